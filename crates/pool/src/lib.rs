//! The buffer pool of one shard: 28 size classes (4 KiB … 512 MiB) of 4 KiB-aligned buffers
//! that return to their class when dropped.
//!
//! Invariants:
//! - A pool belongs to one shard thread: it is `!Send` and `!Sync` and holds no globals;
//!   buffers keep a reference to their pool so `Drop` can return them. The one way across
//!   threads is [`SendBuffer`]: it returns through a locked list the pool drains when it next
//!   hands a buffer out, and counts against the pool's budget until then.
//! - Every byte of every buffer is initialised (fresh blocks are zeroed), so a buffer's
//!   length can move anywhere within its capacity without `unsafe`.
//! - The bytes the pool has allocated, free or in use, never exceed its budget; a request
//!   that would exceed it fails with [`PoolError::Exhausted`], which callers turn into
//!   backpressure. There is no silent fallback to the heap.
//! - All `unsafe` blocks live in `aligned.rs` (`io_buf.rs` only implements compio's
//!   `unsafe fn set_len` with a checked, safe body).

mod aligned;
mod bucket;
mod buffer;
mod config;
#[cfg(feature = "compio")]
mod io_buf;
mod pool;
mod send_buffer;

#[cfg(test)]
mod tests;

pub use bucket::{BUCKETS, Bucket, bucket_for};
pub use buffer::Buffer;
pub use config::{ConfigError, PoolConfig, SIZE_BYTES_MIN};
pub use pool::{BucketCounters, Pool, PoolError};
pub use send_buffer::SendBuffer;
