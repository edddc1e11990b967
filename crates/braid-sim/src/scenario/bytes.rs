//! Byte sizes in scenarios (`1500B`, `64KB`, `64KiB`): one parser for every
//! size braid reads, [`braid_core::ByteSize`] (SI `KB` = 1000, IEC `KiB` =
//! 1024; `64K` is refused as ambiguous).

use braid_core::units::{ByteSize, ParseByteSizeError};

/// Parses a size in bytes with [`ByteSize`]'s units: `1500`, `1500B`,
/// `64KB` (64,000), `1.5MB`, `64KiB` (65,536), `1MiB`.
///
/// # Errors
/// Empty, malformed, ambiguous (`64K`, `64kb`) or unknown units, a
/// fraction of a byte, or a size beyond 64 bits.
pub fn parse_bytes(text: &str) -> Result<u64, ParseByteSizeError> {
    text.parse::<ByteSize>().map(ByteSize::bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sizes() {
        assert_eq!(parse_bytes("1500").ok(), Some(1500));
        assert_eq!(parse_bytes("64KB").ok(), Some(64_000));
        assert_eq!(parse_bytes("64KiB").ok(), Some(65_536));
        assert_eq!(parse_bytes("1.5MB").ok(), Some(1_500_000));
        assert_eq!(parse_bytes("12 barrels").ok(), None);
        assert_eq!(parse_bytes("").ok(), None);
    }

    #[test]
    fn refuses_ambiguous_sizes() {
        let e = parse_bytes("64K").unwrap_err().to_string();
        assert!(e.contains("KB (1000)") && e.contains("KiB (1024)"), "{e}");
        assert!(parse_bytes("64kb").is_err());
    }
}
