//! Endpoints: bind, connect, unbind and disconnect over tcp, ipc and udp (handed to an I/O
//! thread) and inproc (the context's registry), and what the socket keeps to undo them.

use std::sync::Arc;

use super::{Socket, SocketType};
use crate::command::PeerPipe;
use crate::endpoint::Endpoint;
use crate::error::{Error, Result};
use crate::io::{self, IoHandle};
use crate::monitor;
use crate::pattern::{PipeEntry, PipeId};
use crate::pipe;
use crate::session::udp::UdpRole;
use crate::transport::inproc::InprocPeer;
use crate::transport::ConnSetup;

/// What a bound or connected endpoint holds so it can be undone.
pub(super) enum EndpointHandle {
    /// A listener or connecting session on an I/O thread.
    Io(IoHandle),
    /// An inproc binding (name registered in the context).
    InprocBind,
    /// An inproc connection: its pipe.
    InprocConnect,
}

/// A bound or connected endpoint.
pub(super) struct EndpointRec {
    /// The address as given by the user.
    pub(super) given: String,
    /// The resolved address (LAST_ENDPOINT form).
    pub(super) resolved: String,
    /// Bound (not connected).
    pub(super) bind: bool,
    /// What undoes it.
    pub(super) handle: EndpointHandle,
}

impl Socket {
    // ----- endpoints ------------------------------------------------------------------------

    /// Binds to an endpoint (`tcp://`, `ipc://`, `inproc://`).
    pub fn bind(&mut self, addr: &str) -> Result<()> {
        self.check_alive()?;
        self.process_commands()?;
        match Endpoint::parse(addr)? {
            Endpoint::Udp(a) => self.udp_endpoint(addr, &a, true).map(|_| ()),
            Endpoint::Inproc(name) => {
                let pending = self.ctx.inproc().bind(self.inproc_peer(), &name)?;
                for (id, entry) in pending {
                    self.attach_pipe(id, entry);
                }
                self.last_endpoint = addr.to_string();
                self.endpoints.push(EndpointRec {
                    given: addr.to_string(),
                    resolved: addr.to_string(),
                    bind: true,
                    handle: EndpointHandle::InprocBind,
                });
                Ok(())
            }
            ep => {
                let setup = self.conn_setup();
                let (handle, resolved) = match io::bind(&ep, setup, || self.ctx.io_thread()) {
                    Ok(r) => r,
                    Err(e) => {
                        self.monitor
                            .event(monitor::EVENT_BIND_FAILED, e.errno() as u32, addr);
                        return Err(e);
                    }
                };
                self.last_endpoint = resolved.clone();
                self.endpoints.push(EndpointRec {
                    given: addr.to_string(),
                    resolved,
                    bind: true,
                    handle: EndpointHandle::Io(handle),
                });
                Ok(())
            }
        }
    }

    /// Connects to an endpoint; the connection is made (and remade) in the background.
    pub fn connect(&mut self, addr: &str) -> Result<()> {
        self.connect_pipe(addr).map(|_| ())
    }

    /// Connects a PEER socket (`zmq_connect_peer`) and returns the routing id of the new
    /// peer, to send to it at once. Other types: [`Error::NotSup`]; with `ZMQ_IMMEDIATE` set
    /// (no pipe exists before the connection is up): [`Error::Fault`], both as libzmq.
    pub fn connect_peer(&mut self, addr: &str) -> Result<u32> {
        if self.ty != SocketType::Peer {
            return Err(Error::NotSup);
        }
        if self.options.immediate {
            return Err(Error::Fault);
        }
        let id = self.connect_pipe(addr)?.ok_or(Error::Fault)?;
        self.pattern.pipe_routing_id(id).ok_or(Error::Fault)
    }

