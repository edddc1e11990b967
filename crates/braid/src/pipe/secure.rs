//! Who may talk to a pipe: the handshake every TCP connection of a secure
//! pipe runs before anything else, and the pairing that turns a one-time
//! code into the session key.
//!
//! One mechanism (docs/SECURITY.md): a connection runs braid-core's Noise
//! handshake ([`braid_core::transport::auth`], the one IQ-RUDP uses:
//! `Noise_NNpsk0_25519_{AESGCM|ChaChaPoly}_BLAKE2s`, the cipher
//! [`super::record::suite`] of the preface's mode: AES-256-GCM when
//! encrypting, ChaCha20-Poly1305 with `--no-encrypt`) with the key file's
//! key as the PSK and a prologue that names the pipe and binds the
//! connection's [`Preface`]:
//!
//! ```text
//! sender:   preface (16 bytes: "BRDPSEC\0", version 5, kind, flags) | message 1 (49: psk, e, mode byte)
//! receiver: message 2 (49: e, ee, payload = status: 0 ok, 1 encryption-mode mismatch)
//! then both directions: records (`record`), the hello first
//! ```
//!
//! Message 1 is an AEAD under a key derived from the PSK: a receiver that
//! cannot open it closes the connection having kept nothing (no session,
//! no slot; only the connection task, which ends at once or at the hello
//! timeout) and counts it. Message 2 proves the receiver holds the key.
//! A replayed message 1 gets a fresh message 2, but the replayer cannot
//! compute the new keys, so its first record (the hello) fails and nothing
//! else happens. The no-encrypt flag is in the preface, hence in the
//! prologue: an attacker who flips it breaks the handshake.
//!
//! One-time codes ([`Code`]): before opening its connections the sender
//! pairs on one connection: preface (kind PAKE) | SPAKE2 message A (33
//! bytes), the receiver answers with message B (33), both derive SPAKE2's
//! key K, and the same Noise handshake follows on that connection with K as
//! the PSK and both SPAKE2 messages in the prologue — the key confirmation:
//! a wrong code fails message 1 at the receiver (counted; after
//! [`MAX_CODE_FAILURES`] it gives up) and, were the receiver the impostor,
//! message 2 at the sender. K then keys every connection's Noise handshake.
//!
//! Main types: [`Security`] (what a side holds), [`Authenticator`] (runs
//! the handshakes of one side), [`SecureStats`], [`SecureError`].

use super::code::{Code, MAX_CODE_FAILURES};
use super::frame::{self, HelloAck, HelloStatus};
use super::record::{suite, ReadHalf, RecordKeys, WriteHalf};
pub use super::refusals::{SecureCounts, SecureStats};
use braid_core::transport::auth::{self, AuthError, ClientHandshake, Psk, SessionKeys};
use braid_core::transport::Protection;
use spake2::{Ed25519Group, Identity, Password, Spake2};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// First bytes of a secure connection.
pub const SEC_MAGIC: [u8; 8] = *b"BRDPSEC\0";
/// Version of the secure pipe (the insecure pipe's hello carries its own
/// version, [`super::frame::VERSION`]).
pub const SEC_VERSION: u16 = 5;
/// Bytes of a [`Preface`].
pub const PREFACE_LEN: usize = 16;
/// Bytes of Noise message 1 (ephemeral key, the mode byte braid-core's
/// handshake carries, and its tag).
pub const MESSAGE1_LEN: usize = 49;
/// Bytes of Noise message 2 (ephemeral key, one status byte and its tag).
pub const MESSAGE2_LEN: usize = 49;
/// Bytes of a SPAKE2 (Ed25519) message.
pub const PAKE_MESSAGE_LEN: usize = 33;
/// Preface flag: authenticate only, do not encrypt.
pub const FLAG_NO_ENCRYPT: u8 = 1;

const LABEL_NOISE: &[u8] = b"braid pipe v5 noise";
const LABEL_PAKE: &[u8] = b"braid pipe v5 pake";
const ID_SENDER: &[u8] = b"braid pipe sender";
const ID_RECEIVER: &[u8] = b"braid pipe receiver";
const STATUS_OK: u8 = 0;
const STATUS_MODE_MISMATCH: u8 = 1;

