//! The wire codec: every message round-trips; damaged frames give typed errors, never a panic
//! (with checksums left broken, and recomputed so the field checks are reached).

use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;

use proptest::prelude::*;
use xxhash_rust::xxh3::xxh3_128;

use crate::wire::{HEADER_SIZE, WireError, decode, encode, fuzz_decode};
use crate::{Entry, Message, ROOT_CHECKSUM, Suffix};

fn log(length: u64) -> Vec<Entry> {
    let mut log: Vec<Entry> = Vec::new();
    for op in 1..=length {
        let parent = log.last().map_or(ROOT_CHECKSUM, |e| e.checksum);
        let body: Arc<[u8]> = Arc::from(vec![u8::try_from(op % 251).unwrap(); 3].as_slice());
        log.push(Entry::new(op, 2, 77, op, parent, body));
    }
    log
}

/// The log of `length` ops after its first `commit`, as a view change carries it.
fn suffix(commit: u64, length: u64) -> Suffix {
    let mut entries = log(commit + length);
    let rest = entries.split_off(usize::try_from(commit).unwrap());
    Suffix {
        commit,
        head: entries.last().map_or(ROOT_CHECKSUM, |e| e.checksum),
        entries: rest,
    }
}

fn every_kind() -> Vec<Message> {
    let entry = log(1).remove(0);
    vec![
        Message::Request {
            client: 9,
            request: 3,
            body: Arc::from(&b"hello"[..]),
        },
        Message::Prepare {
            view: 4,
            replica: 1,
            commit: 7,
            entry,
        },
        Message::PrepareOk {
            view: 4,
            replica: 2,
            op: 8,
        },
        Message::Commit {
            view: 4,
            replica: 1,
            commit: 8,
        },
        Message::StartViewChange {
            view: 5,
            replica: 0,
        },
        Message::DoViewChange {
            view: 5,
            replica: 2,
            log_view: 4,
            log: suffix(2, 1),
        },
        Message::StartView {
            view: 5,
            replica: 2,
            log: suffix(3, 0),
        },
        Message::RequestStartView {
            view: 5,
            replica: 1,
        },
        Message::RequestPrepares {
            view: 5,
            replica: 1,
            op_min: 2,
            op_max: 9,
        },
        Message::Recovery {
            replica: 1,
            nonce: 42,
        },
        Message::RecoveryResponse {
            view: 5,
            replica: 0,
            nonce: 42,
            primary_state: None,
        },
        Message::RecoveryResponse {
            view: 5,
            replica: 2,
            nonce: 42,
            primary_state: Some(suffix(1, 1)),
        },
    ]
}

/// Recomputes both checksums, so a damaged field reaches the decoder's field checks.
fn reseal(frame: &mut [u8]) {
    let body = xxh3_128(&frame[HEADER_SIZE..]);
    frame[16..32].copy_from_slice(&body.to_le_bytes());
    let header = xxh3_128(&frame[16..HEADER_SIZE]);
    frame[0..16].copy_from_slice(&header.to_le_bytes());
}

#[test]
fn every_message_round_trips() {
    for message in every_kind() {
        let frame = encode(&message, 0xC1);
        assert_eq!(decode(&frame), Ok((message.clone(), 0xC1)), "{message:?}");
        assert_eq!(frame[60], message.command() as u8);
    }
}

#[test]
fn damage_is_refused_with_its_reason() {
    let frame = encode(
        &Message::Commit {
            view: 1,
            replica: 1,
            commit: 2,
        },
        0,
    );
    assert!(matches!(
        decode(&frame[..100]),
        Err(WireError::Truncated { .. })
    ));
    let mut flipped = frame.clone();
    flipped[140] ^= 1;
    assert_eq!(decode(&flipped), Err(WireError::Checksum));
    let mut reserved = frame.clone();
    reserved[200] = 1;
    reseal(&mut reserved);
    assert_eq!(decode(&reserved), Err(WireError::Reserved(200)));
    let mut replica = frame.clone();
    replica[61] = 200;
    reseal(&mut replica);
    assert_eq!(decode(&replica), Err(WireError::Replica(200)));
    // A StartView announcing four billion entries in a 40-byte body allocates nothing.
    let mut start_view = encode(
        &Message::StartView {
            view: 1,
            replica: 1,
            log: suffix(0, 0),
        },
        0,
    );
    start_view[144..148].copy_from_slice(&u32::MAX.to_le_bytes());
    reseal(&mut start_view);
    assert!(matches!(decode(&start_view), Err(WireError::Entry(0))));
    // A corrupt entry inside a sealed frame is still caught by its own checksum.
    let mut view_change = encode(&every_kind()[5], 0);
    let last = view_change.len() - 1;
    view_change[last] ^= 0xFF;
    reseal(&mut view_change);
    assert_eq!(decode(&view_change), Err(WireError::Entry(0)));
}

