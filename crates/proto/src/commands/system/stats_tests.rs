//! Tests of `GET_STATS`: the layout, the 0.12.2 open-files tail and round trips.

use proptest::prelude::*;

use super::*;
use crate::codec::{decode_exact, encode_to_vec};
use crate::commands::system::tests::text;
use crate::dialect::Dialect;

fn stats() -> Stats {
    Stats {
        process_id: 1,
        cpu_usage: 1.5,
        total_cpu_usage: 2.5,
        memory_usage: 3,
        total_memory: 4,
        available_memory: 5,
        run_time: 6,
        start_time: 7,
        read_bytes: 8,
        written_bytes: 9,
        messages_size_bytes: 10,
        streams_count: 11,
        topics_count: 12,
        partitions_count: 13,
        segments_count: 14,
        messages_count: 15,
        clients_count: 16,
        consumer_groups_count: 17,
        hostname: text("host"),
        os_name: text("Linux"),
        os_version: text("6"),
        kernel_version: text("6.1"),
        iggy_server_version: text("0.9.0"),
        iggy_server_semver: 9000,
        cache_metrics: alloc::vec![CacheMetric {
            stream_id: 1,
            topic_id: 2,
            partition_id: 3,
            hits: 4,
            misses: 5,
            hit_ratio: 0.5,
        }],
        threads_count: 18,
        free_disk_space: 19,
        total_disk_space: 20,
        open_files_count: 21,
        open_files_limit: 22,
    }
}

#[test]
fn stats_layout_and_open_files_tail() {
    let full = encode_to_vec(&stats(), Dialect::V0_12_2);
    let strings = 4 * 5 + 4 + 5 + 1 + 3 + 5;
    let base = 108 + strings + 4 + 4 + 32 + 4 + 8 + 8;
    assert_eq!(full.len(), base + 16);
    assert_eq!(&full[108..112], &4_u32.to_le_bytes());
    assert_eq!(&full[base..base + 8], &21_u64.to_le_bytes());
    assert_eq!(encode_to_vec(&stats(), Dialect::V0_11_0), full);
    let old = full[..base].to_vec();
    let mut without_tail = stats();
    without_tail.open_files_count = 0;
    without_tail.open_files_limit = 0;
    for dialect in [Dialect::V0_12_2, Dialect::V0_11_0] {
        assert_eq!(decode_exact::<Stats>(&full, dialect).unwrap(), stats());
        assert_eq!(decode_exact::<Stats>(&old, dialect).unwrap(), without_tail);
        for cut in 1..16 {
            assert!(decode_exact::<Stats>(&full[..base + cut], dialect).is_err());
        }
        for length in 0..base {
            assert!(decode_exact::<Stats>(&full[..length], dialect).is_err());
        }
    }
    let mut huge_count = full.clone();
    let count_at = 108 + strings + 4;
    huge_count[count_at..count_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(decode_exact::<Stats>(&huge_count, Dialect::V0_12_2).is_err());
}

proptest! {
    #[test]
    fn stats_round_trip(x in any::<Stats>(), dialect in any::<Dialect>()) {
        // NaN never equals itself; compare the bytes instead.
        let bytes = encode_to_vec(&x, dialect);
        let decoded = decode_exact::<Stats>(&bytes, dialect).unwrap();
        prop_assert_eq!(encode_to_vec(&decoded, dialect), bytes);
    }
}