/// What a side holds to prove itself.
#[derive(Debug, Clone)]
pub enum Security {
    /// No authentication, no encryption (`--insecure`).
    Insecure,
    /// A key both sides hold (`--key FILE`).
    Key {
        /// The key.
        psk: Psk,
        /// Encrypt (`false`: `--no-encrypt`, authentication and integrity only).
        encrypt: bool,
    },
    /// A one-time code (`braid recv` prints it, `braid send --code`).
    Code {
        /// The code.
        code: Code,
        /// Encrypt (`false`: `--no-encrypt`).
        encrypt: bool,
    },
}

/// Kinds of secure connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A pipe connection: Noise with the session key.
    Noise,
    /// A pairing: SPAKE2 with the code, then Noise with its key.
    Pake,
}

/// The sender's first 16 bytes on a secure connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preface {
    /// What follows.
    pub kind: Kind,
    /// Whether records are encrypted.
    pub encrypt: bool,
}

/// Why a preface was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PrefaceError {
    /// An insecure hello (no handshake).
    #[error("the sender runs without a key (--insecure)")]
    InsecurePeer,
    /// Neither a secure preface nor a pipe hello.
    #[error("not a braid pipe sender")]
    BadMagic,
    /// Another secure version, or reserved bits set.
    #[error("unknown secure pipe version or flags")]
    Unknown,
}

impl Preface {
    /// Encodes the preface.
    pub fn encode(&self) -> [u8; PREFACE_LEN] {
        let mut b = [0u8; PREFACE_LEN];
        b[..8].copy_from_slice(&SEC_MAGIC);
        b[8..10].copy_from_slice(&SEC_VERSION.to_be_bytes());
        b[10] = match self.kind {
            Kind::Noise => 1,
            Kind::Pake => 2,
        };
        b[11] = if self.encrypt { 0 } else { FLAG_NO_ENCRYPT };
        b
    }

    /// Decodes and checks a preface.
    ///
    /// # Errors
    /// [`PrefaceError`]: an insecure hello, a wrong magic, an unknown
    /// version, kind or flag, or reserved bytes not zero.
    pub fn decode(b: &[u8; PREFACE_LEN]) -> Result<Self, PrefaceError> {
        if b[..8] == frame::MAGIC {
            return Err(PrefaceError::InsecurePeer);
        }
        if b[..8] != SEC_MAGIC {
            return Err(PrefaceError::BadMagic);
        }
        let kind = match b[10] {
            1 => Kind::Noise,
            2 => Kind::Pake,
            _ => return Err(PrefaceError::Unknown),
        };
        let version_ok = u16::from_be_bytes([b[8], b[9]]) == SEC_VERSION;
        if !version_ok || b[11] & !FLAG_NO_ENCRYPT != 0 || b[12..] != [0; 4] {
            return Err(PrefaceError::Unknown);
        }
        Ok(Preface {
            kind,
            encrypt: b[11] & FLAG_NO_ENCRYPT == 0,
        })
    }
}

/// What went wrong securing a connection (sender side) or pairing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecureError {
    /// The receiver closed during the handshake.
    #[error(
        "the receiver refused the handshake (it holds another key, expects a code, or runs --insecure)"
    )]
    Refused,
    /// The receiver answered but did not prove the key.
    #[error("the receiver did not prove the key: not the receiver you meant, or a different key")]
    ReceiverUnverified,
    /// One side runs `--no-encrypt`, the other does not.
    #[error(
        "the receiver refuses this encryption mode: use --no-encrypt on both sides or neither"
    )]
    ModeMismatch,
    /// The receiver requires a key and this side runs `--insecure`.
    #[error("the receiver requires a key or a code (it does not run --insecure)")]
    KeyRequired,
    /// The receiver is not waiting for a code.
    #[error(
        "the receiver is not waiting for a code (it has --key or --insecure, or already paired)"
    )]
    NotPairing,
    /// The code did not match.
    #[error(
        "wrong code: the receiver refused it (it gives up after {MAX_CODE_FAILURES} wrong codes)"
    )]
    WrongCode,
    /// The receiver saw too many wrong codes and gave up.
    #[error("{MAX_CODE_FAILURES} wrong codes: giving up (someone may be guessing; start braid recv again for a new code)")]
    TooManyCodeFailures,
    /// No randomness for the handshake.
    #[error("no randomness for the handshake: {0}")]
    Random(String),
    /// Network error during the handshake.
    #[error("handshake: {0}")]
    Io(#[from] std::io::Error),
    /// The Noise state could not be built (a bug).
    #[error("handshake set-up failed: {0}")]
    Setup(AuthError),
}

