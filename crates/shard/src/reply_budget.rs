//! A connection's budget for reply memory: a poll or fetch takes a permit for the bytes it may
//! return before it reads, and gives it back when its reply is handed to the transport.
//!
//! The transport writes replies one at a time and does not poll other requests while a write
//! waits, so a client that pipelines many large polls and stops reading holds at most this
//! budget in read results (plus the one reply being written) until the write timeout drops
//! it. Waiting for budget is event-driven: a returned permit wakes the waiters.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Reply bytes one connection may have in reads at once: four 16 MiB polls, or sixty-four of
/// the 1 MiB deferred polls the SDK sends.
pub const REPLY_BUDGET_BYTES: u64 = 64 << 20;

/// Bytes in use out of a fixed budget; shared by a connection's requests on every shard.
#[derive(Debug)]
pub struct ReplyBudget {
    used: AtomicU64,
    max: u64,
    released: event_listener::Event,
}

/// Bytes taken from a [`ReplyBudget`], returned on drop.
#[derive(Debug)]
pub struct ReplyPermit {
    budget: Arc<ReplyBudget>,
    bytes: u64,
}

impl ReplyBudget {
    pub fn new(max: u64) -> Arc<Self> {
        Arc::new(Self {
            used: AtomicU64::new(0),
            max,
            released: event_listener::Event::new(),
        })
    }

    /// Waits until `bytes` (capped at the whole budget, so one large poll always fits
    /// alone) are free, and takes them.
    pub async fn acquire(self: &Arc<Self>, bytes: u64) -> ReplyPermit {
        let bytes = bytes.min(self.max);
        loop {
            // Listening before the check: a release between the two wakes this waiter.
            let released = self.released.listen();
            let used = self.used.load(Ordering::Acquire);
            if used.saturating_add(bytes) <= self.max {
                let taken = self.used.compare_exchange(
                    used,
                    used + bytes,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
                if taken.is_ok() {
                    return ReplyPermit {
                        budget: Arc::clone(self),
                        bytes,
                    };
                }
                continue;
            }
            released.await;
        }
    }

    /// Bytes taken now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }
}

impl Drop for ReplyPermit {
    fn drop(&mut self) {
        let before = self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel);
        assert!(before >= self.bytes, "a permit returns only what it took");
        self.budget.released.notify(usize::MAX);
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;

    use super::ReplyBudget;

    #[test]
    fn waiters_wake_when_permits_return_and_a_large_ask_fits_alone() {
        let budget = ReplyBudget::new(100);
        compio::runtime::Runtime::new().unwrap().block_on(async {
            let first = budget.acquire(60).await;
            let huge = Rc::new(Cell::new(false));
            let waiter = {
                let (budget, huge) = (budget.clone(), Rc::clone(&huge));
                compio::runtime::spawn(async move {
                    let permit = budget.acquire(1_000).await;
                    huge.set(true);
                    drop(permit);
                })
            };
            compio::time::sleep(std::time::Duration::from_millis(20)).await;
            assert!(!huge.get(), "the capped ask waits for the first permit");
            assert_eq!(budget.used(), 60);
            drop(first);
            waiter.await.unwrap();
            assert!(huge.get());
            assert_eq!(budget.used(), 0);
        });
    }
}
