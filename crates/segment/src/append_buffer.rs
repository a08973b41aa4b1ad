//! The bytes of one batch record on its way to a partition's task: a `Vec`, or a pool block
//! sent from the shard that read the request ([`pool::SendBuffer`]), so a body read into the
//! pool is stamped and written where it landed instead of being copied first.

use std::mem::MaybeUninit;

use compio_buf::{IoBuf, IoBufMut, SetLen};
use pool::SendBuffer;

/// One batch record to append; the task stamps it in place and writes it.
#[derive(Debug)]
pub enum AppendBuffer {
    Heap(Vec<u8>),
    Pooled(SendBuffer),
}

impl AppendBuffer {
    /// The `Vec` back, when it was one (callers reusing their own buffers).
    pub fn into_heap(self) -> Option<Vec<u8>> {
        match self {
            Self::Heap(bytes) => Some(bytes),
            Self::Pooled(_) => None,
        }
    }
}

impl From<Vec<u8>> for AppendBuffer {
    fn from(bytes: Vec<u8>) -> Self {
        Self::Heap(bytes)
    }
}

impl From<SendBuffer> for AppendBuffer {
    fn from(buffer: SendBuffer) -> Self {
        Self::Pooled(buffer)
    }
}

impl std::ops::Deref for AppendBuffer {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Self::Heap(bytes) => bytes,
            Self::Pooled(buffer) => buffer,
        }
    }
}

impl IoBuf for AppendBuffer {
    fn as_init(&self) -> &[u8] {
        self
    }
}

impl SetLen for AppendBuffer {
    unsafe fn set_len(&mut self, length: usize) {
        match self {
            // SAFETY: forwarded; the caller upholds `SetLen::set_len`'s contract for the
            // buffer inside.
            Self::Heap(bytes) => unsafe { SetLen::set_len(bytes, length) },
            // SAFETY: as above.
            Self::Pooled(buffer) => unsafe { SetLen::set_len(buffer, length) },
        }
    }
}

impl IoBufMut for AppendBuffer {
    fn as_uninit(&mut self) -> &mut [MaybeUninit<u8>] {
        match self {
            Self::Heap(bytes) => bytes.as_uninit(),
            Self::Pooled(buffer) => buffer.as_uninit(),
        }
    }
}
