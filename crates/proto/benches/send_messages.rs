//! Validating (checksums included) and iterating a 1000 × 1 KiB `SEND_MESSAGES` body, next
//! to a plain copy of the same bytes measured in the same run.
//!
//! Criterion reports each as throughput; the closing summary prints both in GB/s and their
//! ratio, measured back to back, so the figure survives a noisy machine.

use std::hint::black_box;
use std::time::Instant;

use criterion::{Criterion, Throughput, criterion_group};
use proto::Dialect;
use proto::batch::{OutgoingMessage, encode_batch};
use proto::codec::decode_exact;
use proto::commands::messages::SendMessages;

const MESSAGES: usize = 1000;
const PAYLOAD_BYTES: usize = 1024;

fn send_body() -> Vec<u8> {
    let payloads: Vec<Vec<u8>> = (0..MESSAGES)
        .map(|index| {
            (0..PAYLOAD_BYTES)
                .map(|byte| u8::try_from((byte ^ index) & 0xff).expect("masked to a byte"))
                .collect()
        })
        .collect();
    let messages: Vec<OutgoingMessage<'_>> = payloads
        .iter()
        .enumerate()
        .map(|(index, payload)| OutgoingMessage {
            id: u128::try_from(index).expect("fits") + 1,
            origin_timestamp: 1_700_000_000_000_000 + u64::try_from(index).expect("fits"),
            payload,
            user_headers: &[],
        })
        .collect();
    let mut body = vec![
        22, 0, 0, 0, 1, 4, 0, 0, 0, 0, 1, 4, 0, 0, 0, 0, 2, 4, 0, 0, 0, 0,
    ];
    body.extend_from_slice(&u32::try_from(MESSAGES).expect("1000 fits").to_le_bytes());
    encode_batch(&messages, None, &mut body).expect("valid messages");
    body
}

/// Validates the body and touches every message; returns the payload bytes seen.
fn validate_and_iterate(body: &[u8]) -> usize {
    let send = decode_exact::<SendMessages<'_>>(body, Dialect::V0_12_2).expect("valid body");
    send.batch
        .messages()
        .map(|message| message.payload.len())
        .sum()
}

fn benchmarks(criterion: &mut Criterion) {
    let body = send_body();
    let mut target = vec![0_u8; body.len()];
    let mut group = criterion.benchmark_group("send_messages_1000x1KiB");
    group.throughput(Throughput::Bytes(u64::try_from(body.len()).expect("fits")));
    group.bench_function("validate_and_iterate", |bencher| {
        bencher.iter(|| validate_and_iterate(black_box(&body)));
    });
    group.bench_function("memcpy", |bencher| {
        bencher.iter(|| target.copy_from_slice(black_box(&body)));
    });
    group.finish();
}

/// Alternates the two workloads in rounds and reports the best round of each, so both see
/// the same machine state.
fn summary() {
    let body = send_body();
    let mut target = vec![0_u8; body.len()];
    let rounds = 30;
    let iterations = 50;
    let (mut validate_best, mut copy_best) = (f64::MAX, f64::MAX);
    for _ in 0..rounds {
        let start = Instant::now();
        for _ in 0..iterations {
            black_box(validate_and_iterate(black_box(&body)));
        }
        validate_best = validate_best.min(start.elapsed().as_secs_f64());
        let start = Instant::now();
        for _ in 0..iterations {
            target.copy_from_slice(black_box(&body));
            black_box(&target);
        }
        copy_best = copy_best.min(start.elapsed().as_secs_f64());
    }
    let bytes = f64::from(u32::try_from(body.len() * iterations).expect("under 4 GiB"));
    let validate_rate = bytes / validate_best / 1e9;
    let copy_rate = bytes / copy_best / 1e9;
    println!(
        "summary: body {} bytes; validate+iterate {validate_rate:.2} GB/s; \
         memcpy {copy_rate:.2} GB/s; ratio {:.2}",
        body.len(),
        validate_rate / copy_rate
    );
}

criterion_group!(benches, benchmarks);

fn main() {
    benches();
    summary();
    Criterion::default().configure_from_args().final_summary();
}
