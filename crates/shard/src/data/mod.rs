//! The data plane of a shard: one task per partition (log, stored offsets, producer
//! dedupe), the consumer-group runtimes, and the logic of the message, offset and group
//! commands (planning is synchronous against [`Metadata`]; execution awaits the partition
//! tasks, so no `RefCell` borrow of the metadata is held across an `.await`).
//!
//! [`DataPlane::on_applied`] keeps the partitions in step with committed metadata: after any
//! op that creates or deletes partitions it reconciles the open partitions with the metadata
//! (a partition whose incarnation changed is deleted and created afresh).
//!
//! Thread-per-core: every partition is owned by exactly one shard ([`ShardPlace::owner`]),
//! whose data plane opens it and runs its task; the handles of all partitions are published
//! in one [`Routes`] map (papaya: lock-free reads) that every shard reads, so a request for a
//! partition another shard owns travels over that partition's crossfire channel. Consumer
//! groups are run by the leader (the metadata sequencer), which publishes its decisions to
//! every shard ([`leases`]): group polls are checked where they are served.

mod fault_log;
mod fetch;
mod group_plane;
mod groups;
pub(crate) mod identity;
pub mod leases;
mod offsets;
mod orphans;
mod partition;
mod poll;
mod resolve;
mod retention;
mod send;
mod signal;

pub use fetch::{FetchSectionOwned, Fetched};
pub use groups::{
    GroupConfig, GroupRuntime, HEARTBEAT_INTERVAL_US_DEFAULT, MemberView, Ownership,
    REBALANCING_TIMEOUT_US_DEFAULT, Revocation, assign,
};
pub use offsets::OffsetRequest;
pub use orphans::{OrphanError, find as find_orphans, set_aside_all as set_aside_orphans};
pub use partition::{
    AppendOutcome, GROUP_MAX, PartitionError, PartitionHandle, PartitionSpec, PartitionStats,
};
pub use poll::{
    FetchPlan, FetchTargetPlan, PollPlan, PollRefusal, PollRequest, Polled, read_start,
};
pub use resolve::{consumer_slot, offset_owner, resolve_group, resolve_topic};
pub use segment::producers::{Admission, PRODUCERS_MAX, ProducerTable};
pub use send::SendPlan;
pub use signal::{Cancel, Notified, Notify, Race, Waiting, race};

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use segment::layout::partition_directory;
use segment::log::{
    Durability, LogConfig, PREALLOCATE_AHEAD_DEFAULT, Preallocation, SYNC_INTERVAL_DEFAULT_US,
};
use segment::storage::Storage;
use segment::storage::either::Either;

use crate::clock::{Clock, SystemClock};
use crate::metadata::{Metadata, MetadataOp, Topic};
use crate::metrics::{Histogram, ShardMetrics, SyncObserver};
use identity::{Claimed, Identity};

pub use crate::disk::ShardStorage;

/// Where, under the system path, a partition directory left by an earlier partition of the
/// same ids goes (`identity.rs`).
pub const ORPHANS: &str = "orphaned";

/// One partition's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PartitionKey {
    pub stream_id: u32,
    pub topic_id: u32,
    pub partition_id: u32,
}

/// Where a shard sits among the server's shards; partition ownership follows from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardPlace {
    pub index: usize,
    pub count: usize,
    /// The shard that sequences metadata (the `Node`'s sequencer).
    pub sequencer: usize,
}

impl ShardPlace {
    /// The only shard of a one-shard server.
    pub const SOLE: Self = Self {
        index: 0,
        count: 1,
        sequencer: 0,
    };

    /// Whether this shard is the metadata sequencer (the leader): it holds the metadata
    /// journal, the sessions and the consumer groups.
    pub fn is_leader(self) -> bool {
        self.index == self.sequencer
    }

    /// The shard that owns `key`: a topic's partitions go round the shards from a start that
    /// is the sum of its stream and topic ids, so topics with one partition each spread too,
    /// evenly when their ids are consecutive (streams made one after another, as iggy-bench's
    /// eight are: a hash of the ids put five of those on one shard of two and three on the
    /// other, and the even split produced 1.10x, pairwise median of 5, bench/RESULTS.md).
    pub fn owner(self, key: PartitionKey) -> usize {
        let start = u64::from(key.stream_id) + u64::from(key.topic_id);
        let count = u64::try_from(self.count.max(1)).unwrap_or(u64::MAX);
        let slot = start.wrapping_add(u64::from(key.partition_id)) % count;
        // `slot < count`, which came from a usize.
        usize::try_from(slot).unwrap_or(0)
    }

