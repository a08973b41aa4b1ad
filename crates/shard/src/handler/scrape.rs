//! One scrape of `/metrics`: every family, read from the server's state and the shards'
//! [`crate::metrics`].

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use proto::codes::CommandCode;
use segment::offsets::OffsetOwner;

use crate::connection::TransportKind;
use crate::data::{PartitionHandle, PartitionKey, PartitionStats};
use crate::metadata::Metadata;
use crate::metrics::{Exposition, HistogramSnapshot, Kind, ShardMetrics, snake_case};
use crate::procfs::ProcessNumbers;
use crate::server::{Replication, SERVER_VERSION, Server};

/// Stored consumer offsets exported per scrape. Consumer ids are chosen by clients, so
/// their number has no natural bound: past this many (consumer, partition) pairs the rest
/// are counted in `iggy_consumer_series_dropped` instead of exported.
pub const CONSUMER_SERIES_MAX: usize = 10_000;

const MICROS: f64 = 1e6;

impl Server {
    /// Every metric in the Prometheus text format, as of now (`GET /metrics`).
    pub async fn scrape_metrics(&self) -> String {
        scrape(self).await
    }
}

async fn scrape(server: &Server) -> String {
    let now_us = server.now_us();
    let metadata = Rc::clone(&server.metadata.borrow());
    let partitions = partitions(server, &metadata);
    let mut out = Exposition::default();
    process(&mut out, server, now_us);
    entities(&mut out, server, &metadata, &partitions);
    partition_families(&mut out, &partitions);
    topic_and_stream_families(&mut out, &metadata, &partitions);
    let consumers = consumers(&partitions, &metadata, now_us).await;
    consumer_families(&mut out, &consumers);
    let shards: Vec<&ShardMetrics> = server.node.metrics.shards().iter().map(|s| &**s).collect();
    latency_families(&mut out, &shards);
    counter_families(&mut out, &shards);
    shard_families(&mut out, server, &shards);
    cluster_families(&mut out, server);
    out.finish()
}

/// One partition as the scrape sees it.
struct PartitionRow {
    key: PartitionKey,
    stream: String,
    topic: String,
    partition: String,
    handle: Option<PartitionHandle>,
    stats: PartitionStats,
}

impl PartitionRow {
    fn labels(&self) -> [(&str, &str); 3] {
        [
            ("stream", &self.stream),
            ("topic", &self.topic),
            ("partition", &self.partition),
        ]
    }
}

fn partitions(server: &Server, metadata: &Metadata) -> Vec<PartitionRow> {
    let mut rows = Vec::new();
    for stream in metadata.streams.values() {
        for topic in stream.topics.values() {
            for &partition_id in topic.partitions.keys() {
                let key = PartitionKey {
                    stream_id: stream.id,
                    topic_id: topic.id,
                    partition_id,
                };
                let handle = server.data.partition(key);
                let stats = handle.as_ref().map(|h| h.stats()).unwrap_or_default();
                rows.push(PartitionRow {
                    key,
                    stream: stream.name.clone(),
                    topic: topic.name.clone(),
                    partition: partition_id.to_string(),
                    handle,
                    stats,
                });
            }
        }
    }
    rows
}

fn process(out: &mut Exposition, server: &Server, now_us: u64) {
    let process = ProcessNumbers::read();
    out.family(
        "iggy_build_info",
        Kind::Gauge,
        "The server's version; always 1.",
    );
    out.sample(&[("version", SERVER_VERSION)], 1);
    let uptime = seconds(now_us.saturating_sub(server.info.started_at_us));
    out.single(
        "iggy_uptime_seconds",
        Kind::Gauge,
        "Seconds since start.",
        uptime,
    );
    let cpu = crate::cpu::process_cpu_seconds();
    out.single(
        "process_cpu_seconds_total",
        Kind::Counter,
        "User and system CPU time of the server process.",
        cpu,
    );
    out.single(
        "process_resident_memory_bytes",
        Kind::Gauge,
        "Resident memory of the server process.",
        process.memory_usage_bytes,
    );
    out.single(
        "process_threads",
        Kind::Gauge,
        "Threads of the server process.",
        process.threads_count,
    );
    out.single(
        "process_open_fds",
        Kind::Gauge,
        "Open file descriptors.",
        process.open_files_count,
    );
    out.single(
        "process_max_fds",
        Kind::Gauge,
        "Limit of open file descriptors.",
        process.open_files_limit,
    );
    let (free, total) = crate::cpu::disk_space(server.data.root());
    out.single(
        "iggy_disk_free_bytes",
        Kind::Gauge,
        "Free bytes on the data directory's filesystem.",
        free,
    );
    out.single(
        "iggy_disk_total_bytes",
        Kind::Gauge,
        "Size of the data directory's filesystem.",
        total,
    );
}

