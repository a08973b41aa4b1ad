//! The replica: its state, normal operation (request, prepare, prepare-ok, commit) and the
//! timers. View changes are in `view_change.rs`, a lost disk's recovery in `recovery.rs`.

use alloc::collections::VecDeque;
use alloc::sync::Arc;
use alloc::vec::Vec;

use crate::catch_up::CatchUp;
use crate::entry::{ROOT_CHECKSUM, chain_length_from};
use crate::{
    Break, Checksum, ClientTable, Completion, Config, EVICT_SLACK, Effect, Entry, Message, Op,
    Outbox, PIPELINE_MAX, REPAIR_PREPARES_MAX, REPLICAS_MAX, REQUEST_QUEUE_MAX, ReplicaId,
    ReplicaSet, Suffix, View,
};

/// Where a replica is in the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Serving `view`: preparing as its primary, or following it as a backup.
    Normal,
    /// Between views: collecting `StartViewChange` and `DoViewChange` for `view`.
    ViewChange,
    /// Its disk was lost: it neither acknowledges nor votes until a quorum has told it the
    /// latest view and its primary has sent the log.
    Recovering,
}

/// What a replica finds on its disk at start.
#[derive(Debug, Clone)]
pub struct Durable {
    pub view: View,
    pub log_view: View,
    /// The entries read back, in op order, after `base` (a torn tail is cut off here).
    pub log: Vec<Entry>,
    /// The disk replaced a lost one and the recovery has not finished: the replica must be
    /// started with [`Replica::recover`], never [`Replica::open`].
    pub recovering: bool,
    /// Ops `1..=base` were read back, known committed and applied by the caller at start
    /// ([`crate::Restore`]); 0 when the whole log is in `log`.
    pub base: Op,
    /// The checksum of the entry at `base` ([`ROOT_CHECKSUM`] for 0).
    pub base_checksum: Checksum,
    /// The client table after the ops up to `base`.
    pub clients: ClientTable,
}

impl Default for Durable {
    fn default() -> Self {
        Self {
            view: 0,
            log_view: 0,
            log: Vec::new(),
            recovering: false,
            base: 0,
            base_checksum: ROOT_CHECKSUM,
            clients: ClientTable::default(),
        }
    }
}

/// One client request waiting for room in the pipeline.
#[derive(Debug, Clone)]
pub(crate) struct Queued {
    pub(crate) client: u128,
    pub(crate) request: u64,
    pub(crate) body: Arc<[u8]>,
}

/// A `DoViewChange` the new primary has received (its own included).
#[derive(Debug, Clone)]
pub(crate) struct Vote {
    pub(crate) replica: ReplicaId,
    pub(crate) log_view: View,
    pub(crate) log: Suffix,
}

/// A `RecoveryResponse` kept: its sender, its view and (from that view's primary) its log.
pub(crate) type RecoveryAnswer = (ReplicaId, View, Option<Suffix>);

