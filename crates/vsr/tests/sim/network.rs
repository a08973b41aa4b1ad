//! A network that loses, duplicates, delays (so reorders) and partitions messages.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use vsr::{Message, Op};

use super::rng::Rng;

/// Where a message goes: a replica, or a client (a reply).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packet {
    ToReplica { to: u8, message: Message },
    ToClient { client: usize, request: u64, op: Op },
}

#[derive(Debug, Clone, Copy)]
pub struct Faults {
    pub loss: u64,
    pub duplicate: u64,
    pub delay_max: u64,
}

#[derive(Debug)]
struct InFlight {
    at: u64,
    sequence: u64,
    packet: Packet,
}

impl PartialEq for InFlight {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.sequence) == (other.at, other.sequence)
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for InFlight {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.sequence).cmp(&(other.at, other.sequence))
    }
}

#[derive(Debug)]
pub struct Network {
    pub faults: Faults,
    in_flight: BinaryHeap<Reverse<InFlight>>,
    sequence: u64,
    /// Replicas cut off from everyone (a bit each) until `healed_at`.
    pub isolated: u16,
    pub healed_at: u64,
    pub sent: u64,
}

impl Network {
    pub fn new(faults: Faults) -> Self {
        Self {
            faults,
            in_flight: BinaryHeap::new(),
            sequence: 0,
            isolated: 0,
            healed_at: 0,
            sent: 0,
        }
    }

    /// Sends `packet` from replica `from` (`None` for a client).
    pub fn send(&mut self, rng: &mut Rng, now: u64, from: Option<u8>, packet: &Packet) {
        self.sent += 1;
        let to = match &packet {
            Packet::ToReplica { to, .. } => Some(*to),
            Packet::ToClient { .. } => None,
        };
        let cut = |replica: Option<u8>| replica.is_some_and(|r| self.isolated & (1 << r) != 0);
        if cut(from) || cut(to) || rng.chance(self.faults.loss) {
            return;
        }
        // Every replica message crosses the wire codec: what arrives is what was encoded.
        let packet = match packet {
            Packet::ToReplica { to, message } => {
                let frame = vsr::wire::encode(message, 0);
                let (decoded, _) = vsr::wire::decode(&frame).expect("a frame we encoded decodes");
                assert_eq!(&decoded, message, "the codec round-trips");
                Packet::ToReplica {
                    to: *to,
                    message: decoded,
                }
            }
            Packet::ToClient { .. } => packet.clone(),
        };
        let copies = if rng.chance(self.faults.duplicate) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let at = now + rng.between(1, self.faults.delay_max.max(1));
            self.sequence += 1;
            self.in_flight.push(Reverse(InFlight {
                at,
                sequence: self.sequence,
                packet: packet.clone(),
            }));
        }
    }

    /// The next packet due by `now`, if any.
    pub fn next_due(&mut self, now: u64) -> Option<Packet> {
        if self
            .in_flight
            .peek()
            .is_some_and(|Reverse(each)| each.at <= now)
        {
            return self.in_flight.pop().map(|Reverse(each)| each.packet);
        }
        None
    }
}
