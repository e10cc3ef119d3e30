//! CLIENT: load-balances outgoing and fair-queues incoming single-part messages (libzmq
//! `client_t`): a DEALER without multipart, [`SinglePart`] of it, talking to SERVERs.

use super::dealer::Dealer;
use super::single::SinglePart;

/// The CLIENT pattern: DEALER under the single-part rule.
pub(crate) type Client = SinglePart<Dealer>;

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::PipeTable;
    use super::*;
    use crate::error::Error;

    #[test]
    fn round_robin_out_fair_queue_in_single_part_only() {
        let mut c = Client::new();
        let mut t = PipeTable::new();
        assert_err(send(&mut c, &mut t, &[b"nobody"]), Error::Again);
        let (_a, mut pa) = connect(&mut c, &mut t, 0);
        let (_b, mut pb) = connect(&mut c, &mut t, 0);
        send(&mut c, &mut t, &[b"1"]).unwrap();
        send(&mut c, &mut t, &[b"2"]).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"1"])]);
        assert_eq!(pb.recv_all(), vec![parts(&[b"2"])]);
        assert_err(send(&mut c, &mut t, &[b"a", b"b"]), Error::Inval);
        assert!(pa.recv_all().is_empty() && pb.recv_all().is_empty());
        pa.send(&[b"multi", b"part"]);
        pb.send(&[b"from b"]);
        pa.send(&[b"from a"]);
        let mut got = vec![recv(&mut c, &mut t).unwrap(), recv(&mut c, &mut t).unwrap()];
        got.sort();
        assert_eq!(got, vec![parts(&[b"from a"]), parts(&[b"from b"])]);
        assert_err(recv(&mut c, &mut t), Error::Again);
    }
}
