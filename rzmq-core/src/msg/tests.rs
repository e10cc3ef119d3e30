use super::meta::META_REF_BATCH;
use super::recv::RECV_REF_BATCH;
use super::*;

#[test]
fn meta_refs_hand_out_counted_references_and_give_back_the_rest() {
    let md = Arc::new(Metadata::new());
    let mut refs = MetaRefs::new(Some(md.clone()));
    assert_eq!(Arc::strong_count(&md), 2);
    let frames: Vec<_> = (0..META_REF_BATCH + 3)
        .map(|_| refs.take().unwrap())
        .collect();
    assert!(frames.iter().all(|f| Arc::ptr_eq(f, &md)));
    // Two batches taken, all but three of the second still held as credit.
    assert_eq!(
        Arc::strong_count(&md),
        2 + frames.len() + (META_REF_BATCH - 3)
    );
    drop(frames);
    drop(refs);
    assert_eq!(Arc::strong_count(&md), 1);
    assert!(MetaRefs::new(None).take().is_none());
}

#[cfg_attr(miri, ignore)] // a 1 MiB frame filled and checked byte by byte: 150 s in Miri
#[test]
fn frames_written_in_place_have_their_size_and_writable_unique_bytes() {
    use std::mem::MaybeUninit;
    let sizes = [
        0,
        1,
        INLINE_CAP,
        INLINE_CAP + 1,
        64,
        1000,
        crate::pool::POOL_MIN - 1,
        crate::pool::POOL_MIN,
        1 << 20,
    ];
    for len in sizes {
        let mut slot = MaybeUninit::<Msg>::uninit();
        Msg::write_with_size_recycled(&mut slot, len);
        // SAFETY: write_with_size_recycled initialised the slot.
        let mut m = unsafe { slot.assume_init() };
        assert_eq!(m.len(), len);
        assert!(!m.more() && m.holds_nothing() == (len <= INLINE_CAP));
        let bytes = m.data_mut().expect("a fresh frame is unique");
        bytes.fill(0xa5);
        assert!(m.data().iter().all(|&b| b == 0xa5), "{len}");
    }
}

use std::sync::atomic::{AtomicUsize, Ordering};

#[test]
fn inline_and_shared() {
    let m = Msg::copy_from(b"hello");
    assert!(m.storage_info().is_none());
    assert_eq!(m.data(), b"hello");
    let big = vec![7u8; 1000];
    let mut m = Msg::from_vec(big.clone());
    assert_eq!(m.data(), &big[..]);
    assert!(!m.is_shared());
    let c = m.share();
    assert!(m.is_shared() && c.is_shared());
    assert_eq!(m.storage_info().unwrap().owners, 2);
    let s = m.slice(100, 200).unwrap();
    assert_eq!(s.data(), &big[100..300]);
    assert_eq!(
        s.storage_info().unwrap().base,
        m.storage_info().unwrap().base
    );
    assert!(m.slice(900, 200).is_none());
    assert_eq!(c.data().as_ptr(), m.data().as_ptr());
}

#[test]
fn external_release_runs_once_after_last_owner() {
    static RELEASED: AtomicUsize = AtomicUsize::new(0);
    let mut storage = vec![1u8; 100].into_boxed_slice();
    let ptr = storage.as_mut_ptr();
    // SAFETY: storage outlives every handle; we check the count before dropping it.
    let mut m = unsafe {
        Msg::from_external(
            ptr,
            100,
            Some(Box::new(|| {
                RELEASED.fetch_add(1, Ordering::SeqCst);
            })),
        )
    };
    let c = m.share();
    let t = std::thread::spawn(move || drop(c));
    t.join().unwrap();
    assert_eq!(RELEASED.load(Ordering::SeqCst), 0);
    drop(m);
    assert_eq!(RELEASED.load(Ordering::SeqCst), 1);
    drop(storage);
}

#[test]
fn data_mut_only_when_unique() {
    let mut m = Msg::with_size(100);
    m.data_mut().unwrap()[0] = 9;
    let c = m.share();
    assert!(m.data_mut().is_none());
    drop(c);
    assert_eq!(m.data_mut().unwrap()[0], 9);
}

#[test]
fn metadata_case_insensitive() {
    let mut md = Metadata::new();
    md.insert("Socket-Type", b"DEALER");
    let mut m = Msg::new();
    m.set_metadata(Some(Arc::new(md)));
    assert_eq!(m.property("socket-type"), Some(&b"DEALER"[..]));
}

#[test]
fn routing_id_zero_is_refused_and_reset_clears() {
    let mut m = Msg::copy_from(b"x");
    assert_eq!(m.routing_id(), 0);
    assert_eq!(m.set_routing_id(0), Err(Error::Inval));
    assert_eq!(m.set_routing_id(0xdead_beef), Ok(()));
    assert_eq!(m.routing_id(), 0xdead_beef);
    assert_eq!(m.clone().routing_id(), 0xdead_beef);
    m.reset_routing_id();
    assert_eq!(m.routing_id(), 0);
}

