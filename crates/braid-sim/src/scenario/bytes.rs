//! Byte sizes in scenarios (`64KB`, `1500B`, `64KiB`).

/// Parses `1500`, `1500B`, `64KB`/`64kB` (1000), `1MB`, `64KiB` (1024), `1MiB`.
pub fn parse_bytes(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().ok()?;
    let k = match unit.trim() {
        "" | "B" | "b" | "bytes" => 1.0,
        "KB" | "kB" | "kb" | "K" | "k" => 1e3,
        "MB" | "mb" | "M" => 1e6,
        "GB" => 1e9,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        _ => return None,
    };
    let b = v * k;
    (b.is_finite() && (0.0..1e15).contains(&b)).then(|| b.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sizes() {
        assert_eq!(parse_bytes("1500"), Some(1500));
        assert_eq!(parse_bytes("64KB"), Some(64_000));
        assert_eq!(parse_bytes("64KiB"), Some(65_536));
        assert_eq!(parse_bytes("1.5MB"), Some(1_500_000));
        assert_eq!(parse_bytes("12 barrels"), None);
        assert_eq!(parse_bytes(""), None);
    }
}