impl SecureError {
    /// Whether trying again cannot help: the receiver refused this
    /// sender's key, code or mode (a reconnect would be refused again).
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            SecureError::Refused
                | SecureError::ReceiverUnverified
                | SecureError::ModeMismatch
                | SecureError::KeyRequired
                | SecureError::WrongCode
                | SecureError::TooManyCodeFailures
        )
    }
}

/// 32 fresh bytes from the operating system for one handshake's RNG seed.
fn os_seed() -> Result<[u8; 32], SecureError> {
    use rand::TryRngCore;
    let mut b = [0u8; 32];
    rand::rngs::OsRng
        .try_fill_bytes(&mut b)
        .map_err(|e| SecureError::Random(e.to_string()))?;
    Ok(b)
}

fn prologue(label: &[u8], preface: &[u8; PREFACE_LEN], extra: &[u8]) -> Vec<u8> {
    [label, preface.as_slice(), extra].concat()
}

/// Splits a connection into halves protected with the session's keys.
fn protect(
    s: TcpStream,
    keys: &SessionKeys,
    initiator: bool,
    encrypt: bool,
    stats: &Arc<SecureStats>,
) -> (ReadHalf, WriteHalf) {
    let (send, recv) = if initiator {
        (keys.initiator_to_responder(), keys.responder_to_initiator())
    } else {
        (keys.responder_to_initiator(), keys.initiator_to_responder())
    };
    let (rd, wr) = s.into_split();
    (
        ReadHalf::protected(rd, &RecordKeys::new(*recv, encrypt), Arc::clone(stats)),
        WriteHalf::protected(wr, &RecordKeys::new(*send, encrypt)),
    )
}

/// The mode byte of braid-core's handshake. The pipe's own mode check is
/// the preface (bound by the prologue) and message 2's status, so the
/// responder passes the mode the client's preface names: a mismatch is
/// then reported by the status, with the pipe's message.
fn mode(encrypt: bool) -> Protection {
    if encrypt {
        Protection::Encrypt
    } else {
        Protection::IntegrityOnly
    }
}

/// The initiator's Noise exchange: writes `lead` and message 1, reads and
/// checks message 2.
async fn initiate(
    s: &mut TcpStream,
    psk: &Psk,
    pro: &[u8],
    lead: &[u8],
    encrypt: bool,
) -> Result<SessionKeys, SecureError> {
    let hs = ClientHandshake::start(psk, os_seed()?, pro, mode(encrypt), suite(encrypt))
        .map_err(SecureError::Setup)?;
    s.write_all(&[lead, hs.message()].concat()).await?;
    let mut m2 = [0u8; MESSAGE2_LEN];
    if let Err(e) = s.read_exact(&mut m2).await {
        return Err(match e.kind() {
            std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset => {
                SecureError::Refused
            }
            _ => e.into(),
        });
    }
    match hs.finish(&m2, &[STATUS_OK]) {
        Ok(k) => Ok(k),
        Err(AuthError::PayloadMismatch) => Err(SecureError::ModeMismatch),
        Err(AuthError::Unverified) => Err(SecureError::ReceiverUnverified),
        Err(e) => Err(SecureError::Setup(e)),
    }
}

/// The responder's Noise exchange: reads message 1, writes message 2.
/// `Ok(None)`: refused (counted).
async fn respond(
    s: &mut TcpStream,
    psk: &Psk,
    pro: &[u8],
    status: u8,
    client_encrypts: bool,
) -> Result<Option<SessionKeys>, SecureError> {
    let mut m1 = [0u8; MESSAGE1_LEN];
    s.read_exact(&mut m1).await?;
    match auth::respond(
        psk,
        os_seed()?,
        pro,
        &m1,
        mode(client_encrypts),
        suite(client_encrypts),
        &[status],
    ) {
        Ok((m2, keys)) => {
            s.write_all(&m2).await?;
            Ok(Some(keys))
        }
        Err(AuthError::Setup) => Err(SecureError::Setup(AuthError::Setup)),
        Err(_) => Ok(None),
    }
}