/// One replica of a cluster: a pure state machine (see the crate docs).
#[derive(Debug)]
pub struct Replica {
    pub(crate) config: Config,
    pub(crate) id: ReplicaId,
    pub(crate) status: Status,
    pub(crate) view: View,
    /// The latest view in which this replica was normal; its log is that view's.
    pub(crate) log_view: View,
    /// The `log_view` on disk: it becomes `log_view` only once the log that view replaced is
    /// written (`replacement`), and only then does this replica acknowledge in it, so a
    /// log on disk is always the log of the view it is labelled with.
    pub(crate) log_view_durable: View,
    /// The write that installs the log of `log_view` on disk; when it completes, `log_view`
    /// is made durable.
    pub(crate) replacement: Option<u64>,
    /// This replica's disk was lost and its recovery is not yet durable: its disk must be
    /// opened with [`Replica::recover`] again after a crash.
    pub(crate) recovering_disk: bool,
    /// Writes issued and not yet completed, oldest first: id, and the op and checksum the log
    /// on disk ends with once it is done.
    pub(crate) writes: VecDeque<(u64, Op, Checksum)>,
    pub(crate) write_next: u64,
    /// Ops `1..=base` are applied and written: no longer in memory (read back from disk for
    /// a replica that asks for them).
    pub(crate) base: Op,
    /// The checksum of the entry at `base` ([`ROOT_CHECKSUM`] for 0).
    pub(crate) base_checksum: Checksum,
    /// Entries of ops `base + 1 ..= op`.
    pub(crate) log: Vec<Entry>,
    /// Committed ops being fetched before a log can be taken: as a new primary whose log
    /// does not reach the chosen log's suffix, or as a recovering replica.
    pub(crate) catch_up: Option<CatchUp>,
    /// A recovering replica's chosen answer: the latest view and its primary's log.
    pub(crate) recovery_target: Option<(View, Suffix)>,
    /// A backup's `StartView` log for `view`, taken once the fetch it waits on is done.
    pub(crate) start_view_target: Option<Suffix>,
    /// As a backup repairing its log: the last op of the latest `RequestPrepares`, when it
    /// was sent, and the highest op known to exist beyond the log.
    pub(crate) repair_requested: Op,
    pub(crate) repair_requested_at: u64,
    pub(crate) repair_wanted: Op,
    /// The highest op known committed (may run ahead of `log` on a lagging backup).
    pub(crate) commit: Op,
    /// The highest op handed to the state machine.
    pub(crate) applied: Op,
    /// The highest op whose entry, and every one before it, is written.
    pub(crate) durable: Op,
    pub(crate) clients: ClientTable,
    /// As primary: the highest op each replica has acknowledged in this view.
    pub(crate) acked: [Op; REPLICAS_MAX],
    pub(crate) queue: VecDeque<Queued>,
    pub(crate) now: u64,
    pub(crate) heard_primary_at: u64,
    pub(crate) commit_sent_at: u64,
    pub(crate) retransmitted_at: u64,
    pub(crate) view_change_started_at: u64,
    /// `StartViewChange` votes for `view` (this replica's own included).
    pub(crate) svc_from: ReplicaSet,
    pub(crate) dvc_sent: bool,
    pub(crate) votes: Vec<Vote>,
    pub(crate) nonce: u64,
    pub(crate) recovery_answers: Vec<RecoveryAnswer>,
    /// Messages dropped as invalid (for the caller's metrics).
    pub(crate) invalid: u64,
}

impl Replica {
    /// A replica of a new cluster: view 0, an empty log.
    pub fn format(config: Config, id: ReplicaId) -> Self {
        let mut replica = Self::blank(config, id, 0);
        replica.status = Status::Normal;
        replica
    }

    /// A replica restarted with its disk. The primary of its durable view starts a view
    /// change to the next view: as a normal primary it may have lost prepares it had sent
    /// but not written, and between views it may have sent a `StartView` it no longer
    /// remembers, so building that view again could give it a second log. A backup resumes
    /// its view; a backup caught between views resumes its view change.
    pub fn open(
        config: Config,
        id: ReplicaId,
        durable: Durable,
        now: u64,
        out: &mut Outbox,
    ) -> Self {
        assert!(
            durable.log_view <= durable.view,
            "log_view above view on disk"
        );
        assert!(
            !durable.recovering,
            "a disk still being recovered is opened with `recover`"
        );
        let mut replica = Self::blank(config, id, now);
        replica.adopt_durable(durable);
        if replica.is_primary() {
            replica.status = Status::ViewChange;
            replica.start_view_change(replica.view.saturating_add(1), out);
        } else if replica.log_view < replica.view {
            replica.status = Status::ViewChange;
            replica.view_change_started_at = now;
            replica.svc_from = Self::bit(id);
        } else {
            replica.status = Status::Normal;
        }
        replica.invariants();
        replica
    }

    pub(crate) fn blank(config: Config, id: ReplicaId, now: u64) -> Self {
        assert!(id < config.replica_count, "replica id outside the cluster");
        Self {
            config,
            id,
            status: Status::Recovering,
            view: 0,
            log_view: 0,
            log_view_durable: 0,
            replacement: None,
            recovering_disk: false,
            writes: VecDeque::new(),
            write_next: 1,
            base: 0,
            base_checksum: ROOT_CHECKSUM,
            log: Vec::new(),
            catch_up: None,
            recovery_target: None,
            start_view_target: None,
            repair_requested: 0,
            repair_requested_at: 0,
            repair_wanted: 0,
            commit: 0,
            applied: 0,
            durable: 0,
            clients: ClientTable::default(),
            acked: [0; REPLICAS_MAX],
            queue: VecDeque::new(),
            now,
            heard_primary_at: now,
            commit_sent_at: now,
            retransmitted_at: now,
            view_change_started_at: now,
            svc_from: 0,
            dvc_sent: false,
            votes: Vec::new(),
            nonce: 0,
            recovery_answers: Vec::new(),
            invalid: 0,
        }
    }

