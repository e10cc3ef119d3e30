//! A connecting session's side: tcp (directly or through a SOCKS5 proxy) and ipc connects,
//! connect timeouts, and reconnects with back-off (`ZMQ_RECONNECT_IVL`, `_MAX`).

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use mio::{Interest, Token};

use super::{Fate, Io, Phase, Session, Timer};
use crate::endpoint::Endpoint;
use crate::engine::Stream;
use crate::monitor;
use crate::socks;
use crate::transport::engine::{make_proto, make_upgrade, new_engine};
use crate::transport::socks::{socks_io, SocksConn};
use crate::transport::tcp::tcp_connect;

/// Where a connecting session connects, and its attempt under way.
pub(super) struct ConnectInfo {
    /// The endpoint.
    pub(super) ep: Endpoint,
    /// The wait before the next attempt (doubles up to `ZMQ_RECONNECT_IVL_MAX`).
    pub(super) ivl: Duration,
    /// A TCP connect in progress (to the SOCKS proxy while `socks` is set).
    pub(super) pending: Option<mio::net::TcpStream>,
    /// `ZMQ_SOCKS_PROXY` when this tcp connect goes through a SOCKS5 proxy.
    pub(super) proxy: Option<String>,
    /// The SOCKS5 handshake of the attempt in `pending`.
    pub(super) socks: Option<SocksConn>,
}

impl Session {
    /// Starts a connect attempt (or schedules the next one when it cannot start).
    pub(super) fn try_connect(&mut self, r: &mut impl Io, token: u64) -> Fate {
        let Some(ci) = self.connect.as_mut() else {
            return Fate::Remove;
        };
        self.timers.stop(Timer::Reconnect);
        let o = self.setup.options.clone();
        match &ci.ep {
            Endpoint::Tcp(tcp) => {
                // Through a SOCKS5 proxy: connect to the proxy (resolved like a tcp endpoint),
                // and ask it for the target, which is not resolved here.
                ci.socks = None;
                let resolved = match &ci.proxy {
                    Some(p) => {
                        let target = socks::Target::parse(tcp.target()).and_then(|t| {
                            socks::Handshake::new(t, &o.socks_username, &o.socks_password)
                        });
                        match target {
                            Ok(handshake) => {
                                ci.socks = Some(SocksConn {
                                    up: false,
                                    handshake,
                                });
                            }
                            Err(_) => return self.retry_later(r, token),
                        }
                        crate::endpoint::TcpEndpoint::new(p).resolve_connect(o.ipv6)
                    }
                    None => tcp.resolve_connect(o.ipv6),
                };
                let (src, dst) = match resolved {
                    Ok(v) => v,
                    Err(_) => return self.retry_later(r, token),
                };
                match tcp_connect(src, dst, &o) {
                    Ok(mut s) => {
                        let fd = s.as_raw_fd();
                        if r.registry()
                            .register(
                                &mut s,
                                Token(token as usize),
                                Interest::WRITABLE | Interest::READABLE,
                            )
                            .is_err()
                        {
                            return self.retry_later(r, token);
                        }
                        self.setup.monitor.event_at(
                            monitor::EVENT_CONNECT_DELAYED,
                            libc::EINPROGRESS as u32,
                            crate::monitor::EventAddrs {
                                local: "",
                                remote: &self.monitor_endpoint,
                                v1: &self.monitor_endpoint,
                            },
                        );
                        let _ = fd;
                        ci.pending = Some(s);
                        if o.connect_timeout > 0 {
                            let at =
                                Instant::now() + Duration::from_millis(o.connect_timeout as u64);
                            self.timers.set(Timer::ConnectTimeout, at);
                            r.schedule(at, token);
                        }
                        Fate::Keep
                    }
                    Err(_) => self.retry_later(r, token),
                }
            }
            Endpoint::Ipc(ipc) => {
                let addr = match ipc.to_unix_addr() {
                    Ok(a) => a,
                    Err(_) => return self.retry_later(r, token),
                };
                match std::os::unix::net::UnixStream::connect_addr(&addr) {
                    Ok(s) => {
                        if s.set_nonblocking(true).is_err() {
                            return self.retry_later(r, token);
                        }
                        let stream = Stream::Unix(mio::net::UnixStream::from_std(s));
                        self.connected(r, token, stream)
                    }
                    Err(_) => self.retry_later(r, token),
                }
            }
            Endpoint::Inproc(_) | Endpoint::Udp(_) => Fate::Remove,
        }
    }

