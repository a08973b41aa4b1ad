//! A replica's disk: the persisted view, the entries written, and the writes in flight, which
//! a crash loses (the first of them possibly torn part-way).

use std::collections::VecDeque;

use vsr::{Durable, Entry, Op};

use super::rng::Rng;

#[derive(Debug)]
pub struct PendingWrite {
    pub id: u64,
    pub done_at: u64,
    pub op_min: Op,
    pub entries: Vec<Entry>,
}

#[derive(Debug, Default)]
pub struct Disk {
    pub durable: Durable,
    pub pending: VecDeque<PendingWrite>,
}

impl Disk {
    pub fn write(&mut self, now: u64, latency: u64, id: u64, op_min: Op, entries: Vec<Entry>) {
        // Writes complete in the order they were issued.
        let after = self.pending.back().map_or(0, |last| last.done_at);
        let done_at = (now + latency).max(after);
        self.pending.push_back(PendingWrite {
            id,
            done_at,
            op_min,
            entries,
        });
    }

    /// The next write done by `now`, applied to the durable log: its id.
    pub fn complete(&mut self, now: u64) -> Option<u64> {
        if self.pending.front().is_none_or(|write| write.done_at > now) {
            return None;
        }
        let write = self.pending.pop_front()?;
        self.apply(write.op_min, &write.entries);
        Some(write.id)
    }

    fn apply(&mut self, op_min: Op, entries: &[Entry]) {
        let keep = usize::try_from(op_min - 1).unwrap();
        self.durable.log.truncate(keep);
        self.durable.log.extend_from_slice(entries);
    }

    /// A crash: writes in flight are lost; the first may have reached the disk in part, its
    /// last piece torn (a corrupt entry the replica must cut off at start).
    pub fn crash(&mut self, rng: &mut Rng, torn: bool) {
        if let Some(first) = self.pending.pop_front()
            && torn
            && rng.chance(500)
        {
            let written = usize::try_from(rng.below(first.entries.len() as u64 + 1)).unwrap();
            self.apply(first.op_min, &first.entries[..written]);
            if let Some(next) = first.entries.get(written) {
                let mut torn_entry = next.clone();
                torn_entry.request ^= 1;
                self.durable.log.push(torn_entry);
            }
        }
        self.pending.clear();
    }

    /// The disk is replaced by an empty one.
    pub fn wipe(&mut self) {
        self.durable = Durable::default();
        self.pending.clear();
    }
}