fn entities(out: &mut Exposition, server: &Server, metadata: &Metadata, rows: &[PartitionRow]) {
    let topics = metadata.streams.values().flat_map(|s| s.topics.values());
    let (topics_count, groups_count) =
        topics.fold((0, 0), |(t, g), topic| (t + 1, g + topic.groups.len()));
    let counts = [
        ("iggy_streams", "Streams.", metadata.streams.len()),
        ("iggy_topics", "Topics.", topics_count),
        ("iggy_partitions", "Partitions.", rows.len()),
        ("iggy_consumer_groups", "Consumer groups.", groups_count),
        ("iggy_users", "Users.", metadata.users.len()),
        (
            "iggy_sessions",
            "Live sessions.",
            server.node.sessions.len(),
        ),
    ];
    for (name, help, value) in counts {
        out.single(name, Kind::Gauge, help, value);
    }
    let mut connections = [0_usize; TransportKind::ALL.len()];
    for record in server.node.clients.pin().values() {
        connections[record.transport.index()] += 1;
    }
    out.family("iggy_connections", Kind::Gauge, "Open client connections.");
    for (kind, count) in TransportKind::ALL.iter().zip(connections) {
        out.sample(&[("transport", kind.label())], count);
    }
    let totals = server.data.totals(None, None);
    out.single(
        "iggy_messages",
        Kind::Gauge,
        "Messages stored in every partition (as GET_STATS).",
        totals.messages_count,
    );
    out.single(
        "iggy_messages_bytes",
        Kind::Gauge,
        "Bytes of the stored messages (as GET_STATS).",
        totals.size_bytes,
    );
    out.single(
        "iggy_segments",
        Kind::Gauge,
        "Segments of every partition (as GET_STATS).",
        totals.segments_count,
    );
    out.single(
        "iggy_clients",
        Kind::Gauge,
        "Open client connections (as GET_STATS).",
        server.node.clients.len(),
    );
    let quarantined = rows.iter().filter(|row| row.stats.quarantined).count();
    out.single(
        "iggy_partitions_quarantined",
        Kind::Gauge,
        "Partitions refusing appends after damage or a failed sync.",
        quarantined,
    );
}

fn partition_families(out: &mut Exposition, rows: &[PartitionRow]) {
    let families: [(&str, &str, Field); 5] = [
        ("iggy_partition_messages", "Messages stored.", |s| {
            s.messages_count
        }),
        ("iggy_partition_bytes", "Bytes stored.", |s| s.size_bytes),
        ("iggy_partition_segments", "Segments.", |s| {
            u64::from(s.segments_count)
        }),
        (
            "iggy_partition_first_offset",
            "First offset still stored (retention moves it).",
            |s| s.first_offset,
        ),
        (
            "iggy_partition_current_offset",
            "Offset of the last message (0 when empty).",
            |s| s.current_offset,
        ),
    ];
    for (name, help, field) in families {
        out.family(name, Kind::Gauge, help);
        for row in rows {
            out.sample(&row.labels(), field(&row.stats));
        }
    }
}

