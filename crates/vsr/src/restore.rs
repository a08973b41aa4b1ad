//! Reading a replica's log back at start without holding all of it. The caller feeds the
//! entries read from disk in op order; an entry more than [`PIPELINE_MAX`] ops below the
//! end of the chain read so far is committed (whoever prepared that end had committed it,
//! see `Replica::committed_prefix`), so it comes straight back for the caller to apply and
//! leaves memory; the last [`PIPELINE_MAX`] stay for the replica. Memory at start is then a
//! pipeline of entries, whatever the size of the log.

use alloc::collections::VecDeque;

use crate::{Checksum, ClientTable, Durable, Entry, Op, PIPELINE_MAX, ROOT_CHECKSUM, View};

/// A log being read back (see the module docs).
#[derive(Debug)]
pub struct Restore {
    window: VecDeque<Entry>,
    /// Ops `1..=base` came back to be applied.
    base: Op,
    base_checksum: Checksum,
    clients: ClientTable,
    /// An entry did not continue the chain: it and everything after it are a torn tail.
    ended: bool,
}

impl Default for Restore {
    fn default() -> Self {
        Self {
            window: VecDeque::new(),
            base: 0,
            base_checksum: ROOT_CHECKSUM,
            clients: ClientTable::default(),
            ended: false,
        }
    }
}

impl Restore {
    /// The last op taken so far.
    pub fn op(&self) -> Op {
        let count = Op::try_from(self.window.len()).unwrap_or(Op::MAX);
        self.base.saturating_add(count)
    }

    /// Takes the next entry read back. Returns the entry that is now known committed, for
    /// the caller to apply before the next. From the first entry that is not the next op,
    /// not intact or not chained to the one before, nothing more is taken (a torn tail,
    /// cut at start: it was never acknowledged).
    pub fn push(&mut self, entry: Entry) -> Option<Entry> {
        let parent = self
            .window
            .back()
            .map_or(self.base_checksum, |last| last.checksum);
        let next = self.op().saturating_add(1);
        if self.ended || entry.op != next || entry.parent != parent || !entry.is_intact() {
            self.ended = true;
            return None;
        }
        self.window.push_back(entry);
        if self.window.len() <= PIPELINE_MAX {
            return None;
        }
        let committed = self.window.pop_front()?;
        self.base = committed.op;
        self.base_checksum = committed.checksum;
        self.clients
            .commit(committed.client, committed.request, committed.op);
        Some(committed)
    }

    /// What the replica opens with: its durable view and log view, and the entries not
    /// handed back (ops `base + 1 ..`), with `base` applied.
    pub fn finish(self, view: View, log_view: View) -> Durable {
        Durable {
            view,
            log_view,
            log: self.window.into(),
            recovering: false,
            base: self.base,
            base_checksum: self.base_checksum,
            clients: self.clients,
        }
    }
}

#[cfg(test)]
mod tests {
    use alloc::sync::Arc;
    use alloc::vec::Vec;

    use super::Restore;
    use crate::{Config, Entry, Op, Outbox, PIPELINE_MAX, ROOT_CHECKSUM, Replica, Status};

    fn chain(length: Op) -> Vec<Entry> {
        let mut log: Vec<Entry> = Vec::new();
        for op in 1..=length {
            let parent = log.last().map_or(ROOT_CHECKSUM, |entry| entry.checksum);
            log.push(Entry::new(op, 0, 5, op, parent, Arc::from(&b"body"[..])));
        }
        log
    }

    #[test]
    fn all_but_a_pipeline_comes_back_to_apply_and_the_replica_opens_on_the_rest() {
        let mut restore = Restore::default();
        let mut applied = Vec::new();
        for entry in chain(200) {
            applied.extend(restore.push(entry));
        }
        let pipeline = Op::try_from(PIPELINE_MAX).unwrap();
        let ops: Vec<Op> = applied.iter().map(|entry| entry.op).collect();
        assert_eq!(ops, (1..=200 - pipeline).collect::<Vec<_>>(), "in op order");
        let durable = restore.finish(0, 0);
        assert_eq!(durable.log.len(), PIPELINE_MAX);
        let mut out = Outbox::new();
        let replica = Replica::open(Config::new(3), 1, durable, 0, &mut out);
        assert_eq!(replica.status(), Status::Normal);
        assert_eq!((replica.op(), replica.applied()), (200, 200 - pipeline));
        assert_eq!(replica.commit(), 200 - pipeline);
        assert_eq!(
            replica.clients().latest(5),
            Some((200 - pipeline, 200 - pipeline))
        );
    }

    #[test]
    fn a_torn_or_unchained_entry_ends_the_log_read_back() {
        let mut log = chain(100);
        log[80].request ^= 1; // torn: no longer intact
        let mut restore = Restore::default();
        let applied = log
            .into_iter()
            .filter_map(|entry| restore.push(entry))
            .count();
        assert_eq!(restore.op(), 80);
        assert_eq!(applied, 80 - PIPELINE_MAX);
        let mut other = chain(3);
        // Intact, but not the next link of the chain.
        other[2] = Entry::new(3, 0, 5, 3, 7, Arc::from(&b"body"[..]));
        assert!(other[2].is_intact());
        let mut restore = Restore::default();
        for entry in other {
            let _ = restore.push(entry);
        }
        assert_eq!(restore.op(), 2);
    }
}
