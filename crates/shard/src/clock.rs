//! Time as an input: every reading of the wall clock and every timed wait of the shard goes
//! through a [`Clock`] the server is built with, so the deterministic simulator can run the
//! same code on simulated time (and replay a run) while the server runs on the system clock.

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A boxed future that stays on its thread.
pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Where a shard's time comes from.
pub trait Clock: Debug + Send + Sync {
    /// µs since the Unix epoch.
    fn now_us(&self) -> u64;

    /// Completes once [`Self::now_us`] has reached `deadline_us`.
    fn sleep_until(&self, deadline_us: u64) -> LocalFuture<'static, ()>;
}

/// The operating system's clock, with compio's timers.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_us(&self) -> u64 {
        system_now_us()
    }

    fn sleep_until(&self, deadline_us: u64) -> LocalFuture<'static, ()> {
        let wait = Duration::from_micros(deadline_us.saturating_sub(system_now_us()));
        // Instants are monotonic: a wall-clock step during the wait does not stretch it.
        let deadline = Instant::now() + wait;
        Box::pin(compio::time::sleep_until(deadline))
    }
}

/// µs since the Unix epoch by the system clock; 0 if the clock is before it. For the
/// runtime edge (start time, the tick timers); logic takes a [`Clock`].
pub fn system_now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX)
        })
}