#[test]
fn group_layer_keeps_the_connection_properties_beneath_it() {
    let mut md = Metadata::new();
    md.insert("Socket-Type", b"RADIO");
    let md = Arc::new(md);
    let mut m = Msg::copy_from(b"body");
    assert_eq!(m.group(), b"");
    assert_eq!(m.group_with_nul(), b"\0");
    assert!(m.holds_nothing());
    m.set_metadata(Some(md.clone()));
    m.set_group("weather").unwrap();
    assert_eq!(m.group(), b"weather");
    assert_eq!(m.group_with_nul(), b"weather\0");
    assert!(Arc::ptr_eq(m.metadata().unwrap(), &md));
    assert_eq!(m.property("socket-type"), Some(&b"RADIO"[..]));
    // Replacing the connection keeps the group; replacing the group keeps the connection.
    m.set_metadata(None);
    assert_eq!(m.group(), b"weather");
    assert!(m.metadata().is_none());
    m.set_metadata(Some(md.clone()));
    m.set_group(b"news").unwrap();
    assert_eq!(m.group(), b"news");
    assert!(Arc::ptr_eq(m.metadata().unwrap(), &md));
    let copy = m.share();
    m.set_group("").unwrap();
    assert_eq!(m.group(), b"");
    assert!(Arc::ptr_eq(m.metadata().unwrap(), &md));
    assert_eq!(copy.group(), b"news");
    assert_eq!(m.data(), b"body");
    m.set_group("g").unwrap();
    m.reset_meta();
    assert_eq!(m.group(), b"");
}

#[test]
fn group_length_and_nul_are_checked() {
    let mut m = Msg::new();
    let longest = vec![b'a'; GROUP_MAX_LENGTH];
    assert_eq!(m.set_group(&longest), Ok(()));
    assert_eq!(m.group(), &longest[..]);
    assert_eq!(
        m.set_group(vec![b'a'; GROUP_MAX_LENGTH + 1]),
        Err(Error::Inval)
    );
    assert_eq!(m.set_group(b"a\0b"), Err(Error::Inval));
    assert_eq!(
        m.group(),
        &longest[..],
        "a refused group leaves the old one"
    );
    assert!(!m.holds_nothing());
}

#[test]
fn recv_buf_slices_share_and_count_in_bulk() {
    let mut b = RecvBuf::new(64 * 1024);
    b.bytes_mut().unwrap()[..8].copy_from_slice(b"abcdefgh");
    for (i, x) in b.bytes_mut().unwrap()[100..3000].iter_mut().enumerate() {
        *x = i as u8;
    }
    // Inline frames copy; larger ones share the storage.
    let small = b.slice(0, 8);
    assert_eq!(small.data(), b"abcdefgh");
    assert!(small.storage_info().is_none());
    // More slices than one batch of references, so the credit is refilled.
    let slices: Vec<Msg> = (0..RECV_REF_BATCH + 10).map(|_| b.slice(100, 64)).collect();
    let base = b.bytes().as_ptr();
    for m in &slices {
        assert_eq!(m.data(), &b.bytes()[100..164]);
        assert_eq!(m.storage_info().unwrap().base, base);
        assert!(m.is_shared());
    }
    // Not writable while any slice lives, nor through a slice.
    assert!(b.bytes_mut().is_none());
    let mut one = slices[0].clone();
    assert!(one.data_mut().is_none());
    drop(slices);
    assert!(b.bytes_mut().is_none(), "the clone still holds it");
    drop(one);
    assert!(
        b.bytes_mut().is_some(),
        "writable again once every slice is gone"
    );
}

#[test]
fn recv_buf_outlived_by_its_slices_across_threads() {
    let mut b = RecvBuf::new(1000);
    for (i, x) in b.bytes_mut().unwrap().iter_mut().enumerate() {
        *x = (i % 251) as u8;
    }
    let slices: Vec<Msg> = (0..500).map(|i| b.slice(i, 100)).collect();
    drop(b);
    let t = std::thread::spawn(move || {
        let mut last = None;
        for (i, m) in slices.into_iter().enumerate() {
            let want: Vec<u8> = (i..i + 100).map(|j| (j % 251) as u8).collect();
            assert_eq!(m.data(), &want[..]);
            last = Some(m);
        }
        // The last handle is the only owner now: its bytes are writable.
        let mut m = last.unwrap();
        assert_eq!(m.storage_info().unwrap().owners, 1);
        m.data_mut().unwrap()[0] = 7;
        assert_eq!(m.data()[0], 7);
    });
    t.join().unwrap();
}
