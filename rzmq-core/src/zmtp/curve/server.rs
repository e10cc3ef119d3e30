//! The CURVE server (libzmq's `curve_server_t`): `HELLO` -> `WELCOME` (with a cookie), then
//! `INITIATE` -> the client's key for authentication, then `READY` and the message boxing.

use zeroize::Zeroizing;

use super::keys::{nonce, precompute, random, transient_keypair, Cipher, CurveKeys};
use super::record::Codec;
use super::step::Step;
use super::wire::{
    check_structure, ct_eq, key_at, u64_at, COOKIE_NONCE, HELLO, HELLO_LEN, HELLO_NONCE, INITIATE,
    INITIATE_MIN, INITIATE_NONCE, READY, READY_MIN, READY_NONCE, VOUCH_NONCE, WELCOME, WELCOME_LEN,
    WELCOME_NONCE,
};
use crate::z85::{self, KEY_LEN};
use crate::zmtp::error::CurveError;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum ServerState {
    ExpectHello,
    ExpectInitiate,
    /// `INITIATE` accepted; waiting for [`super::Handshake::accept`] or [`super::Handshake::reject`].
    Authenticating,
    Done,
}

/// The server side (`curve_server_t`).
pub(crate) struct Server {
    state: ServerState,
    secret_key: Zeroizing<[u8; KEY_LEN]>,
    public_key: [u8; KEY_LEN],
    cn_public: [u8; KEY_LEN],
    cn_secret: Zeroizing<[u8; KEY_LEN]>,
    cn_client: [u8; KEY_LEN],
    cookie_key: Option<Cipher>,
    precom: Option<Cipher>,
    nonce: u64,
    peer_nonce: u64,
    properties: Vec<u8>,
}

impl Server {
    pub(super) fn new(keys: &CurveKeys, properties: Vec<u8>) -> Result<Server, CurveError> {
        let (cn_public, cn_secret) = transient_keypair()?;
        Ok(Server {
            state: ServerState::ExpectHello,
            secret_key: Zeroizing::new(keys.secret_key),
            public_key: z85::public_key(&keys.secret_key),
            cn_public,
            cn_secret,
            cn_client: [0; KEY_LEN],
            cookie_key: None,
            precom: None,
            nonce: 1,
            peer_nonce: 0,
            properties,
        })
    }

    pub(super) fn on_command(&mut self, b: &[u8]) -> Result<Step, CurveError> {
        match self.state {
            ServerState::ExpectHello => {
                let welcome = self.process_hello(b)?;
                self.state = ServerState::ExpectInitiate;
                Ok(Step::Send(welcome))
            }
            ServerState::ExpectInitiate => {
                let step = self.process_initiate(b)?;
                self.state = ServerState::Authenticating;
                Ok(step)
            }
            ServerState::Authenticating | ServerState::Done => Err(CurveError::OutOfSequence),
        }
    }

    fn process_hello(&mut self, b: &[u8]) -> Result<Vec<u8>, CurveError> {
        check_structure(b)?;
        if !b.starts_with(HELLO) {
            return Err(CurveError::UnexpectedCommand);
        }
        if b.len() != HELLO_LEN || b[6] != 1 || b[7] != 0 {
            return Err(CurveError::MalformedHello);
        }
        // The 72 padding bytes are not checked (libzmq does not either).
        self.cn_client = key_at(b, 80);
        self.peer_nonce = u64_at(b, 112);
        let key = precompute(&self.cn_client, &self.secret_key)?;
        key.open(&nonce(HELLO_NONCE, &b[112..120]), &b[120..])?;

        // cookie = cookie nonce + SecretBox[C' + s'](t), t fresh for this connection
        let cookie_key = Cipher::random()?;
        let mut cookie_tail = [0u8; 16];
        random(&mut cookie_tail)?;
        let mut cookie_pt = Zeroizing::new([0u8; 64]);
        cookie_pt[..32].copy_from_slice(&self.cn_client);
        cookie_pt[32..].copy_from_slice(&self.cn_secret[..]);
        // Box[S' + cookie](S->C')
        let mut pt = Zeroizing::new(Vec::with_capacity(128));
        pt.extend_from_slice(&self.cn_public);
        pt.extend_from_slice(&cookie_tail);
        cookie_key.seal_into(&nonce(COOKIE_NONCE, &cookie_tail), &cookie_pt[..], &mut pt);
        let mut welcome_tail = [0u8; 16];
        random(&mut welcome_tail)?;
        let mut welcome = Vec::with_capacity(WELCOME_LEN);
        welcome.extend_from_slice(WELCOME);
        welcome.extend_from_slice(&welcome_tail);
        key.seal_into(&nonce(WELCOME_NONCE, &welcome_tail), &pt, &mut welcome);
        debug_assert_eq!(welcome.len(), WELCOME_LEN);
        self.cookie_key = Some(cookie_key);
        Ok(welcome)
    }

    fn process_initiate(&mut self, b: &[u8]) -> Result<Step, CurveError> {
        check_structure(b)?;
        if !b.starts_with(INITIATE) {
            return Err(CurveError::UnexpectedCommand);
        }
        if b.len() < INITIATE_MIN {
            return Err(CurveError::MalformedInitiate);
        }
        // The cookie must be ours and name this client's transient key and our own.
        let cookie_key = self
            .cookie_key
            .take()
            .ok_or(CurveError::UnexpectedCommand)?;
        let cookie = cookie_key.open(&nonce(COOKIE_NONCE, &b[9..25]), &b[25..105])?;
        if !ct_eq(&cookie[..32], &self.cn_client) || !ct_eq(&cookie[32..], &self.cn_secret[..]) {
            return Err(CurveError::Cryptographic);
        }
        let short = u64_at(b, 105);
        if short <= self.peer_nonce {
            return Err(CurveError::InvalidSequence);
        }
        self.peer_nonce = short;
        let precom = precompute(&self.cn_client, &self.cn_secret)?;
        let mut pt = precom.open(&nonce(INITIATE_NONCE, &b[105..113]), &b[113..])?;
        let client_key = key_at(&pt, 0);
        let vouch_key = precompute(&client_key, &self.cn_secret)?;
        let vouch = vouch_key.open(&nonce(VOUCH_NONCE, &pt[32..48]), &pt[48..128])?;
        if vouch.len() != 64 || vouch[..32] != self.cn_client || vouch[32..] != self.public_key {
            return Err(CurveError::KeyExchange);
        }
        self.precom = Some(precom);
        let properties = Zeroizing::new(pt.split_off(128));
        Ok(Step::Initiated {
            client_key,
            properties,
        })
    }

    pub(super) fn accept(&mut self) -> Result<(Vec<u8>, Codec), CurveError> {
        if self.state != ServerState::Authenticating {
            return Err(CurveError::OutOfSequence);
        }
        let precom = self.precom.take().ok_or(CurveError::OutOfSequence)?;
        self.state = ServerState::Done;
        let n = self.nonce;
        self.nonce += 1;
        let mut ready = Vec::with_capacity(READY_MIN + self.properties.len());
        ready.extend_from_slice(READY);
        ready.extend_from_slice(&n.to_be_bytes());
        precom.seal_into(
            &nonce(READY_NONCE, &n.to_be_bytes()),
            &self.properties,
            &mut ready,
        );
        let codec = Codec::new(precom, true, self.nonce, self.peer_nonce);
        Ok((ready, codec))
    }
}

impl Server {
    /// The client was refused: the handshake is over.
    pub(super) fn reject(&mut self) {
        self.state = ServerState::Done;
    }
}