    fn adopt_durable(&mut self, durable: Durable) {
        let mut log = durable.log;
        // Keep the longest intact chain: a torn last entry was never acknowledged.
        let first = durable.base.saturating_add(1);
        log.truncate(chain_length_from(&log, first, durable.base_checksum));
        self.view = durable.view;
        self.log_view = durable.log_view;
        self.log_view_durable = durable.log_view;
        // What the caller applied at start is committed, applied and written.
        self.base = durable.base;
        self.base_checksum = durable.base_checksum;
        self.commit = durable.base;
        self.applied = durable.base;
        self.clients = durable.clients;
        self.log = log;
        self.durable = self.op();
    }

    pub fn id(&self) -> ReplicaId {
        self.id
    }

    /// The primary of `view` in this replica's cluster.
    pub fn primary_of(&self, view: View) -> ReplicaId {
        self.config.primary(view)
    }

    pub fn status(&self) -> Status {
        self.status
    }

    pub fn view(&self) -> View {
        self.view
    }

    pub fn log_view(&self) -> View {
        self.log_view
    }

    /// The highest op in the log.
    pub fn op(&self) -> Op {
        let count = Op::try_from(self.log.len()).unwrap_or(Op::MAX);
        self.base.saturating_add(count)
    }

    pub fn commit(&self) -> Op {
        self.commit
    }

    pub fn applied(&self) -> Op {
        self.applied
    }

    /// On the primary: the highest op `replica` has written and acknowledged in this view
    /// (0 before its first acknowledgement, and on a backup).
    pub fn acked(&self, replica: u8) -> Op {
        self.acked.get(usize::from(replica)).copied().unwrap_or(0)
    }

    /// The entries in memory: ops `log_base() + 1 ..= op()`.
    pub fn log(&self) -> &[Entry] {
        &self.log
    }

    /// The ops up to here are applied, written, and dropped from memory.
    pub fn log_base(&self) -> Op {
        self.base
    }

    pub fn clients(&self) -> &ClientTable {
        &self.clients
    }

    /// Messages dropped as invalid so far.
    pub fn invalid(&self) -> u64 {
        self.invalid
    }

    pub fn is_primary(&self) -> bool {
        self.config.primary(self.view) == self.id
    }

    pub(crate) fn bit(replica: ReplicaId) -> ReplicaSet {
        1 << replica
    }

    /// The entry at `op`, if it is in memory.
    pub(crate) fn entry(&self, op: Op) -> Option<&Entry> {
        let index = usize::try_from(op.checked_sub(self.base)?.checked_sub(1)?).ok()?;
        self.log.get(index)
    }

    /// The checksum of the entry at `op`, if this replica still knows it (ops from `base`).
    pub(crate) fn checksum_at(&self, op: Op) -> Option<Checksum> {
        if op == self.base {
            Some(self.base_checksum)
        } else {
            self.entry(op).map(|entry| entry.checksum)
        }
    }

    pub(crate) fn last_checksum(&self) -> Checksum {
        self.log
            .last()
            .map_or(self.base_checksum, |entry| entry.checksum)
    }

    /// Every other replica.
    pub(crate) fn others(&self) -> impl Iterator<Item = ReplicaId> + use<> {
        let id = self.id;
        (0..self.config.replica_count).filter(move |&each| each != id)
    }

    pub(crate) fn broadcast(&self, message: &Message, out: &mut Outbox) {
        for to in self.others() {
            out.send(to, message.clone());
        }
    }

    /// One message in, its effects out.
    pub fn on_message(&mut self, now: u64, message: &Message, out: &mut Outbox) {
        self.now = self.now.max(now);
        if let Some(sender) = message.sender()
            && (sender >= self.config.replica_count || sender == self.id)
        {
            self.invalid = self.invalid.saturating_add(1);
            return;
        }
        match message {
            Message::Request {
                client,
                request,
                body,
            } => {
                self.on_request(*client, *request, body, out);
            }
            Message::Prepare {
                view,
                replica,
                commit,
                entry,
            } => {
                self.on_prepare(*view, *replica, *commit, entry, out);
            }
            Message::PrepareOk { view, replica, op } => {
                self.on_prepare_ok(*view, *replica, *op, out);
            }
            Message::Commit { view, commit, .. } => self.on_commit(*view, *commit, out),
            Message::RequestPrepares {
                view,
                replica,
                op_min,
                op_max,
            } => {
                self.on_request_prepares(*view, *replica, *op_min, *op_max, out);
            }
            _ => self.on_view_message(message, out),
        }
        self.evict();
        self.invariants();
    }

