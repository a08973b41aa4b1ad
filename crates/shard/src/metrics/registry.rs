//! [`ShardMetrics`]: what one shard measures, written by that shard alone; [`Metrics`]: every
//! shard's, shared through the node, read at scrape.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use proto::codes::CommandCode;

use super::histogram::{GROUP_BOUNDS, Histogram, LATENCY_BOUNDS_US};
use crate::clock::Clock;

/// Transports a request can arrive on (`TransportKind::index`).
pub const TRANSPORTS: usize = 4;

/// Buffer-pool classes (`pool::Bucket::COUNT`).
pub(super) const POOL_CLASSES: usize = pool::Bucket::COUNT;

/// One shard's measurements. Every field is written only on its shard's thread (the
/// partition tasks it owns run there too), so the atomics never contend.
#[derive(Debug)]
pub struct ShardMetrics {
    /// Request latency, from the frame's arrival at the handler to its outcome, per
    /// (command, transport): `requests[command.index() * TRANSPORTS + transport]`.
    requests: Box<[Histogram]>,
    /// A partition append, from the handoff to the partition's task to its answer (the
    /// group commit's sync included under `persisted`).
    pub append_us: Histogram,
    /// A partition read (poll or fetch), handoff to answer.
    pub read_us: Histogram,
    /// An fdatasync of a round's appends (group commit), and how many appends it covered.
    pub group_sync_us: Histogram,
    pub group_sync_appends: Histogram,
    /// A `replicated` threshold sync, beside the appends.
    pub threshold_sync_us: Histogram,
    pub logins_failed: AtomicU64,
    /// Appends refused because the disk is full.
    pub no_space_refusals: AtomicU64,
    /// Segments deleted by the retention pass (age or size).
    pub retention_deleted_segments: AtomicU64,
    /// The shard's buffer pool per class: `[in use, free]` buffers, published by the shard
    /// on its ticks (the pool itself never leaves its thread).
    pub pool: [[AtomicU64; 2]; POOL_CLASSES],
    pub pool_allocated_bytes: AtomicU64,
    /// Whether anything is recorded (`[http.metrics] enabled`).
    enabled: AtomicBool,
}

impl Default for ShardMetrics {
    fn default() -> Self {
        Self {
            requests: (0..CommandCode::COUNT * TRANSPORTS)
                .map(|_| Histogram::new(LATENCY_BOUNDS_US))
                .collect(),
            append_us: Histogram::new(LATENCY_BOUNDS_US),
            read_us: Histogram::new(LATENCY_BOUNDS_US),
            group_sync_us: Histogram::new(LATENCY_BOUNDS_US),
            group_sync_appends: Histogram::new(GROUP_BOUNDS),
            threshold_sync_us: Histogram::new(LATENCY_BOUNDS_US),
            logins_failed: AtomicU64::new(0),
            no_space_refusals: AtomicU64::new(0),
            retention_deleted_segments: AtomicU64::new(0),
            pool: std::array::from_fn(|_| [AtomicU64::new(0), AtomicU64::new(0)]),
            pool_allocated_bytes: AtomicU64::new(0),
            enabled: AtomicBool::new(true),
        }
    }
}

impl ShardMetrics {
    /// The latency histogram of `code` on transport number `transport` (`< TRANSPORTS`).
    pub fn request(&self, code: CommandCode, transport: usize) -> &Histogram {
        assert!(
            transport < TRANSPORTS,
            "transport {transport} is a TransportKind index"
        );
        // `index() < COUNT` and `transport < TRANSPORTS`: always inside the table.
        &self.requests[code.index() * TRANSPORTS + transport]
    }

    /// Whether recording is on: callers skip their clock readings too when it is off.
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Adds `n` to the counter `pick` chooses, when recording is on.
    pub fn add(&self, pick: fn(&Self) -> &AtomicU64, n: u64) {
        if self.enabled() {
            pick(self).fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Publishes the shard's pool counters.
    pub fn publish_pool(&self, pool: &pool::Pool) {
        for (bucket, slots) in pool::Bucket::all().zip(&self.pool) {
            let counters = pool.counters(bucket);
            slots[0].store(counters.in_use, Ordering::Relaxed);
            slots[1].store(counters.free, Ordering::Relaxed);
        }
        self.pool_allocated_bytes
            .store(pool.allocated_bytes(), Ordering::Relaxed);
    }
}

/// Every shard's metrics.
#[derive(Debug)]
pub struct Metrics {
    shards: Box<[Arc<ShardMetrics>]>,
}

impl Metrics {
    pub fn new(shard_count: usize) -> Self {
        Self {
            shards: (0..shard_count.max(1))
                .map(|_| Arc::new(ShardMetrics::default()))
                .collect(),
        }
    }

    pub fn shards(&self) -> &[Arc<ShardMetrics>] {
        &self.shards
    }

    /// Shard `index`'s metrics (the last shard's for an index out of range).
    pub fn shard(&self, index: usize) -> &Arc<ShardMetrics> {
        let last = self.shards.len() - 1;
        &self.shards[index.min(last)]
    }

    /// Turns recording on or off on every shard (`[http.metrics] enabled`, set at start).
    pub fn set_enabled(&self, enabled: bool) {
        for shard in &self.shards {
            shard.enabled.store(enabled, Ordering::Relaxed);
        }
    }
}

/// Reports the syncs of the partitions one shard owns into that shard's metrics.
#[derive(Debug)]
pub struct SyncObserver {
    pub metrics: Arc<ShardMetrics>,
    pub clock: Arc<dyn Clock>,
}

impl segment::partition::IoObserver for SyncObserver {
    fn now_us(&self) -> u64 {
        if self.metrics.enabled() {
            self.clock.now_us()
        } else {
            0
        }
    }

    fn group_synced(&self, appends: usize, elapsed_us: u64) {
        if self.metrics.enabled() {
            self.metrics.group_sync_us.record(elapsed_us);
            let appends = u64::try_from(appends).unwrap_or(u64::MAX);
            self.metrics.group_sync_appends.record(appends);
        }
    }

    fn threshold_synced(&self, elapsed_us: u64) {
        if self.metrics.enabled() {
            self.metrics.threshold_sync_us.record(elapsed_us);
        }
    }
}
