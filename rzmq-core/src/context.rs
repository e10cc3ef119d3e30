//! Contexts: sockets, I/O threads, the inproc registry and termination (the top floor).
//!
//! A [`Context`] is cheap to clone and thread-safe. It starts its I/O threads on first need,
//! keeps the table of live sockets (so `term` can wake their blocked calls with ETERM) and the
//! inproc endpoint registry, where connects may precede binds.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use crate::error::{Error, Result};
use crate::msg::Metadata;
use crate::pattern::PipeEntry;
use crate::pipe;
use crate::socket::{Attach, Cmd, Socket, SocketShared, SocketType};
use crate::transport::IoThread;

pub use crate::options::CtxOptions;

/// One inproc binding.
struct InprocBinding {
    socket: Arc<SocketShared>,
    socket_type: SocketType,
    sndhwm: i32,
    rcvhwm: i32,
    routing_id: Vec<u8>,
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
}

#[derive(Default)]
struct Inproc {
    bound: HashMap<String, InprocBinding>,
    pending: HashMap<String, Vec<PendingConnect>>,
}

pub(crate) struct CtxInner {
    settings: Mutex<CtxOptions>,
    io: OnceLock<std::result::Result<Vec<IoThread>, Error>>,
    next_io: AtomicUsize,
    sockets: Mutex<HashMap<u64, Arc<SocketShared>>>,
    sockets_gone: Condvar,
    next_socket_id: AtomicU64,
    terminating: AtomicBool,
    terminated: AtomicBool,
    inproc: Mutex<Inproc>,
}

/// A ZeroMQ context.
#[derive(Clone)]
pub struct Context {
    inner: Arc<CtxInner>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").finish_non_exhaustive()
    }
}

