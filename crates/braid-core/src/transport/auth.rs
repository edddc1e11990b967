//! The authenticated handshake: who may open an IQ-RUDP connection.
//!
//! Both ends hold the same 32-byte pre-shared key ([`Psk`], written by
//! `braid keygen`) and run the Noise protocol `Noise_NNpsk0_25519_ChaChaPoly_BLAKE2s`
//! (through the `snow` crate) inside the stateless cookie handshake:
//!
//! ```text
//! client INITIAL (echoing the cookie) + AUTH(message 1: psk, e)   ->
//!                          <- server HANDSHAKE + AUTH(message 2: e, ee)
//! ```
//!
//! Message 1's payload is one byte, the client's [`Protection`] mode
//! (encrypt, or `--no-encrypt`); message 2's payload ends with the
//! server's. A server whose mode differs refuses the client (after message
//! 1 verified, before any Diffie-Hellman work) with a CLOSE that names the
//! mismatch ([`REASON_MODE_MISMATCH_PREFIX`]).
//!
//! Message 1 is an AEAD under a key derived from the PSK alone: a server
//! that cannot decrypt it refuses the client before it keeps any state and
//! before it does any Diffie-Hellman work (NNpsk0's responder does its only
//! DH while writing message 2). Message 2 proves to the client that the
//! server holds the key too. The prologue binds the handshake to the
//! client's connection ids and transport parameters; message 2's payload
//! carries the server's id and parameters, which the client compares with
//! the HANDSHAKE packet's.
//!
//! Why NNpsk0: neither side has a static key pair to manage — the key file
//! is the one secret, as with SRT's passphrase or WireGuard's PSK — and
//! psk0 lets the responder reject a wrong key on the first message. With
//! no static keys a compromised PSK lets its holder impersonate either side
//! (as with any pure-PSK scheme); docs/SECURITY.md says what that means.
//!
//! Main types: [`Psk`], [`SessionKeys`] (the split's two keys as the
//! connection's `PacketKeys`, see [`super::protection`]),
//! [`ClientHandshake`] and [`respond`], [`AuthError`].
//!
//! One mechanism: the pipe's TCP connections (`braid::pipe::secure`) run
//! this same handshake — same pattern, same key file — with their own
//! prologue (a label naming the pipe and the connection's preface), so a
//! message from one protocol never verifies in the other.
//!
//! Randomness: the ephemeral keys need randomness, and braid-core draws
//! none from entropy. Each handshake gets a `ChaCha20Rng` seeded with
//! `BLAKE3-keyed(K, counter)`, where `K` is derived from the 32 secret
//! random bytes the driver hands to `Endpoint::new` and `counter` counts
//! the handshakes of that endpoint (never reused). This is sound as long as
//! the endpoint secret is fresh and secret: BLAKE3 keyed by an unknown key
//! is a PRF, so distinct counters give independent, unpredictable seeds,
//! and ChaCha20 expands each into an unpredictable ephemeral key. A driver
//! that reused one secret for two endpoints would repeat ephemeral keys;
//! the runtime reads a fresh secret from the OS for every endpoint.

use super::protection::{PacketKeys, Protection};
pub use super::suite::Suite;
use crate::wire::{ConnectionId, TransportParams};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use snow::params::{CipherChoice, DHChoice, HashChoice, NoiseParams};
use snow::resolvers::{CryptoResolver, DefaultResolver};
use snow::types::{Cipher, Dh, Hash, Random};
use snow::HandshakeState;

/// The Noise protocol name of IQ-RUDP's handshake (the pipe's, when it
/// encrypts, is [`Suite::AesGcm`]'s: see [`super::suite`]).
pub const NOISE_PATTERN: &str = Suite::ChaChaPoly.noise_name();
/// Bytes in a pre-shared key.
pub const PSK_LEN: usize = 32;
pub use crate::wire::MAX_AUTH_LEN;

