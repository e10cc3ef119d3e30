//! `zmq_proxy` and `zmq_proxy_steerable`: forwarding between two sockets.
//!
//! Messages from the frontend go to the backend and back, whole (all frames of a message), with
//! an optional capture socket receiving a copy of each frame. A control socket may send PAUSE,
//! RESUME, TERMINATE or STATISTICS (the steerable variant).

use std::time::Duration;

use crate::error::{Error, Result};
use crate::msg::Msg;
use crate::poll::{poll, PollItem, ZMQ_POLLIN};
use crate::socket::{Socket, SocketType, SNDMORE};

/// Counters the STATISTICS command reports, in libzmq's order.
#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    msg_in: u64,
    bytes_in: u64,
    msg_out: u64,
    bytes_out: u64,
}

fn forward(
    from: &mut Socket,
    to: &mut Socket,
    capture: &mut Option<&mut Socket>,
    rx: &mut Stats,
    tx: &mut Stats,
) -> Result<()> {
    loop {
        let m = from.recv_msg(0)?;
        let more = m.more();
        let len = m.len() as u64;
        rx.bytes_in += len;
        if let Some(c) = capture.as_mut() {
            let mut copy: Msg = m.clone();
            copy.set_more(false);
            c.send_msg(copy, if more { SNDMORE } else { 0 })
                .map_err(|(_, e)| e)?;
        }
        to.send_msg(m, if more { SNDMORE } else { 0 })
            .map_err(|(_, e)| e)?;
        tx.bytes_out += len;
        if !more {
            rx.msg_in += 1;
            tx.msg_out += 1;
            return Ok(());
        }
    }
}

/// Runs a proxy until the context terminates (ETERM) or the control socket says TERMINATE.
pub fn proxy(
    frontend: &mut Socket,
    backend: &mut Socket,
    mut capture: Option<&mut Socket>,
    mut control: Option<&mut Socket>,
) -> Result<()> {
    let mut fstats = Stats::default();
    let mut bstats = Stats::default();
    let mut paused = false;
    let same = std::ptr::eq(frontend as *const Socket, backend as *const Socket);
    loop {
        let has_control = control.is_some();
        let (fin, bin, cin) = {
            let mut items: Vec<PollItem<'_>> = Vec::with_capacity(3);
            items.push(PollItem::socket(frontend, ZMQ_POLLIN));
            if !same {
                items.push(PollItem::socket(backend, ZMQ_POLLIN));
            }
            if let Some(c) = control.as_deref_mut() {
                items.push(PollItem::socket(c, ZMQ_POLLIN));
            }
            poll(&mut items, None)?;
            let fin = items[0].revents & ZMQ_POLLIN != 0;
            let bin = !same && items[1].revents & ZMQ_POLLIN != 0;
            let cin = has_control && items.last().is_some_and(|i| i.revents & ZMQ_POLLIN != 0);
            (fin, bin, cin)
        };
        if cin {
            let c = control.as_deref_mut().ok_or(Error::Inval)?;
            let cmd = c.recv_msg(0)?;
            // A REP control socket must answer every command (libzmq 4.3.5 sends an empty
            // reply to all but STATISTICS).
            let rep = c.socket_type() == SocketType::Rep;
            let ack = |c: &mut Socket| -> Result<()> {
                if rep {
                    c.send_msg(Msg::new(), 0).map_err(|(_, e)| e)?;
                }
                Ok(())
            };
            match cmd.data() {
                b"PAUSE" => {
                    paused = true;
                    ack(c)?;
                }
                b"RESUME" => {
                    paused = false;
                    ack(c)?;
                }
                b"TERMINATE" => {
                    ack(c)?;
                    return Ok(());
                }
                b"STATISTICS" => {
                    let vals = [
                        fstats.msg_in,
                        fstats.bytes_in,
                        fstats.msg_out,
                        fstats.bytes_out,
                        bstats.msg_in,
                        bstats.bytes_in,
                        bstats.msg_out,
                        bstats.bytes_out,
                    ];
                    for (i, v) in vals.iter().enumerate() {
                        let flags = if i + 1 < vals.len() { SNDMORE } else { 0 };
                        c.send_msg(Msg::copy_from(&v.to_ne_bytes()), flags)
                            .map_err(|(_, e)| e)?;
                    }
                }
                _ => ack(c)?,
            }
        }
        if paused {
            // Only the control socket is served while paused.
            if let Some(c) = control.as_deref_mut() {
                let mut items = [PollItem::socket(c, ZMQ_POLLIN)];
                poll(&mut items, Some(Duration::from_millis(100)))?;
            }
            continue;
        }
        if fin {
            if same {
                let fp = frontend as *mut Socket;
                // SAFETY: frontend and backend are the same socket; forward() uses the two
                // references strictly one after the other, never overlapping a call.
                let back = unsafe { &mut *fp };
                forward(frontend, back, &mut capture, &mut fstats, &mut bstats)?;
            } else {
                forward(frontend, backend, &mut capture, &mut fstats, &mut bstats)?;
            }
        }
        if bin {
            forward(backend, frontend, &mut capture, &mut bstats, &mut fstats)?;
        }
    }
}
