//! Model-based tests: random acquire/release sequences against a plain model of the pool.

use proptest::prelude::*;

use crate::{BUCKETS, Bucket, Buffer, Pool, PoolConfig, PoolError, bucket_for};

#[derive(Debug, Clone)]
enum Step {
    Acquire(usize),
    Release(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..=300_000_usize).prop_map(Step::Acquire),
        any::<usize>().prop_map(Step::Release),
    ]
}

/// The model: per class, how many buffers are out and how many are cached.
#[derive(Debug, Default)]
struct Model {
    in_use: [u64; Bucket::COUNT],
    free: [u64; Bucket::COUNT],
}

impl Model {
    fn allocated(&self) -> u64 {
        (0..Bucket::COUNT)
            .map(|i| (self.in_use[i] + self.free[i]) * BUCKETS[i] as u64)
            .sum()
    }
}

fn check(pool: &Pool, model: &Model) -> Result<(), TestCaseError> {
    for bucket in Bucket::all() {
        let counters = pool.counters(bucket);
        prop_assert_eq!(counters.in_use, model.in_use[bucket.index()]);
        prop_assert_eq!(counters.free, model.free[bucket.index()]);
    }
    prop_assert_eq!(pool.allocated_bytes(), model.allocated());
    prop_assert!(pool.allocated_bytes() <= pool.budget_bytes());
    Ok(())
}

proptest! {
    #[test]
    fn acquire_release_matches_model(
        steps in proptest::collection::vec(step(), 1..200),
        bucket_capacity in 1..4_usize,
    ) {
        let config = PoolConfig { enabled: true, size_bytes: 1024 * 1024, bucket_capacity };
        let pool = Pool::new_unchecked(config);
        let mut model = Model::default();
        let mut held: Vec<Buffer> = Vec::new();
        for step in steps {
            match step {
                Step::Acquire(length) => acquire(&pool, &mut model, &mut held, length)?,
                Step::Release(pick) if !held.is_empty() => {
                    let buffer = held.swap_remove(pick % held.len());
                    let index = buffer.bucket().index();
                    model.in_use[index] -= 1;
                    if model.free[index] < bucket_capacity as u64 {
                        model.free[index] += 1;
                    }
                    drop(buffer);
                }
                Step::Release(_) => {}
            }
            check(&pool, &model)?;
        }
    }
}

fn acquire(
    pool: &Pool,
    model: &mut Model,
    held: &mut Vec<Buffer>,
    length: usize,
) -> Result<(), TestCaseError> {
    let index = bucket_for(length).unwrap().index();
    let class = BUCKETS[index] as u64;
    let result = pool.acquire(length);
    if model.free[index] > 0 {
        model.free[index] -= 1;
        model.in_use[index] += 1;
        held.push(result.unwrap());
        return Ok(());
    }
    // The pool frees cached buffers of other classes, largest first, to fit the request.
    for other in (0..Bucket::COUNT).rev() {
        while model.allocated() + class > 1024 * 1024 && model.free[other] > 0 {
            model.free[other] -= 1;
        }
    }
    if model.allocated() + class > 1024 * 1024 {
        let is_exhausted = matches!(result, Err(PoolError::Exhausted { .. }));
        prop_assert!(is_exhausted, "expected exhaustion, got {:?}", result);
        return Ok(());
    }
    let mut buffer = result.unwrap();
    prop_assert!(buffer.capacity() >= length);
    prop_assert_eq!(buffer.as_ptr() as usize % 4096, 0);
    buffer.set_len(length.min(16));
    model.in_use[index] += 1;
    held.push(buffer);
    Ok(())
}

#[test]
fn reuse_returns_the_same_class_and_counts() {
    let pool = Pool::new_unchecked(PoolConfig {
        enabled: true,
        size_bytes: 1 << 20,
        bucket_capacity: 2,
    });
    let buffer = pool.acquire_copy(b"hello").unwrap();
    assert_eq!(&buffer[..], b"hello");
    let bucket = buffer.bucket();
    drop(buffer);
    let again = pool.acquire(10).unwrap();
    assert_eq!(again.len(), 0);
    let counters = pool.counters(bucket);
    assert_eq!(
        (counters.allocations, counters.returns, counters.reuses),
        (1, 1, 1)
    );
}

