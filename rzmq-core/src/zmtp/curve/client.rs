//! The CURVE client (libzmq's `curve_client_t`): `HELLO`, then `WELCOME` -> `INITIATE`, then
//! `READY` -> the message boxing.

use zeroize::Zeroizing;

use super::keys::{nonce, precompute, random, transient_keypair, Cipher, CurveKeys};
use super::record::Codec;
use super::step::Step;
use super::wire::{
    key_at, u64_at, ERROR, HELLO, HELLO_LEN, HELLO_NONCE, INITIATE, INITIATE_MIN, INITIATE_NONCE,
    READY, READY_MIN, READY_NONCE, VOUCH_NONCE, WELCOME, WELCOME_LEN, WELCOME_NONCE,
};
use crate::z85::KEY_LEN;
use crate::zmtp::command;
use crate::zmtp::error::{CurveError, ZmtpError};

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum ClientState {
    ExpectWelcome,
    ExpectReady,
    Done,
}

/// The client side (`curve_client_t`).
pub(crate) struct Client {
    state: ClientState,
    keys: CurveKeys,
    cn_public: [u8; KEY_LEN],
    cn_secret: Zeroizing<[u8; KEY_LEN]>,
    /// Box key C' to S (`HELLO`, `WELCOME`).
    hello_key: Cipher,
    /// Box key C' to S' (`INITIATE`, `READY`, messages).
    precom: Option<Cipher>,
    nonce: u64,
    properties: Vec<u8>,
}

impl Client {
    pub(super) fn new(
        keys: &CurveKeys,
        properties: Vec<u8>,
    ) -> Result<(Client, Vec<u8>), CurveError> {
        let (cn_public, cn_secret) = transient_keypair()?;
        let hello_key = precompute(&keys.server_key, &cn_secret)?;
        let mut c = Client {
            state: ClientState::ExpectWelcome,
            keys: keys.clone(),
            cn_public,
            cn_secret,
            hello_key,
            precom: None,
            nonce: 1,
            properties,
        };
        let n = c.next_nonce();
        let mut hello = Vec::with_capacity(HELLO_LEN);
        hello.extend_from_slice(HELLO);
        hello.extend_from_slice(&[1, 0]);
        hello.extend_from_slice(&[0u8; 72]);
        hello.extend_from_slice(&c.cn_public);
        hello.extend_from_slice(&n.to_be_bytes());
        c.hello_key.seal_into(
            &nonce(HELLO_NONCE, &n.to_be_bytes()),
            &[0u8; 64],
            &mut hello,
        );
        debug_assert_eq!(hello.len(), HELLO_LEN);
        Ok((c, hello))
    }

    fn next_nonce(&mut self) -> u64 {
        let n = self.nonce;
        self.nonce = self.nonce.wrapping_add(1);
        n
    }

    pub(super) fn on_command(&mut self, b: &[u8]) -> Result<Step, ZmtpError> {
        if b.starts_with(WELCOME) && self.state == ClientState::ExpectWelcome {
            let initiate = self.process_welcome(b)?;
            self.state = ClientState::ExpectReady;
            Ok(Step::Send(initiate))
        } else if b.starts_with(READY) && self.state == ClientState::ExpectReady {
            let step = self.process_ready(b)?;
            self.state = ClientState::Done;
            Ok(step)
        } else if b.starts_with(ERROR) && self.state != ClientState::Done {
            // libzmq: at least a reason length, which must fit; trailing bytes are ignored.
            let reason = command::parse(b)
                .and_then(|(_, data)| command::parse_error(data))
                .ok_or(ZmtpError::MalformedError)?;
            Err(ZmtpError::PeerError {
                reason: reason.to_vec(),
            })
        } else {
            Err(CurveError::UnexpectedCommand.into())
        }
    }

    fn process_welcome(&mut self, b: &[u8]) -> Result<Vec<u8>, CurveError> {
        // libzmq reports a WELCOME of the wrong size as a cryptographic error.
        if b.len() != WELCOME_LEN {
            return Err(CurveError::Cryptographic);
        }
        let pt = self
            .hello_key
            .open(&nonce(WELCOME_NONCE, &b[8..24]), &b[24..])?;
        let cn_server = key_at(&pt, 0);
        let cookie = &pt[32..128];
        let precom = precompute(&cn_server, &self.cn_secret)?;

        // vouch = Box[C' + S](C->S')
        let mut vouch_tail = [0u8; 16];
        random(&mut vouch_tail)?;
        let mut vouch_pt = Zeroizing::new([0u8; 64]);
        vouch_pt[..32].copy_from_slice(&self.cn_public);
        vouch_pt[32..].copy_from_slice(&self.keys.server_key);
        let vouch_key = precompute(&cn_server, &self.keys.secret_key)?;
        let mut vouch = Vec::with_capacity(80);
        vouch_key.seal_into(&nonce(VOUCH_NONCE, &vouch_tail), &vouch_pt[..], &mut vouch);

        // Box[C + vouch nonce + vouch + metadata](C'->S')
        let mut pt = Zeroizing::new(Vec::with_capacity(128 + self.properties.len()));
        pt.extend_from_slice(&self.keys.public_key);
        pt.extend_from_slice(&vouch_tail);
        pt.extend_from_slice(&vouch);
        pt.extend_from_slice(&self.properties);
        let n = self.next_nonce();
        let mut initiate = Vec::with_capacity(INITIATE_MIN + self.properties.len());
        initiate.extend_from_slice(INITIATE);
        initiate.extend_from_slice(cookie);
        initiate.extend_from_slice(&n.to_be_bytes());
        precom.seal_into(&nonce(INITIATE_NONCE, &n.to_be_bytes()), &pt, &mut initiate);
        self.precom = Some(precom);
        Ok(initiate)
    }

    fn process_ready(&mut self, b: &[u8]) -> Result<Step, CurveError> {
        if b.len() < READY_MIN {
            return Err(CurveError::MalformedReady);
        }
        let precom = self.precom.take().ok_or(CurveError::UnexpectedCommand)?;
        let peer_nonce = u64_at(b, 6);
        let properties = precom.open(&nonce(READY_NONCE, &b[6..14]), &b[14..])?;
        let codec = Codec::new(precom, false, self.nonce, peer_nonce);
        Ok(Step::Ready { properties, codec })
    }
}
