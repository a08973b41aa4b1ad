//! The 28 size classes and the pure mapping from a length to its class.

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;

/// Capacities of the size classes, ascending.
pub const BUCKETS: [usize; 28] = [
    4 * KIB,
    8 * KIB,
    16 * KIB,
    32 * KIB,
    64 * KIB,
    128 * KIB,
    256 * KIB,
    512 * KIB,
    768 * KIB,
    MIB,
    MIB + MIB / 2,
    2 * MIB,
    4 * MIB,
    6 * MIB,
    8 * MIB,
    10 * MIB,
    12 * MIB,
    16 * MIB,
    24 * MIB,
    32 * MIB,
    48 * MIB,
    64 * MIB,
    96 * MIB,
    128 * MIB,
    192 * MIB,
    256 * MIB,
    384 * MIB,
    512 * MIB,
];

const _: () = {
    assert!(BUCKETS[0] == 4 * KIB);
    assert!(BUCKETS[BUCKETS.len() - 1] == 512 * MIB);
    let mut index = 0;
    while index < BUCKETS.len() {
        assert!(BUCKETS[index].is_multiple_of(4096));
        if index > 0 {
            assert!(BUCKETS[index - 1] < BUCKETS[index]);
        }
        index += 1;
    }
};

/// One size class, by index into [`BUCKETS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bucket(u8);

impl Bucket {
    pub const COUNT: usize = BUCKETS.len();

    pub fn index(self) -> usize {
        usize::from(self.0)
    }

    /// Capacity of the buffers in this class.
    pub fn capacity(self) -> usize {
        BUCKETS[self.index()]
    }

    /// Every class, smallest first.
    pub fn all() -> impl Iterator<Item = Self> {
        (0..BUCKETS.len()).filter_map(|index| u8::try_from(index).ok().map(Self))
    }
}

/// The smallest class that holds `length` bytes; `None` above 512 MiB. A zero length maps to
/// the smallest class.
pub fn bucket_for(length: usize) -> Option<Bucket> {
    let index = BUCKETS.partition_point(|&capacity| capacity < length);
    u8::try_from(index)
        .ok()
        .filter(|&index| usize::from(index) < BUCKETS.len())
        .map(Bucket)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges() {
        assert_eq!(bucket_for(0).unwrap().capacity(), 4096);
        assert_eq!(bucket_for(4096).unwrap().capacity(), 4096);
        assert_eq!(bucket_for(4097).unwrap().capacity(), 8192);
        assert_eq!(bucket_for(768 * KIB + 1).unwrap().capacity(), MIB);
        assert_eq!(bucket_for(MIB + 1).unwrap().capacity(), MIB + MIB / 2);
        assert_eq!(bucket_for(512 * MIB).unwrap().capacity(), 512 * MIB);
        assert_eq!(bucket_for(512 * MIB + 1), None);
        assert_eq!(Bucket::all().count(), 28);
    }

    #[test]
    fn every_class_edge_maps_to_itself_and_the_next() {
        for bucket in Bucket::all() {
            assert_eq!(bucket_for(bucket.capacity()), Some(bucket));
            let next = bucket_for(bucket.capacity() + 1);
            assert_eq!(
                next.map(Bucket::index),
                (bucket.index() + 1 < 28).then_some(bucket.index() + 1)
            );
        }
    }
}
