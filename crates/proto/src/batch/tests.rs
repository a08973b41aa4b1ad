//! Batch codec tests: golden bytes from PROTOCOL.md A.7/A.8, round trips, and corruption.

use alloc::vec;
use alloc::vec::Vec;

use proptest::prelude::*;

use super::*;
use crate::dialect::Dialect;
use crate::primitives::UserHeaders;

const ORIGIN: u64 = 1_700_000_000_000_000;

/// The batch of Appendix A.7 (one message `hello`, id 1).
fn golden_hello() -> Vec<u8> {
    let mut out = Vec::new();
    let message = OutgoingMessage {
        id: 1,
        origin_timestamp: ORIGIN,
        payload: b"hello",
        user_headers: &[],
    };
    encode_batch(&[message], None, &mut out).unwrap();
    out
}

#[test]
fn golden_send_batch_matches_appendix_a7() {
    let bytes = golden_hello();
    assert_eq!(bytes.len(), 309);
    assert_eq!(bytes[24..32], ORIGIN.to_le_bytes());
    assert_eq!(bytes[32..40], 309_u64.to_le_bytes());
    assert_eq!(
        bytes[40..48],
        [0xc3, 0x0f, 0x94, 0x7c, 0x3d, 0xc3, 0x37, 0x89]
    );
    assert_eq!(bytes[48..52], [1, 0, 0, 0]);
    assert!(bytes[52..256].iter().all(|&b| b == 0));
    assert_eq!(
        bytes[256..264],
        [0x8e, 0x5c, 0xa5, 0x9e, 0xdb, 0xbd, 0xbf, 0xb9]
    );
    assert_eq!(bytes[264], 1);
    assert_eq!(bytes[292..296], [5, 0, 0, 0]);
    assert_eq!(&bytes[304..], b"hello");
    let batch = Batch::parse(&bytes, Dialect::V0_12_2, Integrity::Full, 0).unwrap();
    let messages: Vec<_> = batch.messages().collect();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].payload, b"hello");
    assert_eq!(messages[0].header.id.get(), 1);
}

#[test]
fn golden_stamp_matches_appendix_a8() {
    let mut bytes = golden_hello();
    stamp(&mut bytes, 0, 1_700_000_000_000_500).unwrap();
    assert_eq!(
        bytes[16..24],
        [0xf4, 0x41, 0x1e, 0x18, 0x24, 0x0a, 0x06, 0x00]
    );
    assert_eq!(
        bytes[40..48],
        [0xfb, 0xc1, 0x94, 0xce, 0xa8, 0x65, 0x53, 0xeb]
    );
    Batch::parse(&bytes, Dialect::V0_12_2, Integrity::Full, 0).unwrap();
}

#[test]
fn every_single_bit_flip_is_refused() {
    let bytes = golden_hello();
    for bit in 0..bytes.len() * 8 {
        let mut flipped = bytes.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        for dialect in [Dialect::V0_11_0, Dialect::V0_12_2] {
            assert!(
                Batch::parse(&flipped, dialect, Integrity::Full, 0).is_err(),
                "bit {bit} not detected"
            );
        }
    }
}

#[test]
fn every_truncation_is_refused() {
    let mut bytes = golden_hello();
    let message = OutgoingMessage {
        id: 2,
        origin_timestamp: ORIGIN,
        payload: b"world!",
        user_headers: &[],
    };
    let mut two = Vec::new();
    encode_batch(&[message, message], None, &mut two).unwrap();
    bytes.extend_from_slice(&two);
    for length in 0..bytes.len() {
        let records = Records::new(&bytes[..length], Dialect::V0_12_2, Integrity::LayoutOnly, 0);
        let parsed: Result<Vec<_>, _> = records.collect();
        let expect_ok = length == 0 || length == 309;
        assert_eq!(parsed.is_ok(), expect_ok, "length {length}");
    }
}

