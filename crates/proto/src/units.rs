//! Byte sizes as people write them in settings and options (`64 MiB`, `4GB`, `512 B`, a bare
//! count): one parser for the server's config, topic options sent as text and the bench.

/// Units and their multipliers (matched in any case).
const UNITS: [(&str, u64); 10] = [
    ("", 1),
    ("b", 1),
    ("kb", 1_000),
    ("kib", 1 << 10),
    ("mb", 1_000_000),
    ("mib", 1 << 20),
    ("gb", 1_000_000_000),
    ("gib", 1 << 30),
    ("tb", 1_000_000_000_000),
    ("tib", 1 << 40),
];

/// `text` as bytes: a whole number and an optional unit, decimal (`KB`, `MB`, `GB`, `TB`) or
/// binary (`KiB` … `TiB`), any case, spaces around allowed; `None` for anything else or a
/// value past `u64`.
pub fn parse_byte_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let number: u64 = number.parse().ok()?;
    let unit = unit.trim();
    let (_, multiplier) = UNITS
        .iter()
        .find(|(name, _)| unit.eq_ignore_ascii_case(name))?;
    number.checked_mul(*multiplier)
}

#[cfg(test)]
mod tests {
    use super::parse_byte_size;

    #[test]
    fn sizes_as_written() {
        assert_eq!(parse_byte_size("4096"), Some(4096));
        assert_eq!(parse_byte_size(" 512 B "), Some(512));
        assert_eq!(parse_byte_size("100KB"), Some(100_000));
        assert_eq!(parse_byte_size("64 MiB"), Some(64 << 20));
        assert_eq!(parse_byte_size("1gib"), Some(1 << 30));
        assert_eq!(parse_byte_size("2 TB"), Some(2_000_000_000_000));
        assert_eq!(parse_byte_size("1TiB"), Some(1 << 40));
        for bad in [
            "",
            "MiB",
            "1.5 GiB",
            "-1",
            "1 PiB",
            "12 apples",
            "99999999999 TiB",
        ] {
            assert_eq!(parse_byte_size(bad), None, "{bad}");
        }
    }
}
