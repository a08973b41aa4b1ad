//! What each actor measures and how results add up: an HDR histogram of per-request latency
//! (microseconds, 3 significant digits), a latency-over-time series, byte and message counts.
//!
//! Throughput is payload bytes (what the user sent) per second, in MB of 10^6 bytes; the frame
//! bytes on the wire are kept too, for comparison with the calibration, which moves frames.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// Latencies above this are clamped into the top bucket: a minute is far beyond any run.
const LATENCY_US_MAX: u64 = 60_000_000;
/// The percentiles every report shows.
pub const PERCENTILES: [(&str, f64); 6] = [
    ("p50", 50.0),
    ("p90", 90.0),
    ("p95", 95.0),
    ("p99", 99.0),
    ("p999", 99.9),
    ("p9999", 99.99),
];

/// Which side of the stream an actor is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActorKind {
    Producer,
    Consumer,
    /// Sends a batch, then polls it back (end-to-end).
    ProducingConsumer,
}

impl ActorKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Producer => "producer",
            Self::Consumer => "consumer",
            Self::ProducingConsumer => "producing-consumer",
        }
    }
}

/// Counters every actor bumps, read by the progress line.
#[derive(Debug, Default)]
pub struct Progress {
    pub payload_bytes: AtomicU64,
    pub messages: AtomicU64,
}

/// One actor's measurements while it runs.
pub struct Recorder {
    pub kind: ActorKind,
    pub index: u32,
    histogram: Histogram<u64>,
    /// (microseconds since the common start, latency in microseconds), one per request.
    series: Vec<(u64, u64)>,
    payload_bytes: u64,
    frame_bytes: u64,
    messages: u64,
    started: Instant,
}

/// One actor's final numbers.
#[derive(Clone)]
pub struct ActorResult {
    pub kind: ActorKind,
    pub index: u32,
    pub histogram: Histogram<u64>,
    pub series: Vec<(u64, u64)>,
    pub payload_bytes: u64,
    pub frame_bytes: u64,
    pub messages: u64,
    pub elapsed: Duration,
}

/// Derived numbers of an actor or an aggregate.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub label: String,
    pub megabytes_per_second: f64,
    pub frame_megabytes_per_second: f64,
    pub messages_per_second: f64,
    pub payload_bytes: u64,
    pub messages: u64,
    pub requests: u64,
    pub elapsed_seconds: f64,
    /// Microseconds at each of [`PERCENTILES`].
    pub percentiles_us: [u64; 6],
    pub latency_us_max: u64,
    pub latency_us_mean: f64,
}

impl Recorder {
    pub fn new(kind: ActorKind, index: u32, started: Instant) -> Self {
        let histogram = Histogram::new_with_bounds(1, LATENCY_US_MAX, 3)
            .expect("1..60 s at 3 digits are valid histogram bounds");
        Self {
            kind,
            index,
            histogram,
            series: Vec::new(),
            payload_bytes: 0,
            frame_bytes: 0,
            messages: 0,
            started,
        }
    }

    /// Records one request that began at `begin` and moved the given bytes.
    pub fn record(&mut self, begin: Instant, payload: u64, frame: u64, messages: u64) {
        let end = Instant::now();
        let latency = duration_us(end - begin).clamp(1, LATENCY_US_MAX);
        self.histogram.saturating_record(latency);
        self.series
            .push((duration_us(begin - self.started), latency));
        self.payload_bytes += payload;
        self.frame_bytes += frame;
        self.messages += messages;
    }

    /// Closes the measurement at `end`: throughput counts from the common start.
    pub fn finish(self, end: Instant) -> ActorResult {
        ActorResult {
            kind: self.kind,
            index: self.index,
            histogram: self.histogram,
            series: self.series,
            payload_bytes: self.payload_bytes,
            frame_bytes: self.frame_bytes,
            messages: self.messages,
            elapsed: end - self.started,
        }
    }
}

impl ActorResult {
    pub fn label(&self) -> String {
        format!("{} {}", self.kind.name(), self.index)
    }

    pub fn summary(&self) -> Summary {
        summarise(self.label(), std::slice::from_ref(self), self.elapsed)
    }
}

/// The aggregate of `results`: bytes add up over the longest actor's time, histograms merge.
pub fn aggregate(label: &str, results: &[ActorResult]) -> Option<Summary> {
    let elapsed = results.iter().map(|result| result.elapsed).max()?;
    Some(summarise(label.to_owned(), results, elapsed))
}

fn summarise(label: String, results: &[ActorResult], elapsed: Duration) -> Summary {
    let mut histogram = Histogram::<u64>::new_with_bounds(1, LATENCY_US_MAX, 3)
        .expect("1..60 s at 3 digits are valid histogram bounds");
    for result in results {
        histogram
            .add(&result.histogram)
            .expect("histograms with the same bounds always merge");
    }
    let payload_bytes: u64 = results.iter().map(|result| result.payload_bytes).sum();
    let frame_bytes: u64 = results.iter().map(|result| result.frame_bytes).sum();
    let messages: u64 = results.iter().map(|result| result.messages).sum();
    let seconds = elapsed.as_secs_f64().max(1e-9);
    Summary {
        label,
        megabytes_per_second: to_f64(payload_bytes) / seconds / 1e6,
        frame_megabytes_per_second: to_f64(frame_bytes) / seconds / 1e6,
        messages_per_second: to_f64(messages) / seconds,
        payload_bytes,
        messages,
        requests: histogram.len(),
        elapsed_seconds: seconds,
        percentiles_us: PERCENTILES.map(|(_, p)| histogram.value_at_percentile(p)),
        latency_us_max: histogram.max(),
        latency_us_mean: histogram.mean(),
    }
}

/// Merged histogram of `results` (for the distribution chart).
pub fn merged_histogram(results: &[&ActorResult]) -> Histogram<u64> {
    let mut histogram = Histogram::<u64>::new_with_bounds(1, LATENCY_US_MAX, 3)
        .expect("1..60 s at 3 digits are valid histogram bounds");
    for result in results {
        histogram
            .add(&result.histogram)
            .expect("histograms with the same bounds always merge");
    }
    histogram
}

pub fn duration_us(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

/// Counts far below 2^53 convert exactly; above, the rounding is irrelevant to a rate.
#[allow(clippy::cast_precision_loss)]
pub fn to_f64(value: u64) -> f64 {
    value as f64
}

/// Progress counters bumped by `record`'s callers.
pub fn bump(progress: &Progress, payload: u64, messages: u64) {
    progress.payload_bytes.fetch_add(payload, Ordering::Relaxed);
    progress.messages.fetch_add(messages, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{ActorKind, Recorder, aggregate};

    #[test]
    fn aggregate_adds_bytes_and_merges_latency() {
        let start = Instant::now();
        let mut first = Recorder::new(ActorKind::Producer, 0, start);
        let mut second = Recorder::new(ActorKind::Producer, 1, start);
        first.record(Instant::now(), 1000, 1100, 10);
        second.record(Instant::now(), 3000, 3300, 30);
        let end = start + Duration::from_secs(2);
        let results = [first.finish(end), second.finish(end)];
        let total = aggregate("producers", &results).unwrap();
        assert_eq!(total.payload_bytes, 4000);
        assert_eq!(total.messages, 40);
        assert_eq!(total.requests, 2);
        assert!((total.megabytes_per_second - 0.002).abs() < 1e-9);
        assert!(total.percentiles_us[0] >= 1);
    }
}
