//! The results as a table on stdout and as JSON (`<output>/<scenario>.json`), with the
//! calibration and the server's share of it when `--calibrate` ran.

use std::fmt::Write as _;

use crate::calibrate::Calibration;
use crate::client::Durability;
use crate::metrics::{ActorKind, ActorResult, PERCENTILES, Summary, aggregate};
use crate::options::Options;
use crate::scenario::ServerTrace;

/// Per actor and per kind (producers, consumers, producing consumers).
pub struct Report {
    pub actors: Vec<Summary>,
    pub aggregates: Vec<(ActorKind, Summary)>,
}

impl Report {
    pub fn new(results: &[ActorResult]) -> Self {
        let actors = results.iter().map(ActorResult::summary).collect();
        let aggregates = [
            ActorKind::Producer,
            ActorKind::Consumer,
            ActorKind::ProducingConsumer,
        ]
        .into_iter()
        .filter_map(|kind| {
            let of_kind: Vec<ActorResult> = results
                .iter()
                .filter(|result| result.kind == kind)
                .cloned()
                .collect();
            let label = format!("all {}s", kind.name());
            aggregate(&label, &of_kind).map(|summary| (kind, summary))
        })
        .collect();
        Self { actors, aggregates }
    }

    /// The table: one row per actor and per aggregate, latencies in milliseconds.
    pub fn table(&self) -> String {
        let mut text = format!(
            "{:<24} {:>9} {:>11} {:>9}",
            "actor", "MB/s", "msg/s", "requests"
        );
        for (name, _) in PERCENTILES {
            let _ = write!(text, " {name:>8}");
        }
        text.push_str("      max (ms)\n");
        for summary in self
            .actors
            .iter()
            .chain(self.aggregates.iter().map(|(_, s)| s))
        {
            let _ = write!(
                text,
                "{:<24} {:>9.1} {:>11.0} {:>9}",
                summary.label,
                summary.megabytes_per_second,
                summary.messages_per_second,
                summary.requests
            );
            for value in summary.percentiles_us {
                let _ = write!(text, " {:>8.3}", milliseconds(value));
            }
            let _ = writeln!(text, " {:>13.3}", milliseconds(summary.latency_us_max));
        }
        text
    }

    /// The aggregate's frame throughput as a percentage of each calibration figure.
    pub fn calibration_table(&self, calibration: &Calibration, durability: Durability) -> String {
        let mut text = format!(
            "calibration ({} B buffers, {} MB): loopback tcp stream {:.0} MB/s, \
             request/reply {:.0} MB/s; disk buffered {:.0} MB/s, fdatasync per batch \
             {:.0} MB/s, O_DIRECT {}\n",
            calibration.batch_bytes,
            calibration.total_bytes / 1_000_000,
            calibration.tcp_stream,
            calibration.tcp_request_reply,
            calibration.disk_buffered,
            calibration.disk_fdatasync,
            calibration
                .disk_direct
                .map_or_else(|| "n/a".to_owned(), |rate| format!("{rate:.0} MB/s")),
        );
        for (kind, summary) in &self.aggregates {
            let disk = disk_limit(calibration, durability);
            let _ = writeln!(
                text,
                "{:<24} {:.0} MB/s on the wire = {:.0} % of tcp stream, {:.0} % of tcp \
                 request/reply{}",
                summary.label,
                summary.frame_megabytes_per_second,
                percent(summary.frame_megabytes_per_second, calibration.tcp_stream),
                percent(
                    summary.frame_megabytes_per_second,
                    calibration.tcp_request_reply
                ),
                if *kind == ActorKind::Consumer {
                    String::new()
                } else {
                    format!(
                        ", {:.0} % of the disk ({})",
                        percent(summary.frame_megabytes_per_second, disk.1),
                        disk.0
                    )
                },
            );
        }
        text
    }

