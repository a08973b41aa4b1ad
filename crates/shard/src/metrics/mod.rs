//! Metrics for `GET /metrics` (Prometheus text format): what the shards measure as they
//! serve, and what a scrape reads from the state they already keep.
//!
//! Measured: request latency per command and transport, partition append and read latency,
//! sync latency and group-commit sizes, failed logins, full-disk refusals, retention
//! deletions, each shard's buffer pool. Each shard writes only its own [`ShardMetrics`]
//! (relaxed atomic adds, no lock, no shared cache line); a scrape merges every shard's.
//! Recording reads the shard's [`crate::clock::Clock`] twice per timed operation, and
//! nothing when `[http.metrics] enabled = false`.
//!
//! Read at scrape (`crate::handler::scrape`, `Server::scrape_metrics`): entity counts,
//! per-partition counters and offsets, every stored consumer offset with its lag in messages
//! and in seconds, connections, sessions, lane depths, disk space, process CPU and memory,
//! quarantined partitions, cluster status.
//! `GET_STATS` and the metrics share their sources, so the quantities both report agree.

mod exposition;
mod histogram;
mod registry;
mod spans;

pub use exposition::{Exposition, Kind, snake_case};
pub use histogram::{GROUP_BOUNDS, Histogram, HistogramSnapshot, LATENCY_BOUNDS_US};
pub use registry::{Metrics, ShardMetrics, SyncObserver, TRANSPORTS};
pub use spans::{RequestSpan, SpanSink};
