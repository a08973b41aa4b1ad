//! The on-disk log and superblock: round trips, torn tails cut at the last intact record,
//! and total decoders on damaged bytes.

use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;

use proptest::prelude::*;

use crate::journal::{SUPERBLOCK_SIZE, Superblock, SuperblockError, encode_record, scan};
use crate::{Entry, ROOT_CHECKSUM};

fn log(length: u64) -> Vec<Entry> {
    let mut log: Vec<Entry> = Vec::new();
    for op in 1..=length {
        let parent = log.last().map_or(ROOT_CHECKSUM, |e| e.checksum);
        let size = usize::try_from(op * 7 % 40).unwrap();
        let body: Arc<[u8]> = Arc::from(vec![u8::try_from(op % 251).unwrap(); size].as_slice());
        log.push(Entry::new(op, 1, 5, op, parent, body));
    }
    log
}

fn bytes_of(entries: &[Entry]) -> (Vec<u8>, Vec<usize>) {
    let mut bytes = Vec::new();
    let mut ends = Vec::new();
    for entry in entries {
        let before = bytes.len();
        encode_record(entry, &mut bytes);
        assert_eq!(
            crate::journal::record_size(entry),
            (bytes.len() - before) as u64
        );
        ends.push(bytes.len());
    }
    (bytes, ends)
}

#[test]
fn records_round_trip() {
    let entries = log(20);
    let (bytes, _) = bytes_of(&entries);
    assert_eq!(scan(&bytes), (entries, bytes.len()));
    assert_eq!(scan(&[]), (Vec::new(), 0));
}

#[test]
fn a_torn_tail_is_cut_at_the_last_whole_record() {
    let entries = log(6);
    let (bytes, ends) = bytes_of(&entries);
    for cut in 0..bytes.len() {
        let (kept, used) = scan(&bytes[..cut]);
        let whole = ends.iter().filter(|end| **end <= cut).count();
        assert_eq!(kept.len(), whole, "cut at {cut}");
        assert_eq!(used, if whole == 0 { 0 } else { ends[whole - 1] });
        assert_eq!(kept[..], entries[..whole]);
    }
}

#[test]
fn a_flipped_byte_ends_the_log_before_its_record() {
    let entries = log(5);
    let (bytes, ends) = bytes_of(&entries);
    for at in 0..bytes.len() {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x10;
        let (kept, used) = scan(&damaged);
        let record = ends.iter().filter(|end| **end <= at).count();
        assert!(
            kept.len() <= record,
            "flip at {at} kept {} records",
            kept.len()
        );
        assert_eq!(kept[..], entries[..kept.len()]);
        assert!(used <= at);
    }
}

/// Each record's start declares its whole size and reads back as its entry; a flipped byte
/// anywhere in a record makes it not intact (or not a record), and a start cut short of the
/// fixed part declares nothing.
#[test]
fn a_record_declares_its_size_and_reads_back_only_when_intact() {
    use crate::journal::{RECORD_FIXED, declared_record_size, record_at};
    let entries = log(4);
    let (bytes, ends) = bytes_of(&entries);
    let mut start = 0;
    for (entry, end) in entries.iter().zip(&ends) {
        let record = &bytes[start..*end];
        assert_eq!(
            declared_record_size(&bytes[start..]),
            Some(record.len() as u64)
        );
        assert_eq!(record_at(record), Some(entry.op));
        assert_eq!(declared_record_size(&record[..RECORD_FIXED - 1]), None);
        assert_eq!(
            record_at(&record[..record.len() - 1]),
            None,
            "short by a byte"
        );
        for at in 0..record.len() {
            let mut flipped = record.to_vec();
            flipped[at] ^= 0x04;
            assert_eq!(record_at(&flipped), None, "flip at {at}");
        }
        start = *end;
    }
    assert_eq!(declared_record_size(&bytes[1..]), None, "no magic");
}

#[test]
fn records_out_of_order_end_the_log() {
    let entries = log(3);
    let (bytes, ends) = bytes_of(&[entries[0].clone(), entries[2].clone()]);
    assert_eq!(scan(&bytes), (vec![entries[0].clone()], ends[0]));
}

#[test]
fn superblocks_round_trip_and_refuse_damage() {
    let superblock = Superblock {
        cluster: 0x1234_5678,
        replica: 2,
        view: 9,
        log_view: 7,
        recovering: true,
    };
    let bytes = superblock.encode();
    assert_eq!(Superblock::decode(&bytes), Ok(superblock));
    for at in 0..SUPERBLOCK_SIZE {
        for bit in 0..8 {
            let mut damaged = bytes;
            damaged[at] ^= 1 << bit;
            assert!(Superblock::decode(&damaged).is_err(), "flip {at}.{bit}");
        }
    }
    assert_eq!(
        Superblock::decode(&bytes[..10]),
        Err(SuperblockError::Size(10))
    );
    let backwards = Superblock {
        view: 1,
        log_view: 2,
        ..superblock
    };
    assert_eq!(
        Superblock::decode(&backwards.encode()),
        Err(SuperblockError::Field)
    );
}

proptest! {
    #[test]
    fn any_bytes_decode_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        crate::journal::fuzz_decode(&bytes);
    }

    #[test]
    fn garbage_after_records_is_not_kept(tail in proptest::collection::vec(any::<u8>(), 0..100)) {
        let entries = log(4);
        let (mut bytes, _) = bytes_of(&entries);
        let used = bytes.len();
        bytes.extend_from_slice(&tail);
        let (kept, end) = scan(&bytes);
        prop_assert!(kept.len() >= 4 && kept[..4] == entries[..]);
        prop_assert!(kept.len() == 4 || end > used);
    }
}

#[test]
fn replay_vsr_journal_corpus() {
    let directory =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/vsr_journal");
    if std::env::var_os("VSR_WRITE_CORPUS").is_some() {
        std::fs::create_dir_all(&directory).unwrap();
        let (records, _) = bytes_of(&log(4));
        let superblock = Superblock {
            cluster: 1,
            replica: 1,
            view: 3,
            log_view: 2,
            recovering: false,
        };
        std::fs::write(directory.join("seed-log"), &records).unwrap();
        std::fs::write(directory.join("seed-superblock"), superblock.encode()).unwrap();
    }
    let mut replayed = 0;
    for file in std::fs::read_dir(&directory).unwrap() {
        crate::journal::fuzz_decode(&std::fs::read(file.unwrap().path()).unwrap());
        replayed += 1;
    }
    assert!(
        replayed >= 2,
        "the corpus holds a log and a superblock seed"
    );
}
