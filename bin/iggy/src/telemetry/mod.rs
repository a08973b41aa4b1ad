//! OpenTelemetry (`[telemetry]`): the server's log lines and a span per request, exported
//! over OTLP/HTTP in JSON by one background thread ([`exporter`]). Off by default; off, it
//! costs nothing (no sink is installed, so the shards build no span).

pub(crate) mod endpoint;
mod exporter;
pub(crate) mod otlp;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) use endpoint::Endpoint;
use exporter::{Destinations, Item, Queue};
use otlp::{LogItem, SpanItem};
use shard::metrics::{RequestSpan, SpanSink};

use crate::config::TelemetrySettings;

/// Starts the exporter and routes log lines and the shards' request spans to it.
pub(crate) fn start(settings: &TelemetrySettings, node: &shard::node::Node) -> Result<(), String> {
    if !settings.enabled {
        return Ok(());
    }
    // The configuration checked both endpoints already.
    let destinations = Destinations {
        service_name: settings.service_name.clone(),
        logs: Endpoint::parse(&settings.logs_endpoint)?,
        traces: Endpoint::parse(&settings.traces_endpoint)?,
    };
    let queue =
        exporter::start(destinations).map_err(|error| format!("start the exporter: {error}"))?;
    crate::logger::export_to(Box::new(LogExport(queue.clone())));
    node.trace_to(Arc::new(Spans {
        queue,
        ids: AtomicU64::new(seed()),
    }));
    log::info!(
        "telemetry: logs to {}, traces to {} (OTLP/HTTP, JSON)",
        settings.logs_endpoint,
        settings.traces_endpoint
    );
    Ok(())
}

struct LogExport(Queue);

impl crate::logger::Export for LogExport {
    fn export(&self, record: &log::Record<'_>, unix_ns: u64) {
        self.0.push(Item::Log(LogItem {
            unix_ns,
            level: record.level(),
            target: record.target().to_owned(),
            body: record.args().to_string(),
        }));
    }
}

/// The shards' sink: each request becomes a root span of its own trace.
#[derive(Debug)]
struct Spans {
    queue: Queue,
    /// A counter mixed into ids (splitmix64): unique, and spread over the id space.
    ids: AtomicU64,
}

impl SpanSink for Spans {
    fn request(&self, span: RequestSpan) {
        let id = || splitmix64(self.ids.fetch_add(1, Ordering::Relaxed));
        let (high, low, span_id) = (id(), id(), id());
        let mut trace_id = [0_u8; 16];
        trace_id[..8].copy_from_slice(&high.to_le_bytes());
        trace_id[8..].copy_from_slice(&low.to_le_bytes());
        let name = format!("{:?}", span.command);
        self.queue.push(Item::Span(SpanItem {
            trace_id,
            span_id: span_id.to_le_bytes(),
            name: shard::metrics::snake_case(&name),
            start_ns: span.start_us.saturating_mul(1000),
            end_ns: span.end_us.saturating_mul(1000),
            attributes: vec![("iggy.transport", span.transport.to_owned())],
            status: span.status,
        }));
    }
}

fn seed() -> u64 {
    let mut bytes = [0_u8; 8];
    // Without the OS's randomness ids still differ within the run (the counter).
    let _ = getrandom::fill(&mut bytes);
    u64::from_le_bytes(bytes)
}

fn splitmix64(value: u64) -> u64 {
    let mut z = value.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
