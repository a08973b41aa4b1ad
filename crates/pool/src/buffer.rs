//! A pooled buffer: an owned aligned block with a length, returned to its class on drop.

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};
use std::rc::Rc;

use crate::aligned::AlignedBlock;
use crate::bucket::Bucket;
use crate::pool::PoolState;
use crate::send_buffer::SendBuffer;

/// Bytes `0..len` are the buffer's content; `len..capacity` is spare room, always
/// initialised (old content or zeros).
#[derive(Debug)]
pub struct Buffer {
    /// `Some` until `Drop` hands the block back.
    block: Option<AlignedBlock>,
    length: usize,
    bucket: Bucket,
    pool: Rc<RefCell<PoolState>>,
}

impl Buffer {
    pub(crate) fn new(block: AlignedBlock, bucket: Bucket, pool: Rc<RefCell<PoolState>>) -> Self {
        Self {
            block: Some(block),
            length: 0,
            bucket,
            pool,
        }
    }

    pub fn capacity(&self) -> usize {
        self.bucket.capacity()
    }

    pub fn bucket(&self) -> Bucket {
        self.bucket
    }

    /// Sets the content length; bytes up to the capacity are always initialised, so any
    /// length within it is sound. Panics past the capacity: a caller bug.
    pub fn set_len(&mut self, length: usize) {
        assert!(
            length <= self.capacity(),
            "length {length} over capacity {}",
            self.capacity()
        );
        self.length = length;
    }

    /// Appends `bytes`; panics if they do not fit (callers size buffers before filling them).
    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        let start = self.length;
        let end = start + bytes.len();
        self.full_mut()[start..end].copy_from_slice(bytes);
        self.length = end;
    }

    /// Turns the buffer into one that may go to another thread, viewing bytes `window` of
    /// it; it comes back to this pool when dropped there. Panics if `window` is not within
    /// the content (a caller bug).
    pub fn into_send(mut self, window: std::ops::Range<usize>) -> SendBuffer {
        assert!(
            window.start <= window.end && window.end <= self.length,
            "window {window:?} outside the content of {} bytes",
            self.length
        );
        let home = self.pool.borrow().homecoming();
        let block = self.block.take().expect("buffer block present until drop");
        SendBuffer::new(block, window, self.bucket, home)
    }

    pub fn clear(&mut self) {
        self.length = 0;
    }

    /// The whole block, content and spare room.
    pub fn full_mut(&mut self) -> &mut [u8] {
        self.block_mut().as_mut_slice()
    }

    /// The spare room after the content.
    pub fn spare_mut(&mut self) -> &mut [u8] {
        let length = self.length;
        &mut self.full_mut()[length..]
    }

    /// The whole block as possibly-uninitialised bytes, for compio's `IoBufMut`.
    #[cfg(feature = "compio")]
    pub(crate) fn full_uninit_mut(&mut self) -> &mut [std::mem::MaybeUninit<u8>] {
        self.block_mut().as_uninit_mut()
    }

    fn block(&self) -> &AlignedBlock {
        // `block` is `None` only inside `drop`.
        self.block
            .as_ref()
            .expect("buffer block present until drop")
    }

    fn block_mut(&mut self) -> &mut AlignedBlock {
        self.block
            .as_mut()
            .expect("buffer block present until drop")
    }
}

impl Deref for Buffer {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.block().as_slice()[..self.length]
    }
}

impl DerefMut for Buffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        let length = self.length;
        &mut self.block_mut().as_mut_slice()[..length]
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if let Some(block) = self.block.take() {
            self.pool.borrow_mut().give_back(self.bucket, block);
        }
    }
}