/// Runs one side's handshakes: the sender's connects, the receiver's
/// accepts.
#[derive(Debug)]
pub struct Authenticator {
    /// The session key and whether to encrypt; `None`: insecure.
    key: Option<(Psk, bool)>,
    stats: Arc<SecureStats>,
}

impl Authenticator {
    /// An authenticator with the session key, or none (`--insecure`).
    pub fn new(key: Option<(Psk, bool)>, stats: Arc<SecureStats>) -> Self {
        Authenticator { key, stats }
    }

    /// The counters.
    pub fn stats(&self) -> &Arc<SecureStats> {
        &self.stats
    }

    /// Secures a connection the sender opened (the caller bounds the time).
    ///
    /// # Errors
    /// [`SecureError`]: refused, the receiver unverified, a mode mismatch,
    /// or the network.
    pub async fn connect(&self, mut s: TcpStream) -> Result<(ReadHalf, WriteHalf), SecureError> {
        let Some((psk, encrypt)) = &self.key else {
            let (rd, wr) = s.into_split();
            return Ok((ReadHalf::plain(rd), WriteHalf::plain(wr)));
        };
        let preface = Preface {
            kind: Kind::Noise,
            encrypt: *encrypt,
        }
        .encode();
        let pro = prologue(LABEL_NOISE, &preface, &[]);
        let keys = initiate(&mut s, psk, &pro, &preface, *encrypt).await?;
        Ok(protect(s, &keys, true, *encrypt, &self.stats))
    }

    /// Secures an accepted connection, or refuses it (`None`, counted)
    /// having kept nothing; the caller bounds the time (a silent peer).
    pub async fn accept(&self, mut s: TcpStream) -> Option<(ReadHalf, WriteHalf)> {
        let Some((psk, encrypt)) = &self.key else {
            let (rd, wr) = s.into_split();
            return Some((ReadHalf::plain(rd), WriteHalf::plain(wr)));
        };
        let r = self.accept_keyed(&mut s, psk, *encrypt).await;
        match r {
            Ok(Some(keys)) => Some(protect(s, &keys, false, *encrypt, &self.stats)),
            Ok(None) => None,
            Err(e) => {
                tracing::info!(error = %e, "connection refused at the handshake");
                self.stats.count_refused();
                None
            }
        }
    }

    async fn accept_keyed(
        &self,
        s: &mut TcpStream,
        psk: &Psk,
        encrypt: bool,
    ) -> Result<Option<SessionKeys>, SecureError> {
        let mut pb = [0u8; PREFACE_LEN];
        s.read_exact(&mut pb).await?;
        let preface = match Preface::decode(&pb) {
            Ok(p) if p.kind == Kind::Noise => p,
            Ok(_) => {
                tracing::info!("a code pairing after the session key was set: refused");
                self.stats.count_refused();
                return Ok(None);
            }
            Err(PrefaceError::InsecurePeer) => {
                // Say so in the insecure sender's own language.
                let mut rest = [0u8; frame::HELLO_LEN - PREFACE_LEN];
                s.read_exact(&mut rest).await?;
                let ack = HelloAck {
                    status: HelloStatus::KeyRequired,
                    window_blocks: 0,
                    window_bytes: 0,
                };
                s.write_all(&ack.encode()).await?;
                tracing::info!("an insecure sender: refused");
                self.stats.count_refused();
                return Ok(None);
            }
            Err(e) => {
                tracing::info!(error = %e, "connection refused");
                self.stats.count_refused();
                return Ok(None);
            }
        };
        let status = if preface.encrypt == encrypt {
            STATUS_OK
        } else {
            STATUS_MODE_MISMATCH
        };
        let pro = prologue(LABEL_NOISE, &pb, &[]);
        match respond(s, psk, &pro, status, preface.encrypt).await? {
            None => {
                tracing::info!("connection refused: its key does not verify");
                self.stats.count_refused();
                Ok(None)
            }
            Some(_) if status != STATUS_OK => {
                tracing::info!("connection refused: --no-encrypt on one side only");
                self.stats.count_mode_mismatch();
                Ok(None)
            }
            Some(keys) => Ok(Some(keys)),
        }
    }
}

