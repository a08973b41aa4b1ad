//! The partition task: one compio task per partition owns its [`PartitionLog`], its
//! [`ConsumerOffsets`] and its [`ProducerTable`], and serves the jobs [`PartitionHandle`]s
//! send it over a bounded crossfire channel, one at a time in channel order.
//!
//! Group commit (`FORMAT.md` §9): a round waits for one job, then keeps taking the appends
//! already queued (up to [`GROUP_MAX`]), appending each as it is taken; the round ends when
//! the channel runs dry, the limit is hit or another kind of job comes next. Then one
//! [`PartitionLog::sync`] covers every append of the round that needs it
//! (`Durability::Persisted`), and only then are the appenders answered, so *n* appenders
//! waiting together share one fdatasync. Reads, offset writes and purges wait for the round
//! before them, so they see its appends; only purges, segment deletions and the close also
//! wait for `Replicated`'s threshold sync in flight (`log::background_sync`).
//!
//! Invariants:
//! - replies to a round's appends go out only after the round's sync (when one was needed)
//!   returned, so a `Persisted` acknowledgement always follows an fdatasync that covers it;
//! - after a failed sync the task is poisoned: what the kernel held may be gone while the
//!   page cache says clean (a retried fdatasync would succeed and lie), so every later append
//!   fails and the log is never marked cleanly closed; only a purge, which starts a fresh
//!   log, lifts it. The log poisons itself the same way after any failed sync of its own (a
//!   roll, a reservation, a `Replicated` threshold sync), and a log that recovery found
//!   damaged opens quarantined; both refuse appends with an [`AppendError`] and show in
//!   [`PartitionStats::quarantined`];
//! - jobs run in channel order, one at a time, so offsets are dense and follow that order,
//!   and the producer check of a batch sees every batch sent before it;
//! - a close answers the jobs queued behind it with [`PartitionError::Closed`] (by dropping
//!   their reply senders) and closes the channel, so later sends fail the same way.

use std::future::{Future, poll_fn};
use std::io;
use std::path::{Path, PathBuf};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;

use crossfire::oneshot::{TxOneshot, oneshot};

pub use crate::append_buffer::AppendBuffer;
use crossfire::{AsyncRx, MAsyncTx, mpsc};
use proto::batch::Producer;

use crate::log::{
    AppendError, Durability, LogConfig, OpenError, PartitionLog, ReadError, ReadStart, Records,
    SegmentInfo, SyncStart,
};
use crate::offsets::{ConsumerOffsets, OffsetError, OffsetOwner};
use crate::producers::{Admission, ProducerRefusal, ProducerTable};
use crate::stats_cell::StatsCell;
use crate::storage::Storage;

/// Jobs that may wait in a partition's channel; a full channel makes senders wait
/// (backpressure) instead of growing memory.
pub const QUEUE_MAX: usize = 128;

/// Appends one round may take before it syncs and replies, so the first appender of a round
/// waits for a bounded amount of work.
pub const GROUP_MAX: usize = 64;

const _: () = assert!(GROUP_MAX >= 1 && GROUP_MAX <= QUEUE_MAX);

/// Index entries that wait in memory before a threshold sync writes them to their files
/// (the seal and the close write the rest): few enough writes per record, files close
/// enough to the log.
const INDEX_WRITE_MIN: usize = 64;

/// What the task reports about its syncs, for metrics. Called on the task's thread; the
/// times come from the observer's own clock (the task reads none).
pub trait IoObserver: Send + Sync {
    /// µs by the observer's clock.
    fn now_us(&self) -> u64;
    /// A round's sync (group commit) covering `appends` appends took `elapsed_us`.
    fn group_synced(&self, appends: usize, elapsed_us: u64);
    /// A `Replicated` threshold sync, beside the appends, took `elapsed_us`.
    fn threshold_synced(&self, elapsed_us: u64);
}

/// Reports nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoObserver;

impl IoObserver for NoObserver {
    fn now_us(&self) -> u64 {
        0
    }
    fn group_synced(&self, _appends: usize, _elapsed_us: u64) {}
    fn threshold_synced(&self, _elapsed_us: u64) {}
}