#[test]
fn too_large_and_config_bounds() {
    let pool = Pool::new_unchecked(PoolConfig::default());
    assert_eq!(
        pool.acquire(512 * 1024 * 1024 + 1).unwrap_err(),
        PoolError::TooLarge {
            requested: 512 * 1024 * 1024 + 1
        }
    );
    assert!(
        Pool::new(PoolConfig {
            size_bytes: 1 << 20,
            ..PoolConfig::default()
        })
        .is_err()
    );
    assert!(Pool::new(PoolConfig::default()).is_ok());
}

#[test]
fn disabled_pool_frees_on_return() {
    let pool = Pool::new_unchecked(PoolConfig {
        enabled: false,
        size_bytes: 1 << 20,
        bucket_capacity: 8,
    });
    drop(pool.acquire(100).unwrap());
    assert_eq!(pool.allocated_bytes(), 0);
}

/// A buffer sent to another thread views its window, is written there, and comes home when
/// dropped there: the block is reused by the next acquire, and it counts against the budget
/// while away, so a one-block pool refuses a second buffer until then and its `returned`
/// listener fires when the block comes back.
#[test]
fn a_sent_buffer_comes_home_from_another_thread_and_counts_while_away() {
    let pool = Pool::new_unchecked(PoolConfig {
        enabled: true,
        size_bytes: 8192,
        bucket_capacity: 4,
    });
    let mut buffer = pool.acquire(8192).unwrap();
    buffer.extend_from_slice(b"head:batch-bytes");
    let address = buffer.as_ptr() as usize;
    let mut sent = buffer.into_send(5..16);
    assert_eq!(&sent[..], b"batch-bytes");
    sent[0] = b'B';
    let class = bucket_for(8192).unwrap();
    assert_eq!(pool.counters(class).in_use, 1, "away, still in use");
    assert!(matches!(
        pool.acquire(8192),
        Err(PoolError::Exhausted { .. })
    ));
    let returned = pool.returned();
    let seen = std::thread::spawn(move || {
        let seen = sent.to_vec();
        drop(sent);
        seen
    })
    .join()
    .unwrap();
    assert_eq!(seen, b"Batch-bytes");
    // The listener taken before the return fires for it.
    event_listener::Listener::wait(returned);
    let again = pool.acquire(8192).unwrap();
    assert_eq!(again.as_ptr() as usize, address, "the same block, reused");
    let counters = pool.counters(class);
    assert_eq!(
        (counters.in_use, counters.returns, counters.reuses),
        (1, 1, 1)
    );
    assert_eq!(pool.allocated_bytes(), 8192);
}

#[test]
#[should_panic(expected = "outside the content")]
fn a_window_past_the_content_is_refused() {
    let pool = Pool::new_unchecked(PoolConfig::default());
    let mut buffer = pool.acquire(10).unwrap();
    buffer.extend_from_slice(b"0123");
    let _sent = buffer.into_send(2..5);
}

#[test]
fn a_trim_frees_the_classes_no_acquire_used_since_the_last_one() {
    let pool = Pool::new_unchecked(PoolConfig::default());
    let (large, small) = (BUCKETS[9], BUCKETS[0]);
    let burst: Vec<Buffer> = (0..4).map(|_| pool.acquire(large).unwrap()).collect();
    drop(burst);
    drop(pool.acquire(small).unwrap());
    let cached = 4 * large as u64 + small as u64;
    assert_eq!(pool.allocated_bytes(), cached);
    // The first trim only marks: the blocks were just used.
    assert_eq!(pool.trim(), 0);
    // The small class is used again meanwhile and keeps its block; the idle one goes.
    drop(pool.acquire(small).unwrap());
    assert_eq!(pool.trim(), 4 * large as u64);
    assert_eq!(pool.allocated_bytes(), small as u64);
    assert_eq!(pool.counters(bucket_for(large).unwrap()).free, 0);
    assert_eq!(pool.counters(bucket_for(small).unwrap()).free, 1);
    // A buffer out across trims is not touched, and returns to its class.
    let held = pool.acquire(large).unwrap();
    assert_eq!(pool.trim(), small as u64);
    assert_eq!(pool.trim(), 0);
    drop(held);
    assert_eq!(pool.allocated_bytes(), large as u64);
    assert_eq!(pool.trim(), large as u64);
    assert_eq!(pool.allocated_bytes(), 0);
}
