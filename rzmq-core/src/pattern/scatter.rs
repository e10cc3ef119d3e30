//! SCATTER: load-balances single-part messages to GATHERs (libzmq `scatter_t`): a thread-safe
//! PUSH, [`SinglePart`] of it. It receives nothing (`ENOTSUP`); a frame with MORE is `EINVAL`.

use super::push::Push;
use super::single::SinglePart;

/// The SCATTER pattern: PUSH under the single-part rule.
pub(crate) type Scatter = SinglePart<Push>;

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::PipeTable;
    use super::*;
    use crate::error::Error;

    #[test]
    fn fans_out_single_parts_and_skips_full_pipes() {
        let mut s = Scatter::new();
        let mut t = PipeTable::new();
        let (_a, mut pa) = connect(&mut s, &mut t, 1);
        let (_b, mut pb) = connect(&mut s, &mut t, 0);
        for m in [b"1", b"2", b"3"] {
            send(&mut s, &mut t, &[m]).unwrap();
        }
        // a holds one; the rest go to b.
        assert_eq!(pa.recv_all(), vec![parts(&[b"1"])]);
        assert_eq!(pb.recv_all(), vec![parts(&[b"2"]), parts(&[b"3"])]);
        assert_err(send(&mut s, &mut t, &[b"x", b"y"]), Error::Inval);
        assert_err(recv(&mut s, &mut t), Error::NotSup);
        assert!(!has_in(&mut s, &mut t));
    }
}
