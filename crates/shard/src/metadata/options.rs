//! The option catalog (PROTOCOL.md §7.4): which keys each scope accepts, how a topic's
//! options block resolves into [`TopicSettings`], how an update patches it, and the
//! derived block responses carry.
//!
//! Values must have their key's canonical kind (plus Uint8 1/2 for
//! `compression_algorithm`, as the reference accepts). Refusals: an unknown or internal key
//! `4041`, a bad value `4042`, a read-only key `4105`, `encryption_key` `4106` (no at-rest
//! encryption here), a finite `max_topic_size` below the segment size `1019`. Both dialects
//! get the 0.12.2 catalog: the 0.11.0 client only ever sends a subset of it.

use proto::Dialect;
use proto::codec::WireName;
use proto::commands::system::{OptionDescriptor, OptionDescriptors, OptionScope};
use proto::primitives::{HeaderKind, OptionsBlock, TlvEntry};
use segment::log::Durability;

use super::model::TopicSettings;
use crate::refusal::{Invalid, Refusal, TopicOption, Unavailable};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// `segment_size` bounds and alignment.
pub const SEGMENT_SIZE_MIN_BYTES: u64 = MIB;
pub const SEGMENT_SIZE_MAX_BYTES: u64 = GIB;
const SEGMENT_SIZE_ALIGNMENT_BYTES: u64 = 512;
pub const MESSAGES_REQUIRED_TO_SAVE_MAX: u32 = 16_777_216;
pub const SIZE_OF_MESSAGES_REQUIRED_TO_SAVE_MAX_BYTES: u64 = GIB;
/// `segment_size × partitions_count` a preallocating topic may reserve.
pub const PREALLOCATED_MAX_BYTES: u64 = 64 * GIB;

/// What a key is in one scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyRole {
    /// Set at create only.
    CreateOnly,
    /// Set at create and by updates, and resettable to the default.
    Resettable,
    /// Only through updates (`name`, `username`, `status`).
    UpdateOnly,
    /// Server computed; refused from clients.
    ReadOnly,
    /// Accepted by the catalog but refused here: at-rest encryption is unavailable.
    Encryption,
}

const TOPIC_KEYS: [(&str, KeyRole); 12] = [
    ("name", KeyRole::UpdateOnly),
    ("compression_algorithm", KeyRole::CreateOnly),
    ("message_expiry", KeyRole::Resettable),
    ("max_topic_size", KeyRole::Resettable),
    ("segment_size", KeyRole::CreateOnly),
    ("durability", KeyRole::CreateOnly),
    ("consumer_offset_durability", KeyRole::CreateOnly),
    ("partition_resize_policy", KeyRole::CreateOnly),
    ("messages_required_to_save", KeyRole::CreateOnly),
    ("size_of_messages_required_to_save", KeyRole::CreateOnly),
    ("preallocate_segments", KeyRole::CreateOnly),
    // Not in the 0.12.2 catalog (so not described): the key Iggy's own 0.9.0-edge tools
    // send instead of `durability` (iggy-bench --enforce-fsync). `true` makes the topic
    // `persisted` (with an explicit `durability` of `replicated` the pair is refused);
    // `false` changes nothing.
    ("enforce_fsync", KeyRole::CreateOnly),
];
const TOPIC_REPLICATION_KEY: (&str, KeyRole) = ("replication_factor", KeyRole::CreateOnly);

const STREAM_KEYS: [(&str, KeyRole); 5] = [
    ("name", KeyRole::UpdateOnly),
    ("encryption_key", KeyRole::Encryption),
    ("encryption_key_source", KeyRole::ReadOnly),
    ("encryption_key_fingerprint", KeyRole::ReadOnly),
    ("encryption_kek_fingerprint", KeyRole::ReadOnly),
];

const USER_KEYS: [(&str, KeyRole); 2] = [
    ("username", KeyRole::UpdateOnly),
    ("status", KeyRole::UpdateOnly),
];