#[test]
fn producer_section_only_in_0_12_2() {
    let producer = Producer {
        producer_id: 7 << 20,
        epoch: 3,
        base_sequence: 10,
    };
    let message = OutgoingMessage {
        id: 9,
        origin_timestamp: 5,
        payload: b"p",
        user_headers: &[],
    };
    let mut bytes = Vec::new();
    encode_batch(&[message], Some(producer), &mut bytes).unwrap();
    let batch = Batch::parse(&bytes, Dialect::V0_12_2, Integrity::Full, 0).unwrap();
    assert_eq!(batch.producer(), Some(producer));
    assert!(Batch::parse(&bytes, Dialect::V0_11_0, Integrity::Full, 0).is_err());
}

#[test]
fn slices_keep_deltas_and_rewrite_counts() {
    let payloads: [&[u8]; 4] = [b"a", b"bb", b"ccc", b"dddd"];
    let messages: Vec<_> = payloads
        .iter()
        .enumerate()
        .map(|(i, p)| OutgoingMessage {
            id: i as u128 + 1,
            origin_timestamp: ORIGIN + i as u64,
            payload: p,
            user_headers: &[],
        })
        .collect();
    let mut bytes = Vec::new();
    encode_batch(&messages, None, &mut bytes).unwrap();
    stamp(&mut bytes, 100, ORIGIN + 50).unwrap();
    let batch = Batch::parse(&bytes, Dialect::V0_12_2, Integrity::Full, 0).unwrap();
    let slice = batch.slice(1, 2).unwrap();
    let mut record = slice.header.to_vec();
    record.extend_from_slice(slice.frames);
    let sliced = Batch::parse(&record, Dialect::V0_12_2, Integrity::Full, 0).unwrap();
    let kept: Vec<_> = sliced
        .messages()
        .map(|m| (m.header.offset_delta.get(), m.payload))
        .collect();
    assert_eq!(kept, vec![(1, &b"bb"[..]), (2, &b"ccc"[..])]);
    assert_eq!(sliced.header().base_offset.get(), 100);
    assert!(batch.slice(4, 1).is_none());
    let whole = batch.slice(0, 4).unwrap();
    assert_eq!([&whole.header[..], whole.frames].concat(), bytes);
}

/// An owned message for property tests.
#[derive(Debug, Clone)]
struct OwnedMessage {
    id: u128,
    origin_timestamp: u64,
    payload: Vec<u8>,
    user_headers: Vec<u8>,
}

impl OwnedMessage {
    fn outgoing(&self) -> OutgoingMessage<'_> {
        OutgoingMessage {
            id: self.id,
            origin_timestamp: self.origin_timestamp,
            payload: &self.payload,
            user_headers: &self.user_headers,
        }
    }
}

fn owned_message() -> impl Strategy<Value = OwnedMessage> {
    (
        any::<u128>(),
        0..1_000_000_u64,
        proptest::collection::vec(any::<u8>(), 1..300),
        any::<UserHeaders>(),
    )
        .prop_map(|(id, delta, payload, headers)| {
            let mut user_headers = Vec::new();
            headers.encode_into(&mut user_headers);
            OwnedMessage {
                id,
                origin_timestamp: ORIGIN + delta,
                payload,
                user_headers,
            }
        })
}

