//! The engine's side of sharing its connection with the pipe's ends (see [`crate::direct`] and
//! the pipe's framed lane): when output or input may be shared, the decoders handed over with
//! input, and output taken back (with what a partial direct write left) before every write.

use super::upgrade::UpState;
use super::{Engine, Proto};

impl Engine {
    /// Whether the application thread may write this connection's next message itself (see
    /// [`crate::direct`]): plain ZMTP, ready, nothing queued, not mid-message, no CURVE, no
    /// subscription forwarding, no alternative path (declined upgrades qualify).
    pub(crate) fn direct_capable(&self) -> bool {
        let Proto::Zmtp(z) = &self.proto else {
            return false;
        };
        z.is_ready()
            && !z.encrypts()
            && !z.has_output()
            && !self.subscriptions
            && !self.hup
            && !self.out_in_multipart
            && self
                .upgrade
                .as_ref()
                .is_none_or(|u| matches!(u.state, UpState::Declined) && !u.required)
    }

    /// Whether output can take the pipe's framed lane (wire bytes the writer encoded, see
    /// [`crate::pipe::Reader::request_framed`]): plain ZMTP, ready, no CURVE, no subscription
    /// forwarding, not mid-message, no alternative path (declined upgrades qualify).
    pub(crate) fn takes_framed(&self) -> bool {
        let Proto::Zmtp(z) = &self.proto else {
            return false;
        };
        z.is_ready()
            && !z.encrypts()
            && !self.subscriptions
            && !self.out_in_multipart
            && self
                .upgrade
                .as_ref()
                .is_none_or(|u| matches!(u.state, UpState::Declined) && !u.required)
    }

    /// As [`Engine::input_offerable`]; with `cut_ok`, also when the decoder holds a frame cut
    /// by the end of the last read (it goes to the reader with the input).
    pub(crate) fn input_offerable_with(&self, cut_ok: bool) -> bool {
        let Proto::Zmtp(z) = &self.proto else {
            return false;
        };
        self.stalled.is_none()
            && !self.read_pending
            && z.input_idle(cut_ok)
            && self.input_may_be_offered()
    }

    /// What [`Engine::input_offerable`] asks beyond the moment (a stall, a read pending, what
    /// the decoder holds): plain ZMTP, ready, no hang-up, no subscriptions to track, no timer
    /// that input resets, no alternative path (declined upgrades qualify).
    pub(crate) fn input_may_be_offered(&self) -> bool {
        let Proto::Zmtp(z) = &self.proto else {
            return false;
        };
        !self.hup
            && !self.subscriptions
            && z.input_shareable()
            && self
                .upgrade
                .as_ref()
                .is_none_or(|u| matches!(u.state, UpState::Declined) && !u.required)
    }

    /// True when the input decoder holds nothing received (plain ZMTP; false otherwise).
    pub(crate) fn input_clean(&self) -> bool {
        matches!(&self.proto, Proto::Zmtp(z) if z.input_clean())
    }

    /// A fresh decoder with the connection's limits (plain ZMTP only).
    pub(crate) fn fresh_decoder(&self) -> Option<crate::zmtp::Decoder> {
        match &self.proto {
            Proto::Zmtp(z) => Some(z.fresh_decoder()),
            _ => None,
        }
    }

    /// The properties the connection attaches to received messages.
    pub(crate) fn input_metadata(&self) -> Option<std::sync::Arc<crate::msg::Metadata>> {
        match &self.proto {
            Proto::Zmtp(z) => z.metadata(),
            _ => None,
        }
    }

    /// Continues input with `dec`, a decoder the reader handed back mid-stream; returns the one
    /// it replaces.
    pub(crate) fn swap_input_decoder(
        &mut self,
        dec: crate::zmtp::Decoder,
    ) -> Option<crate::zmtp::Decoder> {
        match &mut self.proto {
            Proto::Zmtp(z) => Some(z.swap_decoder(dec)),
            _ => None,
        }
    }

    /// Takes output back from the pipe's writer (waiting out a direct write in progress) and
    /// queues what a partial direct write left, ahead of anything else.
    pub(super) fn take_output(&mut self) {
        if let Some(d) = &self.direct {
            d.revoke();
            let rest = d.take_leftover();
            if let Proto::Zmtp(z) = &mut self.proto {
                for piece in rest {
                    match piece {
                        crate::direct::Piece::Bytes(b) => z.push_framed(&b),
                        crate::direct::Piece::Body { msg, from } => z.push_body_rest(msg, from),
                    }
                }
            }
        }
    }
}
