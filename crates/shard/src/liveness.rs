//! Whether a connection is still there: the time of its last request, the signal that evicts
//! it, and the rule that picks the stale ones (PROTOCOL.md §1.14).
//!
//! One [`Liveness`] per connection is shared by its registry record, which every shard reads,
//! and by the connection's state on the shard that serves it. That shard stamps every request
//! into it without touching the registry and waits on its [`EvictSignal`]; the leader's tick
//! reads the stamps and fires the signal of each connection [`stale`] picks.
//!
//! A connection is stale when its session's client id is a consumer-group member and it sent
//! nothing for longer than 1.2 × the heartbeat interval. An idle connection without
//! memberships is left alone: it holds nothing, while a dead member holds partitions that its
//! group cannot consume until the member is gone.

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use proto::header::EvictionReason;

use crate::data::Notify;

/// The liveness of one connection.
#[derive(Debug)]
pub struct Liveness {
    /// µs since the epoch. Stamps from requests running concurrently may land out of order,
    /// which moves it back by as long as a request takes: far below the idle limit.
    last_request_us: AtomicU64,
    eviction: EvictSignal,
}

impl Liveness {
    /// A connection opened at `now_us`: a fresh connection is not idle.
    pub fn new(now_us: u64) -> Self {
        Self {
            last_request_us: AtomicU64::new(now_us),
            eviction: EvictSignal::default(),
        }
    }

    /// A request arrived at `now_us`.
    pub fn stamp(&self, now_us: u64) {
        self.last_request_us.store(now_us, Ordering::Relaxed);
    }

    pub fn last_request_us(&self) -> u64 {
        self.last_request_us.load(Ordering::Relaxed)
    }

    pub fn eviction(&self) -> &EvictSignal {
        &self.eviction
    }
}

/// Tells a connection, from any thread, that it must be evicted, and why. It fires once: the
/// first reason is the one its client is told.
#[derive(Debug, Default)]
pub struct EvictSignal {
    /// An [`EvictionReason`] as its wire byte; 0, which no reason uses, until fired.
    reason: AtomicU8,
    notify: Notify,
}

impl EvictSignal {
    /// Fires with `reason` unless the signal has fired already; says whether this call did.
    pub fn fire(&self, reason: EvictionReason) -> bool {
        assert_ne!(reason.as_u8(), 0, "0 marks a signal not fired");
        let fired = self
            .reason
            .compare_exchange(0, reason.as_u8(), Ordering::SeqCst, Ordering::SeqCst)
            .is_ok();
        if fired {
            self.notify.notify_all();
        }
        fired
    }

    /// The reason it fired with, if it has.
    pub fn reason(&self) -> Option<EvictionReason> {
        EvictionReason::from_u8(self.reason.load(Ordering::SeqCst))
    }

    /// Completes with the reason once the signal has fired.
    pub async fn fired(&self) -> EvictionReason {
        loop {
            // Listening before the check: a fire between the two still wakes this waiter.
            let notified = self.notify.notified();
            if let Some(reason) = self.reason() {
                return reason;
            }
            notified.await;
        }
    }
}

/// One open connection as [`stale`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Activity {
    pub client_number: u32,
    /// The client id of the session it is bound to, if any.
    pub client_id: Option<u128>,
    pub last_request_us: u64,
}

/// A connection to evict, and the client id whose session and memberships end with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stale {
    pub client_number: u32,
    pub client_id: u128,
}

/// The connections to evict at `now_us`: bound to a session whose client id `is_member` of a
/// consumer group, with no request for more than `idle_max_us`. In `connections` order.
pub fn stale(
    connections: &[Activity],
    now_us: u64,
    idle_max_us: u64,
    is_member: impl Fn(u128) -> bool,
) -> Vec<Stale> {
    connections
        .iter()
        .filter(|activity| now_us.saturating_sub(activity.last_request_us) > idle_max_us)
        .filter_map(|activity| {
            let client_id = activity.client_id?;
            is_member(client_id).then_some(Stale {
                client_number: activity.client_number,
                client_id,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::sync::Arc;
    use std::task::{Context, Poll, Waker};

    use proto::header::EvictionReason;

    use super::{Activity, EvictSignal, Liveness, Stale, stale};

    const IDLE_MAX_US: u64 = 36_000_000;

    fn activity(client_number: u32, client_id: Option<u128>, last: u64) -> Activity {
        Activity {
            client_number,
            client_id,
            last_request_us: last,
        }
    }

    #[test]
    fn only_idle_members_are_stale() {
        let now = 100_000_000;
        let connections = [
            // A member idle past the limit.
            activity(1, Some(10), now - IDLE_MAX_US - 1),
            // A member idle exactly the limit: not yet.
            activity(2, Some(10), now - IDLE_MAX_US),
            // A member that sent a request recently.
            activity(3, Some(11), now - 1),
            // Idle and bound, but not a member.
            activity(4, Some(12), 0),
            // Idle and never logged in.
            activity(5, None, 0),
            // A member idle past the limit, on a second connection.
            activity(6, Some(11), now - 2 * IDLE_MAX_US),
            // A stamp later than `now` (a request raced the tick) is not idle.
            activity(7, Some(10), now + 5),
        ];
        let is_member = |client_id| client_id == 10 || client_id == 11;
        let found = stale(&connections, now, IDLE_MAX_US, is_member);
        let expected = [
            Stale {
                client_number: 1,
                client_id: 10,
            },
            Stale {
                client_number: 6,
                client_id: 11,
            },
        ];
        assert_eq!(found, expected);
        assert!(stale(&connections, now, IDLE_MAX_US, |_| false).is_empty());
        assert!(stale(&connections, now, u64::MAX, is_member).is_empty());
    }

    #[test]
    fn stamps_are_the_last_request() {
        let liveness = Liveness::new(5);
        assert_eq!(liveness.last_request_us(), 5);
        liveness.stamp(9);
        assert_eq!(liveness.last_request_us(), 9);
        assert_eq!(liveness.eviction().reason(), None);
    }

    #[test]
    fn the_signal_fires_once_from_any_thread() {
        let signal = Arc::new(EvictSignal::default());
        let mut waiter = pin!(signal.fired());
        let mut context = Context::from_waker(Waker::noop());
        assert!(waiter.as_mut().poll(&mut context).is_pending());
        let firing = Arc::clone(&signal);
        let first = std::thread::spawn(move || firing.fire(EvictionReason::StaleClient))
            .join()
            .unwrap();
        assert!(first);
        assert!(
            !signal.fire(EvictionReason::NoSession),
            "the first reason stays"
        );
        assert_eq!(
            waiter.as_mut().poll(&mut context),
            Poll::Ready(EvictionReason::StaleClient)
        );
        assert_eq!(signal.reason(), Some(EvictionReason::StaleClient));
    }
}
