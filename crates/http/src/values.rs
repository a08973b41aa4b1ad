//! Typed values between JSON and the TLV entries of options and user headers.
//!
//! Into TLV (option values of create and update bodies, PROTOCOL.md §8.4): JSON booleans,
//! integers and strings; an integer kind also takes a decimal string (values past 2^53),
//! a human-readable duration (`"7 days"`, in µs as the options are) or byte size (`"1 GiB"`);
//! a raw kind takes base64. Out of TLV (option values of responses, §9): the text form.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use proto::primitives::{HeaderKind, TlvEntry};
use serde_json::Value;

/// `bytes` as lower-case hexadecimal.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut out, byte| {
        // Writing to a String cannot fail.
        let _ = write!(out, "{byte:02x}");
        out
    })
}

/// The JSON name of a kind (§3.8).
pub fn kind_name(kind: HeaderKind) -> &'static str {
    match kind {
        HeaderKind::Raw => "raw",
        HeaderKind::String => "string",
        HeaderKind::Bool => "bool",
        HeaderKind::Int8 => "int8",
        HeaderKind::Int16 => "int16",
        HeaderKind::Int32 => "int32",
        HeaderKind::Int64 => "int64",
        HeaderKind::Int128 => "int128",
        HeaderKind::Uint8 => "uint8",
        HeaderKind::Uint16 => "uint16",
        HeaderKind::Uint32 => "uint32",
        HeaderKind::Uint64 => "uint64",
        HeaderKind::Uint128 => "uint128",
        HeaderKind::Float32 => "float32",
        HeaderKind::Float64 => "float64",
    }
}

/// The kind a JSON name stands for.
pub fn kind_of(name: &str) -> Option<HeaderKind> {
    HeaderKind::ALL
        .into_iter()
        .find(|kind| kind_name(*kind).eq_ignore_ascii_case(name))
}

/// `value` as an entry of `kind`, or why it cannot be one.
pub fn to_tlv(kind: HeaderKind, value: &Value) -> Result<TlvEntry, String> {
    let data = match kind {
        HeaderKind::String => {
            let text = value.as_str().ok_or("expected a string")?;
            text.as_bytes().to_vec()
        }
        HeaderKind::Raw => {
            let text = value.as_str().ok_or("expected base64")?;
            STANDARD.decode(text).map_err(|_e| "expected base64")?
        }
        HeaderKind::Bool => {
            let flag = match value {
                Value::Bool(flag) => *flag,
                Value::String(text) if text == "true" => true,
                Value::String(text) if text == "false" => false,
                _ => return Err("expected a boolean".into()),
            };
            vec![u8::from(flag)]
        }
        HeaderKind::Float32 | HeaderKind::Float64 => {
            let number = value.as_f64().ok_or("expected a number")?;
            if kind == HeaderKind::Float32 {
                // Narrowing to the option's own width is the point.
                #[allow(clippy::cast_possible_truncation, clippy::as_conversions)]
                let narrow = number as f32;
                narrow.to_le_bytes().to_vec()
            } else {
                number.to_le_bytes().to_vec()
            }
        }
        _ => integer_bytes(kind, integer(value)?)?,
    };
    TlvEntry::new(kind, &data).ok_or_else(|| "a value is 1 to 255 bytes".into())
}

/// An integer from a JSON number or string (decimal, duration in µs, or byte size).
fn integer(value: &Value) -> Result<i128, String> {
    match value {
        Value::Number(number) => number
            .as_i64()
            .map(i128::from)
            .or_else(|| number.as_u64().map(i128::from))
            .ok_or_else(|| "expected an integer".into()),
        Value::String(text) => parse_integer_text(text.trim()),
        _ => Err("expected an integer".into()),
    }
}

fn parse_integer_text(text: &str) -> Result<i128, String> {
    if let Ok(number) = text.parse::<i128>() {
        return Ok(number);
    }
    if matches!(
        text.to_ascii_lowercase().as_str(),
        "unlimited" | "none" | "never_expire" | "never" | "server_default"
    ) {
        return Err(format!("{text:?}: send the option's number instead"));
    }
    if let Ok(duration) = humantime::parse_duration(text) {
        return i128::try_from(duration.as_micros()).map_err(|_e| "duration too long".into());
    }
    byte_size(text).ok_or_else(|| format!("{text:?} is not a number, duration or size"))
}

/// `"1 GiB"`, `"512 KB"`, `"100B"`: a number and a decimal or binary unit.
fn byte_size(text: &str) -> Option<i128> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let multiplier: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        "kib" => 1024.0,
        "mib" => 1_048_576.0,
        "gib" => 1_073_741_824.0,
        "tib" => 1_099_511_627_776.0,
        _ => return None,
    };
    let bytes = (number * multiplier).round();
    // A finite, non-negative value below 2^64 converts exactly enough for a size.
    #[allow(clippy::cast_possible_truncation, clippy::as_conversions)]
    (bytes.is_finite() && (0.0..1.8e19).contains(&bytes)).then_some(bytes as i128)
}

