//! A connection's budget for reply memory: a poll or fetch takes a permit for the bytes it may
//! return before it reads, and gives it back when its reply is handed to the transport.
//!
//! The transport writes replies one at a time and does not poll other requests while a write
//! waits, so a client that pipelines many large polls and stops reading holds at most this
//! budget in read results (plus the one reply being written) until the write timeout drops
//! it. Waiting for budget is event-driven: a returned permit wakes the waiters.
//!
//! The server's budget ([`NODE_REPLY_BUDGET_BYTES`]) bounds all connections together; while
//! a poll waits for it, it is [`ReplyBudget::short`], and a transport ends the connections
//! whose reply writes have stalled, so clients that stopped reading do not hold the memory
//! others wait for until their write timeouts.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Reply bytes one connection may have in reads at once: four 16 MiB polls, or sixty-four of
/// the 1 MiB deferred polls the SDK sends.
pub const REPLY_BUDGET_BYTES: u64 = 64 << 20;

/// Reply bytes all connections of the server may have in reads at once (128 polls of the
/// 16 MiB most a poll may return): without it, a thousand clients that pipeline polls and
/// stop reading would hold 64 GiB.
pub const NODE_REPLY_BUDGET_BYTES: u64 = 2 << 30;

/// Bytes in use out of a fixed budget; shared by a connection's requests on every shard (or
/// by every connection, for the server's).
#[derive(Debug)]
pub struct ReplyBudget {
    used: AtomicU64,
    max: u64,
    released: event_listener::Event,
    /// Acquires waiting now, and the event a change of that count notifies.
    waiting: AtomicUsize,
    waiters_changed: event_listener::Event,
}

/// Counts one waiting acquire while it lives (a dropped acquire stops waiting too).
struct Waiting<'b>(&'b ReplyBudget);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::AcqRel);
        self.0.waiters_changed.notify(usize::MAX);
    }
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
            waiting: AtomicUsize::new(0),
            waiters_changed: event_listener::Event::new(),
        })
    }

    /// Waits until `bytes` (capped at the whole budget, so one large poll always fits
    /// alone) are free, and takes them.
    pub async fn acquire(self: &Arc<Self>, bytes: u64) -> ReplyPermit {
        let bytes = bytes.min(self.max);
        let mut waiting = None;
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
            if waiting.is_none() {
                self.waiting.fetch_add(1, Ordering::AcqRel);
                self.waiters_changed.notify(usize::MAX);
                waiting = Some(Waiting(self));
            }
            released.await;
        }
    }

    /// Completes once some acquire waits for room (at once if one does now): the budget is
    /// short, and whoever holds it without progress should let go.
    pub async fn short(&self) {
        loop {
            let changed = self.waiters_changed.listen();
            if self.waiting.load(Ordering::Acquire) > 0 {
                return;
            }
            changed.await;
        }
    }

    /// Bytes taken now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }
}

/// Room a read that may wait (a deferred poll, a fetch) takes from its budgets (the
/// connection's, then the server's) only while it reads and answers: before it waits for
/// messages it drops what it read and the room with it, so clients parked on quiet
/// partitions hold none of a budget others need, their own connection's included.
#[derive(Debug, Clone, Default)]
pub struct ReplyRoom {
    budgets: Vec<Arc<ReplyBudget>>,
    bytes: u64,
}

/// The permits of a [`ReplyRoom`], returned on drop (held for that alone).
#[derive(Debug, Default)]
pub struct ReplyPermits(#[allow(dead_code)] Vec<ReplyPermit>);

impl ReplyRoom {
    /// `bytes` of each of `budgets`, taken in that order (always the same order, so two
    /// rooms never wait for each other's budgets).
    pub fn new(budgets: Vec<Arc<ReplyBudget>>, bytes: u64) -> Self {
        Self { budgets, bytes }
    }

    /// Room without a budget (a caller that holds its permits already).
    pub fn unbounded() -> Self {
        Self::default()
    }

    /// Waits for the room and takes it.
    pub async fn take(&self) -> ReplyPermits {
        let mut permits = Vec::with_capacity(self.budgets.len());
        for budget in &self.budgets {
            permits.push(budget.acquire(self.bytes).await);
        }
        ReplyPermits(permits)
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

    #[test]
    fn the_budget_is_short_while_an_acquire_waits() {
        use futures_util::FutureExt;
        let budget = ReplyBudget::new(100);
        compio::runtime::Runtime::new().unwrap().block_on(async {
            assert!(budget.short().now_or_never().is_none(), "nobody waits");
            let held = budget.acquire(100).await;
            assert!(
                budget.short().now_or_never().is_none(),
                "full, but nobody waits"
            );
            let waiter = {
                let budget = budget.clone();
                compio::runtime::spawn(async move { drop(budget.acquire(10).await) })
            };
            budget.short().await;
            drop(held);
            waiter.await.unwrap();
            assert!(
                budget.short().now_or_never().is_none(),
                "the waiter was served"
            );
            // An acquire given up while waiting stops counting.
            let held = budget.acquire(100).await;
            assert!(budget.acquire(10).now_or_never().is_none());
            assert!(
                budget.short().now_or_never().is_none(),
                "the dropped acquire"
            );
            drop(held);
        });
    }
}
