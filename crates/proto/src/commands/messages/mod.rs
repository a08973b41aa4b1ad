//! The message plane: send, poll, deferred poll, fetch, routes and cancellation
//! (PROTOCOL.md §2.9, §2.11, §4.4, §5).

mod fetch;
mod poll;
mod route;
mod send;

#[cfg(test)]
mod tests;

pub use fetch::{FETCH_TARGETS_MAX, FetchMessages, FetchSection, FetchTarget, FetchedMessages};
pub use poll::{POLL_BYTES_MIN, PollMessagesDeferred, PolledMessages, poll_head_length};
pub use route::{GetPartitionRoute, PartitionRoute};
pub use send::{Confirmation, SendConfirmations, SendMessages};

/// Longest a deferred request may park, in µs (10 minutes).
pub const WAIT_US_MAX: u64 = 600_000_000;
/// Longest client budget a deferred request may announce, in µs.
pub const REQUEST_TIMEOUT_US_MAX: u64 = 630_000_000;
/// The margin between the park time and the client's budget, in µs.
pub const REQUEST_TIMEOUT_MARGIN_US: u64 = 1_000_000;
