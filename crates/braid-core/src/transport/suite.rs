//! The Noise cipher of a handshake, and of everything its keys protect
//! afterwards.
//!
//! A Noise protocol name fixes one cipher for the handshake's own messages
//! and for the transport messages sealed with the keys of its `Split()`
//! (the Noise specification, §5.1 and §12). braid uses two:
//!
//! ```text
//! ChaChaPoly  ChaCha20-Poly1305 (RFC 8439)  nonce = 32 zero bits || n, 64-bit little-endian
//! AESGCM      AES-256-GCM                  nonce = 32 zero bits || n, 64-bit big-endian
//! ```
//!
//! IQ-RUDP runs `…_ChaChaPoly_…` in both its modes. The pipe runs
//! `…_AESGCM_…` when it encrypts — on CPUs with AES instructions (every
//! x86-64 since about 2010, ARMv8 with the crypto extension) AES-256-GCM
//! seals 256 KiB records about 6× as fast as ChaCha20-Poly1305 (`cargo
//! bench -p braid-core --bench aead`) — and `…_ChaChaPoly_…` with
//! `--no-encrypt`, whose records are only headers and acknowledgements
//! (block payloads travel outside them), so the cipher's speed does not
//! matter there.
//!
//! Both AEADs come from AWS-LC (`aws-lc-rs`; its AES-256-GCM runs 512-bit
//! VAES where the CPU has it, 1.6× ring's speed here, and it seals out of
//! place); this module only names them, builds their nonces as Noise
//! prescribes, and hands AES-256-GCM to `snow` (whose own AESGCM needs
//! another crate) through its `Cipher` trait.
//!
//! Main type: [`Suite`].

use aws_lc_rs::aead::{
    Aad, Algorithm, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, CHACHA20_POLY1305,
};

/// Bytes of an AEAD tag (both ciphers).
const TAG_LEN: usize = 16;

/// A Noise cipher: which AEAD, with which nonce encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Suite {
    /// `ChaChaPoly`: ChaCha20-Poly1305.
    #[default]
    ChaChaPoly,
    /// `AESGCM`: AES-256-GCM.
    AesGcm,
}

impl Suite {
    /// The full Noise protocol name of braid's handshake with this cipher.
    pub const fn noise_name(self) -> &'static str {
        match self {
            Suite::ChaChaPoly => "Noise_NNpsk0_25519_ChaChaPoly_BLAKE2s",
            Suite::AesGcm => "Noise_NNpsk0_25519_AESGCM_BLAKE2s",
        }
    }

    /// The AEAD.
    pub fn algorithm(self) -> &'static Algorithm {
        match self {
            Suite::ChaChaPoly => &CHACHA20_POLY1305,
            Suite::AesGcm => &AES_256_GCM,
        }
    }

    /// Noise's nonce for message number `n` under this cipher.
    pub fn nonce(self, n: u64) -> Nonce {
        let mut b = [0u8; 12];
        match self {
            Suite::ChaChaPoly => b[4..].copy_from_slice(&n.to_le_bytes()),
            Suite::AesGcm => b[4..].copy_from_slice(&n.to_be_bytes()),
        }
        Nonce::assume_unique_for_key(b)
    }

    /// A key for this cipher. AWS-LC refuses only a key of the wrong length,
    /// which a `[u8; 32]` is not for either cipher.
    pub fn key(self, k: &[u8; 32]) -> Result<LessSafeKey, aws_lc_rs::error::Unspecified> {
        UnboundKey::new(self.algorithm(), k).map(LessSafeKey::new)
    }
}

/// AES-256-GCM from AWS-LC behind snow's `Cipher` trait (for the handshake
/// messages of `…_AESGCM_…`).
#[derive(Default)]
pub(crate) struct SnowAesGcm {
    key: Option<LessSafeKey>,
}

impl snow::types::Cipher for SnowAesGcm {
    fn name(&self) -> &'static str {
        "AESGCM"
    }

    fn set(&mut self, key: &[u8; 32]) {
        self.key = Suite::AesGcm.key(key).ok();
    }

    fn encrypt(&self, nonce: u64, authtext: &[u8], plaintext: &[u8], out: &mut [u8]) -> usize {
        let n = plaintext.len();
        // snow sizes `out` for the plaintext and the tag before it calls,
        // and always sets a key first; were either not so, a message of
        // zero bytes fails the handshake instead of panicking.
        let Some(key) = &self.key else { return 0 };
        if out.len() < n + TAG_LEN {
            return 0;
        }
        out[..n].copy_from_slice(plaintext);
        match key.seal_in_place_separate_tag(
            Suite::AesGcm.nonce(nonce),
            Aad::from(authtext),
            &mut out[..n],
        ) {
            Ok(tag) => {
                out[n..n + TAG_LEN].copy_from_slice(tag.as_ref());
                n + TAG_LEN
            }
            Err(_) => 0,
        }
    }

    fn decrypt(
        &self,
        nonce: u64,
        authtext: &[u8],
        ciphertext: &[u8],
        out: &mut [u8],
    ) -> Result<usize, snow::Error> {
        let fail = || snow::Error::Decrypt;
        let key = self.key.as_ref().ok_or_else(fail)?;
        let n = ciphertext.len().checked_sub(TAG_LEN).ok_or_else(fail)?;
        if out.len() < n {
            return Err(fail());
        }
        // Handshake messages only (under 100 bytes): the copy is nothing.
        let mut buf = ciphertext.to_vec();
        let plain = key
            .open_in_place(Suite::AesGcm.nonce(nonce), Aad::from(authtext), &mut buf)
            .map_err(|_| fail())?;
        out[..n].copy_from_slice(plain);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use snow::types::Cipher;

    #[test]
    fn nonces_follow_the_noise_encodings() {
        // Noise §12.3 (ChaChaPoly, little-endian) and §12.4 (AESGCM,
        // big-endian), each after 32 zero bits.
        let le = Suite::ChaChaPoly.nonce(0x0102);
        let be = Suite::AesGcm.nonce(0x0102);
        assert_eq!(le.as_ref(), &[0, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(be.as_ref(), &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2]);
    }

    #[test]
    fn the_snow_cipher_round_trips_and_refuses_a_changed_byte() {
        let mut c = SnowAesGcm::default();
        c.set(&[9; 32]);
        let mut sealed = [0u8; 5 + TAG_LEN];
        assert_eq!(c.encrypt(7, b"ad", b"hello", &mut sealed), 5 + TAG_LEN);
        let mut out = [0u8; 5];
        assert_eq!(c.decrypt(7, b"ad", &sealed, &mut out), Ok(5));
        assert_eq!(&out, b"hello");
        assert!(c.decrypt(8, b"ad", &sealed, &mut out).is_err());
        sealed[0] ^= 1;
        assert!(c.decrypt(7, b"ad", &sealed, &mut out).is_err());
        assert!(c.decrypt(7, b"ad", &sealed[..10], &mut out).is_err());
    }

    #[test]
    fn aes_gcm_is_the_standard_one() {
        // NIST SP 800-38D / McGrew–Viega test case 14: AES-256, zero key,
        // zero 96-bit IV (our nonce for n = 0), one zero block.
        let mut c = SnowAesGcm::default();
        c.set(&[0; 32]);
        let mut out = [0u8; 32];
        c.encrypt(0, &[], &[0; 16], &mut out);
        let hex: String = out.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "cea7403d4d606b6e074ec5d3baf39d18d0d1c8a799996bf0265b98b5d48ab919"
        );
    }
}
