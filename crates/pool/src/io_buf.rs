//! compio buffer traits, so pool buffers go straight into `io_uring` reads and writes.

use std::mem::MaybeUninit;

use compio_buf::{IoBuf, IoBufMut, SetLen};

use crate::buffer::Buffer;
use crate::send_buffer::SendBuffer;

impl IoBuf for Buffer {
    fn as_init(&self) -> &[u8] {
        self
    }
}

impl SetLen for Buffer {
    unsafe fn set_len(&mut self, length: usize) {
        Buffer::set_len(self, length);
    }
}

impl IoBufMut for Buffer {
    fn as_uninit(&mut self) -> &mut [MaybeUninit<u8>] {
        self.full_uninit_mut()
    }
}

impl IoBuf for SendBuffer {
    fn as_init(&self) -> &[u8] {
        self
    }
}

impl SetLen for SendBuffer {
    unsafe fn set_len(&mut self, length: usize) {
        SendBuffer::set_len(self, length);
    }
}

impl IoBufMut for SendBuffer {
    fn as_uninit(&mut self) -> &mut [MaybeUninit<u8>] {
        self.spare_uninit_mut()
    }
}