fn role(scope: OptionScope, key: &str) -> Option<KeyRole> {
    let found = |keys: &[(&str, KeyRole)]| {
        keys.iter()
            .find(|(name, _)| *name == key)
            .map(|(_, role)| *role)
    };
    match scope {
        OptionScope::Topic => found(&TOPIC_KEYS).or(found(&[TOPIC_REPLICATION_KEY])),
        OptionScope::Stream => found(&STREAM_KEYS),
        OptionScope::User => found(&USER_KEYS),
    }
}

/// Checks the keys of a create request's options block for `scope`: every key must be
/// settable at create.
fn check_create_keys(scope: OptionScope, options: &OptionsBlock) -> Result<(), Refusal> {
    for (key, _) in &options.0 {
        match role(scope, key.as_str()) {
            Some(KeyRole::CreateOnly | KeyRole::Resettable) => {}
            Some(KeyRole::ReadOnly) => return Err(Refusal::TopicOption(TopicOption::ReadOnly)),
            Some(KeyRole::Encryption) => {
                return Err(Refusal::Unavailable(Unavailable::StreamEncryption));
            }
            Some(KeyRole::UpdateOnly) | None => {
                return Err(Refusal::TopicOption(TopicOption::UnsupportedKey));
            }
        }
    }
    Ok(())
}

/// A stream's create options: no key is settable at create here.
pub fn check_stream_create_options(options: &OptionsBlock) -> Result<(), Refusal> {
    check_create_keys(OptionScope::Stream, options)
}

/// A user's create options: none are accepted (the reference refuses every key).
pub fn check_user_create_options(options: &OptionsBlock) -> Result<(), Refusal> {
    match options.0.first() {
        None => Ok(()),
        Some(_) => Err(Refusal::TopicOption(TopicOption::UnsupportedKey)),
    }
}

/// Resolves a create request's topic options over `defaults` (the server's configured
/// defaults) for a topic of `partitions_count` partitions.
pub fn resolve_topic_options(
    options: &OptionsBlock,
    defaults: &TopicSettings,
    partitions_count: u32,
) -> Result<TopicSettings, Refusal> {
    check_create_keys(OptionScope::Topic, options)?;
    let mut settings = *defaults;
    let mut enforce_fsync = false;
    for (key, value) in &options.0 {
        if key.as_str() == "enforce_fsync" {
            let invalid = Refusal::TopicOption(TopicOption::InvalidValue);
            enforce_fsync |= boolean(value).ok_or(invalid)?;
            continue;
        }
        apply_topic_value(&mut settings, key.as_str(), value, defaults)?;
    }
    if enforce_fsync {
        // Both keys set and at odds: refused, as the topic could not report both.
        let replicated = options
            .get("durability")
            .is_some_and(|value| durability(value) == Some(Durability::Replicated));
        if replicated {
            return Err(Refusal::TopicOption(TopicOption::InvalidValue));
        }
        settings.durability = Durability::Persisted;
    }
    check_topic_settings(&settings, partitions_count)?;
    Ok(settings)
}

/// The cross-key rules: size bounds and preallocation.
pub fn check_topic_settings(
    settings: &TopicSettings,
    partitions_count: u32,
) -> Result<(), Refusal> {
    if settings
        .max_topic_size_bytes
        .is_some_and(|max| max < settings.segment_size_bytes)
    {
        return Err(Refusal::Invalid(Invalid::TopicSize));
    }
    let reserved = settings
        .segment_size_bytes
        .checked_mul(u64::from(partitions_count));
    if settings.preallocate_segments && reserved.is_none_or(|bytes| bytes > PREALLOCATED_MAX_BYTES)
    {
        return Err(Refusal::TopicOption(TopicOption::InvalidValue));
    }
    Ok(())
}