/// CLOSE reason phrase of a server refusal: the client sent no AUTH frame
/// but the server requires a key.
pub const REASON_KEY_REQUIRED: &str = "key required";
/// CLOSE reason phrase of a server refusal: the client's message 1 did not
/// decrypt under the server's key (a different key).
pub const REASON_KEY_MISMATCH: &str = "key mismatch";
/// CLOSE reason phrase of a server refusal: the client sent an AUTH frame
/// but the server has no key configured.
pub const REASON_NO_KEY: &str = "no key configured";
/// Start of the CLOSE reason phrase of a server refusal: the client's
/// encryption mode (`--no-encrypt` or not) differs from the server's; the
/// rest of the phrase says which side does what.
pub const REASON_MODE_MISMATCH_PREFIX: &str = "encryption mode mismatch";
/// CLOSE reason phrase of a client that refused the server: its HANDSHAKE
/// carried no message 2, or one that does not verify.
pub const REASON_SERVER_UNVERIFIED: &str = "server did not prove the key";

/// A 32-byte pre-shared key: what both ends of an authenticated connection
/// hold. `Debug` never prints the key bytes; there is deliberately no
/// equality (nothing needs to compare keys outside the handshake, which
/// compares them cryptographically).
#[derive(Clone)]
pub struct Psk([u8; PSK_LEN]);

impl Psk {
    /// A key from its 32 bytes.
    pub const fn from_bytes(bytes: [u8; PSK_LEN]) -> Self {
        Psk(bytes)
    }

    /// The key's bytes (to write a key file; handle with care).
    pub const fn as_bytes(&self) -> &[u8; PSK_LEN] {
        &self.0
    }
}

impl core::fmt::Debug for Psk {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Psk(..)")
    }
}

/// Why a handshake message was refused or could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// The message did not decrypt or verify: the peer holds another key
    /// (or none), or the message was altered.
    #[error("the peer's handshake message does not verify under our key")]
    Unverified,
    /// The verified payload does not match the packet it came in.
    #[error("the peer's handshake payload does not match its packet")]
    PayloadMismatch,
    /// The client's verified message 1 asks for another protection mode
    /// than this server's (`--no-encrypt` on one side only).
    #[error("the client {} but this server {}", .client.describe(), .server.describe())]
    ModeMismatch {
        /// The client's mode.
        client: Protection,
        /// This server's mode.
        server: Protection,
    },
    /// Building the Noise state or a message failed (a bug, not the
    /// peer's doing).
    #[error("the Noise handshake could not be set up")]
    Setup,
}

/// The keys a completed handshake derived: Noise's split as the packet
/// keys of the connection (one per direction, nonces from packet numbers,
/// [`super::protection`]) and the handshake hash.
pub struct SessionKeys {
    pub(crate) packet: PacketKeys,
    pub(crate) handshake_hash: [u8; 32],
    /// The split's two cipher keys (initiator-to-responder first), for a
    /// record layer outside the crate (the pipe's).
    raw_split: ([u8; 32], [u8; 32]),
}

impl core::fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("SessionKeys(..)")
    }
}

impl SessionKeys {
    /// The cipher key of the initiator-to-responder direction (Noise's
    /// first split key): the key a ChaChaPoly transport uses with explicit
    /// nonces.
    pub fn initiator_to_responder(&self) -> &[u8; 32] {
        &self.raw_split.0
    }

    /// The cipher key of the responder-to-initiator direction (Noise's
    /// second split key).
    pub fn responder_to_initiator(&self) -> &[u8; 32] {
        &self.raw_split.1
    }

    /// The handshake hash (Noise's `h` after the last message): a value
    /// both sides share, unique to this handshake (channel binding).
    pub fn handshake_hash(&self) -> &[u8; 32] {
        &self.handshake_hash
    }