/// A partition job failed.
#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    #[error("open partition")]
    Open(#[source] OpenError),
    #[error("load consumer offsets")]
    LoadOffsets(#[source] OffsetError),
    /// The log refused or failed this append; the task goes on.
    #[error("append")]
    Append(#[source] AppendError),
    /// The round's fdatasync failed; this append may not be durable and the task is now
    /// poisoned.
    #[error("group sync")]
    Sync(#[source] Arc<AppendError>),
    /// An earlier group sync failed, so the task refuses appends and a clean close.
    #[error("partition poisoned by an earlier failed sync")]
    Poisoned(#[source] Arc<AppendError>),
    #[error("read")]
    Read(#[source] ReadError),
    #[error("consumer offset")]
    Offset(#[source] OffsetError),
    #[error("remove {path}")]
    Remove {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The partition's directory could not be made its own (the shard's check that it was
    /// not left by an earlier partition of the same ids).
    #[error("claim the partition's directory")]
    Claim(#[source] io::Error),
    #[error("close")]
    Close(#[source] AppendError),
    #[error("delete segments")]
    DeleteSegments(#[source] AppendError),
    /// The idempotent-producer check refused the batch (§5.5); nothing was appended.
    #[error("producer batch refused with {0:?}")]
    Producer(ProducerRefusal),
    /// The partition keeps offsets for [`crate::offsets::OFFSETS_MAX`] owners already.
    #[error("too many stored consumer offsets")]
    OffsetsLimit,
    /// The task is gone (closed or deleted) or lost its log in a failed purge.
    #[error("the partition is closed")]
    Closed,
}

/// Counters kept by the task after every change, readable without waiting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PartitionStats {
    pub size_bytes: u64,
    pub messages_count: u64,
    /// Offset of the last message; 0 when empty (the protocol's `current_offset`).
    pub current_offset: u64,
    /// The offset the next message gets.
    pub next_offset: u64,
    /// The first offset still stored (`next_offset` when empty): retention moves it.
    pub first_offset: u64,
    pub segments_count: u32,
    /// The log refuses appends: recovery found damage, or an fdatasync failed.
    pub quarantined: bool,
}

impl PartitionStats {
    fn of<S: Storage>(log: &PartitionLog<S>) -> Self {
        let next_offset = log.next_offset();
        Self {
            size_bytes: log.size_bytes(),
            messages_count: log.messages_count(),
            current_offset: next_offset.saturating_sub(1),
            next_offset,
            first_offset: log.first_offset(),
            segments_count: u32::try_from(log.segments().count()).unwrap_or(u32::MAX),
            quarantined: log.refuses_appends(),
        }
    }

    /// Whether the partition holds no message at all.
    pub fn is_empty(&self) -> bool {
        self.next_offset == 0
    }
}

/// Where an append landed, or the confirmation of a deduplicated retransmission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendOutcome {
    pub base_offset: u64,
    pub messages_count: u32,
    /// An exact retransmission: nothing was appended.
    pub duplicate: bool,
}

/// How a partition is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionSpec {
    pub directory: PathBuf,
    pub log: LogConfig,
    pub offsets_durability: Durability,
}

/// An append's outcome with its buffer, handed back for reuse.
pub type AppendReply = (Result<AppendOutcome, PartitionError>, AppendBuffer);

type Reply<T> = TxOneshot<Result<T, PartitionError>>;

enum Job {
    Append {
        batch: AppendBuffer,
        now_us: u64,
        producer: Option<(Producer, u32)>,
        reply: TxOneshot<AppendReply>,
    },
    Read {
        start: ReadStart,
        count: u32,
        max_bytes: u64,
        reply: Reply<Records>,
    },
    StoreOffset {
        owner: OffsetOwner,
        offset: u64,
        reply: Reply<()>,
    },
    DeleteOffset {
        owner: OffsetOwner,
        reply: Reply<bool>,
    },
    Purge {
        reply: Reply<()>,
    },
    DeleteSegments {
        count: usize,
        reply: Reply<usize>,
    },
    Segments {
        reply: Reply<Vec<SegmentInfo>>,
    },
    DeleteSegment {
        start_offset: u64,
        reply: Reply<bool>,
    },
    /// The append time of the record holding each offset (consumer lag in seconds).
    Timestamps {
        offsets: Vec<u64>,
        reply: Reply<Vec<Option<u64>>>,
    },
    Close {
        remove: bool,
        reply: Reply<()>,
    },
    /// The time now, from the owner's clock: starts a threshold sync that waited for its
    /// interval (`LogConfig::sync_interval_us`) when no append came to start it.
    Tick {
        now_us: u64,
    },
}

impl Job {
    /// Whether the job removes or replaces log files, so must not run beside a threshold
    /// sync: a purge's fresh log would be credited with what the old one's sync covered,
    /// and a deletion could remove the segment a sync flushes (one a roll sealed meanwhile).
    fn changes_files(&self) -> bool {
        match self {
            Self::Purge { .. }
            | Self::DeleteSegments { .. }
            | Self::DeleteSegment { .. }
            | Self::Close { .. } => true,
            Self::Append { .. }
            | Self::Read { .. }
            | Self::StoreOffset { .. }
            | Self::DeleteOffset { .. }
            | Self::Segments { .. }
            | Self::Timestamps { .. }
            | Self::Tick { .. } => false,
        }
    }
}

/// What the task publishes for handles, on any shard, to read without a job: neither the
/// task nor a reader ever waits for the other.
#[derive(Default)]
struct Shared {
    stats: StatsCell,
    offsets: papaya::HashMap<OffsetOwner, u64>,
    /// `Replicated`'s thresholds want a sync that has not started (its interval was not
    /// over): the owner's ticks are needed only while this is set.
    sync_waiting: AtomicBool,
    /// The task has stopped taking jobs ([`Task::refuse_queued_jobs`]). Jobs left in its
    /// channel are not dropped with the task's receiver: the channel lives on while any
    /// handle does, so a job queued behind a close (a deferred poll's read as its topic
    /// was deleted) was never answered, and its caller, holding a handle, waited forever.
    closed: AtomicBool,
}

/// A cloneable handle to one partition's task, usable from any thread: the jobs travel over
/// the task's bounded crossfire channel, so a shard reaches a partition another shard owns
/// the same way it reaches its own. When every handle is dropped without [`Self::close`],
/// the task still closes the log, but nobody learns the result.
#[derive(Clone)]
pub struct PartitionHandle {
    sender: MAsyncTx<mpsc::Array<Job>>,
    shared: Arc<Shared>,
}

// Shards hand handles and job results to each other across threads.
const _: () = {
    const fn cross_thread<T: Send + Sync>() {}
    cross_thread::<PartitionHandle>();
    cross_thread::<Result<Records, PartitionError>>();
    cross_thread::<AppendReply>();
};

impl std::fmt::Debug for PartitionHandle {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PartitionHandle")
            .field("stats", &self.shared.stats.get())
            .finish_non_exhaustive()
    }
}

struct Task<S: Storage> {
    storage: S,
    spec: PartitionSpec,
    receiver: AsyncRx<mpsc::Array<Job>>,
    /// `None` only after a purge failed to reopen the log, or after the close.
    log: Option<PartitionLog<S>>,
    offsets: ConsumerOffsets<S>,
    producers: ProducerTable,
    /// Set by the first failed group sync; see the module invariants.
    poison: Option<Arc<AppendError>>,
    shared: Arc<Shared>,
    /// Called after every append round, purge and close, so the owner can wake readers
    /// parked until the partition changes.
    on_change: Box<dyn Fn()>,
    /// `Replicated`'s threshold sync while it runs beside the appends (see
    /// `log::background_sync`).
    syncing: Option<RunningSync>,
    /// The latest time the task was given (appends' and ticks' `now_us`): the clock of the
    /// threshold sync's interval.
    latest_us: u64,
    observer: Arc<dyn IoObserver>,
    /// When the threshold sync in flight started, by the observer's clock.
    sync_started_us: u64,
}

/// A threshold sync in flight, with what it covers.
type RunningSync = Pin<Box<dyn Future<Output = (io::Result<()>, SyncStart)>>>;

/// An append done in the current round, waiting for the round's sync.
struct Pending {
    reply: TxOneshot<AppendReply>,
    result: Result<AppendOutcome, PartitionError>,
    needs_sync: bool,
    batch: AppendBuffer,
}

impl PartitionHandle {
    /// Opens (creating if needed) the partition and spawns its task on the current compio
    /// runtime; `on_change` runs on the task after every append round, purge and close.
    pub async fn open<S: Storage + Clone + 'static>(
        storage: S,
        spec: PartitionSpec,
        on_change: impl Fn() + 'static,
    ) -> Result<Self, PartitionError> {
        Self::open_observed(storage, spec, on_change, Arc::new(NoObserver)).await
    }

    /// As [`Self::open`], reporting syncs to `observer`.
    pub async fn open_observed<S: Storage + Clone + 'static>(
        storage: S,
        spec: PartitionSpec,
        on_change: impl Fn() + 'static,
        observer: Arc<dyn IoObserver>,
    ) -> Result<Self, PartitionError> {
        // A purge cut short by a crash after its rename left the old files aside.
        remove_purged(&storage, &spec.directory).await;
        let (log, _) = PartitionLog::open(storage.clone(), &spec.directory, spec.log)
            .await
            .map_err(PartitionError::Open)?;
        let offsets = ConsumerOffsets::load(storage.clone(), &spec.directory)
            .await
            .map_err(PartitionError::LoadOffsets)?;
        let shared = Arc::new(Shared::default());
        shared.stats.set(PartitionStats::of(&log));
        {
            let published = shared.offsets.pin();
            for (owner, offset) in offsets.iter() {
                published.insert(owner, offset);
            }
        }
        let (sender, receiver) = mpsc::bounded_async(QUEUE_MAX);
        let task = Task {
            storage,
            spec,
            receiver,
            log: Some(log),
            offsets,
            producers: ProducerTable::new(),
            poison: None,
            shared: Arc::clone(&shared),
            on_change: Box::new(on_change),
            syncing: None,
            latest_us: 0,
            observer,
            sync_started_us: 0,
        };
        compio::runtime::spawn(task.run()).detach();
        Ok(Self { sender, shared })
    }

    pub fn stats(&self) -> PartitionStats {
        self.shared.stats.get()
    }

    /// Tells the task the time, when a threshold sync waits for its interval to end, so the
    /// last appends of a burst are synced within about one interval even if no append
    /// follows. Never waits: a full queue means appends are coming, and they start it.
    pub fn tick(&self, now_us: u64) {
        if self.shared.sync_waiting.load(Ordering::Relaxed) {
            let _ = self.sender.try_send(Job::Tick { now_us });
        }
    }

    /// The stored offset of `owner`, as of the last completed offset write.
    pub fn stored_offset(&self, owner: OffsetOwner) -> Option<u64> {
        self.shared.offsets.pin().get(&owner).copied()
    }

    /// Every stored offset.
    pub fn stored_offsets(&self) -> Vec<(OffsetOwner, u64)> {
        let mut offsets: Vec<(OffsetOwner, u64)> = self
            .shared
            .offsets
            .pin()
            .iter()
            .map(|(owner, offset)| (*owner, *offset))
            .collect();
        offsets.sort_unstable();
        offsets
    }

    /// Appends one batch record; `producer` carries the batch's producer section and message
    /// count when it has one. Acknowledged after the sync that covers it under `Persisted`.
    pub async fn append(
        &self,
        batch: impl Into<AppendBuffer>,
        now_us: u64,
        producer: Option<(Producer, u32)>,
    ) -> Result<AppendOutcome, PartitionError> {
        self.append_returning(batch.into(), now_us, producer)
            .await
            .0
    }

    /// As [`Self::append`], handing the buffer back unless the task dropped it unanswered.
    pub async fn append_returning(
        &self,
        batch: AppendBuffer,
        now_us: u64,
        producer: Option<(Producer, u32)>,
    ) -> (Result<AppendOutcome, PartitionError>, Option<AppendBuffer>) {
        let (reply, mut receiver) = oneshot();
        let job = Job::Append {
            batch,
            now_us,
            producer,
            reply,
        };
        if let Err(crossfire::SendError(job)) = self.sender.send(job).await {
            let batch = match job {
                Job::Append { batch, .. } => Some(batch),
                _ => None,
            };
            return (Err(PartitionError::Closed), batch);
        }
        if self.task_stopped() {
            // As in `call`.
            return match receiver.try_recv() {
                Ok((result, batch)) => (result, Some(batch)),
                Err(_) => (Err(PartitionError::Closed), None),
            };
        }
        match receiver.await {
            Ok((result, batch)) => (result, Some(batch)),
            Err(crossfire::RecvError) => (Err(PartitionError::Closed), None),
        }
    }

    pub async fn read(
        &self,
        start: ReadStart,
        count: u32,
        max_bytes: u64,
    ) -> Result<Records, PartitionError> {
        self.call(|reply| Job::Read {
            start,
            count,
            max_bytes,
            reply,
        })
        .await
    }

    pub async fn store_offset(
        &self,
        owner: OffsetOwner,
        offset: u64,
    ) -> Result<(), PartitionError> {
        self.call(|reply| Job::StoreOffset {
            owner,
            offset,
            reply,
        })
        .await
    }

    /// Deletes `owner`'s offset; returns whether there was one.
    pub async fn delete_offset(&self, owner: OffsetOwner) -> Result<bool, PartitionError> {
        self.call(|reply| Job::DeleteOffset { owner, reply }).await
    }

    /// Deletes every message, stored offset and producer; offsets start over at 0.
    pub async fn purge(&self) -> Result<(), PartitionError> {
        self.call(|reply| Job::Purge { reply }).await
    }

    /// Deletes the oldest `count` sealed segments (the active one is kept); returns how
    /// many went (`DELETE_SEGMENTS`).
    pub async fn delete_oldest_segments(&self, count: usize) -> Result<usize, PartitionError> {
        self.call(|reply| Job::DeleteSegments { count, reply })
            .await
    }

    /// The log's segments, oldest first (retention plans over them).
    pub async fn segments(&self) -> Result<Vec<SegmentInfo>, PartitionError> {
        self.call(|reply| Job::Segments { reply }).await
    }

    /// The append time (µs) of the record holding each of `offsets`; `None` for an offset
    /// not stored (past the end, or removed by retention).
    pub async fn timestamps(&self, offsets: Vec<u64>) -> Result<Vec<Option<u64>>, PartitionError> {
        self.call(|reply| Job::Timestamps { offsets, reply }).await
    }

    /// Deletes the sealed segment starting at `start_offset` (retention); says whether it
    /// existed. The active segment is never deleted.
    pub async fn delete_segment(&self, start_offset: u64) -> Result<bool, PartitionError> {
        self.call(|reply| Job::DeleteSegment {
            start_offset,
            reply,
        })
        .await
    }

    /// Lets the jobs queued before it finish, then closes the log cleanly; with `remove`,
    /// deletes the partition directory afterwards. Jobs sent after it fail with
    /// [`PartitionError::Closed`].
    pub async fn close(&self, remove: bool) -> Result<(), PartitionError> {
        self.call(|reply| Job::Close { remove, reply }).await
    }

    async fn call<T>(&self, job: impl FnOnce(Reply<T>) -> Job) -> Result<T, PartitionError> {
        let (reply, mut receiver) = oneshot();
        if self.sender.send(job(reply)).await.is_err() {
            return Err(PartitionError::Closed);
        }
        if self.task_stopped() {
            // Answered before the task stopped, or never to be: not awaited.
            return receiver.try_recv().unwrap_or(Err(PartitionError::Closed));
        }
        receiver.await.unwrap_or(Err(PartitionError::Closed))
    }

    /// Whether the task stopped taking jobs, asked after a job was queued. Either this
    /// sees the task's flag, or the task's drain after setting it sees the job (each side
    /// writes, fences, then reads the other's write): no job is left waiting unseen.
    fn task_stopped(&self) -> bool {
        std::sync::atomic::fence(Ordering::SeqCst);
        self.shared.closed.load(Ordering::SeqCst)
    }
}

impl<S: Storage + Clone + 'static> Task<S> {
    /// Stops taking jobs (the log closed): flags it, then drops every job still queued,
    /// whose callers then hear [`PartitionError::Closed`] as their reply sender goes. A job
    /// queued after the drain finds the flag ([`PartitionHandle::task_stopped`]).
    fn refuse_queued_jobs(&self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        while let Ok(job) = self.receiver.try_recv() {
            drop(job);
        }
    }

    async fn run(mut self) {
        let mut round: Vec<Pending> = Vec::with_capacity(GROUP_MAX);
        while let Some(first) = self.next_job().await {
            let next = self.run_round(first, &mut round).await;
            self.finish_round(&mut round).await;
            assert!(round.is_empty());
            // A small append is written inline (`storage::compio::INLINE_WRITE_MAX`), so a
            // round may complete without ever waiting; with appenders on other threads
            // keeping the queue full, the task would then never let the shard's other
            // tasks (connections, timers) run. One turn for them after every round.
            YieldOnce::default().await;
            if let Some(Job::Tick { now_us }) = next {
                // Nothing to wait for: a sync in flight goes on.
                self.latest_us = self.latest_us.max(now_us);
                self.start_sync_if_due().await;
            } else if let Some(job) = next {
                // Purges, segment deletions and the close change the files the sync is
                // flushing: they see the log as the sync left it. Reads and offset writes
                // do not wait for it (a consumer tailing a busy partition would otherwise
                // wait out an fdatasync per poll).
                let settles = job.changes_files();
                if settles {
                    self.settle_sync().await;
                }
                if self.serve(job).await {
                    self.refuse_queued_jobs();
                    return;
                }
                if settles {
                    // Thresholds crossed while the settled sync ran want the next one, or
                    // the owner's ticks, which come only while one waits.
                    self.start_sync_if_due().await;
                }
            }
        }
        // Every handle is gone; close as well as we can, with nobody to tell.
        self.settle_sync().await;
        let _ = self.close(false).await;
    }

    /// The next job, `None` once every handle is gone. A threshold sync in flight that
    /// finishes first is settled meanwhile, and the next one started if due.
    async fn next_job(&mut self) -> Option<Job> {
        loop {
            let finished = {
                let Some(sync) = self.syncing.as_mut() else {
                    return self.receiver.recv().await.ok();
                };
                // Receiving is cancel-safe: a job is never lost when the sync wins.
                let mut receive = pin!(self.receiver.recv());
                let first = poll_fn(|context| {
                    if let Poll::Ready(finished) = sync.as_mut().poll(context) {
                        return Poll::Ready(Err(finished));
                    }
                    receive.as_mut().poll(context).map(Ok)
                })
                .await;
                match first {
                    Ok(job) => return job.ok(),
                    Err(finished) => finished,
                }
            };
            self.syncing = None;
            self.finish_sync(finished).await;
            self.start_sync_if_due().await;
        }
    }

    /// Starts `Replicated`'s threshold sync when it is due and none runs (inline when no
    /// second file handle can be had), and publishes whether one still waits for its
    /// interval.
    async fn start_sync_if_due(&mut self) {
        self.start_due_sync().await;
        let waiting =
            self.syncing.is_none() && self.log.as_ref().is_some_and(PartitionLog::sync_wanted);
        self.shared.sync_waiting.store(waiting, Ordering::Relaxed);
    }

    async fn start_due_sync(&mut self) {
        let now_us = self.latest_us;
        let Some(log) = self.log.as_mut() else {
            return;
        };
        if self.syncing.is_some() || !log.sync_due(now_us) {
            return;
        }
        if let Err(error) = log.write_waiting_entries(INDEX_WRITE_MIN).await {
            log::warn!(
                "partition {}: index entries wait for the next try: {error}",
                self.spec.directory.display()
            );
        }
        match log.start_sync(now_us) {
            Ok((sync, start)) => {
                self.sync_started_us = self.observer.now_us();
                self.syncing = Some(Box::pin(async move { (sync.await, start) }));
            }
            Err(error) => {
                log::warn!(
                    "partition {}: threshold sync inline: {error}",
                    self.spec.directory.display()
                );
                log.sync_if_due(now_us).await;
                self.shared.stats.set(PartitionStats::of(log));
            }
        }
    }

    /// Waits for the threshold sync in flight, if any, and records it.
    async fn settle_sync(&mut self) {
        if let Some(sync) = self.syncing.take() {
            let finished = sync.await;
            self.finish_sync(finished).await;
        }
    }

    async fn finish_sync(&mut self, (synced, start): (io::Result<()>, SyncStart)) {
        let elapsed_us = self.observer.now_us().saturating_sub(self.sync_started_us);
        self.observer.threshold_synced(elapsed_us);
        if let Some(log) = self.log.as_mut() {
            log.finish_sync(synced, start).await;
            self.shared.stats.set(PartitionStats::of(log));
        }
    }

    /// Appends `first` and then the appends already queued, up to [`GROUP_MAX`]; returns the
    /// job of another kind that ended the round, if one did (it may be `first` itself).
    async fn run_round(&mut self, first: Job, round: &mut Vec<Pending>) -> Option<Job> {
        let mut next = Some(first);
        while let Some(job) = next.take() {
            match job {
                Job::Append {
                    batch,
                    now_us,
                    producer,
                    reply,
                } => {
                    self.latest_us = self.latest_us.max(now_us);
                    let (result, needs_sync, batch) = self.append(batch, now_us, producer).await;
                    round.push(Pending {
                        reply,
                        result,
                        needs_sync,
                        batch,
                    });
                }
                other => return Some(other),
            }
            if round.len() < GROUP_MAX {
                next = self.receiver.try_recv().ok();
            }
        }
        None
    }

    /// Admits and appends one batch; returns the outcome, whether it waits for the round's
    /// sync, and the buffer.
    async fn append(
        &mut self,
        batch: AppendBuffer,
        now_us: u64,
        producer: Option<(Producer, u32)>,
    ) -> (Result<AppendOutcome, PartitionError>, bool, AppendBuffer) {
        if let Some(poison) = &self.poison {
            return (
                Err(PartitionError::Poisoned(Arc::clone(poison))),
                false,
                batch,
            );
        }
        if let Some((producer, count)) = producer {
            match self.producers.admit(producer, count) {
                Ok(Admission::Append) => {}
                Ok(Admission::Duplicate { base_offset }) => {
                    let outcome = AppendOutcome {
                        base_offset,
                        messages_count: count,
                        duplicate: true,
                    };
                    return (Ok(outcome), false, batch);
                }
                Err(code) => return (Err(PartitionError::Producer(code)), false, batch),
            }
        }
        let Some(log) = self.log.as_mut() else {
            return (Err(PartitionError::Closed), false, batch);
        };
        let (result, batch) = log.append(batch, now_us).await;
        let appended = match result {
            Ok(appended) => appended,
            Err(error) => return (Err(PartitionError::Append(error)), false, batch),
        };
        if let Some((producer, count)) = producer {
            self.producers.record(producer, count, appended.base_offset);
        }
        let outcome = AppendOutcome {
            base_offset: appended.base_offset,
            messages_count: appended.message_count,
            duplicate: false,
        };
        (Ok(outcome), appended.needs_sync, batch)
    }

    /// Syncs once if any append of the round needs it, then answers every appender.
    async fn finish_round(&mut self, round: &mut Vec<Pending>) {
        if round.is_empty() {
            return;
        }
        // The deliberately broken build acknowledges without syncing (`crate::broken`).
        let needs_sync = round.iter().any(|pending| pending.needs_sync)
            && !crate::broken::is(crate::broken::Break::AckBeforeWrite);
        let mut failure = None;
        if needs_sync && let Some(log) = self.log.as_mut() {
            let started_us = self.observer.now_us();
            let synced = log.sync().await;
            let elapsed_us = self.observer.now_us().saturating_sub(started_us);
            self.observer.group_synced(round.len(), elapsed_us);
            if let Err(error) = synced {
                let error = Arc::new(error);
                self.poison = Some(Arc::clone(&error));
                failure = Some(error);
            }
        }
        if let Some(log) = &self.log {
            self.shared.stats.set(PartitionStats::of(log));
        }
        for pending in round.drain(..) {
            let result = match (&failure, pending.result) {
                (Some(error), Ok(outcome)) if !outcome.duplicate => {
                    Err(PartitionError::Sync(Arc::clone(error)))
                }
                (_, result) => result,
            };
            // An appender that stopped waiting dropped its receiver; its record stays.
            pending.reply.send((result, pending.batch));
        }
        (self.on_change)();
        // After the answers, so no appender waits for it.
        self.start_sync_if_due().await;
    }

    /// Serves a job other than an append; returns `true` when the task ends.
    async fn serve(&mut self, job: Job) -> bool {
        match job {
            Job::Append { .. } => unreachable!("appends are served in rounds"),
            Job::Tick { .. } => unreachable!("ticks are served by `run`"),
            Job::Read {
                start,
                count,
                max_bytes,
                reply,
            } => {
                let result = self.read(start, count, max_bytes).await;
                reply.send(result);
            }
            Job::StoreOffset {
                owner,
                offset,
                reply,
            } => reply.send(self.store_offset(owner, offset).await),
            Job::DeleteOffset { owner, reply } => reply.send(self.delete_offset(owner).await),
            Job::Purge { reply } => reply.send(self.purge().await),
            Job::DeleteSegments { count, reply } => {
                reply.send(self.delete_oldest_segments(count).await);
            }
            Job::Segments { reply } => {
                let segments = match &self.log {
                    Some(log) => Ok(log.segments().collect()),
                    None => Err(PartitionError::Closed),
                };
                reply.send(segments);
            }
            Job::DeleteSegment {
                start_offset,
                reply,
            } => reply.send(self.delete_segment(start_offset).await),
            Job::Timestamps { offsets, reply } => {
                let times = match &self.log {
                    Some(log) => Ok(offsets.iter().map(|&o| log.timestamp_of(o)).collect()),
                    None => Err(PartitionError::Closed),
                };
                reply.send(times);
            }
            Job::Close { remove, reply } => {
                reply.send(self.close(remove).await);
                return true;
            }
        }
        false
    }

    /// A read; damage it finds quarantines the partition (appends refused from now on).
    async fn read(
        &mut self,
        start: ReadStart,
        count: u32,
        max_bytes: u64,
    ) -> Result<Records, PartitionError> {
        let log = self.log.as_mut().ok_or(PartitionError::Closed)?;
        let result = log.read(start, count, max_bytes).await;
        let damage = match &result {
            Ok(records) => records.damage.clone(),
            Err(ReadError::Corrupt { path, position, .. }) => Some((path.clone(), *position)),
            Err(_) => None,
        };
        if let Some((path, position)) = damage {
            log.quarantine_found(path, position).await;
            self.shared.stats.set(PartitionStats::of(log));
            (self.on_change)();
        }
        result.map_err(PartitionError::Read)
    }

    async fn store_offset(
        &mut self,
        owner: OffsetOwner,
        offset: u64,
    ) -> Result<(), PartitionError> {
        // Without its log the partition is closed, or a purge failed after moving its
        // directory aside: a store would land in files about to be removed.
        if self.log.is_none() {
            return Err(PartitionError::Closed);
        }
        if self.offsets.is_full_for(owner) {
            return Err(PartitionError::OffsetsLimit);
        }
        self.offsets
            .store(owner, offset, self.spec.offsets_durability)
            .await
            .map_err(PartitionError::Offset)?;
        self.shared.offsets.pin().insert(owner, offset);
        Ok(())
    }

    async fn delete_offset(&mut self, owner: OffsetOwner) -> Result<bool, PartitionError> {
        let existed = self
            .offsets
            .delete(owner)
            .await
            .map_err(PartitionError::Offset)?;
        self.shared.offsets.pin().remove(&owner);
        Ok(existed)
    }

    async fn delete_oldest_segments(&mut self, count: usize) -> Result<usize, PartitionError> {
        let log = self.log.as_mut().ok_or(PartitionError::Closed)?;
        let deleted = log
            .delete_oldest_segments(count)
            .await
            .map_err(PartitionError::DeleteSegments)?;
        self.shared.stats.set(PartitionStats::of(log));
        (self.on_change)();
        Ok(deleted)
    }

    async fn delete_segment(&mut self, start_offset: u64) -> Result<bool, PartitionError> {
        let log = self.log.as_mut().ok_or(PartitionError::Closed)?;
        let deleted = log
            .delete_segment(start_offset)
            .await
            .map_err(PartitionError::DeleteSegments)?;
        self.shared.stats.set(PartitionStats::of(log));
        (self.on_change)();
        Ok(deleted)
    }

    /// Drops the log, moves the directory aside in one rename and opens a fresh, empty
    /// partition in its place, then removes what was moved. The log is not closed cleanly
    /// first: its files are about to go, and a poisoned one would refuse. A crash leaves the
    /// whole old directory (the purge not done) or the new one; never some of the old files,
    /// which a removal cut short would leave to be served again.
    async fn purge(&mut self) -> Result<(), PartitionError> {
        drop(self.log.take());
        // The stored offsets' files go with the directory, in the rename; deleting them
        // first would let a crash before it keep the messages but lose the offsets. The
        // table is reloaded from the fresh directory below; until then stores are refused
        // (the log is gone), so none lands in the directory moved aside.
        self.shared.offsets.pin().clear();
        self.producers.clear();
        self.poison = None;
        let directory = self.spec.directory.clone();
        remove_purged(&self.storage, &directory).await;
        let aside = free_purging_path(&self.storage, &directory).await;
        if self.storage.exists(&directory).await {
            let removal = |source| PartitionError::Remove {
                path: directory.clone(),
                source,
            };
            self.storage
                .rename(&directory, &aside)
                .await
                .map_err(removal)?;
            if let Some(parent) = directory.parent() {
                self.storage.sync_dir(parent).await.map_err(removal)?;
            }
        }
        let (log, _) =
            PartitionLog::open(self.storage.clone(), &self.spec.directory, self.spec.log)
                .await
                .map_err(PartitionError::Open)?;
        self.offsets = ConsumerOffsets::load(self.storage.clone(), &self.spec.directory)
            .await
            .map_err(PartitionError::LoadOffsets)?;
        self.shared.stats.set(PartitionStats::of(&log));
        self.log = Some(log);
        (self.on_change)();
        carry_identity(&self.storage, &aside, &directory).await;
        remove_purged(&self.storage, &directory).await;
        Ok(())
    }

    /// Closes the log (refused when poisoned), or with `remove` drops it and removes the
    /// directory (its durability no longer matters), and answers the jobs queued behind the
    /// close by dropping them.
    async fn close(&mut self, remove: bool) -> Result<(), PartitionError> {
        let log = self.log.take();
        let closed = match (&self.poison, log) {
            _ if remove => Ok(()),
            (Some(poison), _) => Err(PartitionError::Poisoned(Arc::clone(poison))),
            (None, Some(log)) => log.close().await.map_err(PartitionError::Close),
            (None, None) => Ok(()),
        };
        let removed = if remove {
            self.remove_directory().await
        } else {
            Ok(())
        };
        // Jobs still queued are refused once the close is answered (`refuse_queued_jobs`).
        (self.on_change)();
        removed.and(closed)
    }

    async fn remove_directory(&self) -> Result<(), PartitionError> {
        let directory = &self.spec.directory;
        if !self.storage.exists(directory).await {
            return Ok(());
        }
        self.storage
            .remove_dir_all(directory)
            .await
            .map_err(|source| PartitionError::Remove {
                path: directory.clone(),
                source,
            })
    }
}

/// The names a purge moves a partition's directory to before removing it:
/// `<directory>.purging`, numbered (`.purging-2` …) while an earlier one could not be removed.
fn is_purging_name(directory: &Path, name: &str) -> bool {
    let Some(own) = directory.file_name().and_then(|own| own.to_str()) else {
        return false;
    };
    name.strip_prefix(own)
        .and_then(|rest| rest.strip_prefix(".purging"))
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
}

/// A free name to move `directory` to for a purge.
async fn free_purging_path<S: Storage>(storage: &S, directory: &Path) -> PathBuf {
    let mut name = directory.as_os_str().to_owned();
    name.push(".purging");
    let first = PathBuf::from(name);
    let mut path = first.clone();
    let mut count = 1u32;
    while storage.exists(&path).await {
        count = count.saturating_add(1);
        let mut numbered = first.as_os_str().to_owned();
        numbered.push(format!("-{count}"));
        path = PathBuf::from(numbered);
    }
    path
}

/// Removes what purges of the partition in `directory` moved aside, if anything is left:
/// best effort, since the partition serves without it (a failure is logged and retried at
/// the next open or purge).
async fn remove_purged<S: Storage>(storage: &S, directory: &Path) {
    let Some(parent) = directory.parent() else {
        return;
    };
    let names = storage.list_dir(parent).await.unwrap_or_default();
    for name in names.iter().filter(|name| is_purging_name(directory, name)) {
        let path = parent.join(name);
        if let Err(error) = storage.remove_dir_all(&path).await {
            log::error!(
                "{}: a purged partition's files remain: {error}",
                path.display()
            );
        }
    }
}

/// Moves the shard's identity file (`layout::IDENTITY_FILE`) from the directory a purge
/// moved aside into the fresh one, so the partition keeps it: best effort (without it the
/// shard adopts the directory at the next start).
async fn carry_identity<S: Storage>(storage: &S, aside: &Path, directory: &Path) {
    let from = aside.join(crate::layout::IDENTITY_FILE);
    if !storage.exists(&from).await {
        return;
    }
    let to = directory.join(crate::layout::IDENTITY_FILE);
    let carried = match storage.rename(&from, &to).await {
        Ok(()) => storage.sync_dir(directory).await,
        Err(error) => Err(error),
    };
    if let Err(error) = carried {
        log::warn!("{}: not carried over by the purge: {error}", to.display());
    }
}

#[cfg(test)]
mod tests;

/// Completes at its second poll, having woken its task at the first: the executor runs its
/// other ready tasks in between.
#[derive(Debug, Default)]
struct YieldOnce {
    yielded: bool,
}

impl Future for YieldOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, context: &mut std::task::Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        context.waker().wake_by_ref();
        Poll::Pending
    }
}