fn spake_start(code: &Code, sender: bool) -> (Spake2<Ed25519Group>, Vec<u8>) {
    let pw = Password::new(code.as_bytes());
    let (a, b) = (Identity::new(ID_SENDER), Identity::new(ID_RECEIVER));
    if sender {
        Spake2::<Ed25519Group>::start_a(&pw, &a, &b)
    } else {
        Spake2::<Ed25519Group>::start_b(&pw, &a, &b)
    }
}

fn psk_from(k: &[u8]) -> Option<Psk> {
    let bytes: [u8; 32] = k.get(..32)?.try_into().ok()?;
    Some(Psk::from_bytes(bytes))
}

/// The sender's pairing on connection `s`: turns `code` into the session
/// key (the caller bounds the time).
///
/// # Errors
/// [`SecureError::WrongCode`] if the receiver refused the code,
/// [`SecureError::NotPairing`] if it was not waiting for one, or another
/// [`SecureError`].
pub async fn pair_connect(
    mut s: TcpStream,
    code: &Code,
    encrypt: bool,
) -> Result<Psk, SecureError> {
    let preface = Preface {
        kind: Kind::Pake,
        encrypt,
    }
    .encode();
    let (state, msg_a) = spake_start(code, true);
    s.write_all(&[preface.as_slice(), &msg_a].concat()).await?;
    let mut msg_b = [0u8; PAKE_MESSAGE_LEN];
    if s.read_exact(&mut msg_b).await.is_err() {
        return Err(SecureError::NotPairing);
    }
    // A malformed message B is the receiver's (or an impostor's) doing.
    let k = state
        .finish(&msg_b)
        .map_err(|_| SecureError::ReceiverUnverified)?;
    let psk = psk_from(&k).ok_or(SecureError::Setup(AuthError::Setup))?;
    let pro = prologue(LABEL_PAKE, &preface, &[msg_a.as_slice(), &msg_b].concat());
    match initiate(&mut s, &psk, &pro, &[], encrypt).await {
        Ok(_) => Ok(psk),
        Err(SecureError::Refused) => Err(SecureError::WrongCode),
        Err(e) => Err(e),
    }
}

/// Pairings that may be under way at once (most wait for their first
/// bytes); a connection beyond them is closed unread.
pub const MAX_PAIRINGS_AT_ONCE: usize = 64;

/// How one pairing attempt ended.
enum Pairing {
    /// The code matched: the session key.
    Paired(Psk),
    /// A completed attempt with a wrong code: the sender's confirmation
    /// came and did not verify. The only outcome that counts as a guess.
    WrongCode,
    /// Not a pairing, or one that stopped before its confirmation (it
    /// learnt nothing: the receiver sends nothing keyed before it).
    Refused,
}

/// The receiver's pairing: accepts connections on `listeners` until one
/// proves the code (its SPAKE2 key is returned) or [`MAX_CODE_FAILURES`]
/// completed attempts had a wrong code. Attempts run side by side, each
/// bounded by `timeout`, so a connection that never sends a byte stalls
/// nobody and counts for nothing; at most as many attempts may be past
/// SPAKE2's first message as there are guesses left, so no more than
/// [`MAX_CODE_FAILURES`] guesses can ever be tried.
///
/// # Errors
/// [`SecureError::TooManyCodeFailures`], or a failure to accept.
pub async fn pair_accept(
    listeners: &[tokio::net::TcpListener],
    code: &Code,
    encrypt: bool,
    timeout: std::time::Duration,
    stats: &Arc<SecureStats>,
) -> Result<Psk, SecureError> {
    let guesses = Arc::new(tokio::sync::Semaphore::new(MAX_CODE_FAILURES as usize));
    let mut failures = 0;
    let mut attempts = tokio::task::JoinSet::new();
    loop {
        let accept = std::future::poll_fn(|cx| {
            for l in listeners {
                if let std::task::Poll::Ready(r) = l.poll_accept(cx) {
                    return std::task::Poll::Ready(r);
                }
            }
            std::task::Poll::Pending
        });
        tokio::select! {
            r = accept => {
                let (s, peer) = r?;
                if attempts.len() >= MAX_PAIRINGS_AT_ONCE {
                    stats.count_refused();
                    tracing::info!(%peer, "pairing refused: too many at once");
                    continue;
                }
                let (code, guesses, stats) = (code.clone(), guesses.clone(), stats.clone());
                attempts.spawn(async move {
                    let r = tokio::time::timeout(timeout, pair_one(s, &code, encrypt, &guesses, &stats)).await;
                    (peer, r)
                });
            }
            Some(done) = attempts.join_next(), if !attempts.is_empty() => {
                let Ok((peer, r)) = done else {
                    continue;
                };
                match r {
                    Ok(Ok(Pairing::Paired(psk))) => return Ok(psk),
                    Ok(Ok(Pairing::WrongCode)) => {
                        failures += 1;
                        stats.count_code_failure();
                        tracing::warn!(%peer, failures, "a wrong code");
                        if failures >= MAX_CODE_FAILURES {
                            return Err(SecureError::TooManyCodeFailures);
                        }
                    }
                    Ok(Ok(Pairing::Refused)) => stats.count_refused(),
                    Ok(Err(e)) => {
                        stats.count_refused();
                        tracing::info!(%peer, error = %e, "pairing failed");
                    }
                    Err(_) => {
                        stats.count_refused();
                        tracing::info!(%peer, "pairing timed out");
                    }
                }
            }
        }
    }
}

