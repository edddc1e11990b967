//! Checked byte cursors: [`Reader`] for decoding, [`Writer`] helpers for
//! encoding, and the QUIC-style variable-length integer ([`varint_len`]).
//!
//! Every read is bounds-checked and returns [`WireError`] instead of
//! panicking; the decoder never indexes a slice directly.
//!
//! Varints use the encoding of RFC 9000 §16: the two high bits of the first
//! byte give the length (1, 2, 4 or 8 bytes) and the rest is the value in
//! network byte order, so values up to 2^62 − 1 ([`VARINT_MAX`]) fit.

use super::WireError;

/// The largest value a varint can carry (2^62 − 1).
pub const VARINT_MAX: u64 = (1 << 62) - 1;

/// A bounds-checked cursor over a received datagram.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A cursor at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// True when everything has been read.
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// The next byte without consuming it.
    pub fn peek_u8(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    /// What is left, without consuming it.
    pub fn peek_rest(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or(&[])
    }

    /// One byte.
    ///
    /// # Errors
    /// [`WireError::Truncated`] at the end of the buffer.
    pub fn u8(&mut self) -> Result<u8, WireError> {
        let b = self.peek_u8().ok_or(WireError::Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    /// `n` bytes as a sub-slice of the datagram.
    ///
    /// # Errors
    /// [`WireError::Truncated`] if fewer than `n` bytes remain.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.pos.checked_add(n).ok_or(WireError::Truncated)?;
        let out = self.buf.get(self.pos..end).ok_or(WireError::Truncated)?;
        self.pos = end;
        Ok(out)
    }

    /// A fixed-size array.
    ///
    /// # Errors
    /// [`WireError::Truncated`] if fewer than `N` bytes remain.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let s = self.bytes(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(s);
        Ok(out)
    }

    /// A variable-length integer.
    ///
    /// # Errors
    /// [`WireError::Truncated`] if the encoding runs past the buffer.
    pub fn varint(&mut self) -> Result<u64, WireError> {
        let rest = self.peek_rest();
        let first = *rest.first().ok_or(WireError::Truncated)?;
        // One bounds check for the whole encoding and one big-endian load
        // (every packet header and frame has several of these).
        let v = match first >> 6 {
            0 => u64::from(first),
            1 => u64::from(u16::from_be_bytes(*first_n(rest)?) & 0x3fff),
            2 => u64::from(u32::from_be_bytes(*first_n(rest)?) & 0x3fff_ffff),
            _ => u64::from_be_bytes(*first_n(rest)?) & VARINT_MAX,
        };
        self.pos += 1 << (first >> 6);
        Ok(v)
    }

    /// A varint that must not exceed `max`; `what` names the field.
    ///
    /// # Errors
    /// [`WireError::Truncated`] or [`WireError::OutOfRange`].
    pub fn varint_max(&mut self, max: u64, what: &'static str) -> Result<u64, WireError> {
        let v = self.varint()?;
        if v > max {
            return Err(WireError::OutOfRange { field: what });
        }
        Ok(v)
    }

    /// The rest of the buffer.
    pub fn rest(&mut self) -> &'a [u8] {
        let out = self.buf.get(self.pos..).unwrap_or(&[]);
        self.pos = self.buf.len();
        out
    }
}

/// The first `N` bytes of `b` as an array.
fn first_n<const N: usize>(b: &[u8]) -> Result<&[u8; N], WireError> {
    b.first_chunk().ok_or(WireError::Truncated)
}

/// Encoded length of `v` as a varint (values above [`VARINT_MAX`] are
/// clamped by [`put_varint`], so they count as 8 bytes).
pub const fn varint_len(v: u64) -> usize {
    if v < (1 << 6) {
        1
    } else if v < (1 << 14) {
        2
    } else if v < (1 << 30) {
        4
    } else {
        8
    }
}

/// Appends `v` as a varint. Values above [`VARINT_MAX`] are clamped to it;
/// every encoder in this module validates its fields first, so clamping is a
/// last line of defence, not a behaviour callers rely on.
pub fn put_varint(out: &mut Vec<u8>, v: u64) {
    let (bytes, n) = encode_varint(v);
    out.extend_from_slice(&bytes[..n]);
}