    /// The keys of a finished handshake; `initiator` says which half of
    /// the split this side seals with (Noise: the initiator sends with the
    /// first key).
    fn from_state(
        mut state: HandshakeState,
        initiator: bool,
        mode: Protection,
        suite: Suite,
    ) -> Result<Self, AuthError> {
        let mut handshake_hash = [0u8; 32];
        let h = state.get_handshake_hash();
        if h.len() != handshake_hash.len() || !state.is_handshake_finished() {
            return Err(AuthError::Setup);
        }
        handshake_hash.copy_from_slice(h);
        let (k1, k2) = state.dangerously_get_raw_split();
        let (send, recv) = if initiator { (k1, k2) } else { (k2, k1) };
        let packet = PacketKeys::new(&send, &recv, mode, suite).map_err(|_| AuthError::Setup)?;
        Ok(SessionKeys {
            packet,
            handshake_hash,
            raw_split: (k1, k2),
        })
    }
}

/// Derives the per-handshake RNG seeds of one endpoint from its secret:
/// `BLAKE3-keyed(derive_key("braid rudp noise rng v1", secret), counter)`,
/// the counter never repeating (see the module docs).
#[derive(Clone)]
pub(crate) struct SeedSource {
    key: [u8; 32],
    counter: u64,
}

impl core::fmt::Debug for SeedSource {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SeedSource")
            .field("counter", &self.counter)
            .finish_non_exhaustive()
    }
}

impl SeedSource {
    pub(crate) fn new(endpoint_secret: &[u8; 32]) -> Self {
        SeedSource {
            key: blake3::derive_key("braid rudp noise rng v1", endpoint_secret),
            counter: 0,
        }
    }

    /// The next seed; each is used for exactly one handshake state.
    pub(crate) fn next_seed(&mut self) -> [u8; 32] {
        self.counter += 1;
        *blake3::keyed_hash(&self.key, &self.counter.to_be_bytes()).as_bytes()
    }
}

/// snow's `Random` over a seeded ChaCha20 stream.
struct SeededRandom(ChaCha20Rng);

impl Random for SeededRandom {
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), snow::Error> {
        self.0.fill_bytes(dest);
        Ok(())
    }
}

/// snow's default primitives (X25519, ChaChaPoly, BLAKE2s) with the seeded
/// RNG instead of the operating system's.
struct SeededResolver {
    seed: [u8; 32],
}

impl CryptoResolver for SeededResolver {
    fn resolve_rng(&self) -> Option<Box<dyn Random>> {
        Some(Box::new(SeededRandom(ChaCha20Rng::from_seed(self.seed))))
    }
    fn resolve_dh(&self, choice: &DHChoice) -> Option<Box<dyn Dh>> {
        DefaultResolver.resolve_dh(choice)
    }
    fn resolve_hash(&self, choice: &HashChoice) -> Option<Box<dyn Hash>> {
        DefaultResolver.resolve_hash(choice)
    }
    fn resolve_cipher(&self, choice: &CipherChoice) -> Option<Box<dyn Cipher>> {
        match choice {
            CipherChoice::AESGCM => Some(Box::<super::suite::SnowAesGcm>::default()),
            _ => DefaultResolver.resolve_cipher(choice),
        }
    }
}

fn builder<'a>(
    psk: &'a Psk,
    seed: [u8; 32],
    prologue: &'a [u8],
    suite: Suite,
) -> Result<snow::Builder<'a>, AuthError> {
    let params: NoiseParams = suite.noise_name().parse().map_err(|_| AuthError::Setup)?;
    snow::Builder::with_resolver(params, Box::new(SeededResolver { seed }))
        .psk(0, &psk.0)
        .and_then(|b| b.prologue(prologue))
        .map_err(|_| AuthError::Setup)
}

/// The client's half-done handshake: message 1 written, waiting for
/// message 2. Message 1 is kept to resend with every retransmitted INITIAL.
///
/// Drive it: [`ClientHandshake::start`], send [`ClientHandshake::message`],
/// then [`ClientHandshake::finish`] with the responder's message 2.
pub struct ClientHandshake {
    state: HandshakeState,
    message: Vec<u8>,
    mode: Protection,
    suite: Suite,
}