/// Sets one catalog key of `settings` from its wire value.
fn apply_topic_value(
    settings: &mut TopicSettings,
    key: &str,
    value: &TlvEntry,
    defaults: &TopicSettings,
) -> Result<(), Refusal> {
    let invalid = Refusal::TopicOption(TopicOption::InvalidValue);
    match key {
        "compression_algorithm" => settings.compression_gzip = compression(value).ok_or(invalid)?,
        "message_expiry" => {
            settings.message_expiry_us = match value.as_u64().ok_or(invalid)? {
                0 => defaults.message_expiry_us,
                u64::MAX => None,
                micros => Some(micros),
            };
        }
        "max_topic_size" => {
            settings.max_topic_size_bytes = match value.as_u64().ok_or(invalid)? {
                0 => defaults.max_topic_size_bytes,
                u64::MAX => None,
                bytes => Some(bytes),
            };
        }
        "segment_size" => settings.segment_size_bytes = segment_size(value).ok_or(invalid)?,
        "durability" => settings.durability = durability(value).ok_or(invalid)?,
        "consumer_offset_durability" => {
            settings.consumer_offset_durability = durability(value).ok_or(invalid)?;
        }
        "partition_resize_policy" => {
            settings.partitions_fixed = match value.as_str().ok_or(invalid)? {
                "mutable" => false,
                "fixed" => true,
                _ => return Err(invalid),
            };
        }
        "messages_required_to_save" => {
            let count = value.as_u32().ok_or(invalid)?;
            let valid = (1..=MESSAGES_REQUIRED_TO_SAVE_MAX).contains(&count);
            settings.messages_required_to_save = valid.then_some(count).ok_or(invalid)?;
        }
        "size_of_messages_required_to_save" => {
            let bytes = value.as_u64().ok_or(invalid)?;
            let valid = (1..=SIZE_OF_MESSAGES_REQUIRED_TO_SAVE_MAX_BYTES).contains(&bytes);
            settings.size_of_messages_required_to_save = valid.then_some(bytes).ok_or(invalid)?;
        }
        "preallocate_segments" => settings.preallocate_segments = value.as_bool().ok_or(invalid)?,
        "replication_factor" => {
            let factor = value.as_u32().ok_or(invalid)?;
            // The server's default is the number of nodes, which is also the most copies
            // there can be (`Server::topic_defaults`).
            let valid = (1..=defaults.replication_factor).contains(&factor);
            settings.replication_factor = valid.then_some(factor).ok_or(invalid)?;
        }
        _ => return Err(Refusal::TopicOption(TopicOption::UnsupportedKey)),
    }
    Ok(())
}

/// A `Bool`, or the text `true` / `false` (as Iggy's tools may send it).
fn boolean(value: &TlvEntry) -> Option<bool> {
    match value.as_str() {
        Some("true") => Some(true),
        Some("false") => Some(false),
        Some(_) => None,
        None => value.as_bool(),
    }
}

fn compression(value: &TlvEntry) -> Option<bool> {
    if let Some(text) = value.as_str() {
        return match text {
            "none" => Some(false),
            "gzip" => Some(true),
            _ => None,
        };
    }
    match (HeaderKind::from_u8(value.kind)?, value.data.as_bytes()) {
        (HeaderKind::Uint8, [1]) => Some(false),
        (HeaderKind::Uint8, [2]) => Some(true),
        _ => None,
    }
}

fn segment_size(value: &TlvEntry) -> Option<u64> {
    let bytes = value.as_u64()?;
    let valid = (SEGMENT_SIZE_MIN_BYTES..=SEGMENT_SIZE_MAX_BYTES).contains(&bytes)
        && bytes.is_multiple_of(SEGMENT_SIZE_ALIGNMENT_BYTES);
    valid.then_some(bytes)
}

fn durability(value: &TlvEntry) -> Option<Durability> {
    match value.as_str()? {
        "replicated" => Some(Durability::Replicated),
        "persisted" => Some(Durability::Persisted),
        _ => None,
    }
}