/// `v` (clamped to [`VARINT_MAX`]) as a varint: the encoding is the first
/// `n` bytes — the length code in the top two bits of the first byte, the
/// value big-endian.
#[inline]
fn encode_varint(v: u64) -> ([u8; 8], usize) {
    let v = v.min(VARINT_MAX);
    let n = varint_len(v);
    let code: u64 = match n {
        1 => 0,
        2 => 0x4000,
        4 => 0x8000_0000,
        _ => 0xc000_0000_0000_0000,
    };
    (((v | code) << (8 * (8 - n))).to_be_bytes(), n)
}

/// A frame's fixed fields, built on the stack and appended in one copy
/// (a STREAM frame's type, flags and up to seven varints: one capacity
/// check instead of one per field, for every packet sent).
#[derive(Debug)]
pub struct FieldBuf {
    bytes: [u8; FieldBuf::CAPACITY],
    len: usize,
}

impl Default for FieldBuf {
    fn default() -> Self {
        FieldBuf {
            bytes: [0; FieldBuf::CAPACITY],
            len: 0,
        }
    }
}

impl FieldBuf {
    /// Room for two bytes and seven varints of the largest size.
    pub const CAPACITY: usize = 2 + 7 * 8;

    /// Appends a byte.
    ///
    /// # Panics
    /// Past [`FieldBuf::CAPACITY`] (a frame's encoder writes a fixed
    /// number of fields).
    #[inline]
    pub fn u8(&mut self, b: u8) {
        self.bytes[self.len] = b;
        self.len += 1;
    }

    /// Appends `v` as a varint, as [`put_varint`] does.
    ///
    /// # Panics
    /// Past [`FieldBuf::CAPACITY`].
    #[inline]
    pub fn varint(&mut self, v: u64) {
        let (bytes, n) = encode_varint(v);
        self.bytes[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }

    /// The bytes written.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rfc9000_examples() {
        // RFC 9000 appendix A.1 sample encodings.
        let cases: [(&[u8], u64); 4] = [
            (
                &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c],
                151_288_809_941_952_652,
            ),
            (&[0x9d, 0x7f, 0x3e, 0x7d], 494_878_333),
            (&[0x7b, 0xbd], 15_293),
            (&[0x25], 37),
        ];
        for (bytes, v) in cases {
            assert_eq!(Reader::new(bytes).varint().unwrap(), v);
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out, bytes);
        }
    }

    #[test]
    fn truncated_reads_fail() {
        assert_eq!(Reader::new(&[0x40]).varint(), Err(WireError::Truncated));
        assert_eq!(Reader::new(&[]).u8(), Err(WireError::Truncated));
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(r.bytes(4), Err(WireError::Truncated));
        assert_eq!(r.bytes(usize::MAX), Err(WireError::Truncated));
        assert_eq!(r.bytes(3).unwrap(), &[1, 2, 3]);
        assert!(r.is_empty());
    }

    proptest! {
        #[test]
        fn varint_round_trips(v in 0..=VARINT_MAX) {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            prop_assert_eq!(out.len(), varint_len(v));
            let mut r = Reader::new(&out);
            prop_assert_eq!(r.varint().unwrap(), v);
            prop_assert!(r.is_empty());
            let mut f = FieldBuf::default();
            f.varint(v);
            prop_assert_eq!(f.as_slice(), out.as_slice());
            // Behind other bytes, and cut short anywhere.
            let mut framed = vec![7u8];
            framed.extend_from_slice(&out);
            framed.push(9);
            let mut r = Reader::new(&framed);
            prop_assert_eq!(r.u8().unwrap(), 7);
            prop_assert_eq!(r.varint().unwrap(), v);
            prop_assert_eq!(r.u8().unwrap(), 9);
            for cut in 0..out.len() {
                prop_assert_eq!(Reader::new(&out[..cut]).varint(), Err(WireError::Truncated));
            }
        }
    }
}
