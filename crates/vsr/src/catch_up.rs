//! Fetching committed ops before a log can be taken. View changes and recovery carry only a
//! log's [`Suffix`] (the ops after its sender's committed prefix); a replica whose own log
//! does not reach that suffix's head (a new primary that lagged, a replica rebuilding a lost
//! disk) first fetches the committed ops between its own committed prefix and the head with
//! `RequestPrepares`, which any replica answers with ops it knows committed. Committed ops
//! are the same in every replica's log, so what was fetched stays valid across retargets.

use alloc::vec::Vec;

use crate::{
    Checksum, Entry, Message, Op, Outbox, REPAIR_PREPARES_MAX, Replica, ReplicaId, Status, Suffix,
};

/// A fetch in progress: the committed ops `start + 1 ..= target`, continuing this replica's
/// own committed prefix (which ends at `start`). A recovering replica moves what it fetched
/// into its log as it comes, and `start` with it.
#[derive(Debug, Clone)]
pub(crate) struct CatchUp {
    /// The replica asked.
    pub(crate) source: ReplicaId,
    pub(crate) start: Op,
    /// The checksum of this replica's entry at `start`.
    pub(crate) start_checksum: Checksum,
    pub(crate) target: Op,
    /// Ops `start + 1 ..`, a chain from `start_checksum`.
    pub(crate) fetched: Vec<Entry>,
    /// The last op of the latest request.
    pub(crate) requested: Op,
    pub(crate) requested_at: u64,
    /// When the last entry came in (or the fetch began).
    pub(crate) progressed_at: u64,
}

impl CatchUp {
    /// The last op fetched so far.
    pub(crate) fn end(&self) -> Op {
        let count = Op::try_from(self.fetched.len()).unwrap_or(Op::MAX);
        self.start.saturating_add(count)
    }

    fn last_checksum(&self) -> Checksum {
        self.fetched
            .last()
            .map_or(self.start_checksum, |entry| entry.checksum)
    }

    /// The checksum of the fetched (or starting) entry at `op`.
    fn checksum_at(&self, op: Op) -> Option<Checksum> {
        if op == self.start {
            return Some(self.start_checksum);
        }
        let index = usize::try_from(op.checked_sub(self.start)?.checked_sub(1)?).ok()?;
        self.fetched.get(index).map(|entry| entry.checksum)
    }
}

impl Replica {
    /// The log this replica holds once it takes `suffix`, as `(from, entries)`: its own ops
    /// up to `from - 1`, then `entries`. `Err` gives the suffix back when neither its log nor
    /// what it has fetched reaches the suffix's head.
    pub(crate) fn assemble(&self, suffix: Suffix) -> Result<(Op, Vec<Entry>), Suffix> {
        let head = suffix.commit;
        if head < self.base {
            // Our ops up to `base` are committed, so every later log holds them: the suffix
            // must agree at `base`, and only its entries after it are new.
            if suffix.checksum_at(self.base) != Some(self.base_checksum) {
                return Err(suffix);
            }
            let skip = usize::try_from(self.base - head).unwrap_or(usize::MAX);
            let entries = suffix.entries.get(skip..).unwrap_or_default().to_vec();
            return Ok((self.base.saturating_add(1), entries));
        }
        if self.checksum_at(head) == Some(suffix.head) {
            return Ok((head.saturating_add(1), suffix.entries));
        }
        if let Some(catch_up) = &self.catch_up
            && head >= catch_up.start
            && catch_up.checksum_at(head) == Some(suffix.head)
        {
            let count = usize::try_from(head - catch_up.start).unwrap_or(usize::MAX);
            let mut entries = catch_up.fetched.get(..count).unwrap_or_default().to_vec();
            entries.extend(suffix.entries);
            return Ok((catch_up.start.saturating_add(1), entries));
        }
        Err(suffix)
    }

