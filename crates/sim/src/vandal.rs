//! The vandal's frames: a valid request of its own with a few bytes flipped, or a random
//! body under a random command code, keeping the frame's length field honest half the time
//! (a dishonest one is the transport's to refuse; here it reaches the header check).

use proto::codes::CommandCode;
use proto::header::{RequestHeader, SIZE_OFFSET};

use crate::rng::Rng;
use crate::wire::Frame;

/// Bytes of the header whose flips reach past the frame checks: release, command and
/// reserved bytes, the client, and the request number, operation, session, user id, command
/// code and partition context (§1.2).
const HEADER_TARGETS: [std::ops::Range<usize>; 3] = [56..64, 128..144, 168..224];

/// `frame` mangled one of several ways.
pub fn vandalize(rng: &mut Rng, mut frame: Frame) -> Frame {
    match rng.below(4) {
        0 => flip_header(rng, &mut frame),
        1 => flip_body(rng, &mut frame),
        2 => {
            flip_header(rng, &mut frame);
            flip_body(rng, &mut frame);
        }
        _ => random_body(rng, &mut frame),
    }
    frame
}

fn flip_header(rng: &mut Rng, frame: &mut Frame) {
    for _ in 0..=rng.below(3) {
        let range = &HEADER_TARGETS[rng.index(HEADER_TARGETS.len())];
        let at = range.start + rng.index(range.len());
        frame.header[at] ^= 1 << rng.below(8);
    }
}

fn flip_body(rng: &mut Rng, frame: &mut Frame) {
    if frame.body.is_empty() {
        return;
    }
    for _ in 0..=rng.below(3) {
        let at = rng.index(frame.body.len());
        frame.body[at] ^= 1 << rng.below(8);
    }
}

/// A body of 0..200 random bytes under a random known command code (in the header's code
/// field, which non-replicated requests carry), the header's size kept honest.
fn random_body(rng: &mut Rng, frame: &mut Frame) {
    let length = rng.index(200);
    frame.body = (0..length).map(|_| (rng.next_u64() & 0xff) as u8).collect();
    let codes: Vec<u32> = (0..1000)
        .filter(|code| CommandCode::from_u32(*code).is_some())
        .collect();
    let code = codes[rng.index(codes.len())];
    let at = std::mem::offset_of!(RequestHeader, code);
    frame.header[at..at + 4].copy_from_slice(&code.to_le_bytes());
    let size = u32::try_from(frame.header.len() + length).unwrap_or(u32::MAX);
    frame.header[SIZE_OFFSET..SIZE_OFFSET + 4].copy_from_slice(&size.to_le_bytes());
}
