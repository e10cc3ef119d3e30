//! The inproc transport: a context's registry of inproc endpoints, where two sockets of one
//! process meet and get a pipe pair, with no I/O thread. A connect may precede its bind: the
//! binder's ends then wait in the registry until the bind.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::command::{Attach, SocketShared};
use crate::error::{Error, Result};
use crate::msg::{Metadata, Msg};
use crate::pattern::{DisconnectMsg, PipeEntry, PipeId};
use crate::pipe;
use crate::zmtp::SocketType;

/// What a socket presents to the registry when it binds or connects.
pub(crate) struct InprocPeer {
    /// The socket's shared side (its mailbox).
    pub socket: Arc<SocketShared>,
    /// Its type.
    pub socket_type: SocketType,
    /// Its `ZMQ_SNDHWM`.
    pub sndhwm: i32,
    /// Its `ZMQ_RCVHWM`.
    pub rcvhwm: i32,
    /// Its `ZMQ_ROUTING_ID`.
    pub routing_id: Vec<u8>,
    /// Its `ZMQ_HELLO_MSG`, when its type sends one: the first message of each pipe to a peer.
    pub hello: Option<Vec<u8>>,
    /// Its `ZMQ_DISCONNECT_MSG`, when its type receives one: what a connector sends it when
    /// the connection ends (a binder's only, as libzmq).
    pub disconnect: Option<Vec<u8>>,
}

/// Queues `hello` (a `ZMQ_HELLO_MSG`) as the first message of a new pipe.
fn send_hello(w: &mut pipe::Writer, hello: &Option<Vec<u8>>) {
    if let Some(h) = hello {
        let _ = w.try_write(Msg::copy_from(h));
    }
}

/// A connect made before its bind: the binder's ends wait here.
struct PendingConnect {
    connector_type: SocketType,
    connector_routing_id: Vec<u8>,
    /// The connector's (SNDHWM, RCVHWM), to size the pipes once the binder is known.
    connector_hwm: (i32, i32),
    /// Ends for the binder: reader of messages from the connector, writer towards it.
    reader: pipe::Reader,
    writer: pipe::Writer,
    /// The connector's slot for the binder's `ZMQ_DISCONNECT_MSG`.
    disconnect: DisconnectMsg,
}

#[derive(Default)]
struct Registry {
    bound: HashMap<String, InprocPeer>,
    pending: HashMap<String, Vec<PendingConnect>>,
}

