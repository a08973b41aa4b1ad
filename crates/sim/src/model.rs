//! The oracle: what the clients were told, and the checks every answer and every audit must
//! pass. A violation is a plain value; the driver stops the run on the first one.

use std::collections::BTreeMap;

use proto::batch::{Integrity, Records};
use proto::codec::decode_exact;
use proto::commands::messages::PolledMessages;
use segment::format::state::RESERVATION_STEP;

use crate::wire::DIALECT;

/// One partition of the run's fixed topics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Place {
    pub topic_id: u32,
    pub partition_id: u32,
}

/// An invariant that did not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Violation(pub String);

/// What the oracle knows of one message offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    id: u128,
    /// The send was acknowledged (not only seen in a poll).
    acked: bool,
    /// A power loss since its acknowledgement may have taken it (a topic not `persisted`).
    may_be_lost: bool,
}

/// The oracle of one partition.
#[derive(Debug, Clone, Default)]
pub struct PartitionModel {
    pub persisted: bool,
    slots: BTreeMap<u64, Slot>,
    /// Where each message id was found or acknowledged.
    offsets_of: BTreeMap<u128, u64>,
    /// A power loss dropped unsynced messages: offsets may have gaps from here on.
    pub gappy: bool,
    /// A sync failed somewhere: a poisoned partition reopens past its offset reservation
    /// (what was written after its last good sync may be gone), a jump of about
    /// [`RESERVATION_STEP`].
    pub may_jump: bool,
}

/// A message read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub offset: u64,
    pub id: u128,
}

/// The payload of message `id`: its bytes are a function of the id, so a read can check them.
pub fn payload_of(id: u128) -> Vec<u8> {
    let length = 8 + usize::from(u8::try_from(id & 0x3f).unwrap_or(0));
    let mut bytes = id.to_le_bytes().to_vec();
    let mut state =
        u64::try_from(id >> 64).unwrap_or(0) ^ u64::try_from(id & 0xffff_ffff).unwrap_or(0);
    while bytes.len() < length {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        bytes.push(state.to_le_bytes()[7]);
    }
    bytes.truncate(length.max(16));
    bytes
}

/// Decodes a poll reply body and checks every message's checksum and payload.
pub fn read_polled(body: &[u8]) -> Result<(u32, Vec<Seen>), Violation> {
    let polled: PolledMessages<'_> = decode_exact(body, DIALECT)
        .map_err(|error| Violation(format!("undecodable poll reply: {error}")))?;
    let mut seen = Vec::new();
    for batch in Records::new(polled.records, DIALECT, Integrity::Full, 0) {
        let batch = batch.map_err(|error| Violation(format!("bad record read back: {error}")))?;
        let base = batch.header().base_offset.get();
        for message in batch.messages() {
            let id = message.header.id.get();
            let offset = base + u64::from(message.header.offset_delta.get());
            if message.payload != payload_of(id).as_slice() {
                return Err(Violation(format!(
                    "offset {offset}: payload of {id:#x} differs"
                )));
            }
            seen.push(Seen { offset, id });
        }
    }
    Ok((polled.partition_id, seen))
}

impl PartitionModel {
    pub fn new(persisted: bool) -> Self {
        Self {
            persisted,
            ..Self::default()
        }
    }

    /// A send of `ids` was acknowledged at `base_offset`.
    pub fn acked(&mut self, base_offset: u64, ids: &[u128]) -> Result<(), Violation> {
        for (offset, id) in (base_offset..).zip(ids) {
            self.record(offset, *id, true)?;
        }
        Ok(())
    }