    pub fn owns(self, key: PartitionKey) -> bool {
        self.owner(key) == self.index
    }
}

/// The partition-to-shard table: every open partition's owner and handle, whichever shard
/// owns it.
pub type Routes = papaya::HashMap<PartitionKey, Route>;

/// Where a partition lives: the shard whose runtime runs its task, and the handle that
/// reaches the task from any shard.
#[derive(Debug, Clone)]
pub struct Route {
    pub shard: usize,
    pub handle: PartitionHandle,
}

/// One consumer group's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupKey {
    pub stream_id: u32,
    pub topic_id: u32,
    pub group_id: u32,
}

/// Sums over many partitions (a topic, a stream, the server) for replies and `GET_STATS`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub partitions_count: u32,
    pub segments_count: u64,
    pub messages_count: u64,
    pub size_bytes: u64,
}

/// A data-plane operation failed.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error("partition {key:?}")]
    Partition {
        key: PartitionKey,
        #[source]
        source: PartitionError,
    },
    #[error("remove {path}")]
    Remove {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A group poll's partition moved to another member while the poll read or waited.
    #[error("the partition moved to another group member")]
    NotOwner,
    /// Records read could not be opened for the client (encryption at rest).
    #[error("partition {key:?}: records cannot be opened")]
    Unopenable {
        key: PartitionKey,
        #[source]
        source: crate::at_rest::OpenFailure,
    },
}

/// `error` and each of its sources, for one log line.
pub(crate) fn causes(error: &dyn std::error::Error) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        line.push_str(": ");
        line.push_str(&cause.to_string());
        source = cause.source();
    }
    line
}

/// A partition this shard owns: the incarnation it was opened for, and its handle (also
/// published in the routes).
#[derive(Debug)]
struct Entry {
    incarnation: u64,
    handle: PartitionHandle,
}

/// Record bytes one poll or fetch reply may carry beyond its first record (which is
/// always returned whole): caps the `max_bytes` a client asks for, so one request cannot
/// make the shard read gigabytes or build a frame past the protocol's `u32` size.
pub const REPLY_RECORD_BYTES_MAX: u64 = 16 << 20;

/// Every partition of the shard and every consumer group's live state.
#[derive(Debug)]
pub struct DataPlane<S: Storage = ShardStorage> {
    storage: S,
    root: PathBuf,
    config: GroupConfig,
    place: ShardPlace,
    /// The partitions this shard owns.
    partitions: RefCell<BTreeMap<PartitionKey, Entry>>,
    /// Every shard's partitions, shared by all shards.
    routes: Arc<Routes>,
    /// Only the leader's are used.
    groups: RefCell<BTreeMap<GroupKey, GroupRuntime>>,
    /// What the leader decided about every group, shared by all shards.
    group_views: Arc<leases::GroupViews>,
    /// Round-robin cursor per (stream, topic) for `Partitioning::Balanced`.
    balanced: RefCell<BTreeMap<(u32, u32), u32>>,
    /// Reads verify every message checksum (`[system.partition] validate_checksum`).
    validate_checksum: bool,
    /// Appends of `replicated` topics sync before their acknowledgement, as `persisted`
    /// ones do (`[system.partition] enforce_fsync`).
    enforce_fsync: bool,
    /// `replicated`'s threshold sync starts at most once per this many µs
    /// (`[system.partition] sync_interval`).
    sync_interval_us: u64,
    /// The time of group hand-offs and the deadlines of parked polls and fetches.
    clock: Arc<dyn Clock>,
    /// This shard's measurements: append and read latency, its partitions' syncs.
    metrics: Arc<ShardMetrics>,
    /// The at-rest key (`[system.encryption]`): sends are sealed with it, reads opened.
    record_key: Option<Arc<crate::at_rest::RecordKey>>,
    /// Held by a reconcile: one at a time, since each awaits opens and closes between
    /// reading and changing `partitions`.
    reconciling: futures_util::lock::Mutex<()>,
    /// While a partition the metadata holds could not be opened: when to try again (µs)
    /// and the wait before that try, doubled by each failed one. `None` while all are open.
    unopened_retry: Cell<Option<Retry>>,
    /// The partitions the last reconcile could not open.
    unopened: RefCell<BTreeSet<PartitionKey>>,
    /// Start-up's [`Self::open_all`] is done: from then on a partition directory made anew
    /// belongs to a partition just created, not to one whose directory went missing.
    started: Cell<bool>,
    /// The partitions (and incarnations) the metadata held at start: only their directories
    /// may lack `partition.id` and still be theirs (`identity.rs`).
    at_start: RefCell<BTreeSet<(PartitionKey, u64)>>,
}