    /// [`Socket::connect`], returning the pipe it attached at once (none with IMMEDIATE).
    fn connect_pipe(&mut self, addr: &str) -> Result<Option<PipeId>> {
        self.check_alive()?;
        self.process_commands()?;
        let ep = Endpoint::parse(addr)?;
        if let Endpoint::Udp(a) = &ep {
            return self.udp_endpoint(addr, a, false).map(Some);
        }
        let connect_rid = self.options.take_connect_routing_id();
        if let Some(rid) = &connect_rid {
            if self.ty == SocketType::Router || self.ty == SocketType::Stream {
                let used = self
                    .pipes
                    .ids()
                    .into_iter()
                    .any(|id| self.pipes.get(id).is_some_and(|e| &e.routing_id == rid));
                if used {
                    return Err(Error::Inval);
                }
            }
        }
        match ep {
            Endpoint::Inproc(name) => {
                let conflate = self.options.effective_conflate();
                let (id, entry) = self.ctx.inproc().connect(
                    self.inproc_peer(),
                    conflate,
                    &name,
                    addr,
                    connect_rid,
                )?;
                self.attach_pipe(id, entry);
                self.last_endpoint = addr.to_string();
                self.endpoints.push(EndpointRec {
                    given: addr.to_string(),
                    resolved: addr.to_string(),
                    bind: false,
                    handle: EndpointHandle::InprocConnect,
                });
                Ok(Some(id))
            }
            ep => {
                // Without IMMEDIATE the pipe exists from now on, so messages queue before the
                // connection is up and survive reconnects (libzmq's behaviour).
                let mut attached = None;
                let pipe = if !self.options.immediate {
                    let (entry, peer_side) = self.new_pipe_pair();
                    let id = self.shared.reserve_pipe_id();
                    let mut entry = entry;
                    entry.endpoint = Some(addr.to_string());
                    entry.connect_routing_id = connect_rid.clone();
                    if let Some(rid) = &connect_rid {
                        entry.routing_id = rid.clone();
                    }
                    self.attach_pipe(id, entry);
                    attached = Some(id);
                    Some(peer_side)
                } else {
                    None
                };
                let mut setup = self.conn_setup();
                setup.connect_routing_id = connect_rid;
                let handle = io::connect(&ep, addr, setup, pipe, || self.ctx.io_thread())?;
                self.last_endpoint = addr.to_string();
                self.endpoints.push(EndpointRec {
                    given: addr.to_string(),
                    resolved: addr.to_string(),
                    bind: false,
                    handle: EndpointHandle::Io(handle),
                });
                Ok(attached)
            }
        }
    }

    /// Binds (DISH, DGRAM) or connects (RADIO) a `udp://` endpoint: the pipe is attached now
    /// (there is no handshake), its other end goes to the UDP endpoint on an I/O thread. Other
    /// socket types, and the other direction, get `ENOCOMPATPROTO` as from libzmq 4.3.5.
    fn udp_endpoint(&mut self, given: &str, addr: &str, bind: bool) -> Result<PipeId> {
        let role = UdpRole::of(self.ty)
            .filter(|r| r.binds() == bind)
            .ok_or(Error::NoCompatProto)?;
        let (mut entry, peer_side) = self.new_pipe_pair();
        let (handle, resolved) = match io::udp(addr, bind, role, &self.options, peer_side, || {
            self.ctx.io_thread()
        }) {
            Ok(r) => r,
            Err(e) => {
                if bind {
                    self.monitor
                        .event(monitor::EVENT_BIND_FAILED, e.errno() as u32, given);
                }
                return Err(e);
            }
        };
        entry.endpoint = Some(given.to_string());
        let id = self.shared.reserve_pipe_id();
        self.attach_pipe(id, entry);
        self.last_endpoint = resolved.clone();
        self.endpoints.push(EndpointRec {
            given: given.to_string(),
            resolved,
            bind,
            handle: EndpointHandle::Io(handle),
        });
        Ok(id)
    }

