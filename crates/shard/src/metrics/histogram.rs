//! [`Histogram`]: fixed buckets of atomic counters that one shard writes and any thread reads;
//! [`HistogramSnapshot`]: a copy of one, merged across shards at scrape.
//!
//! The writer never takes a lock or waits: a record is two relaxed atomic adds on memory only
//! its own shard writes, so no cache line bounces between cores. A reader may see a record's
//! bucket without its sum (or the reverse) for an instant; Prometheus tolerates that, and the
//! counts themselves never go back.

use std::sync::atomic::{AtomicU64, Ordering};

/// Latency bounds in µs: 50 µs … 10 s, about three per decade.
pub const LATENCY_BOUNDS_US: &[u64] = &[
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// Bounds of a count of appends one sync covered (a round holds at most
/// `segment::partition::GROUP_MAX`).
pub const GROUP_BOUNDS: &[u64] = &[1, 2, 4, 8, 16, 32, 64];

const _: () = assert!(segment::partition::GROUP_MAX <= 64);

/// Counts of values at or below each bound (`le`), one more for the rest, and their sum.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [u64],
    /// `buckets[i]` counts values in `(bounds[i-1], bounds[i]]`; the last, values above
    /// every bound. Not cumulative: the exposition sums them.
    buckets: Box<[AtomicU64]>,
    sum: AtomicU64,
}

impl Histogram {
    /// An empty histogram over `bounds`, which must rise strictly.
    pub fn new(bounds: &'static [u64]) -> Self {
        assert!(
            bounds.windows(2).all(|pair| pair[0] < pair[1]),
            "histogram bounds rise strictly"
        );
        Self {
            bounds,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
        }
    }

    pub fn record(&self, value: u64) {
        let bucket = self.bounds.partition_point(|&bound| bound < value);
        // `partition_point` is at most `bounds.len()`, and there is one more bucket.
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            bounds: self.bounds,
            counts: self
                .buckets
                .iter()
                .map(|bucket| bucket.load(Ordering::Relaxed))
                .collect(),
            sum: self.sum.load(Ordering::Relaxed),
        }
    }
}

/// A histogram's values at one moment, or the sum of several over the same bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistogramSnapshot {
    pub bounds: &'static [u64],
    /// Per bucket, not cumulative; one more than `bounds`.
    pub counts: Vec<u64>,
    pub sum: u64,
}

impl HistogramSnapshot {
    pub fn empty(bounds: &'static [u64]) -> Self {
        Self {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0,
        }
    }

    /// Adds `other`, a snapshot over the same bounds.
    pub fn merge(&mut self, other: &Self) {
        assert_eq!(self.bounds, other.bounds, "merged histograms share bounds");
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine = mine.saturating_add(*theirs);
        }
        self.sum = self.sum.saturating_add(other.sum);
    }

    pub fn count(&self) -> u64 {
        self.counts
            .iter()
            .fold(0, |total, &n| total.saturating_add(n))
    }

    /// `(bound, values at or below it)` for every bound, then `(None, count)` for `+Inf`.
    pub fn cumulative(&self) -> impl Iterator<Item = (Option<u64>, u64)> + '_ {
        let bounds = self.bounds.iter().map(|&bound| Some(bound)).chain([None]);
        let running = self.counts.iter().scan(0_u64, |total, &n| {
            *total = total.saturating_add(n);
            Some(*total)
        });
        bounds.zip(running)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_value_lands_in_the_first_bucket_whose_bound_holds_it() {
        let histogram = Histogram::new(&[10, 20]);
        for value in [0, 10, 11, 20, 21, u64::MAX / 4] {
            histogram.record(value);
        }
        let snapshot = histogram.snapshot();
        assert_eq!(snapshot.counts, vec![2, 2, 2]);
        let cumulative: Vec<_> = snapshot.cumulative().collect();
        assert_eq!(cumulative, vec![(Some(10), 2), (Some(20), 4), (None, 6)]);
        assert_eq!(snapshot.sum, 62 + u64::MAX / 4);
    }

    proptest! {
        /// Merging the snapshots of several histograms gives the histogram of all their
        /// values, and the `+Inf` line is the count.
        #[test]
        fn merged_snapshots_are_the_histogram_of_every_value(
            shards in proptest::collection::vec(
                proptest::collection::vec(0_u64..20_000_000, 0..50), 1..5),
        ) {
            let all = Histogram::new(LATENCY_BOUNDS_US);
            let mut merged = HistogramSnapshot::empty(LATENCY_BOUNDS_US);
            for values in &shards {
                let shard = Histogram::new(LATENCY_BOUNDS_US);
                for &value in values {
                    shard.record(value);
                    all.record(value);
                }
                merged.merge(&shard.snapshot());
            }
            prop_assert_eq!(&merged, &all.snapshot());
            let total: usize = shards.iter().map(Vec::len).sum();
            prop_assert_eq!(merged.cumulative().last(), Some((None, total as u64)));
        }
    }
}