/// The next try to open the partitions an open left closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Retry {
    at_us: u64,
    wait_us: u64,
}

impl Retry {
    /// The retry after a reconcile at `now_us` that could not open `failed`, `before` those
    /// the one before could not open and `previous` the retry it set.
    fn next(
        previous: Option<Self>,
        (before, failed): (&BTreeSet<PartitionKey>, &BTreeSet<PartitionKey>),
        now_us: u64,
    ) -> Option<Self> {
        let known = failed.is_subset(before);
        match previous {
            _ if failed.is_empty() => None,
            // Not the retry (another change's reconcile): its schedule stands.
            Some(previous) if known && now_us < previous.at_us => Some(previous),
            // The retry failed again: a longer wait.
            Some(_) if known => Some(Self::after(previous, now_us)),
            // A partition failed that did not before: the first wait.
            _ => Some(Self::after(None, now_us)),
        }
    }

    /// The retry after a failed open at `now_us`, `previous` the one that failed (if any):
    /// its wait doubled, up to the most.
    fn after(previous: Option<Self>, now_us: u64) -> Self {
        let wait_us = previous.map_or(REOPEN_WAIT_FIRST_US, |previous| {
            previous.wait_us.saturating_mul(2).min(REOPEN_WAIT_MAX_US)
        });
        Self {
            at_us: now_us.saturating_add(wait_us),
            wait_us,
        }
    }
}

/// The wait before the first retry of a partition that could not be opened, and the most
/// any wait grows to (µs): a disk that stays full costs a few log lines a minute.
const REOPEN_WAIT_FIRST_US: u64 = 1_000_000;
const REOPEN_WAIT_MAX_US: u64 = 60_000_000;

impl DataPlane<ShardStorage> {
    /// The data plane on real files under `root` (the `system.path`).
    pub fn new(root: PathBuf) -> Self {
        let storage = Either::Left(crate::disk::compio());
        Self::with_storage(storage, root, GroupConfig::default())
    }
}

