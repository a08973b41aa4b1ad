//! Request spans for tracing: the shard hands each finished request to a [`SpanSink`] the
//! binary installs (its OpenTelemetry exporter); without one nothing is built.

use proto::codes::CommandCode;

/// One request, from its arrival at the shard to its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestSpan {
    pub command: CommandCode,
    /// `TransportKind::label`.
    pub transport: &'static str,
    /// µs since the epoch, by the shard's clock.
    pub start_us: u64,
    pub end_us: u64,
    /// The reply's status code (0: success); `u32::MAX` for an eviction.
    pub status: u32,
}

/// Where finished requests go. Called on the shard's thread: it must not block.
pub trait SpanSink: Send + Sync + std::fmt::Debug {
    fn request(&self, span: RequestSpan);
}
