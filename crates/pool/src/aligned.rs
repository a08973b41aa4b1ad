//! The one place with `unsafe`: owned, zero-initialised, 4 KiB-aligned heap blocks.
//!
//! 4 KiB alignment lets a block serve `O_DIRECT` reads and writes, and an owned block keeps
//! its address for as long as `io_uring` may use it.

use std::alloc::{Layout, alloc_zeroed, dealloc, handle_alloc_error};
use std::ptr::NonNull;

/// Alignment of every block: the page and `O_DIRECT` sector-multiple granularity.
pub(crate) const ALIGNMENT: usize = 4096;

/// A heap block of `capacity` bytes aligned to [`ALIGNMENT`], all bytes initialised.
#[derive(Debug)]
pub(crate) struct AlignedBlock {
    pointer: NonNull<u8>,
    capacity: usize,
}

impl AlignedBlock {
    /// Allocates a zeroed block. `capacity` is a pool class: non-zero and a multiple of the
    /// alignment.
    pub(crate) fn zeroed(capacity: usize) -> Self {
        let layout = Self::layout(capacity);
        // SAFETY: `layout` has a non-zero size (asserted in `layout`), which is the only
        // requirement of `alloc_zeroed`.
        let raw = unsafe { alloc_zeroed(layout) };
        let Some(pointer) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        Self { pointer, capacity }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: `pointer` is valid for `capacity` bytes for the block's lifetime, every byte
        // was initialised by `alloc_zeroed` and is only ever written with initialised values,
        // and the shared borrow of `self` rules out a concurrent `&mut`.
        unsafe { std::slice::from_raw_parts(self.pointer.as_ptr(), self.capacity) }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and the exclusive borrow of `self` makes this the only
        // reference into the block.
        unsafe { std::slice::from_raw_parts_mut(self.pointer.as_ptr(), self.capacity) }
    }

    /// The block viewed as possibly-uninitialised bytes, the form compio's `IoBufMut` wants.
    #[cfg(feature = "compio")]
    pub(crate) fn as_uninit_mut(&mut self) -> &mut [std::mem::MaybeUninit<u8>] {
        // SAFETY: `MaybeUninit<u8>` has the layout of `u8`, so this views the same
        // `capacity` valid bytes, uniquely for the exclusive borrow. Its writers (the kernel,
        // through compio) store real bytes, so every byte stays initialised.
        unsafe { std::slice::from_raw_parts_mut(self.pointer.as_ptr().cast(), self.capacity) }
    }

    fn layout(capacity: usize) -> Layout {
        assert!(
            capacity > 0 && capacity.is_multiple_of(ALIGNMENT),
            "capacity {capacity}"
        );
        // The alignment is a power of two and the capacity a multiple of it, far below
        // isize::MAX for every pool class, so the layout is valid.
        Layout::from_size_align(capacity, ALIGNMENT).expect("pool classes form valid layouts")
    }
}

impl Drop for AlignedBlock {
    fn drop(&mut self) {
        // SAFETY: `pointer` came from `alloc_zeroed` with exactly this layout and is freed
        // only here, once.
        unsafe { dealloc(self.pointer.as_ptr(), Self::layout(self.capacity)) };
    }
}

// SAFETY: an `AlignedBlock` uniquely owns its allocation, like a `Box<[u8]>`; moving it to
// another thread moves that ownership (buffers freed on another shard travel home).
unsafe impl Send for AlignedBlock {}

// SAFETY: through `&AlignedBlock` the bytes can only be read (`as_slice`); writing needs
// `&mut`, as for a `Box<[u8]>`, so sharing references between threads races nothing.
unsafe impl Sync for AlignedBlock {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_aligned_zeroed_and_writable() {
        let mut block = AlignedBlock::zeroed(8192);
        assert_eq!(block.as_slice().as_ptr() as usize % ALIGNMENT, 0);
        assert!(block.as_slice().iter().all(|&byte| byte == 0));
        block.as_mut_slice()[8191] = 7;
        assert_eq!(block.as_slice()[8191], 7);
        assert_eq!(block.capacity(), 8192);
    }
}
