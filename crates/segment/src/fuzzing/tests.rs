//! Stable replay of the `segment_scan` fuzz target: the committed corpus under
//! `fuzz/corpus/segment_scan/`, seeds built from real records, and random and mutated inputs
//! from a fixed seed, so CI covers the scan without a fuzzing toolchain.

use proto::batch::{OutgoingMessage, Producer, encode_batch, stamp};
use proto::fuzzing::replay::{read_corpus, replay};

use super::fuzz_scan;

/// Inputs the target sees per run, split between random and mutated seeds.
const INPUTS: usize = 30_000;

/// The committed corpus of `target`.
pub(crate) fn corpus(target: &str) -> Vec<Vec<u8>> {
    read_corpus(env!("CARGO_MANIFEST_DIR"), target)
}

/// A log of `records` records from `start`, prefixed by the start offset as the target
/// expects.
pub(crate) fn log_seed(start: u64, records: u64, producer: bool) -> Vec<u8> {
    let mut input = start.to_le_bytes().to_vec();
    let message = OutgoingMessage {
        id: 7,
        origin_timestamp: 5,
        payload: b"payload",
        user_headers: &[],
    };
    let producer = producer.then_some(Producer {
        producer_id: 1,
        epoch: 1,
        base_sequence: 0,
    });
    for record in 0..records {
        let mut bytes = Vec::new();
        encode_batch(&[message, message], producer, &mut bytes).unwrap();
        stamp(&mut bytes, start + 2 * record, 100 + record).unwrap();
        input.extend(bytes);
    }
    input
}

/// Seeds: valid logs, a torn tail, and a log whose second record starts at a wrong offset.
pub(crate) fn seeds() -> Vec<Vec<u8>> {
    let clean = log_seed(4096, 3, false);
    let torn = clean[..clean.len() - 100].to_vec();
    let mut gap = log_seed(0, 1, false);
    gap.extend_from_slice(&log_seed(5, 1, false)[8..]);
    vec![
        clean,
        log_seed(0, 1, true),
        torn,
        gap,
        0_u64.to_le_bytes().to_vec(),
    ]
}

#[test]
fn replay_segment_scan() {
    let mut inputs = seeds();
    let corpus = corpus("segment_scan");
    assert!(!corpus.is_empty(), "fuzz/corpus/segment_scan is empty");
    inputs.extend(corpus);
    replay("segment_scan", &inputs, INPUTS, 8, fuzz_scan);
}
