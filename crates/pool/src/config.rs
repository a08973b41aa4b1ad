//! `system.memory_pool` settings and their bounds.

/// The smallest budget a pool accepts.
pub const SIZE_BYTES_MIN: u64 = 512 * 1024 * 1024;

/// How a shard's pool is sized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolConfig {
    /// When off, buffers are allocated per request and freed on drop (still within budget).
    pub enabled: bool,
    /// Bytes the pool may hold, free and in use together.
    pub size_bytes: u64,
    /// Free buffers kept per class; more are freed on return.
    pub bucket_capacity: usize,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            size_bytes: 4 * 1024 * 1024 * 1024,
            bucket_capacity: 8192,
        }
    }
}

/// A `system.memory_pool` setting out of bounds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("memory_pool.size {size_bytes} bytes is below the minimum of 512 MiB")]
    SizeTooSmall { size_bytes: u64 },
    #[error("memory_pool.bucket_capacity must be at least 1")]
    BucketCapacityZero,
}

impl PoolConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.size_bytes < SIZE_BYTES_MIN {
            return Err(ConfigError::SizeTooSmall {
                size_bytes: self.size_bytes,
            });
        }
        if self.bucket_capacity == 0 {
            return Err(ConfigError::BucketCapacityZero);
        }
        Ok(())
    }
}