    /// Creates both ends of a peer pipe: the socket's entry and the connection's ends.
    pub(crate) fn new_pipe_pair(&self) -> (PipeEntry, PeerPipe) {
        let (out_hwm, in_hwm) = (
            self.options.sndhwm.max(0) as u64,
            self.options.rcvhwm.max(0) as u64,
        );
        let conflate = self.options.effective_conflate();
        let (to_peer_w, to_peer_r) = pipe::pipe_with(out_hwm, conflate);
        let (from_peer_w, from_peer_r) = pipe::pipe_with(in_hwm, conflate);
        let entry = PipeEntry::new(from_peer_r, to_peer_w);
        (
            entry,
            PeerPipe {
                to_socket: from_peer_w,
                from_socket: to_peer_r,
            },
        )
    }

    /// Everything a connection needs to know about this socket, snapshotted now.
    fn conn_setup(&self) -> ConnSetup {
        ConnSetup {
            socket: self.shared.clone(),
            socket_type: self.ty,
            options: Arc::new(self.options.clone()),
            monitor: self.monitor.clone(),
            connect_routing_id: None,
            inproc: Arc::downgrade(self.ctx.inproc()),
        }
    }

    /// What this socket presents to the inproc registry.
    fn inproc_peer(&self) -> InprocPeer {
        InprocPeer {
            socket: self.shared.clone(),
            socket_type: self.ty,
            sndhwm: self.options.sndhwm,
            rcvhwm: self.options.rcvhwm,
            routing_id: self.options.routing_id.clone(),
            hello: (self.ty.sends_hello_msg() && !self.options.hello_msg.is_empty())
                .then(|| self.options.hello_msg.clone()),
            disconnect: (self.ty.receives_disconnect_msg()
                && !self.options.disconnect_msg.is_empty())
            .then(|| self.options.disconnect_msg.clone()),
        }
    }

    /// A bound endpoint is found by its resolved address only (as libzmq: unbinding
    /// "tcp://*:*" or "ipc://*" is ENOENT, the LAST_ENDPOINT form works); a connection by the
    /// address given to connect.
    fn find_endpoint(&self, addr: &str, bind: bool) -> Option<usize> {
        self.endpoints.iter().position(|e| {
            e.bind == bind
                && if bind {
                    e.resolved == addr
                } else {
                    e.given == addr
                }
        })
    }

    /// Stops listening on a bound endpoint and closes its connections.
    pub fn unbind(&mut self, addr: &str) -> Result<()> {
        self.check_alive()?;
        self.process_commands()?;
        let Some(i) = self.find_endpoint(addr, true) else {
            return Err(Error::NoEnt);
        };
        let rec = self.endpoints.remove(i);
        self.undo_endpoint(rec);
        Ok(())
    }

    /// Closes a connection made with [`Socket::connect`].
    pub fn disconnect(&mut self, addr: &str) -> Result<()> {
        self.check_alive()?;
        self.process_commands()?;
        let Some(i) = self.find_endpoint(addr, false) else {
            return Err(Error::NoEnt);
        };
        let rec = self.endpoints.remove(i);
        self.undo_endpoint(rec);
        Ok(())
    }

    fn undo_endpoint(&mut self, rec: EndpointRec) {
        match rec.handle {
            EndpointHandle::Io(h) => h.close(),
            EndpointHandle::InprocBind => self.ctx.inproc().unbind(&rec.given, self.shared.id),
            EndpointHandle::InprocConnect => {}
        }
        let ids: Vec<PipeId> = self
            .pipes
            .ids()
            .into_iter()
            .filter(|id| {
                self.pipes
                    .get(*id)
                    .and_then(|e| e.endpoint.as_deref())
                    .is_some_and(|ep| ep == rec.given || ep == rec.resolved)
            })
            .collect();
        for id in ids {
            if let Some(e) = self.pipes.get_mut(id) {
                e.send_disconnect_msg();
            }
            self.terminate_pipe(id);
        }
    }
}