/// Sums of the partitions' messages, bytes and segments per topic and per stream.
/// Every stream and topic has its series, 0 without partitions.
fn topic_and_stream_families(out: &mut Exposition, metadata: &Metadata, rows: &[PartitionRow]) {
    let mut topics: BTreeMap<(&str, &str), [u64; 3]> = BTreeMap::new();
    let mut streams: BTreeMap<&str, [u64; 3]> = BTreeMap::new();
    for stream in metadata.streams.values() {
        streams.insert(&stream.name, [0; 3]);
        for topic in stream.topics.values() {
            topics.insert((&stream.name, &topic.name), [0; 3]);
        }
    }
    for row in rows {
        let stats = &row.stats;
        let sum = topics.entry((&row.stream, &row.topic)).or_default();
        for (total, value) in sum.iter_mut().zip(sums_of(stats)) {
            *total += value;
        }
    }
    for ((stream, _), values) in &topics {
        let sum = streams.entry(stream).or_default();
        for (total, value) in sum.iter_mut().zip(values) {
            *total += value;
        }
    }
    let summed = [
        ("messages", "Messages"),
        ("bytes", "Bytes"),
        ("segments", "Segments"),
    ];
    for (index, (suffix, what)) in summed.into_iter().enumerate() {
        let help = format!("{what} of the topic's partitions.");
        out.family(&format!("iggy_topic_{suffix}"), Kind::Gauge, &help);
        for ((stream, topic), values) in &topics {
            out.sample(&[("stream", stream), ("topic", topic)], values[index]);
        }
    }
    for (index, (suffix, what)) in summed.into_iter().enumerate() {
        let help = format!("{what} of the stream's partitions.");
        out.family(&format!("iggy_stream_{suffix}"), Kind::Gauge, &help);
        for (stream, values) in &streams {
            out.sample(&[("stream", stream)], values[index]);
        }
    }
}

/// A partition's messages, bytes and segments.
fn sums_of(stats: &PartitionStats) -> [u64; 3] {
    [
        stats.messages_count,
        stats.size_bytes,
        u64::from(stats.segments_count),
    ]
}

/// One stored consumer offset and its lag.
struct ConsumerRow<'r> {
    partition: &'r PartitionRow,
    kind: &'static str,
    consumer: String,
    stored: u64,
    lag_messages: u64,
    lag_seconds: f64,
}

/// Every stored offset (up to [`CONSUMER_SERIES_MAX`]) with its lag, and how many were left
/// out. The lag in seconds is the age of the first message not yet consumed: its record's
/// append time, asked of the partition's task once per partition.
async fn consumers<'r>(
    rows: &'r [PartitionRow],
    metadata: &Metadata,
    now_us: u64,
) -> (Vec<ConsumerRow<'r>>, usize) {
    let mut exported = Vec::new();
    let mut dropped = 0;
    for row in rows {
        let Some(handle) = &row.handle else { continue };
        let stored = handle.stored_offsets();
        let room = CONSUMER_SERIES_MAX.saturating_sub(exported.len());
        dropped += stored.len().saturating_sub(room);
        let stored = &stored[..stored.len().min(room)];
        if stored.is_empty() {
            continue;
        }
        let stats = row.stats;
        // The first unconsumed message of each: after the stored offset, and still stored.
        let next: Vec<u64> = stored
            .iter()
            .map(|&(_, offset)| offset.saturating_add(1).max(stats.first_offset))
            .collect();
        let times = handle.timestamps(next).await.unwrap_or_default();
        for (index, &(owner, offset)) in stored.iter().enumerate() {
            // Messages retention deleted are not waiting for anyone: the lag counts from the
            // first stored offset at most.
            let read_up_to = offset.max(stats.first_offset.saturating_sub(1));
            let lag_messages = if stats.is_empty() {
                0
            } else {
                stats.current_offset.saturating_sub(read_up_to)
            };
            let age_us = match times.get(index) {
                Some(Some(time)) if lag_messages > 0 => now_us.saturating_sub(*time),
                _ => 0,
            };
            let (kind, consumer) = consumer_labels(metadata, row.key, owner);
            exported.push(ConsumerRow {
                partition: row,
                kind,
                consumer,
                stored: offset,
                lag_messages,
                lag_seconds: seconds(age_us),
            });
        }
    }
    (exported, dropped)
}

/// `("consumer", id)` for a plain consumer, `("consumer_group", name)` for a group.
fn consumer_labels(
    metadata: &Metadata,
    key: PartitionKey,
    owner: OffsetOwner,
) -> (&'static str, String) {
    match owner {
        OffsetOwner::Consumer(id) => ("consumer", id.to_string()),
        OffsetOwner::Group(id) => {
            let name = metadata
                .topic_by_ids(key.stream_id, key.topic_id)
                .and_then(|topic| topic.groups.get(&id))
                .map_or_else(|| id.to_string(), |group| group.name.clone());
            ("consumer_group", name)
        }
    }
}

