//! Entry points of the metadata fuzz targets (`fuzz/fuzz_targets/`: `journal_replay`,
//! `metadata_op`, `metadata_snapshot`, `partition_identity`; and cluster mode's
//! `cluster_op`) and their seeded
//! replay tests, which run the committed corpora on every `cargo test`.
//!
//! Each function takes arbitrary bytes and must never panic on them. What a decoder accepts
//! is encoded again and must decode to the same value, and replaying it onto the empty state
//! must not panic either. Checksums are fixed up in a second pass, so the decoders behind
//! them are reached too.

use std::path::Path;

use crate::metadata::op_codec::{decode_op, encode_op};
use crate::metadata::replay::{
    ENTRY_HEADER_BYTES, ENTRY_LENGTH_MAX, Replay, encode_base_entry, encode_entry, recover, replay,
};
use crate::metadata::snapshot::{decode_snapshot, encode_snapshot, frame};
use crate::metadata::{Metadata, MetadataOp};

/// The path replay errors name.
const JOURNAL: &str = "fuzz/journal.wal";

/// The journal's bytes as they are, then with every entry's checksum made to match.
pub fn fuzz_journal(bytes: &[u8]) {
    check_replay(bytes);
    let mut fixed = bytes.to_vec();
    fix_entry_checksums(&mut fixed);
    check_replay(&fixed);
}

/// One op body (`op_codec.rs`).
pub fn fuzz_op(bytes: &[u8]) {
    let Ok(op) = decode_op(bytes) else {
        return;
    };
    let again = decode_op(&encode_op(&op));
    assert_eq!(again.as_ref(), Ok(&op), "re-encoding changed the op");
    let _ = Metadata::default().apply(&op);
}

/// A partition directory's `partition.id` (`crate::data::identity`): what decodes encodes
/// to the same bytes.
pub fn fuzz_partition_identity(bytes: &[u8]) {
    use crate::data::identity::Identity;
    if let Some(identity) = Identity::decode(bytes) {
        assert_eq!(
            identity.encode().as_slice(),
            bytes,
            "re-encoding changed the bytes"
        );
    }
}

/// One replicated entry body of cluster mode (`crate::cluster`): the sync flag, then the op.
pub fn fuzz_cluster_op(bytes: &[u8]) {
    let Some((_, op)) = crate::cluster::entry_body(bytes) else {
        return;
    };
    let Ok(op) = crate::cluster::ReplicatedOp::decode(op) else {
        return;
    };
    let again = crate::cluster::ReplicatedOp::decode(&op.encode());
    assert_eq!(
        again.as_ref(),
        Ok(&op),
        "re-encoding changed the replicated op"
    );
}

/// The first byte selects the input's shape: even, a whole snapshot file; odd, a body to
/// frame under a valid header (so the checksum does not stop the fuzzer).
pub fn fuzz_snapshot(bytes: &[u8]) {
    let Some((&selector, rest)) = bytes.split_first() else {
        return;
    };
    if selector & 1 == 0 {
        check_snapshot(rest);
    } else {
        check_snapshot(&frame(rest));
    }
}

fn check_snapshot(bytes: &[u8]) {
    if let Ok(metadata) = decode_snapshot(bytes) {
        let again = decode_snapshot(&encode_snapshot(&metadata));
        assert_eq!(
            again.as_ref(),
            Ok(&metadata),
            "re-encoding changed the snapshot"
        );
    }
}

fn check_replay(bytes: &[u8]) {
    let path = Path::new(JOURNAL);
    let Ok(replayed) = replay(bytes, path) else {
        return;
    };
    let valid = usize::try_from(replayed.valid_length).unwrap_or(usize::MAX);
    assert!(
        valid <= bytes.len(),
        "the intact prefix lies inside the file"
    );
    assert_eq!(replayed.torn.is_some(), valid < bytes.len());
    let kept = replay(bytes.get(..valid).unwrap_or_default(), path);
    let expected = Replay {
        torn: None,
        ..replayed.clone()
    };
    assert_eq!(kept.ok(), Some(expected), "the intact prefix replays alone");
    let mut encoded = encode_base_entry(replayed.base);
    for entry in &replayed.entries {
        encoded.extend(encode_entry(&entry.op).unwrap_or_default());
    }
    let again = replay(&encoded, path).map(|again| ops(&again));
    assert_eq!(
        again.ok(),
        Some(ops(&replayed)),
        "re-encoded ops replay the same"
    );
    let _ = recover(Metadata::default(), &replayed, path);
}

fn ops(replay: &Replay) -> Vec<MetadataOp> {
    replay
        .entries
        .iter()
        .map(|entry| entry.op.clone())
        .collect()
}

/// Rewrites the checksum of every entry whose length is in range and fits.
fn fix_entry_checksums(bytes: &mut [u8]) {
    let mut position = 0_usize;
    while let Some(entry) = bytes.get_mut(position..) {
        let Some((header, rest)) = entry.split_first_chunk_mut::<ENTRY_HEADER_BYTES>() else {
            break;
        };
        let length = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
        let length = usize::try_from(length).unwrap_or(usize::MAX);
        let in_range = (1..=ENTRY_LENGTH_MAX).contains(&length);
        let Some(body) = rest.get(..length).filter(|_| in_range) else {
            break;
        };
        let checksum = xxhash_rust::xxh3::xxh3_64(body);
        header[4..].copy_from_slice(&checksum.to_le_bytes());
        position = position
            .saturating_add(ENTRY_HEADER_BYTES)
            .saturating_add(length);
    }
}

#[cfg(test)]
mod tests;