fn durability_name(durability: Durability) -> &'static str {
    match durability {
        Durability::Replicated => "replicated",
        Durability::Persisted => "persisted",
    }
}

/// A topic after an update: its explicit options and resolved settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicPatch {
    pub name: Option<String>,
    pub options: OptionsBlock,
    pub settings: TopicSettings,
}

/// Applies an update to a topic's explicit `options`: `set` keys (with `name` split out)
/// and `reset` keys (restored to `defaults`, dropped from the explicit block). A zero
/// `message_expiry`/`max_topic_size` means "server default, no change" and is skipped.
pub fn patch_topic_options(
    options: &OptionsBlock,
    settings: &TopicSettings,
    set: &OptionsBlock,
    reset: &[WireName],
    defaults: &TopicSettings,
    partitions_count: u32,
) -> Result<TopicPatch, Refusal> {
    let set = &super::option_text::canonical_topic_options(set)?;
    let mut patch = TopicPatch {
        name: None,
        options: options.clone(),
        settings: *settings,
    };
    for key in reset {
        match role(OptionScope::Topic, key.as_str()) {
            Some(KeyRole::Resettable) => {}
            Some(KeyRole::ReadOnly) => return Err(Refusal::TopicOption(TopicOption::ReadOnly)),
            Some(_) => return Err(Refusal::TopicOption(TopicOption::NotResettable)),
            None => return Err(Refusal::TopicOption(TopicOption::UnsupportedKey)),
        }
        patch.options.0.retain(|(existing, _)| existing != key);
        reset_topic_value(&mut patch.settings, key.as_str(), defaults);
    }
    for (key, value) in &set.0 {
        match role(OptionScope::Topic, key.as_str()) {
            Some(KeyRole::UpdateOnly) => patch.name = Some(update_name(value)?),
            Some(KeyRole::Resettable) => {
                if value.as_u64() == Some(0) {
                    continue;
                }
                apply_topic_value(&mut patch.settings, key.as_str(), value, defaults)?;
                patch.options.set(key.as_str(), value.clone());
            }
            Some(KeyRole::ReadOnly) => return Err(Refusal::TopicOption(TopicOption::ReadOnly)),
            Some(KeyRole::CreateOnly | KeyRole::Encryption) => {
                return Err(Refusal::TopicOption(TopicOption::NotUpdatable));
            }
            None => return Err(Refusal::TopicOption(TopicOption::UnsupportedKey)),
        }
    }
    check_topic_settings(&patch.settings, partitions_count)?;
    Ok(patch)
}

fn reset_topic_value(settings: &mut TopicSettings, key: &str, defaults: &TopicSettings) {
    match key {
        "message_expiry" => settings.message_expiry_us = defaults.message_expiry_us,
        "max_topic_size" => settings.max_topic_size_bytes = defaults.max_topic_size_bytes,
        _ => {}
    }
}

/// A `name` value: a String of 1..=255 bytes.
pub fn update_name(value: &TlvEntry) -> Result<String, Refusal> {
    value
        .as_str()
        .map(String::from)
        .ok_or(Refusal::TopicOption(TopicOption::InvalidValue))
}

/// Checks a stream or user update: only the scope's rename/status keys may be set, and
/// nothing can be reset.
pub fn check_update_keys(
    scope: OptionScope,
    set: &OptionsBlock,
    reset: &[WireName],
) -> Result<(), Refusal> {
    if let Some(key) = reset.first() {
        return Err(match role(scope, key.as_str()) {
            None => Refusal::TopicOption(TopicOption::UnsupportedKey),
            Some(KeyRole::ReadOnly) => Refusal::TopicOption(TopicOption::ReadOnly),
            Some(_) => Refusal::TopicOption(TopicOption::NotResettable),
        });
    }
    for (key, _) in &set.0 {
        match role(scope, key.as_str()) {
            Some(KeyRole::UpdateOnly) => {}
            Some(KeyRole::ReadOnly) => return Err(Refusal::TopicOption(TopicOption::ReadOnly)),
            Some(_) => return Err(Refusal::TopicOption(TopicOption::NotUpdatable)),
            None => return Err(Refusal::TopicOption(TopicOption::UnsupportedKey)),
        }
    }
    Ok(())
}

