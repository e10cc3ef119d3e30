//! Accepting connections on a listener: the accept filters, the tcp options, the new
//! connection's engine and the session that runs it.

use std::io;
use std::os::fd::AsRawFd;

use super::reactor::{Object, Reactor};
use crate::engine::Stream;
use crate::monitor;
use crate::session::Session;
use crate::transport::engine::{make_proto, make_upgrade, new_engine};
use crate::transport::peer::peer_allowed;
use crate::transport::tcp::apply_tcp_options;

impl Reactor {
    /// Accepts every connection waiting on the listener `token`.
    pub(super) fn accept(&mut self, token: u64) {
        loop {
            let Some(Object::Listener(l)) = self.objects.get_mut(&token) else {
                return;
            };
            let res: io::Result<(Stream, String)> = l.kind.accept();
            match res {
                Ok((stream, peer_ip)) => {
                    if !peer_allowed(&stream, &l.setup.options) {
                        // TCP_ACCEPT_FILTER / IPC_FILTER_*: refused peers are closed at once.
                        drop(stream);
                        continue;
                    }
                    let setup = l.setup.clone();
                    let endpoint = l.endpoint.clone();
                    if let Stream::Tcp(t) = &stream {
                        let s2 = socket2::SockRef::from(t);
                        apply_tcp_options(&s2, &setup.options, true);
                    }
                    let fd = stream.as_raw_fd();
                    if setup.monitor.is_active() {
                        let (local, remote) = stream.uris();
                        setup.monitor.event_at(
                            monitor::EVENT_ACCEPTED,
                            fd as u32,
                            monitor::EventAddrs {
                                local: &local,
                                remote: &remote,
                                v1: &endpoint,
                            },
                        );
                    }
                    let stoken = self.shared.token();
                    l.sessions.push(stoken);
                    let rdma_required = l.rdma_required;
                    let upgrade = make_upgrade(&setup, false, rdma_required, &stream, &endpoint);
                    let adv = upgrade.as_ref().and_then(|u| u.advertise());
                    let proto = make_proto(
                        &setup,
                        (!peer_ip.is_empty()).then(|| peer_ip.clone()),
                        fd,
                        adv,
                    );
                    let mut engine = new_engine(&setup, stream, proto);
                    engine.upgrade = upgrade;
                    let session = Session::accepted(setup, endpoint, engine, token, rdma_required);
                    let _ = peer_ip;
                    self.objects
                        .insert(stoken, Object::Session(Box::new(session)));
                    self.with_session(stoken, |s, r, tok| s.start(r, tok));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let errno = e.raw_os_error().unwrap_or(libc::EIO);
                    l.setup
                        .monitor
                        .event(monitor::EVENT_ACCEPT_FAILED, errno as u32, &l.endpoint);
                    return;
                }
            }
        }
    }
}
