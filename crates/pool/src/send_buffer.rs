//! A pooled buffer that may cross to another thread: a request body read on one shard and
//! appended by the shard that owns the partition, without a copy. It views a window of its
//! block (the batch inside the body) and, dropped on any thread, goes back to its home pool
//! through the pool's [`Homecoming`], which the pool drains the next time it hands a buffer
//! out. Until then the block still counts against the home pool's budget, so memory sent
//! away cannot be used twice.

use std::ops::{Deref, DerefMut, Range};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::aligned::AlignedBlock;
use crate::bucket::Bucket;

/// Where blocks sent to other threads come back to. Shared by a pool and its sent buffers.
#[derive(Debug, Default)]
pub(crate) struct Homecoming {
    blocks: Mutex<Vec<(Bucket, AlignedBlock)>>,
    /// Set when `blocks` may be non-empty: the pool checks it without locking.
    waiting: AtomicBool,
    /// Notified on every return, so a reader waiting for pool memory wakes.
    pub(crate) returned: event_listener::Event,
}

impl Homecoming {
    fn give(&self, bucket: Bucket, block: AlignedBlock) {
        self.lock().push((bucket, block));
        self.waiting.store(true, Ordering::Release);
        self.returned.notify(usize::MAX);
    }

    /// The blocks that came home since the last call.
    pub(crate) fn take(&self) -> Vec<(Bucket, AlignedBlock)> {
        if !self.waiting.swap(false, Ordering::Acquire) {
            return Vec::new();
        }
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Bucket, AlignedBlock)>> {
        // A push or a take cannot leave the list half-changed.
        self.blocks.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A pooled block that may be sent to another thread, viewing bytes `window` of it.
#[derive(Debug)]
pub struct SendBuffer {
    /// `Some` until `Drop` sends the block home.
    block: Option<AlignedBlock>,
    window: Range<usize>,
    bucket: Bucket,
    home: Arc<Homecoming>,
}

impl SendBuffer {
    pub(crate) fn new(
        block: AlignedBlock,
        window: Range<usize>,
        bucket: Bucket,
        home: Arc<Homecoming>,
    ) -> Self {
        assert!(
            window.start <= window.end && window.end <= block.capacity(),
            "window {window:?} outside a block of {}",
            block.capacity()
        );
        Self {
            block: Some(block),
            window,
            bucket,
            home,
        }
    }

    /// Bytes from the window's start to the block's end: what the window may grow into.
    pub fn capacity(&self) -> usize {
        self.block().capacity() - self.window.start
    }

    /// Sets the window's length; panics past [`Self::capacity`] (a caller bug).
    pub fn set_len(&mut self, length: usize) {
        assert!(length <= self.capacity(), "length {length} over capacity");
        self.window.end = self.window.start + length;
    }

    #[cfg(feature = "compio")]
    pub(crate) fn spare_uninit_mut(&mut self) -> &mut [std::mem::MaybeUninit<u8>] {
        let start = self.window.start;
        &mut self.block_mut().as_uninit_mut()[start..]
    }

    fn block(&self) -> &AlignedBlock {
        // `block` is `None` only inside `drop`.
        self.block.as_ref().expect("block present until drop")
    }

    fn block_mut(&mut self) -> &mut AlignedBlock {
        self.block.as_mut().expect("block present until drop")
    }
}

impl Deref for SendBuffer {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.block().as_slice()[self.window.clone()]
    }
}

impl DerefMut for SendBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        let window = self.window.clone();
        &mut self.block_mut().as_mut_slice()[window]
    }
}

impl Drop for SendBuffer {
    fn drop(&mut self) {
        if let Some(block) = self.block.take() {
            self.home.give(self.bucket, block);
        }
    }
}