    /// An I/O completion in, its effects out.
    pub fn on_io_done(&mut self, now: u64, completion: Completion, out: &mut Outbox) {
        self.now = self.now.max(now);
        let Completion::Written { id } = completion;
        let Some(&(first, op, checksum)) = self.writes.front() else {
            self.invalid = self.invalid.saturating_add(1);
            return;
        };
        assert_eq!(first, id, "writes complete in the order they were issued");
        self.writes.pop_front();
        let matches = self.checksum_at(op) == Some(checksum);
        if self.replacement == Some(id) {
            assert!(matches, "nothing replaces a log but a later replacement");
            self.replacement = None;
            self.log_view_durable = self.log_view;
            self.recovering_disk = false;
            self.persist(out);
        }
        // A write whose entries a view change has since replaced proves nothing.
        if matches && op >= self.durable {
            self.durable = op;
            if self.status == Status::Normal && self.log_view_durable == self.view {
                if self.is_primary() {
                    self.acked[usize::from(self.id)] = self.durable;
                    self.try_commit(out);
                } else {
                    self.acknowledge(out);
                }
            }
        }
        self.evict();
        self.invariants();
    }

    /// Time passes: heartbeats, retransmissions and the timeouts that start view changes.
    pub fn tick(&mut self, now: u64, out: &mut Outbox) {
        self.now = self.now.max(now);
        match self.status {
            Status::Normal if self.is_primary() => self.tick_primary(out),
            Status::Normal => self.tick_backup(out),
            Status::ViewChange => self.tick_view_change(out),
            Status::Recovering => self.tick_recovering(out),
        }
        self.evict();
        self.invariants();
    }

    fn tick_primary(&mut self, out: &mut Outbox) {
        if self.now.saturating_sub(self.commit_sent_at) >= self.config.commit_interval {
            self.commit_sent_at = self.now;
            let message = Message::Commit {
                view: self.view,
                replica: self.id,
                commit: self.commit,
            };
            self.broadcast(&message, out);
        }
        if self.now.saturating_sub(self.retransmitted_at) >= self.config.retransmit_interval {
            self.retransmitted_at = self.now;
            // Only what is in memory is resent unasked: a backup that lacks older ops asks for
            // them (a gap, or a commit beyond its log), so a backup that is down costs no disk
            // reads.
            for to in self.others() {
                let acked = self.acked[usize::from(to)].max(self.base);
                if acked < self.op() {
                    let last = self.op().min(acked.saturating_add(REPAIR_PREPARES_MAX));
                    self.send_prepares(to, acked.saturating_add(1), last, out);
                }
            }
        }
    }

    fn tick_backup(&mut self, out: &mut Outbox) {
        let timeout = self.config.heartbeat_timeout;
        let skew = (timeout / 4).saturating_mul(u64::from(self.id));
        if self.now.saturating_sub(self.heard_primary_at) >= timeout.saturating_add(skew) {
            self.start_view_change(self.view.saturating_add(1), out);
        }
    }

    /// Sends replica `to` the prepares `first..=last`: those no longer in memory read back
    /// from disk by the caller, the others from the log.
    pub(crate) fn send_prepares(&self, to: ReplicaId, first: Op, last: Op, out: &mut Outbox) {
        let first = first.max(1);
        if first > last {
            return;
        }
        if first <= self.base {
            out.push(Effect::SendPrepares {
                to,
                view: self.view,
                commit: self.commit,
                op_min: first,
                op_max: last.min(self.base),
            });
        }
        for op in first.max(self.base.saturating_add(1))..=last {
            if let Some(entry) = self.entry(op) {
                let message = Message::Prepare {
                    view: self.view,
                    replica: self.id,
                    commit: self.commit,
                    entry: entry.clone(),
                };
                out.send(to, message);
            }
        }
    }