/// One pairing attempt. It takes one of the guesses left before it sends
/// SPAKE2's message B (waiting for one if every guess is under way), and
/// gives it back unless the attempt completed with a wrong code.
async fn pair_one(
    mut s: TcpStream,
    code: &Code,
    encrypt: bool,
    guesses: &tokio::sync::Semaphore,
    stats: &SecureStats,
) -> Result<Pairing, SecureError> {
    let mut pb = [0u8; PREFACE_LEN];
    s.read_exact(&mut pb).await?;
    let preface = match Preface::decode(&pb) {
        Ok(p) if p.kind == Kind::Pake => p,
        _ => return Ok(Pairing::Refused),
    };
    let mut msg_a = [0u8; PAKE_MESSAGE_LEN];
    s.read_exact(&mut msg_a).await?;
    let (state, msg_b) = spake_start(code, false);
    // A malformed message A learns nothing: refused before message B.
    let Ok(k) = state.finish(&msg_a) else {
        return Ok(Pairing::Refused);
    };
    let Ok(guess) = guesses.acquire().await else {
        return Ok(Pairing::Refused);
    };
    s.write_all(&msg_b).await?;
    let psk = psk_from(&k).ok_or(SecureError::Setup(AuthError::Setup))?;
    let status = if preface.encrypt == encrypt {
        STATUS_OK
    } else {
        STATUS_MODE_MISMATCH
    };
    let pro = prologue(LABEL_PAKE, &pb, &[msg_a.as_slice(), &msg_b].concat());
    match respond(&mut s, &psk, &pro, status, preface.encrypt).await? {
        Some(_) if status == STATUS_OK => Ok(Pairing::Paired(psk)),
        Some(_) => {
            // The code was right; the modes differ. Not a guess.
            stats.count_mode_mismatch();
            Ok(Pairing::Refused)
        }
        None => {
            // A guess used up for good.
            guess.forget();
            Ok(Pairing::WrongCode)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preface_roundtrip_and_rejects() {
        for kind in [Kind::Noise, Kind::Pake] {
            for encrypt in [true, false] {
                let p = Preface { kind, encrypt };
                assert_eq!(Preface::decode(&p.encode()), Ok(p));
            }
        }
        let good = Preface {
            kind: Kind::Noise,
            encrypt: true,
        }
        .encode();
        let mut b = good;
        b[..8].copy_from_slice(&frame::MAGIC);
        assert_eq!(Preface::decode(&b), Err(PrefaceError::InsecurePeer));
        let mut b = good;
        b[0] = b'X';
        assert_eq!(Preface::decode(&b), Err(PrefaceError::BadMagic));
        for (i, v) in [(9, 2u8), (10, 9), (11, 2), (15, 1)] {
            let mut b = good;
            b[i] = v;
            assert_eq!(Preface::decode(&b), Err(PrefaceError::Unknown), "byte {i}");
        }
    }
}