impl Default for Context {
    fn default() -> Self {
        Context::new()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Context {
    /// A new context with libzmq's defaults (one I/O thread, started on first use).
    pub fn new() -> Context {
        Context {
            inner: Arc::new(CtxInner {
                settings: Mutex::new(CtxOptions::new()),
                io: OnceLock::new(),
                next_io: AtomicUsize::new(0),
                sockets: Mutex::new(HashMap::new()),
                sockets_gone: Condvar::new(),
                next_socket_id: AtomicU64::new(1),
                terminating: AtomicBool::new(false),
                terminated: AtomicBool::new(false),
                inproc: Mutex::new(Inproc::default()),
            }),
        }
    }

    pub(crate) fn inner(&self) -> &Arc<CtxInner> {
        &self.inner
    }

    /// Creates a socket of the given type.
    pub fn socket(&self, ty: SocketType) -> Result<Socket> {
        if self.inner.terminating.load(Ordering::SeqCst) {
            return Err(Error::Term);
        }
        let max = lock(&self.inner.settings).max_sockets;
        let id = self.inner.next_socket_id.fetch_add(1, Ordering::Relaxed);
        let sock = Socket::new(self.clone(), ty, id)?;
        {
            let mut socks = lock(&self.inner.sockets);
            if socks.len() >= max as usize {
                drop(socks);
                drop(sock);
                return Err(Error::MFile);
            }
            socks.insert(id, sock.shared().clone());
        }
        Ok(sock)
    }

    /// Sets a context option (`zmq_ctx_set`).
    pub fn set(&self, option: i32, value: i32) -> Result<()> {
        lock(&self.inner.settings).set_int(option, value)
    }

    /// Sets a context option from raw bytes (`zmq_ctx_set_ext`).
    pub fn set_ext(&self, option: i32, value: &[u8]) -> Result<()> {
        lock(&self.inner.settings).set(option, value)
    }

    /// Reads a context option (`zmq_ctx_get`).
    pub fn get(&self, option: i32) -> Result<i32> {
        lock(&self.inner.settings).get(option)
    }

    /// Wakes every blocked call with ETERM and refuses new sockets, without waiting
    /// (`zmq_ctx_shutdown`).
    pub fn shutdown(&self) {
        if !self.inner.terminating.swap(true, Ordering::SeqCst) {
            for s in lock(&self.inner.sockets).values() {
                s.mailbox.send(Cmd::Stop);
            }
        }
    }

    /// Terminates: wakes blocked calls with ETERM, waits until every socket is closed and every
    /// lingering message is delivered or dropped, then stops the I/O threads (`zmq_ctx_term`).
    pub fn term(&self) -> Result<()> {
        self.shutdown();
        {
            let mut socks = lock(&self.inner.sockets);
            while !socks.is_empty() {
                socks = self
                    .inner
                    .sockets_gone
                    .wait(socks)
                    .unwrap_or_else(|e| e.into_inner());
            }
        }
        if !self.inner.terminated.swap(true, Ordering::SeqCst) {
            if let Some(Ok(threads)) = self.inner.io.get() {
                for t in threads {
                    t.shutdown();
                }
                for t in threads {
                    t.join();
                }
            }
        }
        Ok(())
    }
}

impl CtxInner {
    pub(crate) fn is_terminating(&self) -> bool {
        self.terminating.load(Ordering::Relaxed)
    }

    /// A copy of the context options (new sockets take their defaults from it).
    pub(crate) fn ctx_options(&self) -> CtxOptions {
        lock(&self.settings).clone()
    }

    /// An I/O thread for a new listener or connection (round robin), starting them on first use.
    pub(crate) fn io_thread(&self) -> Result<&IoThread> {
        let threads = self.io.get_or_init(|| {
            let s = lock(&self.settings);
            let n = s.io_threads;
            let prefix = String::from_utf8_lossy(&s.thread_name_prefix).into_owned();
            drop(s);
            (0..n)
                .map(|i| IoThread::start(i as usize, &prefix))
                .collect::<Result<Vec<_>>>()
        });
        match threads {
            Ok(t) if !t.is_empty() => {
                Ok(&t[self.next_io.fetch_add(1, Ordering::Relaxed) % t.len()])
            }
            Ok(_) => Err(Error::MThread),
            Err(e) => Err(*e),
        }
    }

    pub(crate) fn socket_closed(&self, id: u64) {
        let mut socks = lock(&self.sockets);
        socks.remove(&id);
        if socks.is_empty() {
            self.sockets_gone.notify_all();
        }
    }

    // ----- inproc -----------------------------------------------------------------------------

    pub(crate) fn inproc_bind(&self, sock: &mut Socket, name: &str) -> Result<()> {
        let opts = sock.options();
        let binding = InprocBinding {
            socket: sock.shared().clone(),
            socket_type: sock.socket_type(),
            sndhwm: opts.sndhwm,
            rcvhwm: opts.rcvhwm,
            routing_id: opts.routing_id.clone(),
        };
        let pending = {
            let mut reg = lock(&self.inproc);
            if reg.bound.contains_key(name) {
                return Err(Error::AddrInUse);
            }
            reg.bound.insert(name.to_string(), binding);
            reg.pending.remove(name).unwrap_or_default()
        };
        let me = inproc_props(sock.socket_type(), &sock.options().routing_id);
        for p in pending {
            p.writer.set_peer(me.clone());
            let id = sock.shared().reserve_pipe_id();
            // Now both ends are known: size the pipes as libzmq does (SNDHWM + peer RCVHWM).
            let (csnd, crcv) = p.connector_hwm;
            let (bsnd, brcv) = (sock.options().sndhwm, sock.options().rcvhwm);
            let mut reader = p.reader;
            reader.set_hwm(crate::pattern::combined_hwm(brcv, Some(csnd)));
            let mut writer = p.writer;
            writer.set_hwm(crate::pattern::combined_hwm(bsnd, Some(crcv)));
            let mut entry = PipeEntry::new(reader, writer);
            entry.hwm_boost = Some((crcv, csnd));
            entry.endpoint = Some(format!("inproc://{name}"));
            entry.peer = Some(inproc_props(p.connector_type, &p.connector_routing_id));
            sock.attach_pipe(id, entry);
        }
        Ok(())
    }

    /// The socket bound at inproc `name` and its type (the ZAP client attaches a pipe to it).
    pub(crate) fn inproc_bound_socket(
        &self,
        name: &str,
    ) -> Option<(Arc<SocketShared>, SocketType)> {
        let reg = lock(&self.inproc);
        reg.bound
            .get(name)
            .map(|b| (b.socket.clone(), b.socket_type))
    }

    pub(crate) fn inproc_unbind(&self, addr: &str, socket_id: u64) {
        let name = addr.strip_prefix("inproc://").unwrap_or(addr);
        let mut reg = lock(&self.inproc);
        if reg
            .bound
            .get(name)
            .is_some_and(|b| b.socket.id == socket_id)
        {
            reg.bound.remove(name);
        }
    }

    pub(crate) fn inproc_connect(
        &self,
        sock: &mut Socket,
        name: &str,
        addr: &str,
        connect_rid: Option<Vec<u8>>,
    ) -> Result<()> {
        let opts = sock.options();
        let my_type = sock.socket_type();
        let my_rid = opts.routing_id.clone();
        let (my_snd, my_rcv, conflate) = (opts.sndhwm, opts.rcvhwm, opts.effective_conflate());
        let mut reg = lock(&self.inproc);
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
                )),
            ),
            None => (my_snd.max(0) as u64, my_rcv.max(0) as u64, None),
        };
        // to_peer: connector writes, binder reads; from_peer: binder writes, connector reads.
        let (to_peer_w, to_peer_r) = pipe::pipe_with(out_hwm, conflate);
        let (from_peer_w, from_peer_r) = pipe::pipe_with(in_hwm, conflate);
        to_peer_w.set_peer(inproc_props(my_type, &my_rid));
        let my_id = sock.shared().reserve_pipe_id();
        let mut entry = PipeEntry::new(from_peer_r, to_peer_w);
        entry.endpoint = Some(addr.to_string());
        if let Some(rid) = &connect_rid {
            entry.routing_id = rid.clone();
            entry.connect_routing_id = Some(rid.clone());
        }
        match peer {
            Some((binder, btype, brid, b_rcv, b_snd)) => {
                drop(reg);
                from_peer_w.set_peer(inproc_props(btype, &brid));
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
                sock.attach_pipe(my_id, entry);
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
                    });
                drop(reg);
                sock.attach_pipe(my_id, entry);
            }
        }
        Ok(())
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
