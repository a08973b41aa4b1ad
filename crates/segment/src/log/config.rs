//! Per-topic settings the log obeys.

/// When an append is acknowledged (`FORMAT.md` §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// After the record reached the kernel; fdatasync by thresholds and on seal.
    #[default]
    Replicated,
    /// After an fdatasync that covers the record (group commit).
    Persisted,
}

/// The server's default `[system.partition] sync_interval` (1 s), in µs.
pub const SYNC_INTERVAL_DEFAULT_US: u64 = 1_000_000;

/// The log's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogConfig {
    /// A segment is sealed once it holds at least this many bytes (soft limit).
    pub segment_size_bytes: u64,
    pub durability: Durability,
    /// Under `Replicated`: sync once this many messages are unsynced.
    pub messages_required_to_save: u32,
    /// Under `Replicated`: sync once this many bytes are unsynced.
    pub size_of_messages_required_to_save: u64,
    /// Under `Replicated`: once only the message-count threshold is reached, a sync starts
    /// if none started within this many µs of append time (the `now_us` appends and ticks
    /// carry); the size threshold starts one at once. 0: at every threshold.
    pub sync_interval_us: u64,
    /// Reads verify every message checksum of the records they return
    /// (`[system.partition] validate_checksum`). Off, they verify each record's layout and
    /// batch checksum, which covers its header and its messages' checksums but not their
    /// payloads.
    pub validate_checksum: bool,
    /// Disk blocks the active segment's `.log` reserves ahead of its end (`preallocate.rs`).
    pub preallocation: Preallocation,
}

/// Blocks reserved ahead of a log's appends (`fallocate`, the size unchanged), so they write
/// into allocated blocks instead of extending the file through the file system's delayed
/// allocation. Never past the segment size (beyond the record being written), and only while
/// the file system keeps [`RESERVE_FREE_MIN_BYTES`] and a hundredth of its size free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preallocation {
    Off,
    /// Records of at least [`RESERVE_RECORD_MIN_BYTES`] and at most half this many bytes
    /// reserve room for four such records (the one being written included), at most this
    /// many bytes. Smaller ones reserve nothing (what they gained was within noise, and a
    /// partition of small records would hold its reservation for days), nor do larger ones
    /// (a reservation would cover little more than the record, a round trip per append).
    Ahead(u64),
    /// The whole segment at its first append (the topic option `preallocate_segments`).
    Segment,
}

/// [`Preallocation::Ahead`] by default: on ext4 a 1 MiB append into reserved blocks took
/// about 0.73× the time of one extending the file, with reservations of 2 MiB and more
/// alike (`bench/RESULTS.md`).
pub const PREALLOCATE_AHEAD_DEFAULT: u64 = 4 << 20;
/// The smallest record that reserves blocks ahead under [`Preallocation::Ahead`].
pub const RESERVE_RECORD_MIN_BYTES: u64 = 256 << 10;
/// Free space a reservation always leaves on its file system, so reserved blocks never
/// turn a nearly full disk into a full one.
pub const RESERVE_FREE_MIN_BYTES: u64 = 1 << 30;

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_size_bytes: 1 << 30,
            durability: Durability::Replicated,
            messages_required_to_save: 1024,
            size_of_messages_required_to_save: 1 << 20,
            sync_interval_us: SYNC_INTERVAL_DEFAULT_US,
            // As the server's default: a record damaged at rest is refused, not served.
            validate_checksum: true,
            preallocation: Preallocation::Ahead(PREALLOCATE_AHEAD_DEFAULT),
        }
    }
}
