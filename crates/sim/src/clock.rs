//! Simulated time: the driver moves it forward; sleeps wake, in deadline order, when it
//! passes their deadline.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use shard::clock::Clock;
use shard::clock::LocalFuture;

/// The simulated clock every shard of one run shares; clones share the time.
#[derive(Debug, Clone, Default)]
pub struct SimClock {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug, Default)]
struct Inner {
    now_us: u64,
    /// Wakers of pending sleeps by (deadline, registration number).
    timers: BTreeMap<(u64, u64), Waker>,
    registrations: u64,
}

impl SimClock {
    /// A clock reading `start_us`.
    pub fn starting_at(start_us: u64) -> Self {
        let clock = Self::default();
        clock.lock().now_us = start_us;
        clock
    }

    /// The lock is only ever held for a few map operations on the simulator's one thread; a
    /// poisoned lock means one of them panicked, and the run is over anyway.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Moves time forward by `step_us` and wakes every sleep whose deadline passed.
    pub fn advance(&self, step_us: u64) {
        let due = {
            let mut inner = self.lock();
            inner.now_us = inner.now_us.saturating_add(step_us);
            let first_later = (inner.now_us.saturating_add(1), 0);
            let later = inner.timers.split_off(&first_later);
            std::mem::replace(&mut inner.timers, later)
        };
        for waker in due.into_values() {
            waker.wake();
        }
    }

    /// Forgets every pending sleep (a crash ended the process that waited on them).
    pub fn clear_timers(&self) {
        self.lock().timers.clear();
    }
}

impl Clock for SimClock {
    fn now_us(&self) -> u64 {
        self.lock().now_us
    }

    fn sleep_until(&self, deadline_us: u64) -> LocalFuture<'static, ()> {
        Box::pin(Sleep {
            clock: self.clone(),
            deadline_us,
            registration: None,
        })
    }
}

/// A pending sleep of [`SimClock::sleep_until`].
struct Sleep {
    clock: SimClock,
    deadline_us: u64,
    registration: Option<u64>,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<()> {
        let deadline = self.deadline_us;
        let registration = {
            let mut inner = self.clock.lock();
            if inner.now_us >= deadline {
                return Poll::Ready(());
            }
            let number = self.registration.unwrap_or_else(|| {
                inner.registrations += 1;
                inner.registrations
            });
            inner
                .timers
                .insert((deadline, number), context.waker().clone());
            number
        };
        self.registration = Some(registration);
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(number) = self.registration {
            self.clock.lock().timers.remove(&(self.deadline_us, number));
        }
    }
}
