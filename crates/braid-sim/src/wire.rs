//! The tiny header the built-in sources, sinks and acks carry.
//!
//! Data: `[1][seq: u64 LE]`; ack: `[2][seq: u64 LE]`. Anything else is
//! malformed and counted by the receiver, never a panic.

/// Header length in bytes.
pub const HEADER_LEN: usize = 9;
const DATA: u8 = 1;
const ACK: u8 = 2;

/// A decoded built-in header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Header {
    /// A data packet with its sequence number.
    Data(u64),
    /// An acknowledgement of one data packet.
    Ack(u64),
}

impl Header {
    /// Encodes the header.
    pub fn encode(self) -> Vec<u8> {
        let (kind, seq) = match self {
            Header::Data(s) => (DATA, s),
            Header::Ack(s) => (ACK, s),
        };
        let mut v = Vec::with_capacity(HEADER_LEN);
        v.push(kind);
        v.extend_from_slice(&seq.to_le_bytes());
        v
    }

    /// Decodes a header; `None` if malformed.
    pub fn decode(data: &[u8]) -> Option<Header> {
        let kind = *data.first()?;
        let seq = u64::from_le_bytes(data.get(1..HEADER_LEN)?.try_into().ok()?);
        match kind {
            DATA => Some(Header::Data(seq)),
            ACK => Some(Header::Ack(seq)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_reject() {
        assert_eq!(
            Header::decode(&Header::Data(7).encode()),
            Some(Header::Data(7))
        );
        assert_eq!(
            Header::decode(&Header::Ack(u64::MAX).encode()),
            Some(Header::Ack(u64::MAX))
        );
        assert_eq!(Header::decode(&[1, 2, 3]), None);
        assert_eq!(Header::decode(&[9; 9]), None);
        assert_eq!(Header::decode(&[]), None);
    }
}
