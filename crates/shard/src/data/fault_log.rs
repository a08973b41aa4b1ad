//! Log lines for data-path failures the client only sees as a status code (a full disk, an
//! I/O error, a quarantined partition), at most one per second per shard thread: a producer
//! retrying into a full disk would otherwise write a line per request.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// The least time between two lines of one thread.
const INTERVAL: Duration = Duration::from_secs(1);

thread_local! {
    /// When this thread last wrote a line, and how many it held back since.
    static LAST: Cell<(Option<Instant>, u64)> = const { Cell::new((None, 0)) };
}

/// Logs `line` at error level unless this thread wrote one less than a second ago; the next
/// line written says how many were held back.
pub(super) fn log_fault(line: impl FnOnce() -> String) {
    LAST.with(|last| {
        let (written, held) = last.get();
        // Logging only: the clock decides which lines are shown, never what is answered.
        let now = Instant::now();
        if written.is_some_and(|at| now.duration_since(at) < INTERVAL) {
            last.set((written, held.saturating_add(1)));
            return;
        }
        last.set((Some(now), 0));
        if held == 0 {
            log::error!("{}", line());
        } else {
            log::error!("{} ({held} more like it held back)", line());
        }
    });
}
