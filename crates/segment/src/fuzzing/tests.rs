//! Stable replay of the `segment_scan` fuzz target: the committed corpus under
//! `fuzz/corpus/segment_scan/`, seeds built from real records, and random and mutated inputs
//! from a fixed seed, so CI covers the scan without a fuzzing toolchain.

use std::path::PathBuf;

use proto::batch::{OutgoingMessage, Producer, encode_batch, stamp};

use super::fuzz_scan;

/// Inputs the target sees per run, split between random and mutated seeds.
const INPUTS: usize = 30_000;

/// xorshift64*: deterministic and dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, bound: usize) -> usize {
        usize::try_from(self.next() % u64::try_from(bound.max(1)).unwrap()).unwrap()
    }
}

/// Bit flips, interesting bytes and words, truncation, insertion and appended bytes.
fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut input = seed.to_vec();
    for _ in 0..=rng.below(4) {
        let position = rng.below(input.len());
        match rng.below(6) {
            0 if !input.is_empty() => input[position] ^= 1 << rng.below(8),
            1 if !input.is_empty() => input[position] = [0, 1, 0x7f, 0x80, 0xff][rng.below(5)],
            2 => input.truncate(position),
            3 => input.insert(position.min(input.len()), rng.next().to_le_bytes()[0]),
            4 if input.len() >= position + 4 => {
                let value = [0_u32, 1, 255, 256, u32::MAX][rng.below(5)];
                input[position..position + 4].copy_from_slice(&value.to_le_bytes());
            }
            _ => input.extend((0..rng.below(16)).map(|_| rng.next().to_le_bytes()[0])),
        }
    }
    input
}

/// The committed corpus of `target`.
pub(crate) fn corpus(target: &str) -> Vec<Vec<u8>> {
    let directory: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "..",
        "..",
        "fuzz",
        "corpus",
        target,
    ]
    .iter()
    .collect();
    let entries = std::fs::read_dir(&directory).unwrap_or_else(|error| {
        panic!(
            "the corpus {} cannot be listed: {error}",
            directory.display()
        )
    });
    entries
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.file_name().and_then(|name| name.to_str()) != Some("README.md"))
        .map(|path| std::fs::read(path).unwrap())
        .collect()
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
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for input in &inputs {
        fuzz_scan(input);
    }
    for index in 0..INPUTS {
        let input = if index % 8 == 0 {
            (0..rng.below(700))
                .map(|_| rng.next().to_le_bytes()[0])
                .collect()
        } else {
            let seed = rng.below(inputs.len());
            mutate(&mut rng, &inputs[seed])
        };
        fuzz_scan(&input);
    }
}
