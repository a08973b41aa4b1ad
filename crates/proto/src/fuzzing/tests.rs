//! Stable replay of every fuzz target: the committed corpus under `fuzz/corpus/<target>/`,
//! seeds built from the encoders, and at least 100,000 random and mutated inputs per target
//! from a fixed seed, so CI covers every decoder family without a fuzzing toolchain.

use std::vec;
use std::vec::Vec;

use super::replay::{self, read_corpus};
use super::seeds::{reply_seeds, request_seeds};
use super::*;
use crate::batch::{OutgoingMessage, Producer, encode_batch};
use crate::header::{EvictionReason, Operation};
use crate::primitives::{ConsumerKind, TlvEntry};

/// Inputs each target sees per run, split between random and mutated seeds.
const INPUTS_PER_TARGET: usize = 100_000;

/// Runs `target` over the seeds, the corpus, and random and mutated inputs.
fn replay(name: &str, seeds: Vec<Vec<u8>>, target: fn(&[u8])) {
    let mut seeds = seeds;
    seeds.extend(read_corpus(env!("CARGO_MANIFEST_DIR"), name));
    replay::replay(name, &seeds, INPUTS_PER_TARGET, 4, target);
}

fn with_selector(selector: u8, body: &[u8]) -> Vec<u8> {
    let mut input = vec![selector];
    input.extend_from_slice(body);
    input
}

fn header_seeds() -> Vec<Vec<u8>> {
    let request = RequestHeader::new(7, Operation::NonReplicated, 0);
    let reply = ReplyHeader::for_request(&request, Operation::NonReplicated, 0, 3, 0);
    let eviction = EvictionHeader::new(7, EvictionReason::IncompatibleProtocol);
    vec![
        zerocopy::IntoBytes::as_bytes(&request).to_vec(),
        zerocopy::IntoBytes::as_bytes(&reply).to_vec(),
        zerocopy::IntoBytes::as_bytes(&eviction).to_vec(),
    ]
}

fn primitive_seeds() -> Vec<Vec<u8>> {
    let mut options = OptionsBlock::default();
    options.set("durability", TlvEntry::string("persisted").unwrap());
    options.set("segment_size", TlvEntry::uint64(1 << 30));
    let consumer = Consumer {
        kind: ConsumerKind::ConsumerGroup,
        id: Identifier::name("g").unwrap(),
    };
    let dialect = Dialect::V0_12_2;
    let mut headers = Vec::new();
    UserHeaders(vec![(TlvEntry::string("k").unwrap(), TlvEntry::uint32(42))])
        .encode_into(&mut headers);
    vec![
        with_selector(0, &encode_to_vec(&Identifier::Numeric(1), dialect)),
        with_selector(2, &encode_to_vec(&consumer, dialect)),
        with_selector(4, &encode_to_vec(&Partitioning::PartitionId(3), dialect)),
        with_selector(6, &encode_to_vec(&PollingStrategy::next(), dialect)),
        with_selector(12, &encode_to_vec(&Permissions::root(), dialect)),
        with_selector(14, &encode_to_vec(&options, dialect)),
        with_selector(
            16,
            &encode_to_vec(&VersionPrefix::rust_sdk(dialect), dialect),
        ),
        with_selector(18, &headers),
        with_selector(20, &[1, 0, 0, 0, 0, 0, 0, 0, 0x11, 0x10, 0, 0]),
    ]
}

fn batch_seeds() -> Vec<Vec<u8>> {
    let message = OutgoingMessage {
        id: 1,
        origin_timestamp: 5,
        payload: b"hello",
        user_headers: &[],
    };
    let mut plain = Vec::new();
    encode_batch(&[message, message, message], None, &mut plain).unwrap();
    let producer = Producer {
        producer_id: 1 << 20,
        epoch: 1,
        base_sequence: 0,
    };
    let mut idempotent = Vec::new();
    encode_batch(&[message], Some(producer), &mut idempotent).unwrap();
    let mut two = plain.clone();
    two.extend_from_slice(&plain);
    vec![
        with_selector(0, &plain),
        with_selector(2, &idempotent),
        with_selector(3, &two),
    ]
}

fn tagged(seeds: Vec<(CommandCode, Dialect, Vec<u8>)>) -> Vec<Vec<u8>> {
    seeds
        .into_iter()
        .map(|(code, dialect, body)| with_selector(selector_for(code, dialect), &body))
        .collect()
}

#[test]
fn replay_request() {
    let mut seeds = tagged(request_seeds());
    let mut send = vec![
        0x16, 0, 0, 0, 1, 4, 0, 0, 0, 0, 1, 4, 0, 0, 0, 0, 2, 4, 0, 0, 0, 0, 1, 0, 0, 0,
    ];
    send.extend_from_slice(&batch_seeds()[0][1..]);
    send[22] = 3;
    seeds.push(with_selector(
        selector_for(CommandCode::SendMessages, Dialect::V0_12_2),
        &send,
    ));
    replay("request", seeds, fuzz_request);
}

#[test]
fn replay_reply() {
    replay("reply", tagged(reply_seeds()), fuzz_reply);
}

#[test]
fn every_code_has_request_seeds_that_decode() {
    let seeds = request_seeds();
    for dialect in [Dialect::V0_11_0, Dialect::V0_12_2] {
        for code in CommandCode::all().filter(|code| code.is_known_in(dialect)) {
            let decodes = seeds.iter().any(|(seed_code, seed_dialect, body)| {
                *seed_code == code
                    && *seed_dialect == dialect
                    && Request::decode(code, body, dialect).is_ok()
            });
            let exempt = code == CommandCode::SendMessages;
            assert!(
                decodes || exempt,
                "no decodable seed for {code:?} in {dialect:?}"
            );
        }
    }
}

#[test]
fn replay_header() {
    replay("header", header_seeds(), fuzz_header);
}

#[test]
fn replay_primitives() {
    replay("primitives", primitive_seeds(), fuzz_primitives);
}

#[test]
fn replay_batch() {
    replay("batch", batch_seeds(), fuzz_batch);
}