    pub fn json(
        &self,
        options: &Options,
        calibration: Option<&Calibration>,
        server: &ServerTrace,
    ) -> String {
        let mut text = String::from("{\n");
        let _ = writeln!(text, "  \"scenario\": \"{}\",", options.scenario.name());
        let _ = writeln!(
            text,
            "  \"options\": {{\"producers\": {}, \"consumers\": {}, \"streams\": {}, \
             \"partitions\": {}, \"message_size_bytes\": {}, \"messages_per_batch\": {}, \
             \"batches_per_actor\": {}, \"rate_limit_bytes_per_second\": {}, \
             \"durability\": \"{}\"}},",
            options.producing_actors(),
            options.consuming_actors(),
            options.streams,
            options.partitions,
            options.message_size_bytes,
            options.messages_per_batch,
            options.batches,
            options
                .rate_limit_bytes_per_second
                .map_or_else(|| "null".to_owned(), |rate| rate.to_string()),
            options.durability.as_str(),
        );
        let actors: Vec<String> = self.actors.iter().map(summary_json).collect();
        let _ = writeln!(
            text,
            "  \"actors\": [\n    {}\n  ],",
            actors.join(",\n    ")
        );
        let aggregates: Vec<String> = self
            .aggregates
            .iter()
            .map(|(kind, summary)| format!("\"{}\": {}", kind.name(), summary_json(summary)))
            .collect();
        let _ = write!(
            text,
            "  \"aggregate\": {{\n    {}\n  }}",
            aggregates.join(",\n    ")
        );
        let _ = write!(text, ",\n  \"server\": {}", server_json(server));
        if let Some(calibration) = calibration {
            let _ = write!(
                text,
                ",\n  \"calibration\": {}",
                calibration_json(calibration)
            );
        }
        text.push_str("\n}\n");
        text
    }
}

fn summary_json(summary: &Summary) -> String {
    let mut latency = String::new();
    for ((name, _), value) in PERCENTILES.iter().zip(summary.percentiles_us) {
        let _ = write!(latency, "\"{name}\": {value}, ");
    }
    format!(
        "{{\"label\": \"{}\", \"megabytes_per_second\": {:.3}, \
         \"frame_megabytes_per_second\": {:.3}, \"messages_per_second\": {:.1}, \
         \"payload_bytes\": {}, \"messages\": {}, \"requests\": {}, \"elapsed_seconds\": {:.4}, \
         \"latency_us\": {{{}\"max\": {}, \"mean\": {:.1}}}}}",
        summary.label,
        summary.megabytes_per_second,
        summary.frame_megabytes_per_second,
        summary.messages_per_second,
        summary.payload_bytes,
        summary.messages,
        summary.requests,
        summary.elapsed_seconds,
        latency,
        summary.latency_us_max,
        summary.latency_us_mean,
    )
}

fn calibration_json(calibration: &Calibration) -> String {
    format!(
        "{{\"batch_bytes\": {}, \"total_bytes\": {}, \"tcp_stream_mb_s\": {:.1}, \
         \"tcp_request_reply_mb_s\": {:.1}, \"disk_buffered_mb_s\": {:.1}, \
         \"disk_fdatasync_per_batch_mb_s\": {:.1}, \"disk_direct_mb_s\": {}}}",
        calibration.batch_bytes,
        calibration.total_bytes,
        calibration.tcp_stream,
        calibration.tcp_request_reply,
        calibration.disk_buffered,
        calibration.disk_fdatasync,
        calibration
            .disk_direct
            .map_or_else(|| "null".to_owned(), |rate| format!("{rate:.1}")),
    )
}

/// The disk figure a producer of this durability is bounded by.
fn disk_limit(calibration: &Calibration, durability: Durability) -> (&'static str, f64) {
    match durability {
        Durability::Replicated => ("buffered", calibration.disk_buffered),
        Durability::Persisted => ("fdatasync per batch", calibration.disk_fdatasync),
    }
}

fn percent(value: f64, limit: f64) -> f64 {
    100.0 * value / limit.max(1e-9)
}

fn milliseconds(microseconds: u64) -> f64 {
    crate::metrics::to_f64(microseconds) / 1000.0
}

fn server_json(server: &ServerTrace) -> String {
    let bytes = |value: Option<u64>| value.map_or_else(|| "null".to_owned(), |v| v.to_string());
    format!(
        "{{\"memory_start_bytes\": {}, \"memory_after_targets_bytes\": {}, \
         \"memory_after_idle_bytes\": {}, \"memory_end_bytes\": {}, \
         \"idle_connections\": {}, \"idle_open_seconds\": {:.3}}}",
        bytes(server.memory_start),
        bytes(server.memory_after_targets),
        bytes(server.memory_after_idle),
        bytes(server.memory_end),
        server.idle_connections,
        server.idle_open_seconds,
    )
}
