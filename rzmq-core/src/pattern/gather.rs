//! GATHER: fair-queues single-part messages from SCATTERs (libzmq `gather_t`): a thread-safe
//! PULL, [`SinglePart`] of it. It sends nothing (`ENOTSUP`); multipart messages from peers are
//! dropped.

use super::pull::Pull;
use super::single::SinglePart;

/// The GATHER pattern: PULL under the single-part rule.
pub(crate) type Gather = SinglePart<Pull>;

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::PipeTable;
    use super::*;
    use crate::error::Error;

    #[test]
    fn fans_in_and_drops_multipart() {
        let mut g = Gather::new();
        let mut t = PipeTable::new();
        let (_a, mut pa) = connect(&mut g, &mut t, 0);
        let (_b, mut pb) = connect(&mut g, &mut t, 0);
        pa.send(&[b"a1"]);
        pa.send(&[b"m", b"p"]);
        pb.send(&[b"b1"]);
        pa.send(&[b"a2"]);
        let mut got: Vec<_> = (0..3).map(|_| recv(&mut g, &mut t).unwrap()).collect();
        got.sort();
        assert_eq!(got, vec![parts(&[b"a1"]), parts(&[b"a2"]), parts(&[b"b1"])]);
        assert_err(recv(&mut g, &mut t), Error::Again);
        assert_err(send(&mut g, &mut t, &[b"x"]), Error::NotSup);
        assert!(!has_out(&mut g, &mut t));
    }
}