proptest! {
    #[test]
    fn encode_then_parse_round_trips(
        messages in proptest::collection::vec(owned_message(), 1..20),
        producer in proptest::option::of(any::<Producer>()),
        base_offset in any::<u64>(),
    ) {
        let outgoing: Vec<_> = messages
            .iter()
            .map(OwnedMessage::outgoing)
            .collect();
        let mut bytes = Vec::new();
        encode_batch(&outgoing, producer, &mut bytes).unwrap();
        stamp(&mut bytes, base_offset, ORIGIN).unwrap();
        let batch = Batch::parse(&bytes, Dialect::V0_12_2, Integrity::Full, 0).unwrap();
        prop_assert_eq!(batch.producer(), producer);
        let origin_min = messages.iter().map(|m| m.origin_timestamp).min().unwrap();
        prop_assert_eq!(batch.header().origin_timestamp.get(), origin_min);
        for (index, (message, expected)) in batch.messages().zip(&messages).enumerate() {
            prop_assert_eq!(message.payload, &expected.payload[..]);
            prop_assert_eq!(message.user_headers, &expected.user_headers[..]);
            prop_assert_eq!(message.header.id.get(), expected.id);
            prop_assert_eq!(message.header.offset_delta.get() as usize, index);
            let origin = origin_min + u64::from(message.header.timestamp_delta.get());
            prop_assert_eq!(origin, expected.origin_timestamp);
            let decoded = UserHeaders::decode(message.user_headers).unwrap();
            let mut reencoded = Vec::new();
            decoded.encode_into(&mut reencoded);
            prop_assert_eq!(&reencoded, &expected.user_headers);
        }
        prop_assert_eq!(batch.messages().count(), messages.len());
    }

    #[test]
    fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..1024)) {
        for integrity in [Integrity::Full, Integrity::LayoutOnly] {
            let _ = Batch::parse(&bytes, Dialect::V0_12_2, integrity, 0);
            let _ = Records::new(&bytes, Dialect::V0_11_0, integrity, 0).count();
        }
    }
}

/// `golden_hello` with a seal section in its header, its frame reshaped into one sealed
/// block (the bytes stand in for ciphertext; layout is what the parsers judge) and every
/// checksum fixed.
fn sealed_hello() -> Vec<u8> {
    use seal::{SEAL_OVERHEAD, SealSection};
    use zerocopy::FromBytes;
    let plain = golden_hello();
    let mut bytes = plain[..BATCH_HEADER_SIZE + FRAME_HEADER_SIZE].to_vec();
    bytes.extend_from_slice(&[0xa5; 5 + SEAL_OVERHEAD]);
    let length = bytes.len() as u64;
    let (header, frames) = bytes.split_at_mut(BATCH_HEADER_SIZE);
    let header = BatchHeader::mut_from_bytes(header).unwrap();
    SealSection::Sealed([7; 16]).write(header);
    header.batch_length = zerocopy::little_endian::U64::new(length);
    frames[36..40].copy_from_slice(&u32::try_from(5 + SEAL_OVERHEAD).unwrap().to_le_bytes());
    let checksum = message_checksum(&frames[8..]);
    frames[..8].copy_from_slice(&checksum.to_le_bytes());
    stamp(&mut bytes, 0, ORIGIN).unwrap();
    bytes
}

#[test]
fn a_sealed_record_parses_only_as_stored() {
    let bytes = sealed_hello();
    let stored = Batch::parse_stored(&bytes, Dialect::V0_12_2, Integrity::Full, 0).unwrap();
    assert_eq!(stored.seal_salt(), Some([7; 16]));
    // A client can never hand the server a sealed record.
    assert!(Batch::parse(&bytes, Dialect::V0_12_2, Integrity::Full, 0).is_err());
    let plain = golden_hello();
    let plain = Batch::parse_stored(&plain, Dialect::V0_12_2, Integrity::Full, 0).unwrap();
    assert_eq!(plain.seal_salt(), None);
}

#[test]
fn a_damaged_seal_section_or_sealed_frame_is_refused() {
    let good = sealed_hello();
    // A version byte, a padding byte, a byte after the salt.
    for at in [72 + 4, 72 + 6, 72 + 24, 255] {
        let mut bytes = good.clone();
        bytes[at] ^= 1;
        assert!(Batch::parse_stored(&bytes, Dialect::V0_12_2, Integrity::LayoutOnly, 0).is_err());
    }
    // A sealed frame declaring user headers beside its block.
    let mut bytes = good.clone();
    let at = BATCH_HEADER_SIZE + 32;
    bytes[at..at + 4].copy_from_slice(&1_u32.to_le_bytes());
    bytes[at + 4..at + 8].copy_from_slice(
        &u32::try_from(4 + seal::SEAL_OVERHEAD)
            .unwrap()
            .to_le_bytes(),
    );
    assert!(Batch::parse_stored(&bytes, Dialect::V0_12_2, Integrity::LayoutOnly, 0).is_err());
}