/// Every resolved topic setting whose key the client did not set (§4.7, §7.4).
pub fn topic_derived_options(explicit: &OptionsBlock, settings: &TopicSettings) -> OptionsBlock {
    let compression = if settings.compression_gzip {
        "gzip"
    } else {
        "none"
    };
    let policy = if settings.partitions_fixed {
        "fixed"
    } else {
        "mutable"
    };
    let entries = [
        ("compression_algorithm", string_entry(compression)),
        (
            "message_expiry",
            TlvEntry::uint64(settings.message_expiry_us.unwrap_or(u64::MAX)),
        ),
        (
            "max_topic_size",
            TlvEntry::uint64(settings.max_topic_size_bytes.unwrap_or(u64::MAX)),
        ),
        (
            "segment_size",
            TlvEntry::uint64(settings.segment_size_bytes),
        ),
        (
            "durability",
            string_entry(durability_name(settings.durability)),
        ),
        (
            "consumer_offset_durability",
            string_entry(durability_name(settings.consumer_offset_durability)),
        ),
        ("partition_resize_policy", string_entry(policy)),
        (
            "messages_required_to_save",
            TlvEntry::uint32(settings.messages_required_to_save),
        ),
        (
            "size_of_messages_required_to_save",
            TlvEntry::uint64(settings.size_of_messages_required_to_save),
        ),
        (
            "preallocate_segments",
            TlvEntry::boolean(settings.preallocate_segments),
        ),
        (
            "replication_factor",
            TlvEntry::uint32(settings.replication_factor),
        ),
    ];
    let mut derived = OptionsBlock::default();
    for (key, value) in entries {
        if explicit.get(key).is_none() {
            derived.set(key, value);
        }
    }
    derived
}

/// A stream's derived block: where its messages' at-rest key comes from, the server's
/// (`[system.encryption]`) or none; per-stream keys are refused at create (`4106`).
pub fn stream_derived_options(explicit: &OptionsBlock, encrypts: bool) -> OptionsBlock {
    let mut derived = OptionsBlock::default();
    if explicit.get("encryption_key_source").is_none() {
        let source = if encrypts { "server" } else { "none" };
        derived.set("encryption_key_source", string_entry(source));
    }
    derived
}

fn string_entry(text: &'static str) -> TlvEntry {
    TlvEntry::string(text).expect("catalog strings are 1..=255 bytes")
}

/// The topic keys of the 0.11.0 catalog (PROTOCOL.md §12.3), the only keys that dialect
/// accepts: it has no stream or user keys, and no `name`, `partition_resize_policy` or
/// `replication_factor`.
const LEGACY_TOPIC_KEYS: [&str; 9] = [
    "compression_algorithm",
    "message_expiry",
    "max_topic_size",
    "segment_size",
    "durability",
    "consumer_offset_durability",
    "messages_required_to_save",
    "size_of_messages_required_to_save",
    "preallocate_segments",
];

/// The `DESCRIBE_OPTIONS` catalog of `scope` for a client of `dialect`: a 0.11.0 client is
/// described only the keys it may send.
pub fn option_descriptors_for(
    dialect: Dialect,
    scope: OptionScope,
    defaults: &TopicSettings,
) -> OptionDescriptors {
    let mut catalog = option_descriptors(scope, defaults);
    if dialect == Dialect::V0_11_0 {
        let known = |key: &str| scope == OptionScope::Topic && LEGACY_TOPIC_KEYS.contains(&key);
        catalog
            .0
            .retain(|descriptor| known(descriptor.key.as_str()));
    }
    catalog
}

