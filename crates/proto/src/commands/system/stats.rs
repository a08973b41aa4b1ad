//! `GET_STATS` (10): the server statistics reply and its per-partition cache metrics. The
//! request is empty ([`crate::commands::Empty`]).

use alloc::string::String;
use alloc::vec::Vec;

use super::wire::{decode_counted, decode_text, encode_counted};
#[cfg(test)]
use super::wire::{small_vec, text_strategy};
use crate::codec::{Codec, Reader, Writer};
use crate::error::DecodeError;

/// Cache metric entries a stats reply may carry.
pub const CACHE_METRICS_MAX: usize = 1_000_000;

const CACHE_METRIC_LENGTH: usize = 32;
const OPEN_FILES_TAIL_LENGTH: usize = 16;

/// `GET_STATS` (10) reply. Field names follow the wire; units are in the docs.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Stats {
    pub process_id: u32,
    /// Percent.
    pub cpu_usage: f32,
    /// Percent.
    pub total_cpu_usage: f32,
    /// Bytes, as are the next two.
    pub memory_usage: u64,
    pub total_memory: u64,
    pub available_memory: u64,
    /// Microseconds.
    pub run_time: u64,
    /// Microseconds since the Unix epoch.
    pub start_time: u64,
    pub read_bytes: u64,
    pub written_bytes: u64,
    pub messages_size_bytes: u64,
    pub streams_count: u32,
    pub topics_count: u32,
    pub partitions_count: u32,
    pub segments_count: u32,
    pub messages_count: u64,
    pub clients_count: u32,
    pub consumer_groups_count: u32,
    #[cfg_attr(test, proptest(strategy = "text_strategy()"))]
    pub hostname: String,
    #[cfg_attr(test, proptest(strategy = "text_strategy()"))]
    pub os_name: String,
    #[cfg_attr(test, proptest(strategy = "text_strategy()"))]
    pub os_version: String,
    #[cfg_attr(test, proptest(strategy = "text_strategy()"))]
    pub kernel_version: String,
    #[cfg_attr(test, proptest(strategy = "text_strategy()"))]
    pub iggy_server_version: String,
    /// `major·1 000 000 + minor·1000 + patch`; 0 = unknown.
    pub iggy_server_semver: u32,
    #[cfg_attr(test, proptest(strategy = "small_vec()"))]
    pub cache_metrics: Vec<CacheMetric>,
    pub threads_count: u32,
    /// Bytes, as is the next.
    pub free_disk_space: u64,
    pub total_disk_space: u64,
    /// The open-files tail, like `open_files_limit`: only 0.12.2 clients read it, and the
    /// 0.11.0 decoder ignores trailing bytes, so both dialects always get it (§4.1). A missing
    /// tail decodes as 0; a partial one is refused.
    pub open_files_count: u64,
    pub open_files_limit: u64,
}

/// Page-cache counters of one partition.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct CacheMetric {
    pub stream_id: u32,
    pub topic_id: u32,
    pub partition_id: u32,
    pub hits: u64,
    pub misses: u64,
    pub hit_ratio: f32,
}

impl Codec<'_> for CacheMetric {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u32(self.stream_id);
        writer.u32(self.topic_id);
        writer.u32(self.partition_id);
        writer.u64(self.hits);
        writer.u64(self.misses);
        writer.f32(self.hit_ratio);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            stream_id: reader.u32("cache_metric.stream_id")?,
            topic_id: reader.u32("cache_metric.topic_id")?,
            partition_id: reader.u32("cache_metric.partition_id")?,
            hits: reader.u64("cache_metric.hits")?,
            misses: reader.u64("cache_metric.misses")?,
            hit_ratio: reader.f32("cache_metric.hit_ratio")?,
        })
    }
}

impl Codec<'_> for Stats {
    fn encode(&self, writer: &mut Writer<'_>) {
        writer.u32(self.process_id);
        writer.f32(self.cpu_usage);
        writer.f32(self.total_cpu_usage);
        for value in [
            self.memory_usage,
            self.total_memory,
            self.available_memory,
            self.run_time,
            self.start_time,
            self.read_bytes,
            self.written_bytes,
            self.messages_size_bytes,
        ] {
            writer.u64(value);
        }
        for value in [
            self.streams_count,
            self.topics_count,
            self.partitions_count,
            self.segments_count,
        ] {
            writer.u32(value);
        }
        writer.u64(self.messages_count);
        writer.u32(self.clients_count);
        writer.u32(self.consumer_groups_count);
        for text in [
            &self.hostname,
            &self.os_name,
            &self.os_version,
            &self.kernel_version,
            &self.iggy_server_version,
        ] {
            writer.bytes_u32(text.as_bytes());
        }
        writer.u32(self.iggy_server_semver);
        encode_counted(&self.cache_metrics, writer);
        writer.u32(self.threads_count);
        writer.u64(self.free_disk_space);
        writer.u64(self.total_disk_space);
        writer.u64(self.open_files_count);
        writer.u64(self.open_files_limit);
    }

    fn decode(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        // Struct fields are evaluated in the order written, which is wire order.
        let mut stats = Self {
            process_id: reader.u32("stats.process_id")?,
            cpu_usage: reader.f32("stats.cpu_usage")?,
            total_cpu_usage: reader.f32("stats.total_cpu_usage")?,
            memory_usage: reader.u64("stats.memory_usage")?,
            total_memory: reader.u64("stats.total_memory")?,
            available_memory: reader.u64("stats.available_memory")?,
            run_time: reader.u64("stats.run_time")?,
            start_time: reader.u64("stats.start_time")?,
            read_bytes: reader.u64("stats.read_bytes")?,
            written_bytes: reader.u64("stats.written_bytes")?,
            messages_size_bytes: reader.u64("stats.messages_size_bytes")?,
            streams_count: reader.u32("stats.streams_count")?,
            topics_count: reader.u32("stats.topics_count")?,
            partitions_count: reader.u32("stats.partitions_count")?,
            segments_count: reader.u32("stats.segments_count")?,
            messages_count: reader.u64("stats.messages_count")?,
            clients_count: reader.u32("stats.clients_count")?,
            consumer_groups_count: reader.u32("stats.consumer_groups_count")?,
            hostname: decode_text(reader, "stats.hostname")?,
            os_name: decode_text(reader, "stats.os_name")?,
            os_version: decode_text(reader, "stats.os_version")?,
            kernel_version: decode_text(reader, "stats.kernel_version")?,
            iggy_server_version: decode_text(reader, "stats.iggy_server_version")?,
            iggy_server_semver: reader.u32("stats.iggy_server_semver")?,
            cache_metrics: decode_counted(
                reader,
                CACHE_METRICS_MAX,
                CACHE_METRIC_LENGTH,
                "stats.cache_metrics_count",
            )?,
            threads_count: reader.u32("stats.threads_count")?,
            free_disk_space: reader.u64("stats.free_disk_space")?,
            total_disk_space: reader.u64("stats.total_disk_space")?,
            open_files_count: 0,
            open_files_limit: 0,
        };
        if !reader.is_empty() {
            let mut tail = reader.sub(OPEN_FILES_TAIL_LENGTH, "stats.open_files")?;
            stats.open_files_count = tail.u64("stats.open_files_count")?;
            stats.open_files_limit = tail.u64("stats.open_files_limit")?;
        }
        Ok(stats)
    }
}

#[cfg(test)]
#[path = "stats_tests.rs"]
mod tests;
