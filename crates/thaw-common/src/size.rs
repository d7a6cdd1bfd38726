//! Sizes with units ("64MiB", "4GiB", "1.5G", "512k"), as every flag takes them.

use crate::{Result, ThawError};

/// Parses a byte size. Binary units (KiB, MiB, GiB, TiB; also K, M, G, T and k, m, g)
/// are powers of 1024; decimal units (KB, MB, GB, TB) powers of 1000.
pub fn parse_size(text: &str) -> Result<u64> {
    let s = text.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let bad = || {
        ThawError::invalid(format!(
            "invalid size {text:?}: expected a number with an optional unit, e.g. 64MiB, 4GiB, 1000000"
        ))
    };
    let value: f64 = num.parse().map_err(|_| bad())?;
    let mult: u64 = match unit.trim() {
        "" | "B" | "b" => 1,
        "K" | "k" | "KiB" | "kiB" => 1 << 10,
        "KB" | "kB" => 1000,
        "M" | "m" | "MiB" => 1 << 20,
        "MB" => 1_000_000,
        "G" | "g" | "GiB" => 1 << 30,
        "GB" => 1_000_000_000,
        "T" | "t" | "TiB" => 1 << 40,
        "TB" => 1_000_000_000_000,
        _ => return Err(bad()),
    };
    let bytes = value * mult as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(bad());
    }
    Ok(bytes.round() as u64)
}

/// Formats bytes with a binary unit, e.g. "64.0 MiB".
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 { format!("{bytes} B") } else { format!("{v:.1} {}", UNITS[i]) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse_size("4GiB").unwrap(), 4 << 30);
        assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_size("64M").unwrap(), 64 << 20);
        assert_eq!(parse_size("1.5KiB").unwrap(), 1536);
        assert_eq!(parse_size("1KB").unwrap(), 1000);
        assert_eq!(parse_size("12345").unwrap(), 12345);
        assert_eq!(parse_size(" 2 GB ").unwrap(), 2_000_000_000);
        for bad in ["", "GiB", "4XB", "-1", "1.2.3MiB", "1e9"] {
            let e = parse_size(bad).unwrap_err();
            assert!(e.message.contains("invalid size"), "{bad}: {e}");
        }
        assert_eq!(format_size(64 << 20), "64.0 MiB");
        assert_eq!(format_size(10), "10 B");
    }
}
