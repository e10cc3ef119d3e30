//! SOCKS5 glue: a connect attempt through a proxy (`ZMQ_SOCKS_PROXY`) and the handshake run
//! on its non-blocking stream ([`crate::socks`] is the sans-IO protocol).

use std::io;

use crate::socks;

/// A connect attempt through a SOCKS5 proxy.
pub(crate) struct SocksConn {
    /// The TCP connect to the proxy completed; the handshake is under way.
    pub up: bool,
    /// The SOCKS5 handshake.
    pub handshake: socks::Handshake,
}

/// Runs a SOCKS5 handshake on a non-blocking stream as far as it goes: `Ok(true)` when the
/// tunnel is up, `Ok(false)` when the stream would block, an error when the attempt failed (the
/// proxy closed, an I/O error, or a [`socks::SocksError`] as `InvalidData`).
pub(crate) fn socks_io(s: &mut mio::net::TcpStream, h: &mut socks::Handshake) -> io::Result<bool> {
    use std::io::{Read, Write};
    let mut buf = [0u8; socks::MAX_READ];
    loop {
        if h.is_done() {
            return Ok(true);
        }
        let out = h.output();
        if !out.is_empty() {
            match s.write(out) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => h.consume_output(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
            continue;
        }
        let want = h.wanted().min(buf.len());
        if want == 0 {
            return Err(io::ErrorKind::InvalidData.into());
        }
        match s.read(&mut buf[..want]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                h.feed(&buf[..n])
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}