    fn on_request(&mut self, client: u128, request: u64, body: &Arc<[u8]>, out: &mut Outbox) {
        if self.status != Status::Normal || !self.is_primary() {
            return;
        }
        if let Some((latest, op)) = self.clients.latest(client) {
            if request == latest {
                out.push(Effect::Reply {
                    client,
                    request,
                    op,
                });
            }
            if request <= latest {
                return;
            }
        }
        let mut uncommitted = self
            .log
            .iter()
            .rev()
            .take_while(|entry| entry.op > self.commit);
        let in_log = uncommitted.any(|e| e.client == client && e.request == request);
        let queued = self
            .queue
            .iter()
            .any(|q| q.client == client && q.request == request);
        if in_log || queued {
            return;
        }
        if self.queue.len() < REQUEST_QUEUE_MAX {
            self.queue.push_back(Queued {
                client,
                request,
                body: body.clone(),
            });
        }
        self.prepare_queued(out);
    }

    /// Prepares queued requests while the pipeline has room.
    pub(crate) fn prepare_queued(&mut self, out: &mut Outbox) {
        while self.uncommitted() < PIPELINE_MAX as u64 {
            let Some(queued) = self.queue.pop_front() else {
                break;
            };
            let op = self.op().saturating_add(1);
            let parent = self.last_checksum();
            let entry = Entry::new(
                op,
                self.view,
                queued.client,
                queued.request,
                parent,
                queued.body,
            );
            self.log.push(entry.clone());
            self.write(op, alloc::vec![entry.clone()], out);
            let message = Message::Prepare {
                view: self.view,
                replica: self.id,
                commit: self.commit,
                entry,
            };
            self.broadcast(&message, out);
        }
    }

    fn uncommitted(&self) -> u64 {
        self.op().saturating_sub(self.commit)
    }

    fn on_prepare(
        &mut self,
        view: View,
        sender: ReplicaId,
        commit: Op,
        entry: &Entry,
        out: &mut Outbox,
    ) {
        if self.status != Status::Normal && self.on_fetched(sender, entry, out) {
            return;
        }
        // Only a view's primary prepares; other replicas send prepares only to a fetch.
        if sender != self.config.primary(view) || !self.follows(view, out) {
            return;
        }
        if entry.op > self.op().saturating_add(1) {
            self.request_prepares(entry.op.saturating_sub(1), out);
        } else if entry.op == self.op().saturating_add(1) {
            if entry.parent == self.last_checksum() && entry.is_intact() && entry.view <= view {
                self.log.push(entry.clone());
                self.write(entry.op, alloc::vec![entry.clone()], out);
                if entry.op == self.repair_requested && self.repair_wanted > entry.op {
                    self.request_prepares(self.repair_wanted, out);
                }
            } else {
                // The primary's log does not continue ours: ours is not this view's.
                self.invalid = self.invalid.saturating_add(1);
                let primary = self.config.primary(view);
                out.send(
                    primary,
                    Message::RequestStartView {
                        view,
                        replica: self.id,
                    },
                );
            }
        } else if entry.op <= self.durable {
            self.acknowledge(out);
        }
        self.learn_commit(commit, out);
    }

    fn on_commit(&mut self, view: View, commit: Op, out: &mut Outbox) {
        if !self.follows(view, out) {
            return;
        }
        if commit > self.op() {
            self.request_prepares(commit, out);
        }
        self.learn_commit(commit, out);
    }

    /// Whether a message of `view` from its primary is for this backup to follow now; asks
    /// for the view's `StartView` if this replica has missed it.
    fn follows(&mut self, view: View, out: &mut Outbox) -> bool {
        if self.status == Status::Recovering || view < self.view {
            return false;
        }
        let primary = self.config.primary(view);
        if primary == self.id {
            self.invalid = self.invalid.saturating_add(1);
            return false;
        }
        if view == self.view && self.status == Status::ViewChange && self.catch_up.is_some() {
            // Fetching what this view's log needs: its StartView is on hand.
            return false;
        }
        if view > self.view || self.status == Status::ViewChange {
            out.send(
                primary,
                Message::RequestStartView {
                    view,
                    replica: self.id,
                },
            );
            return false;
        }
        self.heard_primary_at = self.now;
        true
    }