impl core::fmt::Debug for ClientHandshake {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ClientHandshake")
            .field("message_len", &self.message.len())
            .finish_non_exhaustive()
    }
}

impl ClientHandshake {
    /// Starts the handshake and writes message 1 (`psk, e`, the payload
    /// the mode byte).
    ///
    /// # Errors
    /// [`AuthError::Setup`] if the Noise state cannot be built (a bug).
    pub fn start(
        psk: &Psk,
        seed: [u8; 32],
        prologue: &[u8],
        mode: Protection,
        suite: Suite,
    ) -> Result<Self, AuthError> {
        let mut state = builder(psk, seed, prologue, suite)?
            .build_initiator()
            .map_err(|_| AuthError::Setup)?;
        let mut buf = [0u8; MAX_AUTH_LEN];
        let n = state
            .write_message(&[mode.code()], &mut buf)
            .map_err(|_| AuthError::Setup)?;
        Ok(ClientHandshake {
            state,
            message: buf[..n].to_vec(),
            mode,
            suite,
        })
    }

    /// Message 1, as sent.
    pub fn message(&self) -> &[u8] {
        &self.message
    }

    /// Reads message 2 and checks its payload equals `expected_payload`
    /// (the server id and parameters of the packet it came in, and our own
    /// mode: `server_payload`).
    ///
    /// # Errors
    /// [`AuthError::Unverified`] if message 2 does not verify (the peer
    /// holds another key), [`AuthError::PayloadMismatch`] if its payload
    /// differs from `expected_payload`.
    pub fn finish(
        mut self,
        message2: &[u8],
        expected_payload: &[u8],
    ) -> Result<SessionKeys, AuthError> {
        let mut payload = [0u8; MAX_AUTH_LEN];
        let n = self
            .state
            .read_message(message2, &mut payload)
            .map_err(|_| AuthError::Unverified)?;
        if payload[..n] != *expected_payload || !self.state.is_handshake_finished() {
            return Err(AuthError::PayloadMismatch);
        }
        SessionKeys::from_state(self.state, true, self.mode, self.suite)
    }
}

/// The server's side in one step: reads message 1 (refusing a wrong key
/// with [`AuthError::Unverified`] and another protection mode with
/// [`AuthError::ModeMismatch`], both before any Diffie-Hellman work), then
/// writes message 2 carrying `payload` (which ends with `mode`, see
/// `server_payload`). Returns message 2 and the keys.
///
/// # Errors
/// [`AuthError::Unverified`] for a message 1 that does not verify under
/// `psk` and `prologue`, [`AuthError::ModeMismatch`] for another mode,
/// [`AuthError::PayloadMismatch`] for a malformed payload,
/// [`AuthError::Setup`] if the Noise state cannot be built.
pub fn respond(
    psk: &Psk,
    seed: [u8; 32],
    prologue: &[u8],
    message1: &[u8],
    mode: Protection,
    suite: Suite,
    payload: &[u8],
) -> Result<(Vec<u8>, SessionKeys), AuthError> {
    let mut state = builder(psk, seed, prologue, suite)?
        .build_responder()
        .map_err(|_| AuthError::Setup)?;
    let mut scratch = [0u8; MAX_AUTH_LEN];
    let n = state
        .read_message(message1, &mut scratch)
        .map_err(|_| AuthError::Unverified)?;
    let client = match scratch[..n] {
        [code] => Protection::from_code(code).ok_or(AuthError::PayloadMismatch)?,
        _ => return Err(AuthError::PayloadMismatch),
    };
    if client != mode {
        return Err(AuthError::ModeMismatch {
            client,
            server: mode,
        });
    }
    let mut out = [0u8; MAX_AUTH_LEN];
    let n = state
        .write_message(payload, &mut out)
        .map_err(|_| AuthError::Setup)?;
    Ok((
        out[..n].to_vec(),
        SessionKeys::from_state(state, false, mode, suite)?,
    ))
}