impl<S: Storage + Clone + 'static> DataPlane<S> {
    /// The data plane of a one-shard server.
    pub fn with_storage(storage: S, root: PathBuf, config: GroupConfig) -> Self {
        Self::for_shard(storage, root, config, ShardPlace::SOLE, Arc::default())
    }

    /// The data plane of shard `place`, publishing its partitions in `routes`.
    pub fn for_shard(
        storage: S,
        root: PathBuf,
        config: GroupConfig,
        place: ShardPlace,
        routes: Arc<Routes>,
    ) -> Self {
        Self {
            storage,
            root,
            config,
            place,
            routes,
            partitions: RefCell::new(BTreeMap::new()),
            groups: RefCell::new(BTreeMap::new()),
            group_views: Arc::default(),
            balanced: RefCell::new(BTreeMap::new()),
            // The server's default (`[system.partition] validate_checksum = true`).
            validate_checksum: true,
            enforce_fsync: false,
            sync_interval_us: SYNC_INTERVAL_DEFAULT_US,
            clock: Arc::new(SystemClock),
            metrics: Arc::default(),
            record_key: None,
            reconciling: futures_util::lock::Mutex::new(()),
            unopened_retry: Cell::new(None),
            unopened: RefCell::default(),
            started: Cell::new(false),
            at_start: RefCell::default(),
        }
    }

    /// The same data plane, publishing and reading group decisions in `views` (the map all
    /// shards of a server share).
    pub fn with_group_views(mut self, views: Arc<leases::GroupViews>) -> Self {
        self.group_views = views;
        self
    }

    /// The same data plane, sealing what it is sent and opening what it reads with `key`.
    pub fn with_record_key(mut self, key: Option<Arc<crate::at_rest::RecordKey>>) -> Self {
        self.record_key = key;
        self
    }

    /// Whether records are sealed at rest.
    pub fn encrypts(&self) -> bool {
        self.record_key.is_some()
    }

    /// A send's record as it is to be stored: sealed when a key is set, else as it is.
    pub(crate) fn seal_send(
        &self,
        batch: segment::partition::AppendBuffer,
    ) -> Result<segment::partition::AppendBuffer, crate::refusal::Refusal> {
        match &self.record_key {
            Some(key) => crate::at_rest::seal(key, &batch),
            None => Ok(batch),
        }
    }

    /// The same data plane, measuring into `metrics` (the node's, for this shard).
    pub fn with_metrics(mut self, metrics: Arc<ShardMetrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Runs `work`, recording how long it took in the histogram `pick` chooses of this
    /// shard's metrics (when recording is on).
    pub(crate) async fn timed<T>(
        &self,
        pick: impl Fn(&ShardMetrics) -> &Histogram,
        work: impl Future<Output = T>,
    ) -> T {
        if !self.metrics.enabled() {
            return work.await;
        }
        let started_us = self.clock.now_us();
        let result = work.await;
        pick(&self.metrics).record(self.clock.now_us().saturating_sub(started_us));
        result
    }

    pub(crate) fn metrics(&self) -> &ShardMetrics {
        &self.metrics
    }

    /// The same data plane on `clock`'s time.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The same data plane, opening partitions whose appends all sync before their
    /// acknowledgement (`replicated` topics as `persisted` ones) when `enforce_fsync` is set.
    pub fn with_enforce_fsync(mut self, enforce_fsync: bool) -> Self {
        self.enforce_fsync = enforce_fsync;
        self
    }

    /// The same data plane, opening partitions whose threshold syncs start at most once per
    /// `sync_interval_us` (0: at every threshold).
    pub fn with_sync_interval(mut self, sync_interval_us: u64) -> Self {
        self.sync_interval_us = sync_interval_us;
        self
    }

    /// Gives every partition of the shard the time, so a threshold sync that waited for its
    /// interval starts though no append came (see `PartitionHandle::tick`).
    pub fn tick_partitions(&self, now_us: u64) {
        for entry in self.partitions.borrow().values() {
            entry.handle.tick(now_us);
        }
    }

    /// The same data plane, opening partitions whose reads verify every message checksum
    /// when `validate_checksum` is set.
    pub fn with_validate_checksum(mut self, validate_checksum: bool) -> Self {
        self.validate_checksum = validate_checksum;
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn group_config(&self) -> GroupConfig {
        self.config
    }

    pub fn place(&self) -> ShardPlace {
        self.place
    }

    /// Opens every partition the metadata knows and sets up every group (start-up). A
    /// partition that cannot be opened (a full disk, no free file descriptor) is logged and
    /// left closed, so the others are served; [`Self::retry_unopened`] tries it again.
    pub async fn open_all(&self, metadata: &Metadata) -> Result<(), DataError> {
        let opened = match self.reconcile(metadata).await {
            Err(DataError::Partition { .. }) => Ok(()),
            other => other,
        };
        self.started.set(true);
        opened
    }

    /// Cluster mode: the data directory is rebuilt from the replica log, so every partition
    /// directory made while the log replays, or after, belongs to a partition being created:
    /// none is a loss to warn of, and no bare directory is anyone's to adopt.
    pub fn rebuilt_from_log(&self) {
        self.started.set(true);
    }

    /// Tries again to open the partitions an earlier open left closed, once their retry is
    /// due at `now_us` (a second after the failure, the wait doubling up to a minute);
    /// `metadata` gives the current metadata once no other reconcile runs (one running
    /// retries them itself). Cheap when every partition is open.
    pub async fn retry_unopened(&self, now_us: u64, metadata: impl FnOnce() -> Rc<Metadata>) {
        let Some(retry) = self.unopened_retry.get() else {
            return;
        };
        if now_us < retry.at_us {
            return;
        }
        let Some(_reconciling) = self.reconciling.try_lock() else {
            return;
        };
        let metadata = metadata();
        // Failures are logged (and the time of the next retry set) inside.
        let _ = self.reconcile_locked(&metadata, now_us).await;
    }

    /// Brings partitions and groups in step after `op` was applied to `metadata`. On a
    /// server of several shards the leader calls it last, after every other shard closed
    /// what the op deletes: only the leader removes directories and groups.
    pub async fn on_applied(&self, op: &MetadataOp, metadata: &Metadata) -> Result<(), DataError> {
        match op {
            MetadataOp::CreateTopic { .. }
            | MetadataOp::CreatePartitions { .. }
            | MetadataOp::DeletePartitions { .. }
            | MetadataOp::CreateConsumerGroup { .. } => self.reconcile(metadata).await,
            MetadataOp::DeleteTopic { stream_id, id } => {
                // A partition elsewhere that still cannot be opened does not keep this
                // topic's files: its error is returned after they went.
                let reconciled = self.reconcile(metadata).await;
                if !self.place.is_leader() {
                    return reconciled;
                }
                let topic = self
                    .root
                    .join("streams")
                    .join(stream_id.to_string())
                    .join("topics")
                    .join(id.to_string());
                self.remove_deleted(&topic).await;
                reconciled
            }
            MetadataOp::DeleteStream { id } => {
                let reconciled = self.reconcile(metadata).await;
                if !self.place.is_leader() {
                    return reconciled;
                }
                let stream = self.root.join("streams").join(id.to_string());
                self.remove_deleted(&stream).await;
                reconciled
            }
            MetadataOp::DeleteConsumerGroup {
                stream_id,
                topic_id,
                id,
            } if self.place.is_leader() => {
                let key = GroupKey {
                    stream_id: *stream_id,
                    topic_id: *topic_id,
                    group_id: *id,
                };
                self.forget_group(key);
                self.delete_group_offsets(key).await
            }
            _ => Ok(()),
        }
    }

    /// Closes every partition cleanly (shutdown).
    pub async fn close(&self) -> Result<(), DataError> {
        let entries: Vec<(PartitionKey, Entry)> =
            std::mem::take(&mut *self.partitions.borrow_mut())
                .into_iter()
                .collect();
        let mut first_error = None;
        for (key, entry) in entries {
            self.routes.pin().remove(&key);
            if let Err(source) = entry.handle.close(false).await {
                first_error.get_or_insert(DataError::Partition { key, source });
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// The partition's task, if it is open, whichever shard owns it.
    pub fn partition(&self, key: PartitionKey) -> Option<PartitionHandle> {
        self.routes
            .pin()
            .get(&key)
            .map(|route| route.handle.clone())
    }

    /// The open partitions matching `stream_id` / `topic_id` (`None` = any), every shard's.
    fn matching(
        &self,
        stream_id: Option<u32>,
        topic_id: Option<u32>,
    ) -> Vec<(PartitionKey, PartitionHandle)> {
        let routes = self.routes.pin();
        routes
            .iter()
            .filter(|(key, _)| {
                stream_id.is_none_or(|id| id == key.stream_id)
                    && topic_id.is_none_or(|id| id == key.topic_id)
            })
            .map(|(key, route)| (*key, route.handle.clone()))
            .collect()
    }

    pub fn partition_stats(&self, key: PartitionKey) -> Option<PartitionStats> {
        self.partition(key).map(|handle| handle.stats())
    }

    /// The open partitions that refuse appends (damage found at open, or a failed fsync),
    /// every shard's, in key order.
    pub fn quarantined(&self) -> Vec<PartitionKey> {
        let mut keys: Vec<PartitionKey> = self
            .matching(None, None)
            .into_iter()
            .filter(|(_, handle)| handle.stats().quarantined)
            .map(|(key, _)| key)
            .collect();
        keys.sort_unstable();
        keys
    }

    /// Sums over the partitions matching `stream_id` / `topic_id` (`None` = any).
    pub fn totals(&self, stream_id: Option<u32>, topic_id: Option<u32>) -> Totals {
        let mut totals = Totals::default();
        for (_, handle) in self.matching(stream_id, topic_id) {
            let stats = handle.stats();
            totals.partitions_count = totals.partitions_count.saturating_add(1);
            totals.segments_count += u64::from(stats.segments_count);
            totals.messages_count += stats.messages_count;
            totals.size_bytes += stats.size_bytes;
        }
        totals
    }

    /// Deletes every message and stored offset of the partitions matching the filter
    /// (`PURGE_STREAM`, `PURGE_TOPIC`). A partition deleted while the purge runs (a
    /// `DELETE_PARTITIONS` or a topic delete committed meanwhile) has nothing left to purge.
    pub async fn purge(&self, stream_id: u32, topic_id: Option<u32>) -> Result<(), DataError> {
        for (key, handle) in self.matching(Some(stream_id), topic_id) {
            match handle.purge().await {
                Ok(()) => {}
                Err(PartitionError::Closed) if self.partition(key).is_none() => {}
                Err(source) => return Err(DataError::Partition { key, source }),
            }
        }
        Ok(())
    }

    /// Deletes the oldest `count` sealed segments of one partition (`DELETE_SEGMENTS`);
    /// the active segment stays. Returns how many went, or `None` when the partition is not
    /// open.
    pub async fn delete_segments(
        &self,
        key: PartitionKey,
        count: u32,
    ) -> Result<Option<usize>, DataError> {
        let Some(handle) = self.partition(key) else {
            return Ok(None);
        };
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        handle
            .delete_oldest_segments(count)
            .await
            .map(Some)
            .map_err(|source| DataError::Partition { key, source })
    }

    /// Where `DELETE_SEGMENTS` of `count` would cut the partition now: the offset after the
    /// last of its oldest `count` sealed segments (`None`: no sealed segment would go), so a
    /// cluster's primary can replicate the deletion as an offset
    /// ([`crate::cluster::ReplicatedOp::DeleteSegments`]). `Ok(None)` too when the partition
    /// is not open here; the apply then refuses it.
    pub async fn segments_cut(
        &self,
        key: PartitionKey,
        count: u32,
    ) -> Result<Option<u64>, DataError> {
        let Some(handle) = self.partition(key) else {
            return Ok(None);
        };
        let segments =
            (handle.segments().await).map_err(|source| DataError::Partition { key, source })?;
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        let sealed = segments.iter().filter(|segment| segment.sealed);
        Ok(sealed.take(count).last().map(|segment| segment.next_offset))
    }

    /// Deletes every sealed segment of one partition that ends at or before `below` (a
    /// replicated `DELETE_SEGMENTS`); the active segment stays. Returns how many went, or
    /// `None` when the partition is not open.
    pub async fn delete_segments_below(
        &self,
        key: PartitionKey,
        below: u64,
    ) -> Result<Option<usize>, DataError> {
        let Some(handle) = self.partition(key) else {
            return Ok(None);
        };
        let failed = |source| DataError::Partition { key, source };
        let segments = handle.segments().await.map_err(failed)?;
        let mut deleted = 0;
        for segment in segments {
            if segment.sealed && segment.next_offset <= below {
                // Appends meanwhile only touch the active segment, so a sealed one found
                // above is still there unless retention took it first.
                if handle
                    .delete_segment(segment.start_offset)
                    .await
                    .map_err(failed)?
                {
                    deleted += 1;
                }
            }
        }
        Ok(Some(deleted))
    }

    /// The next round-robin pick for a topic.
    fn next_balanced(&self, stream_id: u32, topic_id: u32) -> u32 {
        let mut balanced = self.balanced.borrow_mut();
        let cursor = balanced.entry((stream_id, topic_id)).or_insert(0);
        let value = *cursor;
        *cursor = cursor.wrapping_add(1);
        value
    }

    async fn reconcile(&self, metadata: &Metadata) -> Result<(), DataError> {
        let _reconciling = self.reconciling.lock().await;
        self.reconcile_locked(metadata, self.clock.now_us()).await
    }

    /// Closes the partitions `metadata` no longer holds and opens those it holds that are
    /// not open. A partition that cannot be opened is logged and skipped, so one full disk
    /// or exhausted descriptor table does not close the rest; the first failure of one that
    /// did not fail before (one the change being applied added) is returned after the others
    /// were tried. Those that failed before wait for their retry, whose schedule only a
    /// retry or a new failure changes.
    async fn reconcile_locked(&self, metadata: &Metadata, now_us: u64) -> Result<(), DataError> {
        let wanted = self.wanted(metadata);
        let stale: Vec<(PartitionKey, PartitionHandle)> = {
            let partitions = self.partitions.borrow();
            partitions
                .iter()
                .filter(|(key, entry)| {
                    wanted
                        .get(key)
                        .is_none_or(|(identity, _)| identity.incarnation != entry.incarnation)
                })
                .map(|(key, entry)| (*key, entry.handle.clone()))
                .collect()
        };
        for (key, handle) in stale {
            self.partitions.borrow_mut().remove(&key);
            self.routes.pin().remove(&key);
            // The partition is gone from the metadata already: a directory the disk will not
            // remove is never served again (`identity.rs`) and moves to `orphaned/` at the
            // next start (`orphans.rs`), so the failure is logged and the rest reconciled.
            if let Err(error) = handle.close(true).await {
                log::error!(
                    "partition {}/{}/{}: deleted, but its files could not be removed ({}); \
                     they are moved to {ORPHANS}/ at the next start",
                    key.stream_id,
                    key.topic_id,
                    key.partition_id,
                    causes(&error)
                );
            }
        }
        let before = self.unopened.take();
        let mut failed = BTreeSet::new();
        let mut unopened = None;
        for (key, (identity, spec)) in wanted {
            if self.partitions.borrow().contains_key(&key) {
                continue;
            }
            let handle = match self.open_partition(key, identity, spec).await {
                Ok(handle) => handle,
                Err(source) => {
                    log::error!(
                        "partition {}/{}/{}: cannot be opened, so it is not served until a \
                         retry succeeds: {}",
                        key.stream_id,
                        key.topic_id,
                        key.partition_id,
                        causes(&source)
                    );
                    if !before.contains(&key) {
                        unopened.get_or_insert(DataError::Partition { key, source });
                    }
                    failed.insert(key);
                    continue;
                }
            };
            self.serve_opened(key, identity.incarnation, handle);
        }
        if self.place.is_leader() {
            self.reconcile_groups(metadata);
        }
        let retry = Retry::next(self.unopened_retry.get(), (&before, &failed), now_us);
        self.unopened_retry.set(retry);
        self.unopened.replace(failed);
        unopened.map_or(Ok(()), Err)
    }

    /// Opens the partition `key` in its directory, once the directory is known to be its own
    /// (`identity.rs`: one left by an earlier partition of the same ids is moved aside).
    async fn open_partition(
        &self,
        key: PartitionKey,
        identity: Identity,
        spec: PartitionSpec,
    ) -> Result<PartitionHandle, PartitionError> {
        let orphans = self.root.join(ORPHANS);
        let incarnation = (key, identity.incarnation);
        if !self.started.get() {
            self.at_start.borrow_mut().insert(incarnation);
        }
        let adopt_bare = self.at_start.borrow().contains(&incarnation);
        let directory = &spec.directory;
        let claimed = identity::claim(
            &self.storage,
            (key, directory),
            identity,
            &orphans,
            adopt_bare,
        )
        .await
        .map_err(PartitionError::Claim)?;
        if claimed == Claimed::Made && !self.started.get() {
            log::warn!(
                "partition {}/{}/{}: its directory was missing at start; created empty (the \
                 messages it held, if any, are lost; a crash right after its creation \
                 explains it too)",
                key.stream_id,
                key.topic_id,
                key.partition_id
            );
        }
        if let Claimed::MovedAside(aside) = claimed {
            log::warn!(
                "partition {}/{}/{}: its directory held an earlier partition of the same ids \
                 (a delete whose removal failed, or lost metadata); moved to {} and the \
                 partition created empty",
                key.stream_id,
                key.topic_id,
                key.partition_id,
                aside.display()
            );
        }
        let observer = Arc::new(SyncObserver {
            metrics: Arc::clone(&self.metrics),
            clock: Arc::clone(&self.clock),
        });
        PartitionHandle::open(self.storage.clone(), spec, observer).await
    }

    /// Routes requests for `key` to the partition just opened.
    fn serve_opened(&self, key: PartitionKey, incarnation: u64, handle: PartitionHandle) {
        let route = Route {
            shard: self.place.index,
            handle: handle.clone(),
        };
        self.routes.pin().insert(key, route);
        let entry = Entry {
            incarnation,
            handle,
        };
        self.partitions.borrow_mut().insert(key, entry);
    }

    async fn delete_group_offsets(&self, key: GroupKey) -> Result<(), DataError> {
        let handles = self.matching(Some(key.stream_id), Some(key.topic_id));
        let owner = segment::offsets::OffsetOwner::Group(key.group_id);
        for (partition, handle) in handles {
            handle
                .delete_offset(owner)
                .await
                .map_err(|source| DataError::Partition {
                    key: partition,
                    source,
                })?;
        }
        Ok(())
    }

    /// Removes the directory of a deleted stream or topic. The delete is committed whatever
    /// happens here, so a removal that fails (a failing disk, a file that cannot be removed)
    /// is logged, not answered: what it leaves is never served (`identity.rs`) and is moved
    /// to `orphaned/` at the next start (`orphans.rs`).
    async fn remove_deleted(&self, path: &Path) {
        if let Err(error) = self.remove_directory(path).await {
            log::error!(
                "{}: the delete is committed but its directory could not be removed ({}); \
                 it is moved to {}/ at the next start",
                path.display(),
                causes(&error),
                ORPHANS
            );
        }
    }

    async fn remove_directory(&self, path: &Path) -> Result<(), DataError> {
        if !self.storage.exists(path).await {
            return Ok(());
        }
        self.storage
            .remove_dir_all(path)
            .await
            .map_err(|source| DataError::Remove {
                path: path.to_path_buf(),
                source,
            })
    }

    /// Every partition the metadata holds that this shard owns, with its identity and how to
    /// open it.
    fn wanted(&self, metadata: &Metadata) -> BTreeMap<PartitionKey, (Identity, PartitionSpec)> {
        let mut wanted = BTreeMap::new();
        for (stream_id, topic_id, topic) in topics(metadata) {
            for partition in topic.partitions.values() {
                let key = PartitionKey {
                    stream_id,
                    topic_id,
                    partition_id: partition.id,
                };
                if !self.place.owns(key) {
                    continue;
                }
                let identity = Identity {
                    incarnation: partition.incarnation,
                    created_at: partition.created_at,
                };
                wanted.insert(key, (identity, self.spec(key, topic)));
            }
        }
        wanted
    }

    fn spec(&self, key: PartitionKey, topic: &Topic) -> PartitionSpec {
        let settings = &topic.settings;
        PartitionSpec {
            directory: partition_directory(
                &self.root,
                key.stream_id,
                key.topic_id,
                key.partition_id,
            ),
            log: LogConfig {
                segment_size_bytes: settings.segment_size_bytes,
                durability: if self.enforce_fsync {
                    Durability::Persisted
                } else {
                    settings.durability
                },
                messages_required_to_save: settings.messages_required_to_save,
                size_of_messages_required_to_save: settings.size_of_messages_required_to_save,
                sync_interval_us: self.sync_interval_us,
                validate_checksum: self.validate_checksum,
                preallocation: if settings.preallocate_segments {
                    Preallocation::Segment
                } else {
                    Preallocation::Ahead(PREALLOCATE_AHEAD_DEFAULT)
                },
            },
            offsets_durability: settings.consumer_offset_durability,
        }
    }
}

/// Every (stream id, topic id, topic) of the metadata.
fn topics(metadata: &Metadata) -> impl Iterator<Item = (u32, u32, &Topic)> {
    metadata.streams.values().flat_map(|stream| {
        stream
            .topics
            .values()
            .map(move |topic| (stream.id, topic.id, topic))
    })
}

#[cfg(test)]
#[path = "tests.rs"]
pub(crate) mod tests;