    /// Asks the primary for the ops after this replica's log, up to `last`: one batch at a
    /// time (the next when the last op of this one arrives, or a retransmission interval
    /// later), so a backup far behind does not ask for the same ops again with every
    /// prepare it sees (each such ask may cost the primary a disk read).
    pub(crate) fn request_prepares(&mut self, last: Op, out: &mut Outbox) {
        self.repair_wanted = self.repair_wanted.max(last);
        let op_min = self.op().saturating_add(1);
        let in_flight = self.repair_requested >= op_min
            && self.now.saturating_sub(self.repair_requested_at) < self.config.retransmit_interval;
        let op_max = last.min(self.op().saturating_add(REPAIR_PREPARES_MAX));
        if op_min <= op_max && !in_flight {
            self.repair_requested = op_max;
            self.repair_requested_at = self.now;
            let primary = self.config.primary(self.view);
            let message = Message::RequestPrepares {
                view: self.view,
                replica: self.id,
                op_min,
                op_max,
            };
            out.send(primary, message);
        }
    }

    pub(crate) fn acknowledge(&self, out: &mut Outbox) {
        if self.log_view_durable != self.view {
            return;
        }
        let primary = self.config.primary(self.view);
        out.send(
            primary,
            Message::PrepareOk {
                view: self.view,
                replica: self.id,
                op: self.durable,
            },
        );
    }

    fn on_request_prepares(
        &mut self,
        view: View,
        to: ReplicaId,
        op_min: Op,
        op_max: Op,
        out: &mut Outbox,
    ) {
        if self.status == Status::Recovering {
            return;
        }
        let mut last = op_max.min(op_min.saturating_add(REPAIR_PREPARES_MAX - 1));
        // A view's primary serves its whole log; any other replica (to a new primary or a
        // recovering replica fetching) only the ops it knows committed, valid in every view.
        if self.status != Status::Normal || !self.is_primary() || view != self.view {
            last = last.min(self.committed_prefix());
        }
        self.send_prepares(to, op_min, last, out);
    }

    fn on_prepare_ok(&mut self, view: View, replica: ReplicaId, op: Op, out: &mut Outbox) {
        if self.status != Status::Normal || !self.is_primary() || view != self.view {
            return;
        }
        if op > self.op() {
            self.invalid = self.invalid.saturating_add(1);
            return;
        }
        let acked = &mut self.acked[usize::from(replica)];
        *acked = (*acked).max(op);
        self.try_commit(out);
    }

    /// Commits the highest op that a quorum has written in this view.
    pub(crate) fn try_commit(&mut self, out: &mut Outbox) {
        let quorum = if self.config.is_broken(Break::CommitWithoutQuorum) {
            1
        } else {
            self.config.quorum()
        };
        let count = usize::from(self.config.replica_count);
        // A copy on the stack: this runs on every PrepareOk.
        let mut acked = self.acked;
        let acked = &mut acked[..count];
        acked.sort_unstable_by(|a, b| b.cmp(a));
        // The quorum-th highest acknowledgement: a quorum has written everything up to it.
        let written = acked.get(quorum - 1).copied().unwrap_or(0);
        if written > self.commit {
            self.commit = written;
            self.apply_commits(out);
            self.prepare_queued(out);
        }
    }

    pub(crate) fn learn_commit(&mut self, commit: Op, out: &mut Outbox) {
        self.commit = self.commit.max(commit);
        self.apply_commits(out);
    }

    /// Hands every committed entry this replica holds to the state machine, in order: as a
    /// normal replica, or as a recovering one taking the committed ops it fetched.
    pub(crate) fn apply_commits(&mut self, out: &mut Outbox) {
        assert_ne!(
            self.status,
            Status::ViewChange,
            "a replica between views applies nothing"
        );
        let last = self.commit.min(self.op());
        while self.applied < last {
            let op = self.applied.saturating_add(1);
            let Some(entry) = self.entry(op).cloned() else {
                break;
            };
            self.applied = op;
            self.clients.commit(entry.client, entry.request, op);
            if self.status == Status::Normal && self.is_primary() {
                out.push(Effect::Reply {
                    client: entry.client,
                    request: entry.request,
                    op,
                });
            }
            out.push(Effect::Commit { entry });
        }
    }