    /// Fetches the committed ops up to `target` from `source`, keeping what an earlier fetch
    /// from the same starting point brought. Returns false when `target` is within this
    /// replica's own committed prefix: then no fetch can help (the suffix contradicts it).
    pub(crate) fn fetch(&mut self, source: ReplicaId, target: Op, out: &mut Outbox) -> bool {
        let start = self.committed_prefix();
        if target <= start {
            return false;
        }
        let (now, interval) = (self.now, self.config.retransmit_interval);
        match &mut self.catch_up {
            Some(catch_up) if catch_up.start == start => {
                if catch_up.source == source && catch_up.target == target {
                    if now.saturating_sub(catch_up.requested_at) < interval {
                        // The same fetch, asked for recently.
                        return true;
                    }
                } else {
                    catch_up.source = source;
                    catch_up.target = target;
                    catch_up.progressed_at = now;
                    if catch_up.end() >= target {
                        // What was fetched reaches the target yet does not match the suffix
                        // (the caller tried): fetch it again from this source.
                        catch_up.fetched.clear();
                    }
                }
            }
            _ => {
                self.catch_up = Some(CatchUp {
                    source,
                    start,
                    start_checksum: self.checksum_at(start).unwrap_or(self.base_checksum),
                    target,
                    fetched: Vec::new(),
                    requested: start,
                    requested_at: now,
                    progressed_at: now,
                });
            }
        }
        self.request_fetch(out);
        true
    }

    /// Asks the source for the next ops of the fetch.
    pub(crate) fn request_fetch(&mut self, out: &mut Outbox) {
        let (view, id, now) = (self.view, self.id, self.now);
        let Some(catch_up) = &mut self.catch_up else {
            return;
        };
        let op_min = catch_up.end().saturating_add(1);
        if op_min > catch_up.target {
            return;
        }
        let op_max = catch_up
            .target
            .min(catch_up.end().saturating_add(REPAIR_PREPARES_MAX));
        catch_up.requested = op_max;
        catch_up.requested_at = now;
        let message = Message::RequestPrepares {
            view,
            replica: id,
            op_min,
            op_max,
        };
        out.send(catch_up.source, message);
    }

    /// A prepare that may answer the fetch: whether it did (taken or dropped).
    pub(crate) fn on_fetched(
        &mut self,
        sender: ReplicaId,
        entry: &Entry,
        out: &mut Outbox,
    ) -> bool {
        let now = self.now;
        let Some(catch_up) = &mut self.catch_up else {
            return false;
        };
        if sender != catch_up.source {
            return false;
        }
        let next = catch_up.end().saturating_add(1);
        if entry.op != next
            || entry.op > catch_up.target
            || entry.parent != catch_up.last_checksum()
            || !entry.is_intact()
        {
            return true;
        }
        catch_up.fetched.push(entry.clone());
        catch_up.progressed_at = now;
        let (done, batch_done) = (
            catch_up.end() == catch_up.target,
            catch_up.end() >= catch_up.requested,
        );
        if self.status == Status::Recovering {
            self.settle_fetched(out);
        }
        if self.status == Status::ViewChange {
            // A fetch that makes progress keeps the view change alive.
            self.view_change_started_at = now;
        }
        if done {
            match self.status {
                Status::ViewChange if self.is_primary() => self.start_view(out),
                Status::ViewChange => {
                    if let Some(log) = self.start_view_target.take() {
                        self.take_start_view(self.view, log, out);
                    }
                }
                Status::Recovering => self.finish_recovery(out),
                Status::Normal => {}
            }
        } else if batch_done {
            self.request_fetch(out);
        }
        true
    }

    /// As a recovering replica: makes the ops fetched so far its own log, written and
    /// applied, so memory holds a batch of them at a time however long the cluster's log
    /// is. They are committed, so every later view's log starts with them, and this replica
    /// votes on nothing until its recovery is durable ([`Replica::replace_log`]): a crash
    /// before then recovers again from an empty log.
    fn settle_fetched(&mut self, out: &mut Outbox) {
        let op = self.op();
        let Some(catch_up) = &mut self.catch_up else {
            return;
        };
        assert_eq!(
            catch_up.start, op,
            "a recovering replica's fetch continues its log"
        );
        if catch_up.fetched.is_empty() {
            return;
        }
        let fetched = core::mem::take(&mut catch_up.fetched);
        catch_up.start = catch_up
            .start
            .saturating_add(Op::try_from(fetched.len()).unwrap_or(0));
        catch_up.start_checksum = fetched
            .last()
            .map_or(catch_up.start_checksum, |e| e.checksum);
        self.log.extend(fetched.iter().cloned());
        self.write(op.saturating_add(1), fetched, out);
        self.learn_commit(self.op(), out);
    }

    /// Resends the fetch's request once a retransmission interval has passed without an
    /// answer.
    pub(crate) fn retransmit_fetch(&mut self, out: &mut Outbox) {
        let due = self.catch_up.as_ref().is_some_and(|catch_up| {
            self.now.saturating_sub(catch_up.requested_at) >= self.config.retransmit_interval
        });
        if due {
            self.request_fetch(out);
        }
    }
}