/// The `DESCRIBE_OPTIONS` catalog of `scope`, internal keys left out; topic defaults are
/// the server's `defaults`.
pub fn option_descriptors(scope: OptionScope, defaults: &TopicSettings) -> OptionDescriptors {
    let descriptor = |(key, kind, flags, text): (&str, HeaderKind, u8, &str)| {
        let default = match scope {
            OptionScope::Topic => topic_derived_options(&OptionsBlock::default(), defaults)
                .get(key)
                .map(|value| value.data.as_bytes().to_vec()),
            OptionScope::Stream | OptionScope::User => None,
        };
        Some(OptionDescriptor {
            key: WireName::new(key)?,
            kind,
            flags,
            default_value: default.unwrap_or_default(),
            description: String::from(text),
        })
    };
    let entries: &[(&str, HeaderKind, u8, &str)] = match scope {
        OptionScope::Topic => &TOPIC_DESCRIPTIONS,
        OptionScope::Stream => &STREAM_DESCRIPTIONS,
        OptionScope::User => &USER_DESCRIPTIONS,
    };
    OptionDescriptors(entries.iter().copied().filter_map(descriptor).collect())
}

const SECRET: u8 = OptionDescriptor::FLAG_SECRET | OptionDescriptor::FLAG_CRITICAL;
const READ_ONLY: u8 = OptionDescriptor::FLAG_READ_ONLY;

const STREAM_DESCRIPTIONS: [(&str, HeaderKind, u8, &str); 5] = [
    ("name", HeaderKind::String, UPDATABLE, "the stream's name"),
    (
        "encryption_key",
        HeaderKind::Raw,
        SECRET,
        "32-byte at-rest key",
    ),
    (
        "encryption_key_source",
        HeaderKind::String,
        READ_ONLY,
        "stream, server or none",
    ),
    (
        "encryption_key_fingerprint",
        HeaderKind::String,
        READ_ONLY,
        "16 hex chars",
    ),
    (
        "encryption_kek_fingerprint",
        HeaderKind::String,
        READ_ONLY,
        "KEK fingerprints",
    ),
];

const USER_DESCRIPTIONS: [(&str, HeaderKind, u8, &str); 2] = [
    ("username", HeaderKind::String, UPDATABLE, "3..=50 bytes"),
    (
        "status",
        HeaderKind::String,
        UPDATABLE,
        "active or inactive",
    ),
];

const UPDATABLE: u8 = OptionDescriptor::FLAG_UPDATABLE;
const RESETTABLE: u8 = OptionDescriptor::FLAG_UPDATABLE | OptionDescriptor::FLAG_RESETTABLE;