/// The prologue both sides hash before message 1: a label, the client's
/// two connection ids (as in the INITIAL header) and its encoded transport
/// parameters.
pub(crate) fn prologue(initial_dst: &[u8], client_src: &[u8], client_params: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(32 + initial_dst.len() + client_src.len() + client_params.len());
    p.extend_from_slice(b"braid iq-rudp v3 auth");
    p.extend_from_slice(initial_dst);
    p.extend_from_slice(client_src);
    p.extend_from_slice(client_params);
    p
}

/// Message 2's payload: the server's connection id, its encoded
/// parameters (which the client compares with its HANDSHAKE packet's) and
/// its protection mode's byte (which the client compares with its own).
pub(crate) fn server_payload(
    server_cid: &ConnectionId,
    params: &TransportParams,
    mode: Protection,
) -> Vec<u8> {
    let mut p = server_cid.as_bytes().to_vec();
    params.encode(&mut p);
    p.push(mode.code());
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handshake(
        client: &Psk,
        server: &Psk,
        suites: (Suite, Suite),
    ) -> Result<(SessionKeys, SessionKeys), AuthError> {
        let mut seeds = SeedSource::new(&[9; 32]);
        let pro = prologue(&[1; 8], &[2; 8], b"params");
        let enc = Protection::Encrypt;
        let c = ClientHandshake::start(client, seeds.next_seed(), &pro, enc, suites.0)?;
        let (m2, sk) = respond(
            server,
            seeds.next_seed(),
            &pro,
            c.message(),
            enc,
            suites.1,
            b"server",
        )?;
        let ck = c.finish(&m2, b"server")?;
        Ok((ck, sk))
    }

    #[test]
    fn same_key_agrees_on_keys_and_hash() {
        for suite in [Suite::ChaChaPoly, Suite::AesGcm] {
            agrees(suite);
        }
    }

    #[test]
    fn the_two_ciphers_do_not_mix() {
        let k = Psk::from_bytes([7; 32]);
        let r = handshake(&k, &k, (Suite::AesGcm, Suite::ChaChaPoly));
        assert_eq!(r.err(), Some(AuthError::Unverified));
        let r = handshake(&k, &k, (Suite::ChaChaPoly, Suite::AesGcm));
        assert_eq!(r.err(), Some(AuthError::Unverified));
    }

    fn agrees(suite: Suite) {
        let k = Psk::from_bytes([7; 32]);
        let (c, s) = handshake(&k, &k, (suite, suite)).unwrap();
        assert_eq!(c.handshake_hash, s.handshake_hash);
        assert_eq!(c.initiator_to_responder(), s.initiator_to_responder());
        assert_eq!(c.responder_to_initiator(), s.responder_to_initiator());
        assert_ne!(c.initiator_to_responder(), c.responder_to_initiator());
        // What the client seals, the server opens (the split is usable),
        // and the other way round.
        let mut sealed = b"hdr hello".to_vec();
        c.packet.seal(0, &mut sealed, 0, 4).unwrap();
        let n = s.packet.open(0, &mut sealed, 4).unwrap();
        assert_eq!(&sealed[..n], b"hdr hello");
        let mut back = b"hdr world".to_vec();
        s.packet.seal(0, &mut back, 0, 4).unwrap();
        let n = c.packet.open(0, &mut back, 4).unwrap();
        assert_eq!(&back[..n], b"hdr world");
    }

    #[test]
    fn wrong_key_is_refused_on_message_one() {
        let pro = prologue(&[1; 8], &[2; 8], b"params");
        let c = ClientHandshake::start(
            &Psk::from_bytes([1; 32]),
            [3; 32],
            &pro,
            Protection::Encrypt,
            Suite::ChaChaPoly,
        )
        .unwrap();
        let r = respond(
            &Psk::from_bytes([2; 32]),
            [4; 32],
            &pro,
            c.message(),
            Protection::Encrypt,
            Suite::ChaChaPoly,
            b"server",
        );
        assert_eq!(r.err(), Some(AuthError::Unverified));
    }

    #[test]
    fn altered_prologue_or_payload_is_refused() {
        let k = Psk::from_bytes([7; 32]);
        let enc = Protection::Encrypt;
        let c = ClientHandshake::start(
            &k,
            [3; 32],
            &prologue(&[1; 8], &[2; 8], b"a"),
            enc,
            Suite::ChaChaPoly,
        )
        .unwrap();
        let other = prologue(&[1; 8], &[2; 8], b"b");
        let r = respond(
            &k,
            [4; 32],
            &other,
            c.message(),
            enc,
            Suite::ChaChaPoly,
            b"server",
        );
        assert_eq!(r.err(), Some(AuthError::Unverified));
        let pro = prologue(&[1; 8], &[2; 8], b"a");
        let c = ClientHandshake::start(&k, [3; 32], &pro, enc, Suite::ChaChaPoly).unwrap();
        let (m2, _) = respond(
            &k,
            [4; 32],
            &pro,
            c.message(),
            enc,
            Suite::ChaChaPoly,
            b"server",
        )
        .unwrap();
        assert_eq!(
            c.finish(&m2, b"forged").err(),
            Some(AuthError::PayloadMismatch)
        );
    }

    #[test]
    fn seeds_never_repeat_and_ephemeral_keys_differ() {
        let mut s = SeedSource::new(&[1; 32]);
        let (a, b) = (s.next_seed(), s.next_seed());
        assert_ne!(a, b);
        let k = Psk::from_bytes([7; 32]);
        let pro = prologue(&[1; 8], &[2; 8], b"p");
        let m1 =
            ClientHandshake::start(&k, a, &pro, Protection::Encrypt, Suite::ChaChaPoly).unwrap();
        let m2 =
            ClientHandshake::start(&k, b, &pro, Protection::Encrypt, Suite::ChaChaPoly).unwrap();
        assert_ne!(
            m1.message()[..32],
            m2.message()[..32],
            "fresh e per handshake"
        );
        assert_eq!(m1.message().len(), 49);
    }

    /// One exchange with fixed seeds, IQ-RUDP's cipher: the client in
    /// mode `client`, the server in mode `server`.
    fn exchange(
        k: &Psk,
        pro: &[u8],
        client: Protection,
        server: Protection,
    ) -> (ClientHandshake, Result<(Vec<u8>, SessionKeys), AuthError>) {
        let cc = Suite::ChaChaPoly;
        let c = ClientHandshake::start(k, [3; 32], pro, client, cc).unwrap();
        let r = respond(k, [4; 32], pro, c.message(), server, cc, b"s");
        (c, r)
    }

    #[test]
    fn a_mode_mismatch_is_refused_after_message_one() {
        let k = Psk::from_bytes([7; 32]);
        let pro = prologue(&[1; 8], &[2; 8], b"p");
        let (_, r) = exchange(&k, &pro, Protection::IntegrityOnly, Protection::Encrypt);
        let e = r.err().unwrap();
        assert_eq!(
            e,
            AuthError::ModeMismatch {
                client: Protection::IntegrityOnly,
                server: Protection::Encrypt
            }
        );
        assert!(e.to_string().contains("--no-encrypt"), "{e}");
        // The same modes on both sides agree.
        let only = Protection::IntegrityOnly;
        let (c, r) = exchange(&k, &pro, only, only);
        let (m2, _) = r.unwrap();
        assert!(c.finish(&m2, b"s").is_ok());
    }

    #[test]
    fn debug_prints_no_key_bytes() {
        let k = Psk::from_bytes([0xab; 32]);
        assert_eq!(format!("{k:?}"), "Psk(..)");
    }
}
