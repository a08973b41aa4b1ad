//! Seeded replay of a fuzz target without a fuzzing toolchain, shared by the replay tests of
//! every crate with fuzz targets: the target's seeds and its committed corpus
//! (`fuzz/corpus/<target>/`), then random and mutated inputs from a fixed xorshift seed, so a
//! run is the same every time and CI covers each decoder.

// A test harness over inputs it makes itself: the crate's denies guard the decoders, whose
// input is a client's.
#![allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]

use alloc::vec::Vec;

/// xorshift64*: deterministic and dependency-free.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value below `bound` (0 when `bound` is 0).
    pub fn below(&mut self, bound: usize) -> usize {
        let bound = u64::try_from(bound.max(1)).unwrap_or(u64::MAX);
        // Below `bound`, which came from a usize.
        usize::try_from(self.next_u64() % bound).unwrap_or(0)
    }

    pub fn bytes(&mut self, length: usize) -> Vec<u8> {
        (0..length)
            .map(|_| self.next_u64().to_le_bytes()[0])
            .collect()
    }
}

/// One mutation of `seed`: bit flips, byte and word overwrites with interesting values,
/// truncation, insertion, or appended random bytes.
pub fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut input = seed.to_vec();
    for _ in 0..=rng.below(4) {
        let position = rng.below(input.len());
        match rng.below(6) {
            0 if !input.is_empty() => input[position] ^= 1 << rng.below(8),
            1 if !input.is_empty() => {
                input[position] = [0, 1, 2, 0x7f, 0x80, 0xff][rng.below(6)];
            }
            2 => input.truncate(position),
            3 => input.insert(position.min(input.len()), rng.next_u64().to_le_bytes()[0]),
            4 if input.len() >= position + 4 => {
                let value = [0_u32, 1, 255, 256, u32::MAX, 0x8000_0000][rng.below(6)];
                input[position..position + 4].copy_from_slice(&value.to_le_bytes());
            }
            _ => {
                let length = rng.below(16);
                input.extend(rng.bytes(length));
            }
        }
    }
    input
}

/// Runs `target` over `seeds`, then `inputs` random (every `random_every`-th) and mutated
/// inputs drawn from a generator seeded by `name`.
pub fn replay(
    name: &str,
    seeds: &[Vec<u8>],
    inputs: usize,
    random_every: usize,
    mut target: impl FnMut(&[u8]),
) {
    assert!(!seeds.is_empty(), "{name}: nothing to replay");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ u64::try_from(name.len()).unwrap_or(0));
    for seed in seeds {
        target(seed);
    }
    for index in 0..inputs {
        let input = if index % random_every.max(1) == 0 {
            let length = rng.below(700);
            rng.bytes(length)
        } else {
            let seed = &seeds[rng.below(seeds.len())];
            mutate(&mut rng, seed)
        };
        target(&input);
    }
}

/// The committed corpus of `target` under `fuzz/corpus/`, for a crate at
/// `crates/<name>` (`manifest_dir` is its `CARGO_MANIFEST_DIR`); dot files and the README
/// are not inputs. Empty when the directory is missing.
#[cfg(any(feature = "std", test))]
pub fn read_corpus(manifest_dir: &str, target: &str) -> Vec<Vec<u8>> {
    let directory: std::path::PathBuf = [manifest_dir, "..", "..", "fuzz", "corpus", target]
        .iter()
        .collect();
    let Ok(entries) = std::fs::read_dir(directory) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .file_name()
                .to_str()
                .is_some_and(|name| !name.starts_with('.') && name != "README.md")
        })
        .filter_map(|entry| std::fs::read(entry.path()).ok())
        .collect()
}