fn consumer_families(out: &mut Exposition, (rows, dropped): &(Vec<ConsumerRow<'_>>, usize)) {
    fn labels<'a>(row: &'a ConsumerRow<'_>) -> [(&'a str, &'a str); 5] {
        let [stream, topic, partition] = row.partition.labels();
        let consumer = ("consumer", row.consumer.as_str());
        [stream, topic, partition, ("kind", row.kind), consumer]
    }
    out.family(
        "iggy_consumer_offset",
        Kind::Gauge,
        "Stored offset of a consumer or consumer group.",
    );
    for row in rows {
        out.sample(&labels(row), row.stored);
    }
    out.family(
        "iggy_consumer_lag_messages",
        Kind::Gauge,
        "Messages stored after the stored offset (current offset minus stored offset).",
    );
    for row in rows {
        out.sample(&labels(row), row.lag_messages);
    }
    out.family(
        "iggy_consumer_lag_seconds",
        Kind::Gauge,
        "Age of the first message not yet consumed (0 when caught up).",
    );
    for row in rows {
        out.sample(&labels(row), row.lag_seconds);
    }
    out.single(
        "iggy_consumer_series_dropped",
        Kind::Gauge,
        "Stored offsets left out of this scrape (over the series cap).",
        dropped,
    );
}

fn merged(
    shards: &[&ShardMetrics],
    pick: impl Fn(&ShardMetrics) -> HistogramSnapshot,
) -> HistogramSnapshot {
    let mut snapshots = shards.iter().map(|shard| pick(shard));
    let mut total = snapshots.next().expect("a server has at least one shard");
    for snapshot in snapshots {
        total.merge(&snapshot);
    }
    total
}

type PickHistogram = fn(&ShardMetrics) -> HistogramSnapshot;
type PickCounter = fn(&ShardMetrics) -> u64;
type Field = fn(&PartitionStats) -> u64;

fn latency_families(out: &mut Exposition, shards: &[&ShardMetrics]) {
    out.family(
        "iggy_request_duration_seconds",
        Kind::Histogram,
        "Requests, from arrival at the shard to their answer, per command and transport.",
    );
    for code in CommandCode::all() {
        let command = snake_case(&format!("{code:?}"));
        for transport in TransportKind::ALL {
            let index = transport.index();
            let snapshot = merged(shards, |shard| shard.request(code, index).snapshot());
            if snapshot.count() > 0 {
                let labels = [
                    ("command", command.as_str()),
                    ("transport", transport.label()),
                ];
                out.histogram(&labels, &snapshot, MICROS);
            }
        }
    }
    let families: [(&str, &str, PickHistogram, f64); 5] = [
        (
            "iggy_append_duration_seconds",
            "Partition appends, the group commit's sync included.",
            |s| s.append_us.snapshot(),
            MICROS,
        ),
        (
            "iggy_read_duration_seconds",
            "Partition reads (polls and fetches).",
            |s| s.read_us.snapshot(),
            MICROS,
        ),
        (
            "iggy_fsync_duration_seconds",
            "fdatasync of a round of appends (group commit).",
            |s| s.group_sync_us.snapshot(),
            MICROS,
        ),
        (
            "iggy_group_commit_appends",
            "Appends one group-commit sync covered.",
            |s| s.group_sync_appends.snapshot(),
            1.0,
        ),
        (
            "iggy_threshold_sync_duration_seconds",
            "fdatasync beside the appends of replicated topics.",
            |s| s.threshold_sync_us.snapshot(),
            MICROS,
        ),
    ];
    for (name, help, pick, divisor) in families {
        out.family(name, Kind::Histogram, help);
        out.histogram(&[], &merged(shards, pick), divisor);
    }
}

fn counter_families(out: &mut Exposition, shards: &[&ShardMetrics]) {
    let counters: [(&str, &str, PickCounter); 3] = [
        (
            "iggy_logins_failed_total",
            "Logins refused (bad credentials, inactive user, backoff).",
            |s| s.logins_failed.load(Ordering::Relaxed),
        ),
        (
            "iggy_no_space_refusals_total",
            "Appends refused because the disk is full.",
            |s| s.no_space_refusals.load(Ordering::Relaxed),
        ),
        (
            "iggy_retention_deleted_segments_total",
            "Segments deleted by retention (age or size).",
            |s| s.retention_deleted_segments.load(Ordering::Relaxed),
        ),
    ];
    for (name, help, pick) in counters {
        let total = shards
            .iter()
            .fold(0_u64, |total, shard| total.saturating_add(pick(shard)));
        out.single(name, Kind::Counter, help, total);
    }
}

