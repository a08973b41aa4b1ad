//! The pool: free lists per class, the budget, and per-class counters for metrics.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use crate::aligned::AlignedBlock;
use crate::bucket::{BUCKETS, Bucket, bucket_for};
use crate::buffer::Buffer;
use crate::config::{ConfigError, PoolConfig};
use crate::send_buffer::Homecoming;

/// Why a buffer could not be handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    #[error("{requested} bytes is more than the largest class (512 MiB)")]
    TooLarge { requested: usize },
    #[error("pool exhausted: {allocated} of {budget} bytes in use, no room for {class} more")]
    Exhausted {
        class: usize,
        allocated: u64,
        budget: u64,
    },
}

/// What one class has done, for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BucketCounters {
    /// Buffers of this class currently handed out.
    pub in_use: u64,
    /// Free buffers kept for reuse.
    pub free: u64,
    /// Blocks allocated from the heap.
    pub allocations: u64,
    /// Buffers returned on drop (kept or freed).
    pub returns: u64,
    /// Acquisitions served from the free list.
    pub reuses: u64,
}

/// A shard's buffer pool. Cloning gives another handle to the same pool.
#[derive(Debug, Clone)]
pub struct Pool {
    state: Rc<RefCell<PoolState>>,
}

#[derive(Debug)]
pub(crate) struct PoolState {
    config: PoolConfig,
    /// Bytes of every block the pool owns or has handed out.
    allocated_bytes: u64,
    free: Vec<Vec<AlignedBlock>>,
    counters: [BucketCounters; Bucket::COUNT],
    /// Per class, whether a block was handed out since the last [`Pool::trim`].
    taken_since_trim: [bool; Bucket::COUNT],
    /// Blocks coming back from other threads ([`crate::SendBuffer`]); its event is notified
    /// whenever any buffer comes back, so a reader waiting for memory wakes on it instead of
    /// polling.
    homecoming: Arc<Homecoming>,
}

impl Pool {
    pub fn new(config: PoolConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Self::new_unchecked(config))
    }

    /// A pool without the 512 MiB floor, for tests that exercise exhaustion.
    pub fn new_unchecked(config: PoolConfig) -> Self {
        let state = PoolState {
            config,
            allocated_bytes: 0,
            free: (0..Bucket::COUNT).map(|_| Vec::new()).collect(),
            counters: [BucketCounters::default(); Bucket::COUNT],
            taken_since_trim: [true; Bucket::COUNT],
            homecoming: Arc::default(),
        };
        Self {
            state: Rc::new(RefCell::new(state)),
        }
    }

    /// A buffer of at least `length` bytes of capacity, with length 0.
    pub fn acquire(&self, length: usize) -> Result<Buffer, PoolError> {
        let bucket = bucket_for(length).ok_or(PoolError::TooLarge { requested: length })?;
        let block = self.state.borrow_mut().take(bucket)?;
        Ok(Buffer::new(block, bucket, Rc::clone(&self.state)))
    }

    /// A listener that fires when a buffer next returns to the pool. Take it before an
    /// `acquire` that may fail with `Exhausted`, then await it: no return is missed between.
    pub fn returned(&self) -> event_listener::EventListener {
        self.state.borrow().homecoming.returned.listen()
    }

    /// A buffer holding a copy of `bytes`.
    pub fn acquire_copy(&self, bytes: &[u8]) -> Result<Buffer, PoolError> {
        let mut buffer = self.acquire(bytes.len())?;
        buffer.extend_from_slice(bytes);
        Ok(buffer)
    }

    pub fn counters(&self, bucket: Bucket) -> BucketCounters {
        self.state.borrow().counters[bucket.index()]
    }

    /// Bytes allocated from the heap, free and in use.
    pub fn allocated_bytes(&self) -> u64 {
        self.state.borrow().allocated_bytes
    }

    pub fn budget_bytes(&self) -> u64 {
        self.state.borrow().config.size_bytes
    }

    /// Frees the free blocks of every class that handed out none since the previous trim,
    /// so the memory a burst took goes back to the heap once the burst is over, while a
    /// class in use keeps every block it may reuse (freeing part of a busy class showed as
    /// allocations and page faults in the next seconds' requests). Call it every interval;
    /// returns the bytes freed.
    pub fn trim(&self) -> u64 {
        self.state.borrow_mut().trim()
    }
}

impl PoolState {
    fn take(&mut self, bucket: Bucket) -> Result<AlignedBlock, PoolError> {
        for (home_bucket, block) in self.homecoming.take() {
            self.give_back(home_bucket, block);
        }
        let index = bucket.index();
        self.taken_since_trim[index] = true;
        if let Some(block) = self.free[index].pop() {
            let counters = &mut self.counters[index];
            counters.free -= 1;
            counters.in_use += 1;
            counters.reuses += 1;
            return Ok(block);
        }
        let class = bucket.capacity();
        let class_bytes = class as u64;
        let budget = self.config.size_bytes;
        if self.allocated_bytes + class_bytes > budget && !self.evict_free(class_bytes) {
            return Err(PoolError::Exhausted {
                class,
                allocated: self.allocated_bytes,
                budget,
            });
        }
        self.allocated_bytes += class_bytes;
        let counters = &mut self.counters[index];
        counters.in_use += 1;
        counters.allocations += 1;
        Ok(AlignedBlock::zeroed(class))
    }

    /// Frees cached blocks of other classes, largest first, until `needed` more bytes fit in
    /// the budget; a pool full of idle small buffers must not refuse a large one.
    fn evict_free(&mut self, needed: u64) -> bool {
        for index in (0..Bucket::COUNT).rev() {
            while self.allocated_bytes + needed > self.config.size_bytes {
                let Some(block) = self.free[index].pop() else {
                    break;
                };
                self.allocated_bytes -= block.capacity() as u64;
                self.counters[index].free -= 1;
            }
        }
        self.allocated_bytes + needed <= self.config.size_bytes
    }

    fn trim(&mut self) -> u64 {
        for (home_bucket, block) in self.homecoming.take() {
            self.give_back(home_bucket, block);
        }
        let mut freed = 0;
        for index in 0..Bucket::COUNT {
            if std::mem::take(&mut self.taken_since_trim[index]) {
                continue;
            }
            for block in self.free[index].drain(..) {
                freed += block.capacity() as u64;
                self.counters[index].free -= 1;
            }
        }
        self.allocated_bytes -= freed;
        freed
    }

    /// Takes a block back from a dropped buffer.
    pub(crate) fn give_back(&mut self, bucket: Bucket, mut block: AlignedBlock) {
        let index = bucket.index();
        debug_assert_eq!(block.capacity(), BUCKETS[index]);
        let counters = &mut self.counters[index];
        counters.in_use -= 1;
        counters.returns += 1;
        let keep = self.config.enabled && self.free[index].len() < self.config.bucket_capacity;
        if keep {
            if cfg!(debug_assertions) {
                block.as_mut_slice().fill(0xA5);
            }
            counters.free += 1;
            self.free[index].push(block);
        } else {
            self.allocated_bytes -= block.capacity() as u64;
        }
        self.homecoming.returned.notify(usize::MAX);
    }

    pub(crate) fn homecoming(&self) -> Arc<Homecoming> {
        Arc::clone(&self.homecoming)
    }
}