const TOPIC_DESCRIPTIONS: [(&str, HeaderKind, u8, &str); 12] = [
    ("name", HeaderKind::String, UPDATABLE, "the topic's name"),
    (
        "compression_algorithm",
        HeaderKind::String,
        0,
        "none or gzip",
    ),
    (
        "message_expiry",
        HeaderKind::Uint64,
        RESETTABLE,
        "µs; 0 = default, max = never",
    ),
    (
        "max_topic_size",
        HeaderKind::Uint64,
        RESETTABLE,
        "bytes; 0 = default, max = unlimited",
    ),
    (
        "segment_size",
        HeaderKind::Uint64,
        0,
        "bytes, 1 MiB..=1 GiB, multiple of 512",
    ),
    (
        "durability",
        HeaderKind::String,
        0,
        "replicated or persisted",
    ),
    (
        "consumer_offset_durability",
        HeaderKind::String,
        0,
        "replicated or persisted",
    ),
    (
        "partition_resize_policy",
        HeaderKind::String,
        0,
        "mutable or fixed",
    ),
    (
        "messages_required_to_save",
        HeaderKind::Uint32,
        0,
        "1..=16777216",
    ),
    (
        "size_of_messages_required_to_save",
        HeaderKind::Uint64,
        0,
        "bytes, at most 1 GiB",
    ),
    (
        "preallocate_segments",
        HeaderKind::Bool,
        0,
        "reserve segment files up front",
    ),
    (
        "replication_factor",
        HeaderKind::Uint32,
        0,
        "copies of each partition",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_describes_every_public_key_with_its_default() {
        let defaults = TopicSettings::default();
        let topic = option_descriptors(OptionScope::Topic, &defaults).0;
        assert_eq!(topic.len(), 12);
        let expiry = topic
            .iter()
            .find(|d| d.key.as_str() == "message_expiry")
            .unwrap();
        assert_eq!(expiry.default_value, [0xff; 8]);
        assert_eq!(expiry.flags, RESETTABLE);
        let durability = topic
            .iter()
            .find(|d| d.key.as_str() == "durability")
            .unwrap();
        assert_eq!(durability.default_value, b"replicated");
        assert_eq!(
            option_descriptors(OptionScope::Stream, &defaults).0.len(),
            5
        );
        assert_eq!(option_descriptors(OptionScope::User, &defaults).0.len(), 2);
    }

    #[test]
    fn a_0_11_0_client_is_described_only_the_topic_keys_it_may_send() {
        let defaults = TopicSettings::default();
        let legacy = |scope| option_descriptors_for(Dialect::V0_11_0, scope, &defaults).0;
        let keys: Vec<String> = legacy(OptionScope::Topic)
            .iter()
            .map(|descriptor| descriptor.key.as_str().to_owned())
            .collect();
        assert_eq!(keys, LEGACY_TOPIC_KEYS);
        assert!(legacy(OptionScope::Stream).is_empty());
        assert!(legacy(OptionScope::User).is_empty());
        let current = option_descriptors_for(Dialect::V0_12_2, OptionScope::Topic, &defaults);
        assert_eq!(current.0.len(), 12);
    }

    fn options(entries: &[(&str, TlvEntry)]) -> OptionsBlock {
        OptionsBlock(
            entries
                .iter()
                .map(|(key, value)| (WireName::new(*key).unwrap(), value.clone()))
                .collect(),
        )
    }

    #[test]
    fn enforce_fsync_makes_a_topic_persisted() {
        let defaults = TopicSettings::default();
        let resolve = |entries: &[(&str, TlvEntry)]| {
            resolve_topic_options(&options(entries), &defaults, 1).map(|s| s.durability)
        };
        let replicated = || TlvEntry::string("replicated").unwrap();
        assert_eq!(
            resolve(&[("enforce_fsync", TlvEntry::boolean(true))]),
            Ok(Durability::Persisted)
        );
        assert_eq!(
            resolve(&[("enforce_fsync", TlvEntry::string("true").unwrap())]),
            Ok(Durability::Persisted)
        );
        // With an explicit `replicated` the pair is at odds, whichever order: refused.
        assert_eq!(
            resolve(&[
                ("enforce_fsync", TlvEntry::boolean(true)),
                ("durability", replicated()),
            ]),
            Err(Refusal::TopicOption(TopicOption::InvalidValue))
        );
        assert_eq!(
            resolve(&[
                ("durability", replicated()),
                ("enforce_fsync", TlvEntry::boolean(true)),
            ]),
            Err(Refusal::TopicOption(TopicOption::InvalidValue))
        );
        assert_eq!(
            resolve(&[
                ("durability", TlvEntry::string("persisted").unwrap()),
                ("enforce_fsync", TlvEntry::boolean(true)),
            ]),
            Ok(Durability::Persisted)
        );
        assert_eq!(
            resolve(&[("enforce_fsync", TlvEntry::boolean(false))]),
            Ok(Durability::Replicated)
        );
        assert_eq!(
            resolve(&[("enforce_fsync", TlvEntry::uint64(1))]),
            Err(Refusal::TopicOption(TopicOption::InvalidValue))
        );
        // It stays out of the 0.12.2 catalog.
        let described = option_descriptors(OptionScope::Topic, &defaults).0;
        assert!(described.iter().all(|d| d.key.as_str() != "enforce_fsync"));
    }
}