fn shard_families(out: &mut Exposition, server: &Server, shards: &[&ShardMetrics]) {
    let names: Vec<String> = (0..shards.len()).map(|index| index.to_string()).collect();
    out.family(
        "iggy_pool_buffers",
        Kind::Gauge,
        "Buffer-pool buffers per shard, size class and state.",
    );
    for (shard, metrics) in names.iter().zip(shards) {
        for (bucket, slots) in pool::Bucket::all().zip(&metrics.pool) {
            let class = bucket.capacity().to_string();
            for (state, slot) in ["in_use", "free"].into_iter().zip(slots) {
                let value = slot.load(Ordering::Relaxed);
                if value > 0 {
                    out.sample(
                        &[("shard", shard), ("class", &class), ("state", state)],
                        value,
                    );
                }
            }
        }
    }
    out.family(
        "iggy_pool_allocated_bytes",
        Kind::Gauge,
        "Bytes the shard's buffer pool holds.",
    );
    for (shard, metrics) in names.iter().zip(shards) {
        out.sample(
            &[("shard", shard)],
            metrics.pool_allocated_bytes.load(Ordering::Relaxed),
        );
    }
    out.family(
        "iggy_shard_queue_depth",
        Kind::Gauge,
        "Messages waiting in a shard's lanes.",
    );
    for (shard, (ordered, concurrent)) in names.iter().zip(server.node.queue_depths()) {
        out.sample(&[("shard", shard), ("lane", "ordered")], ordered);
        out.sample(&[("shard", shard), ("lane", "concurrent")], concurrent);
    }
}

fn cluster_families(out: &mut Exposition, server: &Server) {
    let Some(replication) = server.replication() else {
        return;
    };
    let status = &replication.status;
    out.single(
        "iggy_cluster_view",
        Kind::Gauge,
        "The replica's view.",
        status.view(),
    );
    let gauges = [
        (
            "iggy_cluster_primary",
            "1 on the primary of a view in normal operation.",
            replication.is_primary(),
        ),
        (
            "iggy_cluster_normal",
            "1 in normal operation (not between views or recovering).",
            status.is_normal(),
        ),
        (
            "iggy_cluster_caught_up",
            "1 when every committed op is applied here.",
            status.is_caught_up(),
        ),
    ];
    for (name, help, value) in gauges {
        out.single(name, Kind::Gauge, help, u8::from(value));
    }
    out.family(
        "iggy_cluster_peer_reachable",
        Kind::Gauge,
        "1 when this node has a live connection to the replica.",
    );
    for node in &server.info.roster.nodes {
        if node.replica_id != replication.replica_id {
            let replica = node.replica_id.to_string();
            out.sample(
                &[("replica", &replica)],
                u8::from(status.reaches(node.replica_id)),
            );
        }
    }
    replica_progress(out, server, replication);
}

/// Where the replica log stands here and, on the primary, how far each replica lags.
fn replica_progress(out: &mut Exposition, server: &Server, replication: &Replication) {
    let status = &replication.status;
    let progress = status.progress();
    let ops = [
        (
            "iggy_cluster_op",
            "The replica log's highest op here.",
            progress.op,
        ),
        (
            "iggy_cluster_commit_op",
            "The highest op known committed here.",
            progress.commit,
        ),
        (
            "iggy_cluster_applied_op",
            "The highest op applied here.",
            progress.applied,
        ),
    ];
    for (name, help, value) in ops {
        out.single(name, Kind::Gauge, help, value);
    }
    if !replication.is_primary() {
        return;
    }
    out.family(
        "iggy_cluster_replica_lag_ops",
        Kind::Gauge,
        "On the primary: ops of its log a replica has not acknowledged in this view.",
    );
    for node in &server.info.roster.nodes {
        if node.replica_id != replication.replica_id {
            let replica = node.replica_id.to_string();
            let lag = progress.op.saturating_sub(status.acked(node.replica_id));
            out.sample(&[("replica", &replica)], lag);
        }
    }
}

// µs stay far below 2^53 in practice; the rounding of larger ones is harmless.
#[allow(clippy::cast_precision_loss, clippy::as_conversions)]
fn seconds(micros: u64) -> f64 {
    micros as f64 / MICROS
}
