//! Topic option values sent as text, turned into the option's own kind before anything else
//! reads them.
//!
//! Iggy's CLI sends every `iggy topic create --set key=value` as a `String` entry for the
//! server to parse as the option's type (`segment_size=128MiB`, `message_expiry=1h`,
//! `preallocate_segments=true`), as the reference server does with each option's `FromStr`.
//! The value is stored and answered in its canonical kind (PROTOCOL.md §7.4), so a client
//! reading the topic back sees `Uint64` for a size whichever way it was sent.

use core::time::Duration;

use proto::primitives::{OptionsBlock, TlvEntry};
use proto::units::parse_byte_size as byte_size;

use crate::refusal::{Refusal, TopicOption};

/// `options` with the text values of typed topic keys in their canonical kinds; entries
/// already in a binary kind, and keys of text kinds, as they were. Text that does not parse
/// as the key's type is `InvalidValue`, as a wrong binary kind is.
pub(super) fn canonical_topic_options(options: &OptionsBlock) -> Result<OptionsBlock, Refusal> {
    let mut canonical = OptionsBlock::default();
    for (key, value) in &options.0 {
        let entry = match value.as_str() {
            Some(text) => {
                canonical_value(key.as_str(), text.trim())?.unwrap_or_else(|| value.clone())
            }
            None => value.clone(),
        };
        canonical.0.push((key.clone(), entry));
    }
    Ok(canonical)
}

/// The canonical entry of `key` for `text`; `None` for keys whose kind is text.
fn canonical_value(key: &str, text: &str) -> Result<Option<TlvEntry>, Refusal> {
    let invalid = Refusal::TopicOption(TopicOption::InvalidValue);
    let entry = match key {
        "message_expiry" => TlvEntry::uint64(expiry(text).ok_or(invalid)?),
        "max_topic_size" => TlvEntry::uint64(topic_size(text).ok_or(invalid)?),
        "segment_size" | "size_of_messages_required_to_save" => {
            TlvEntry::uint64(byte_size(text).ok_or(invalid)?)
        }
        "messages_required_to_save" | "replication_factor" => {
            TlvEntry::uint32(text.parse().map_err(|_not_number| invalid)?)
        }
        "preallocate_segments" | "enforce_fsync" => TlvEntry::boolean(match text {
            "true" => true,
            "false" => false,
            _ => return Err(invalid),
        }),
        _ => return Ok(None),
    };
    Ok(Some(entry))
}

/// µs: a number, a duration (`1h`, `7 days`), or the reference's names for the two
/// special values (0 = the server's default, `u64::MAX` = never).
fn expiry(text: &str) -> Option<u64> {
    match text {
        "server_default" => Some(0),
        "never_expire" | "never" | "unlimited" | "none" => Some(u64::MAX),
        _ => text.parse().ok().or_else(|| {
            let duration: Duration = humantime::parse_duration(text).ok()?;
            u64::try_from(duration.as_micros()).ok()
        }),
    }
}

/// Bytes, or the names for 0 (the server's default) and `u64::MAX` (unlimited).
fn topic_size(text: &str) -> Option<u64> {
    match text {
        "server_default" => Some(0),
        "unlimited" | "none" => Some(u64::MAX),
        _ => byte_size(text),
    }
}

#[cfg(test)]
mod tests {
    use proto::codec::WireName;
    use proto::primitives::{OptionsBlock, TlvEntry};

    use super::canonical_topic_options;
    use crate::refusal::{Refusal, TopicOption};

    fn texts(entries: &[(&str, &str)]) -> OptionsBlock {
        OptionsBlock(
            entries
                .iter()
                .map(|(key, value)| {
                    let name = WireName::new(*key).unwrap();
                    (name, TlvEntry::string(value).unwrap())
                })
                .collect(),
        )
    }

    #[test]
    fn text_values_of_typed_keys_take_their_kinds() {
        let sent = texts(&[
            ("segment_size", "128MiB"),
            ("max_topic_size", "1 GB"),
            ("size_of_messages_required_to_save", "4096"),
            ("message_expiry", "1h"),
            ("messages_required_to_save", "10"),
            ("replication_factor", "1"),
            ("preallocate_segments", "true"),
            ("durability", "persisted"),
        ]);
        let canonical = canonical_topic_options(&sent).unwrap();
        let get = |key| canonical.get(key).unwrap().clone();
        assert_eq!(get("segment_size"), TlvEntry::uint64(128 << 20));
        assert_eq!(get("max_topic_size"), TlvEntry::uint64(1_000_000_000));
        assert_eq!(
            get("size_of_messages_required_to_save"),
            TlvEntry::uint64(4096)
        );
        assert_eq!(get("message_expiry"), TlvEntry::uint64(3_600_000_000));
        assert_eq!(get("messages_required_to_save"), TlvEntry::uint32(10));
        assert_eq!(get("replication_factor"), TlvEntry::uint32(1));
        assert_eq!(get("preallocate_segments"), TlvEntry::boolean(true));
        assert_eq!(get("durability"), TlvEntry::string("persisted").unwrap());
        let special = texts(&[
            ("message_expiry", "never_expire"),
            ("max_topic_size", "unlimited"),
        ]);
        let special = canonical_topic_options(&special).unwrap();
        assert_eq!(
            special.get("message_expiry"),
            Some(&TlvEntry::uint64(u64::MAX))
        );
        assert_eq!(
            special.get("max_topic_size"),
            Some(&TlvEntry::uint64(u64::MAX))
        );
        let binary = OptionsBlock(vec![(
            WireName::new("segment_size").unwrap(),
            TlvEntry::uint64(7),
        )]);
        assert_eq!(canonical_topic_options(&binary).unwrap(), binary);
    }

    #[test]
    fn text_that_is_not_the_keys_type_is_an_invalid_value() {
        for (key, value) in [
            ("segment_size", "big"),
            ("segment_size", "1 PiB"),
            ("messages_required_to_save", "-1"),
            ("preallocate_segments", "yes"),
            ("message_expiry", "soon"),
            ("segment_size", "99999999999999999999 GiB"),
        ] {
            let refused = canonical_topic_options(&texts(&[(key, value)]));
            assert_eq!(
                refused,
                Err(Refusal::TopicOption(TopicOption::InvalidValue)),
                "{key}={value}"
            );
        }
    }
}
