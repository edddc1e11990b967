//! Stateless address-validation cookies for the handshake.
//!
//! A cookie is `bucket (u32, big-endian) ‖ tag (16 bytes)` where
//! `tag = BLAKE3-keyed(secret, "braid-cookie-v1" ‖ ip ‖ port ‖ dst ‖ src ‖
//! bucket)` truncated to 16 bytes and `bucket = now / COOKIE_BUCKET`. The
//! server keeps no state per client: it recomputes the tag to check it.
//!
//! Main type: [`CookieKey`]. Invariants: a cookie is accepted only for the
//! current or the previous bucket (so it lives 10-20 s), only for the same
//! address and connection ids, and the comparison takes constant time.

use crate::time::{Duration, Instant};
use crate::wire::ConnectionId;
use std::net::{IpAddr, SocketAddr};

/// How long one cookie time bucket lasts.
pub const COOKIE_BUCKET: Duration = Duration::from_secs(10);
/// Bytes in the truncated tag.
pub const COOKIE_TAG_LEN: usize = 16;
/// Bytes in a whole cookie.
pub const COOKIE_LEN: usize = 4 + COOKIE_TAG_LEN;

/// Why a cookie was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CookieError {
    /// Wrong length.
    #[error("malformed cookie")]
    Malformed,
    /// From a bucket that is neither current nor previous.
    #[error("stale cookie")]
    Stale,
    /// The tag does not match (forged, or for another address or ids).
    #[error("invalid cookie")]
    Invalid,
}

/// The server's secret for minting and checking cookies. Its bytes come
/// from the caller (braid-core constructs no random generator).
#[derive(Clone)]
pub struct CookieKey([u8; 32]);

impl core::fmt::Debug for CookieKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("CookieKey(..)")
    }
}

impl CookieKey {
    /// A key from 32 secret random bytes.
    pub fn new(secret: [u8; 32]) -> Self {
        CookieKey(secret)
    }

    fn tag(
        &self,
        addr: &SocketAddr,
        dst: &ConnectionId,
        src: &ConnectionId,
        bucket: u32,
    ) -> [u8; COOKIE_TAG_LEN] {
        let mut h = blake3::Hasher::new_keyed(&self.0);
        h.update(b"braid-cookie-v1");
        match addr.ip() {
            IpAddr::V4(v4) => h.update(&v4.octets()),
            IpAddr::V6(v6) => h.update(&v6.octets()),
        };
        h.update(&addr.port().to_be_bytes());
        h.update(dst.as_bytes());
        h.update(src.as_bytes());
        h.update(&bucket.to_be_bytes());
        let mut out = [0u8; COOKIE_TAG_LEN];
        out.copy_from_slice(&h.finalize().as_bytes()[..COOKIE_TAG_LEN]);
        out
    }

    fn bucket(now: Instant) -> u32 {
        // Wraps after ~1360 years of uptime; wrapping only shortens one
        // cookie's life.
        (now.as_nanos() / COOKIE_BUCKET.as_nanos()) as u32
    }

    /// Mints a cookie for a client at `addr` whose INITIAL carried `dst`
    /// and `src`.
    pub fn mint(
        &self,
        now: Instant,
        addr: &SocketAddr,
        dst: &ConnectionId,
        src: &ConnectionId,
    ) -> [u8; COOKIE_LEN] {
        let b = Self::bucket(now);
        let mut out = [0u8; COOKIE_LEN];
        out[..4].copy_from_slice(&b.to_be_bytes());
        out[4..].copy_from_slice(&self.tag(addr, dst, src, b));
        out
    }

    /// Checks a cookie; returns its tag (a replay-detection key) if valid.
    ///
    /// # Errors
    /// [`CookieError`] if malformed, stale or forged.
    pub fn verify(
        &self,
        now: Instant,
        addr: &SocketAddr,
        dst: &ConnectionId,
        src: &ConnectionId,
        cookie: &[u8],
    ) -> Result<[u8; COOKIE_TAG_LEN], CookieError> {
        if cookie.len() != COOKIE_LEN {
            return Err(CookieError::Malformed);
        }
        let mut b = [0u8; 4];
        b.copy_from_slice(&cookie[..4]);
        let b = u32::from_be_bytes(b);
        let cur = Self::bucket(now);
        if b != cur && b.wrapping_add(1) != cur {
            return Err(CookieError::Stale);
        }
        let want = self.tag(addr, dst, src, b);
        // Constant-time comparison.
        let diff = want
            .iter()
            .zip(&cookie[4..])
            .fold(0u8, |acc, (x, y)| acc | (x ^ y));
        if diff != 0 {
            return Err(CookieError::Invalid);
        }
        Ok(want)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, 1], port))
    }

    #[test]
    fn accepts_own_cookie_for_two_buckets_only() {
        let k = CookieKey::new([7; 32]);
        let (d, s) = (ConnectionId([1; 8]), ConnectionId([2; 8]));
        let t0 = Instant::from_nanos(5);
        let c = k.mint(t0, &addr(1), &d, &s);
        assert!(k.verify(t0, &addr(1), &d, &s, &c).is_ok());
        assert!(k.verify(t0 + COOKIE_BUCKET, &addr(1), &d, &s, &c).is_ok());
        assert_eq!(
            k.verify(t0 + COOKIE_BUCKET * 2, &addr(1), &d, &s, &c),
            Err(CookieError::Stale)
        );
    }

    #[test]
    fn refuses_other_address_ids_key_or_forgery() {
        let k = CookieKey::new([7; 32]);
        let (d, s) = (ConnectionId([1; 8]), ConnectionId([2; 8]));
        let t = Instant::ZERO;
        let c = k.mint(t, &addr(1), &d, &s);
        assert_eq!(k.verify(t, &addr(2), &d, &s, &c), Err(CookieError::Invalid));
        assert_eq!(k.verify(t, &addr(1), &s, &d, &c), Err(CookieError::Invalid));
        let other = CookieKey::new([8; 32]);
        assert_eq!(
            other.verify(t, &addr(1), &d, &s, &c),
            Err(CookieError::Invalid)
        );
        let mut forged = c;
        forged[10] ^= 1;
        assert_eq!(
            k.verify(t, &addr(1), &d, &s, &forged),
            Err(CookieError::Invalid)
        );
        assert_eq!(
            k.verify(t, &addr(1), &d, &s, &c[..5]),
            Err(CookieError::Malformed)
        );
    }
}