    /// Replaces the log by the log of `self.view`: this replica's ops up to `from - 1`, then
    /// `entries`; writing only where it differs from ours; `log_view` becomes durable once
    /// that write completes (until then the disk holds the log of the view it is labelled
    /// with, and this replica acknowledges nothing).
    pub(crate) fn replace_log(&mut self, from: Op, entries: Vec<Entry>, out: &mut Outbox) {
        let floor = from.saturating_sub(1);
        assert!(
            floor >= self.base && floor <= self.op(),
            "a new log continues ours from an op we hold"
        );
        let own = usize::try_from(floor - self.base).unwrap_or(usize::MAX);
        let same = self.log[own..]
            .iter()
            .zip(entries.iter())
            .take_while(|(a, b)| a.checksum == b.checksum)
            .count();
        let kept_op = floor.saturating_add(Op::try_from(same).unwrap_or(Op::MAX));
        if self.config.is_broken(Break::ViewChangeKeepsOwnLog) {
            // Broken: let the state machine see the replaced op again, for the checker.
            self.applied = self.applied.min(kept_op);
        }
        assert!(
            self.applied <= kept_op,
            "a view change replaced a committed op"
        );
        let unchanged = same == self.log.len() - own && same == entries.len();
        self.repair_requested = 0;
        self.durable = self.durable.min(kept_op);
        self.log.truncate(own + same);
        let mut entries = entries;
        let added = entries.split_off(same);
        self.log.extend(added.iter().cloned());
        self.log_view = self.view;
        // A recovering replica's view becomes durable only with the write below, after every
        // write of the ops it fetched: until then it acknowledges nothing.
        if (unchanged && self.replacement.is_none() && !self.recovering_disk)
            || self.config.is_broken(Break::LogViewBeforeLog)
        {
            self.log_view_durable = self.log_view;
        }
        self.persist(out);
        // A recovering replica's log may already be whole (what it fetched is written as it
        // came in): the write, even of nothing, completes after those, and only then is its
        // recovery durable.
        if !unchanged || self.replacement.is_some() || self.recovering_disk {
            let id = self.write(kept_op.saturating_add(1), added, out);
            self.replacement = Some(id);
        }
    }

    /// Makes the view durable before anything that depends on it.
    pub(crate) fn persist(&self, out: &mut Outbox) {
        out.push(Effect::Persist {
            view: self.view,
            log_view: self.log_view_durable,
            recovering: self.recovering_disk,
        });
    }

    /// Issues a write: the disk's log is cut after `op_min - 1`, then `entries` appended.
    pub(crate) fn write(&mut self, op_min: Op, entries: Vec<Entry>, out: &mut Outbox) -> u64 {
        let id = self.write_next;
        self.write_next = self.write_next.saturating_add(1);
        let last_op = op_min
            .saturating_sub(1)
            .saturating_add(Op::try_from(entries.len()).unwrap_or(0));
        assert!(
            last_op <= self.op() && last_op >= self.base,
            "a write of entries the log does not hold"
        );
        let checksum = self.checksum_at(last_op).unwrap_or(ROOT_CHECKSUM);
        self.writes.push_back((id, last_op, checksum));
        out.push(Effect::Write {
            id,
            op_min,
            entries,
        });
        id
    }

    /// Checks the replica's invariants; runs after every step.
    pub fn invariants(&self) {
        assert!(self.log_view <= self.view);
        assert!(self.log_view_durable <= self.log_view);
        assert!(self.durable <= self.op());
        assert!(self.applied <= self.commit);
        assert!(
            self.base <= self.applied && self.base <= self.durable,
            "only applied, written entries leave memory"
        );
        assert!(
            self.applied.min(self.durable) <= self.base.saturating_add(EVICT_SLACK),
            "memory holds only the log not yet applied and written, and the slack"
        );
        if let Some(first) = self.log.first() {
            assert_eq!(
                first.op,
                self.base.saturating_add(1),
                "the log starts after base"
            );
        }
        if self.status == Status::Normal {
            assert_eq!(
                self.log_view, self.view,
                "a normal replica's log is its view's"
            );
            assert!(self.applied <= self.op());
        }
        if self.status == Status::Normal && self.is_primary() {
            assert!(
                self.commit <= self.op(),
                "a primary commits only what it holds"
            );
            assert!(self.queue.len() <= REQUEST_QUEUE_MAX);
        }
        if self.status == Status::ViewChange {
            assert_ne!(
                self.svc_from & Self::bit(self.id),
                0,
                "a replica votes for its own view change"
            );
        }
        if let Some(last) = self.log.last() {
            assert_eq!(last.op, self.op(), "the log holds ops 1..=op");
        }
    }
}