/// `SplitMix64`, so the replay below is the same on every run.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The fuzz target's checks over 20,000 damaged frames: flipped, cut, grown, then half of
/// them resealed.
#[test]
fn damaged_frames_never_panic() {
    let frames: Vec<Vec<u8>> = every_kind().iter().map(|m| encode(m, 5)).collect();
    let mut state = 7;
    for round in 0..20_000u64 {
        let index = usize::try_from(next(&mut state) % frames.len() as u64).unwrap();
        let mut frame = frames[index].clone();
        for _ in 0..=next(&mut state) % 4 {
            let at = usize::try_from(next(&mut state) % frame.len() as u64).unwrap();
            frame[at] = u8::try_from(next(&mut state) & 0xFF).unwrap();
        }
        match next(&mut state) % 4 {
            0 => frame.truncate(usize::try_from(next(&mut state) % frame.len() as u64).unwrap()),
            1 => frame.extend_from_slice(&[0; 9]),
            _ => {}
        }
        if round % 2 == 0 && frame.len() >= HEADER_SIZE {
            reseal(&mut frame);
        }
        fuzz_decode(&frame);
    }
}

fn arbitrary_message() -> impl Strategy<Value = Message> {
    (
        any::<u32>(),
        0u8..16,
        any::<u64>(),
        any::<u64>(),
        0u64..6,
        any::<u128>(),
    )
        .prop_map(|(view, replica, a, b, length, client)| match a % 6 {
            0 => Message::Request {
                client,
                request: b,
                body: Arc::from(&a.to_le_bytes()[..]),
            },
            1 => Message::Prepare {
                view,
                replica,
                commit: b,
                entry: log(length + 1).remove(0),
            },
            2 => Message::DoViewChange {
                view,
                replica,
                log_view: view / 2,
                log: suffix(b % 4, length),
            },
            3 => Message::StartView {
                view,
                replica,
                log: suffix(b % 4, length),
            },
            4 => Message::RequestPrepares {
                view,
                replica,
                op_min: a,
                op_max: b,
            },
            _ => Message::RecoveryResponse {
                view,
                replica,
                nonce: a,
                primary_state: Some(suffix(b % 4, length)),
            },
        })
}

proptest! {
    #[test]
    fn arbitrary_messages_round_trip(message in arbitrary_message(), cluster in any::<u128>()) {
        let frame = encode(&message, cluster);
        prop_assert_eq!(decode(&frame), Ok((message, cluster)));
    }
}

/// Replays `fuzz/corpus/vsr_wire` (crash inputs `cargo fuzz run vsr_wire` found are committed
/// there). `VSR_WRITE_CORPUS=1` rewrites the seed frames, one per message kind.
#[test]
fn replay_vsr_wire_corpus() {
    let directory =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/vsr_wire");
    if std::env::var_os("VSR_WRITE_CORPUS").is_some() {
        std::fs::create_dir_all(&directory).unwrap();
        for (index, message) in every_kind().iter().enumerate() {
            std::fs::write(
                directory.join(std::format!("seed-{index:02}")),
                encode(message, 1),
            )
            .unwrap();
        }
    }
    let mut replayed = 0;
    for file in std::fs::read_dir(&directory).unwrap() {
        fuzz_decode(&std::fs::read(file.unwrap().path()).unwrap());
        replayed += 1;
    }
    assert!(
        replayed >= every_kind().len(),
        "the corpus holds a seed per message kind"
    );
}

/// Rewrites the corpus's `seed-NN` files from [`every_kind`]; run by hand after a change of
/// the format (`cargo test -p vsr --lib write_corpus_seeds -- --ignored`).
#[test]
#[ignore = "rewrites fuzz/corpus/vsr_wire"]
fn write_corpus_seeds() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/vsr_wire");
    for (index, message) in every_kind().iter().enumerate() {
        std::fs::write(
            dir.join(std::format!("seed-{index:02}")),
            encode(message, 1),
        )
        .unwrap();
    }
}