    /// A read returned `seen`, in order; `dense` when the reply must have no gap (a read by
    /// offset or `next` of a partition without lost messages).
    pub fn read(&mut self, seen: &[Seen]) -> Result<(), Violation> {
        for pair in seen.windows(2) {
            if pair[1].offset <= pair[0].offset {
                return Err(Violation(format!(
                    "offsets out of order in one reply: {} then {}",
                    pair[0].offset, pair[1].offset
                )));
            }
            let gap = pair[1].offset - pair[0].offset;
            let jump = self.may_jump && gap >= RESERVATION_STEP / 2;
            if !self.gappy && gap != 1 && !jump {
                return Err(Violation(format!(
                    "gap in offsets: {} then {}",
                    pair[0].offset, pair[1].offset
                )));
            }
        }
        for message in seen {
            self.record(message.offset, message.id, false)?;
        }
        Ok(())
    }

    fn record(&mut self, offset: u64, id: u128, acked: bool) -> Result<(), Violation> {
        if let Some(slot) = self.slots.get_mut(&offset) {
            if slot.id != id {
                return Err(Violation(format!(
                    "offset {offset} reused: held {:#x}{}, now {id:#x}",
                    slot.id,
                    if slot.acked { " (acknowledged)" } else { "" }
                )));
            }
            slot.acked |= acked;
            return Ok(());
        }
        if let Some(other) = self.offsets_of.get(&id)
            && *other != offset
        {
            return Err(Violation(format!(
                "message {id:#x} stored twice: at {other} and {offset}"
            )));
        }
        let slot = Slot {
            id,
            acked,
            may_be_lost: false,
        };
        self.slots.insert(offset, slot);
        self.offsets_of.insert(id, offset);
        Ok(())
    }

    /// The machine lost power: what a topic that is not `persisted` acknowledged may be gone.
    pub fn power_lost(&mut self) {
        // A new boot reopens every partition past its offset reservation.
        self.may_jump = true;
        if self.persisted {
            return;
        }
        self.gappy = true;
        for slot in self.slots.values_mut() {
            slot.may_be_lost = true;
        }
    }

    /// Checks a full read of the partition after a restart: every acknowledged message that
    /// had to survive is there at its offset; what was lost is forgotten.
    pub fn audit(&mut self, all: &[Seen]) -> Result<(), Violation> {
        self.read(all)?;
        let present: std::collections::BTreeSet<u64> = all.iter().map(|seen| seen.offset).collect();
        for (offset, slot) in &self.slots {
            if slot.acked && !slot.may_be_lost && !present.contains(offset) {
                return Err(Violation(format!(
                    "acknowledged message {:#x} at offset {offset} is gone",
                    slot.id
                )));
            }
        }
        let lost: Vec<u64> = self
            .slots
            .keys()
            .filter(|offset| !present.contains(offset))
            .copied()
            .collect();
        for offset in lost {
            if let Some(slot) = self.slots.remove(&offset) {
                self.offsets_of.remove(&slot.id);
            }
        }
        for slot in self.slots.values_mut() {
            slot.may_be_lost = false;
        }
        Ok(())
    }

    /// The offset after the last message known (what a full read must reach).
    pub fn end(&self) -> u64 {
        self.slots
            .last_key_value()
            .map_or(0, |(offset, _)| offset + 1)
    }

    /// Messages known.
    pub fn known(&self) -> usize {
        self.slots.len()
    }
}

/// A stored consumer offset as the oracle knows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoredModel {
    /// The last acknowledged store (`None`: never stored).
    pub acked: Option<u64>,
    /// A store in flight when the server crashed: it may or may not have landed.
    pub maybe: Option<u64>,
    /// A power loss made the value unknown (offsets of a topic not `persisted`).
    pub unknown: bool,
}

impl StoredModel {
    /// Checks the value read back after a restart, then takes it as the truth.
    pub fn audit(&mut self, read: Option<u64>, what: &str) -> Result<(), Violation> {
        let allowed =
            self.unknown || read == self.acked || (self.maybe.is_some() && read == self.maybe);
        if !allowed {
            return Err(Violation(format!(
                "{what}: stored offset {read:?} after restart, last acknowledged {:?}",
                self.acked
            )));
        }
        *self = Self {
            acked: read,
            ..Self::default()
        };
        Ok(())
    }
}
