//! [`StatsCell`]: the partition task's counters, published for readers on any thread.
//!
//! One writer (the partition task) and any number of readers on other shards. A sequence
//! lock over atomic fields: the writer makes the sequence odd, stores, makes it even; a
//! reader retries while the sequence was odd or moved. Neither side ever blocks the other,
//! and a reader always gets one consistent snapshot (never the size of one round with the
//! offset of another).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering, fence};

use crate::partition::PartitionStats;

#[derive(Debug, Default)]
pub(crate) struct StatsCell {
    sequence: AtomicU64,
    size_bytes: AtomicU64,
    messages_count: AtomicU64,
    current_offset: AtomicU64,
    next_offset: AtomicU64,
    first_offset: AtomicU64,
    segments_count: AtomicU32,
    quarantined: AtomicBool,
}

impl StatsCell {
    /// Publishes `stats`. Only the partition task calls it, so writers never race.
    pub(crate) fn set(&self, stats: PartitionStats) {
        let sequence = self.sequence.load(Ordering::Relaxed);
        self.sequence
            .store(sequence.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        self.size_bytes.store(stats.size_bytes, Ordering::Relaxed);
        self.messages_count
            .store(stats.messages_count, Ordering::Relaxed);
        self.current_offset
            .store(stats.current_offset, Ordering::Relaxed);
        self.next_offset.store(stats.next_offset, Ordering::Relaxed);
        self.first_offset
            .store(stats.first_offset, Ordering::Relaxed);
        self.segments_count
            .store(stats.segments_count, Ordering::Relaxed);
        self.quarantined.store(stats.quarantined, Ordering::Relaxed);
        self.sequence
            .store(sequence.wrapping_add(2), Ordering::Release);
    }

    /// The last published stats.
    pub(crate) fn get(&self) -> PartitionStats {
        loop {
            let before = self.sequence.load(Ordering::Acquire);
            if before % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let stats = PartitionStats {
                size_bytes: self.size_bytes.load(Ordering::Relaxed),
                messages_count: self.messages_count.load(Ordering::Relaxed),
                current_offset: self.current_offset.load(Ordering::Relaxed),
                next_offset: self.next_offset.load(Ordering::Relaxed),
                first_offset: self.first_offset.load(Ordering::Relaxed),
                segments_count: self.segments_count.load(Ordering::Relaxed),
                quarantined: self.quarantined.load(Ordering::Relaxed),
            };
            fence(Ordering::Acquire);
            if self.sequence.load(Ordering::Relaxed) == before {
                return stats;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// A reader on another thread only ever sees snapshots the writer published whole.
    #[test]
    fn readers_see_whole_snapshots() {
        let cell = Arc::new(StatsCell::default());
        let writer = {
            let cell = Arc::clone(&cell);
            std::thread::spawn(move || {
                for n in 0..200_000u64 {
                    cell.set(PartitionStats {
                        size_bytes: n,
                        messages_count: n,
                        current_offset: n,
                        next_offset: n,
                        first_offset: n,
                        segments_count: u32::try_from(n % 1000).unwrap(),
                        quarantined: n % 2 == 1,
                    });
                }
            })
        };
        let mut last = 0;
        while !writer.is_finished() {
            let stats = cell.get();
            assert_eq!(stats.size_bytes, stats.messages_count);
            assert_eq!(stats.size_bytes, stats.current_offset);
            assert_eq!(stats.size_bytes, stats.next_offset);
            assert_eq!(stats.size_bytes, stats.first_offset);
            assert_eq!(u64::from(stats.segments_count), stats.size_bytes % 1000);
            assert_eq!(stats.quarantined, stats.size_bytes % 2 == 1);
            assert!(stats.size_bytes >= last, "published values only grow here");
            last = stats.size_bytes;
        }
        writer.join().unwrap();
        assert_eq!(cell.get().size_bytes, 199_999);
    }
}
