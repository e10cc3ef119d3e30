//! CHANNEL: exactly one peer, single-part messages (libzmq `channel_t`): a thread-safe PAIR,
//! [`SinglePart`] of it.
//!
//! Further pipes are refused as PAIR refuses them ([`super::PipeTable::kill`]); a frame with MORE
//! is `EINVAL`, multipart messages from the peer are dropped.

use super::pair::Pair;
use super::single::SinglePart;

/// The CHANNEL pattern: PAIR under the single-part rule.
pub(crate) type Channel = SinglePart<Pair>;

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::PipeTable;
    use super::*;
    use crate::error::Error;

    #[test]
    fn one_peer_single_part() {
        let mut c = Channel::new();
        let mut t = PipeTable::new();
        assert_err(send(&mut c, &mut t, &[b"x"]), Error::Again);
        assert_err(recv(&mut c, &mut t), Error::Again);
        let (_a, mut pa) = connect(&mut c, &mut t, 0);
        let (b, _pb) = connect(&mut c, &mut t, 0);
        assert_eq!(t.take_kills(), vec![b]);
        send(&mut c, &mut t, &[b"hi"]).unwrap();
        assert_eq!(pa.recv_all(), vec![parts(&[b"hi"])]);
        assert_err(send(&mut c, &mut t, &[b"a", b"b"]), Error::Inval);
        pa.send(&[b"m", b"p"]);
        pa.send(&[b"back"]);
        assert_eq!(recv(&mut c, &mut t), Ok(parts(&[b"back"])));
        assert_err(recv(&mut c, &mut t), Error::Again);
    }
}