    /// The stream is connected (through the proxy's tunnel, if any): the engine takes it.
    pub(super) fn connected(&mut self, r: &mut impl Io, token: u64, stream: Stream) -> Fate {
        (self.local_uri, self.peer_uri) = stream.uris();
        self.setup.monitor.event_at(
            monitor::EVENT_CONNECTED,
            stream.as_raw_fd() as u32,
            self.event_addrs(),
        );
        let peer_ip = match &stream {
            Stream::Tcp(t) => t.peer_addr().ok().map(|a| a.ip().to_string()),
            Stream::Unix(_) => None,
        };
        let upgrade = make_upgrade(
            &self.setup,
            true,
            self.rdma_required,
            &stream,
            &self.endpoint,
        );
        let adv = upgrade.as_ref().and_then(|u| u.advertise());
        let proto = make_proto(&self.setup, peer_ip, stream.as_raw_fd(), adv);
        let mut engine = new_engine(&self.setup, stream, proto);
        engine.upgrade = upgrade;
        self.direct_kill();
        self.engine = Some(engine);
        self.phase = Phase::Handshaking;
        if let Some(ci) = self.connect.as_mut() {
            // A successful connection resets the back-off.
            ci.ivl = Duration::from_millis(self.setup.options.reconnect_ivl.max(0) as u64);
        }
        self.register_engine(r, token)
    }

    /// Schedules the next attempt after the back-off (or ends the session: reconnect off,
    /// socket closed with nothing queued).
    pub(super) fn retry_later(&mut self, r: &mut impl Io, token: u64) -> Fate {
        let o = &self.setup.options;
        let Some(ci) = self.connect.as_mut() else {
            return Fate::Remove;
        };
        if o.reconnect_ivl < 0 {
            // Reconnection disabled: the endpoint ends here, and its pipe with it.
            return Fate::Remove;
        }
        let ivl = ci.ivl;
        let mut next = ivl * 2;
        if o.reconnect_ivl_max > 0 {
            next = next
                .min(Duration::from_millis(o.reconnect_ivl_max as u64))
                .max(Duration::from_millis(o.reconnect_ivl as u64));
        } else {
            next = ivl;
        }
        ci.ivl = next;
        // Reported even when the socket is closing: libzmq's connecter arms its reconnect
        // timer (and reports it) before the termination reaches it, and its test_monitor
        // expects DISCONNECTED to be followed by CONNECT_RETRIED.
        self.setup.monitor.event_at(
            monitor::EVENT_CONNECT_RETRIED,
            ivl.as_millis() as u32,
            self.unconnected_addrs(),
        );
        if self.socket_closed && self.pipe.as_ref().is_none_or(|p| !p.from_socket.has_msg()) {
            return Fate::Remove;
        }
        let at = Instant::now() + ivl;
        self.timers.set(Timer::Reconnect, at);
        r.schedule(at, token);
        Fate::Keep
    }

    /// Moves the SOCKS5 handshake of the pending proxy connection on; when the tunnel is up
    /// the stream goes to the engine as a direct connection would, on failure the attempt is
    /// closed and retried later.
    pub(super) fn socks_step(&mut self, r: &mut impl Io, token: u64) -> Fate {
        let Some(ci) = self.connect.as_mut() else {
            return Fate::Remove;
        };
        let (Some(s), Some(c)) = (ci.pending.as_mut(), ci.socks.as_mut()) else {
            return Fate::Keep;
        };
        let res = socks_io(s, &mut c.handshake);
        if matches!(res, Ok(false)) {
            return Fate::Keep;
        }
        ci.socks = None;
        self.timers.stop(Timer::ConnectTimeout);
        let Some(mut s) = ci.pending.take() else {
            return Fate::Keep;
        };
        let _ = r.registry().deregister(&mut s);
        if res.is_ok() {
            return self.connected(r, token, Stream::Tcp(s));
        }
        self.setup.monitor.event_at(
            monitor::EVENT_CLOSED,
            s.as_raw_fd() as u32,
            self.unconnected_addrs(),
        );
        drop(s);
        self.retry_later(r, token)
    }
}