/// A context's inproc endpoints.
#[derive(Default)]
pub(crate) struct Inproc {
    reg: Mutex<Registry>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Inproc {
    /// Binds `me` at `name`; returns the pipes of connects that came first, for the binder to
    /// attach (ids reserved).
    pub(crate) fn bind(&self, me: InprocPeer, name: &str) -> Result<Vec<(PipeId, PipeEntry)>> {
        let (my_type, my_rid) = (me.socket_type, me.routing_id.clone());
        let (bsnd, brcv) = (me.sndhwm, me.rcvhwm);
        let (hello, disconnect) = (me.hello.clone(), me.disconnect.clone());
        let shared = me.socket.clone();
        let pending = {
            let mut reg = lock(&self.reg);
            if reg.bound.contains_key(name) {
                return Err(Error::AddrInUse);
            }
            reg.bound.insert(name.to_string(), me);
            reg.pending.remove(name).unwrap_or_default()
        };
        let props = inproc_props(my_type, &my_rid);
        let mut out = Vec::with_capacity(pending.len());
        for p in pending {
            p.writer.set_peer(props.clone());
            let id = shared.reserve_pipe_id();
            // Now both ends are known: size the pipes as libzmq does (SNDHWM + peer RCVHWM).
            let (csnd, crcv) = p.connector_hwm;
            let mut reader = p.reader;
            reader.set_hwm(crate::pattern::combined_hwm(brcv, Some(csnd)));
            let mut writer = p.writer;
            writer.set_hwm(crate::pattern::combined_hwm(bsnd, Some(crcv)));
            send_hello(&mut writer, &hello);
            if let Some(d) = &disconnect {
                let _ = p.disconnect.set(d.clone());
            }
            let mut entry = PipeEntry::new(reader, writer);
            entry.hwm_boost = Some((crcv, csnd));
            entry.endpoint = Some(format!("inproc://{name}"));
            entry.peer = Some(inproc_props(p.connector_type, &p.connector_routing_id));
            out.push((id, entry));
        }
        Ok(out)
    }

    /// The socket bound at inproc `name` and its type (the ZAP client attaches a pipe to it).
    pub(crate) fn bound_socket(&self, name: &str) -> Option<(Arc<SocketShared>, SocketType)> {
        let reg = lock(&self.reg);
        reg.bound
            .get(name)
            .map(|b| (b.socket.clone(), b.socket_type))
    }

    /// Removes the binding at `addr` if the socket `socket_id` holds it.
    pub(crate) fn unbind(&self, addr: &str, socket_id: u64) {
        let name = addr.strip_prefix("inproc://").unwrap_or(addr);
        let mut reg = lock(&self.reg);
        if reg
            .bound
            .get(name)
            .is_some_and(|b| b.socket.id == socket_id)
        {
            reg.bound.remove(name);
        }
    }

    /// Connects `me` to `name` (`addr` as given); returns the connector's pipe to attach. A
    /// bound peer gets its end at once; otherwise the end waits for the bind.
    pub(crate) fn connect(
        &self,
        me: InprocPeer,
        conflate: bool,
        name: &str,
        addr: &str,
        connect_rid: Option<Vec<u8>>,
    ) -> Result<(PipeId, PipeEntry)> {
        let InprocPeer {
            socket,
            socket_type: my_type,
            sndhwm: my_snd,
            rcvhwm: my_rcv,
            routing_id: my_rid,
            hello: my_hello,
            disconnect: _,
        } = me;
        let mut reg = lock(&self.reg);
        let sum = |a: i32, b: i32| -> u64 {
            if a <= 0 || b <= 0 {
                0
            } else {
                (a as u64) + (b as u64)
            }
        };
        let (out_hwm, in_hwm, peer) = match reg.bound.get(name) {
            Some(b) => (
                sum(my_snd, b.rcvhwm),
                sum(b.sndhwm, my_rcv),
                Some((
                    b.socket.clone(),
                    b.socket_type,
                    b.routing_id.clone(),
                    b.rcvhwm,
                    b.sndhwm,
                    b.hello.clone(),
                    b.disconnect.clone(),
                )),
            ),
            None => (my_snd.max(0) as u64, my_rcv.max(0) as u64, None),
        };
        // to_peer: connector writes, binder reads; from_peer: binder writes, connector reads.
        let (mut to_peer_w, to_peer_r) = pipe::pipe_with(out_hwm, conflate);
        let (mut from_peer_w, from_peer_r) = pipe::pipe_with(in_hwm, conflate);
        to_peer_w.set_peer(inproc_props(my_type, &my_rid));
        send_hello(&mut to_peer_w, &my_hello);
        let my_id = socket.reserve_pipe_id();
        let disconnect = DisconnectMsg::default();
        let mut entry = PipeEntry::new(from_peer_r, to_peer_w);
        entry.disconnect_msg = Some(disconnect.clone());
        entry.endpoint = Some(addr.to_string());
        if let Some(rid) = &connect_rid {
            entry.routing_id = rid.clone();
            entry.connect_routing_id = Some(rid.clone());
        }
        match peer {
            Some((binder, btype, brid, b_rcv, b_snd, b_hello, b_disconnect)) => {
                drop(reg);
                from_peer_w.set_peer(inproc_props(btype, &brid));
                send_hello(&mut from_peer_w, &b_hello);
                if let Some(d) = b_disconnect {
                    let _ = disconnect.set(d);
                }
                entry.peer = Some(inproc_props(btype, &brid));
                entry.hwm_boost = Some((b_rcv, b_snd));
                let bid = binder.reserve_pipe_id();
                let mut bentry = PipeEntry::new(to_peer_r, from_peer_w);
                bentry.hwm_boost = Some((my_rcv, my_snd));
                bentry.endpoint = Some(format!("inproc://{name}"));
                bentry.peer = Some(inproc_props(my_type, &my_rid));
                binder.attach(Attach {
                    entry: bentry,
                    id: bid,
                });
            }
            None => {
                reg.pending
                    .entry(name.to_string())
                    .or_default()
                    .push(PendingConnect {
                        connector_type: my_type,
                        connector_routing_id: my_rid,
                        connector_hwm: (my_snd, my_rcv),
                        reader: to_peer_r,
                        writer: from_peer_w,
                        disconnect,
                    });
                drop(reg);
            }
        }
        Ok((my_id, entry))
    }
}

/// The properties an inproc peer presents (as a ZMTP READY would).
fn inproc_props(ty: SocketType, routing_id: &[u8]) -> Arc<Metadata> {
    let mut md = Metadata::new();
    md.insert("Socket-Type", ty.name().as_bytes());
    if matches!(
        ty,
        SocketType::Req | SocketType::Dealer | SocketType::Router
    ) {
        md.insert("Identity", routing_id);
    }
    Arc::new(md)
}