fn integer_bytes(kind: HeaderKind, value: i128) -> Result<Vec<u8>, String> {
    let out_of_range = || format!("{value} is out of range for {}", kind_name(kind));
    let bytes = match kind {
        HeaderKind::Int8 => i8::try_from(value).map(|v| v.to_le_bytes().to_vec()),
        HeaderKind::Int16 => i16::try_from(value).map(|v| v.to_le_bytes().to_vec()),
        HeaderKind::Int32 => i32::try_from(value).map(|v| v.to_le_bytes().to_vec()),
        HeaderKind::Int64 => i64::try_from(value).map(|v| v.to_le_bytes().to_vec()),
        HeaderKind::Int128 => Ok(value.to_le_bytes().to_vec()),
        HeaderKind::Uint8 => u8::try_from(value).map(|v| v.to_le_bytes().to_vec()),
        HeaderKind::Uint16 => u16::try_from(value).map(|v| v.to_le_bytes().to_vec()),
        HeaderKind::Uint32 => u32::try_from(value).map(|v| v.to_le_bytes().to_vec()),
        HeaderKind::Uint64 => u64::try_from(value).map(|v| v.to_le_bytes().to_vec()),
        HeaderKind::Uint128 => u128::try_from(value).map(|v| v.to_le_bytes().to_vec()),
        _ => return Err(out_of_range()),
    };
    bytes.map_err(|_range| out_of_range())
}

/// The text form of an entry's value (§9 "options"): UTF-8 for strings, `true`/`false`,
/// base-10 integers, base64 for raw (and for bytes that do not fit their kind), `0x` and
/// the IEEE-754 bits for floats.
pub fn text(entry: &TlvEntry) -> String {
    let bytes = entry.data.as_bytes();
    let Some(kind) = HeaderKind::from_u8(entry.kind) else {
        return STANDARD.encode(bytes);
    };
    let fixed = |n: usize| bytes.len() == n;
    macro_rules! le {
        ($t:ty, $n:expr) => {{
            let mut array = [0_u8; $n];
            array.copy_from_slice(bytes);
            <$t>::from_le_bytes(array).to_string()
        }};
    }
    match kind {
        HeaderKind::String => match std::str::from_utf8(bytes) {
            Ok(text) => text.to_owned(),
            Err(_) => STANDARD.encode(bytes),
        },
        HeaderKind::Bool if fixed(1) => (bytes[0] != 0).to_string(),
        HeaderKind::Int8 if fixed(1) => le!(i8, 1),
        HeaderKind::Uint8 if fixed(1) => le!(u8, 1),
        HeaderKind::Int16 if fixed(2) => le!(i16, 2),
        HeaderKind::Uint16 if fixed(2) => le!(u16, 2),
        HeaderKind::Int32 if fixed(4) => le!(i32, 4),
        HeaderKind::Uint32 if fixed(4) => le!(u32, 4),
        HeaderKind::Int64 if fixed(8) => le!(i64, 8),
        HeaderKind::Uint64 if fixed(8) => le!(u64, 8),
        HeaderKind::Int128 if fixed(16) => le!(i128, 16),
        HeaderKind::Uint128 if fixed(16) => le!(u128, 16),
        HeaderKind::Float32 | HeaderKind::Float64 if fixed(4) || fixed(8) => {
            let big_endian: Vec<u8> = bytes.iter().rev().copied().collect();
            format!("0x{}", hex(&big_endian))
        }
        _ => STANDARD.encode(bytes),
    }
}

#[cfg(test)]
mod tests {
    use proto::primitives::{HeaderKind, TlvEntry};
    use serde_json::json;

    use super::{text, to_tlv};

    #[test]
    fn option_values_take_the_forms_the_sdk_sends() {
        let micros = |value| to_tlv(HeaderKind::Uint64, &value).expect("valid").as_u64();
        assert_eq!(micros(json!(60_000_000)), Some(60_000_000));
        assert_eq!(micros(json!("18446744073709551615")), Some(u64::MAX));
        assert_eq!(micros(json!("7 days")), Some(7 * 86_400 * 1_000_000));
        assert_eq!(micros(json!("1 GiB")), Some(1 << 30));
        assert_eq!(micros(json!("2 MB")), Some(2_000_000));
        assert!(to_tlv(HeaderKind::Uint64, &json!(-1)).is_err());
        assert!(to_tlv(HeaderKind::Uint8, &json!(256)).is_err());
        assert!(to_tlv(HeaderKind::Uint64, &json!("soon")).is_err());
        assert!(to_tlv(HeaderKind::Uint64, &json!(true)).is_err());
        let durability = to_tlv(HeaderKind::String, &json!("replicated")).expect("valid");
        assert_eq!(durability.as_str(), Some("replicated"));
        assert_eq!(
            to_tlv(HeaderKind::Bool, &json!(true))
                .ok()
                .and_then(|e| e.as_bool()),
            Some(true)
        );
        assert!(to_tlv(HeaderKind::String, &json!("")).is_err());
        assert!(to_tlv(HeaderKind::Raw, &json!("not base64!")).is_err());
    }

    #[test]
    fn values_print_as_the_reference_does() {
        assert_eq!(text(&TlvEntry::uint64(u64::MAX)), "18446744073709551615");
        assert_eq!(text(&TlvEntry::boolean(false)), "false");
        assert_eq!(text(&TlvEntry::string("none").expect("valid")), "none");
        let float = TlvEntry::new(HeaderKind::Float64, &1.0_f64.to_le_bytes()).expect("valid");
        assert_eq!(text(&float), "0x3ff0000000000000");
        let raw = TlvEntry::new(HeaderKind::Raw, &[0, 1]).expect("valid");
        assert_eq!(text(&raw), "AAE=");
    }
}
