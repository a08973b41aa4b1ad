//! Single-thread wake-up primitives for the data plane: a broadcast [`Notify`], [`race`] and
//! [`Cancel`] (crossfire, which carries the partition jobs and their replies, has no
//! broadcast). Everything in a shard runs on one compio thread, so these are `Cell`/`RefCell`
//! based and never lock.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// Wakes every waiter registered before [`Notify::notify_all`]. A waiter created before the
/// notification completes even if it is first polled after it (a generation counter), so no
/// wake-up is lost between a check and the wait.
#[derive(Debug, Default)]
pub struct Notify {
    generation: Cell<u64>,
    waiters: RefCell<Vec<Waker>>,
}

impl Notify {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn notify_all(&self) {
        self.generation.set(self.generation.get().wrapping_add(1));
        let waiters = std::mem::take(&mut *self.waiters.borrow_mut());
        for waker in waiters {
            waker.wake();
        }
    }

    /// A future that completes at the next notification after this call.
    pub fn notified(&self) -> Notified<'_> {
        Notified {
            notify: self,
            generation: self.generation.get(),
        }
    }
}

/// See [`Notify::notified`].
#[derive(Debug)]
pub struct Notified<'a> {
    notify: &'a Notify,
    generation: u64,
}

impl Future for Notified<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<()> {
        if self.notify.generation.get() != self.generation {
            return Poll::Ready(());
        }
        let mut waiters = self.notify.waiters.borrow_mut();
        if !waiters.iter().any(|waker| waker.will_wake(context.waker())) {
            waiters.push(context.waker().clone());
        }
        Poll::Pending
    }
}

/// A boxed unit future, for [`race`].
pub type Waiting<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;

/// Completes when the first of `futures` completes (never, when there are none).
pub fn race(futures: Vec<Waiting<'_>>) -> Race<'_> {
    Race { futures }
}

/// See [`race`].
pub struct Race<'a> {
    futures: Vec<Waiting<'a>>,
}

impl Future for Race<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<()> {
        for future in &mut self.futures {
            if future.as_mut().poll(context).is_ready() {
                return Poll::Ready(());
            }
        }
        Poll::Pending
    }
}

/// A cancellation flag a parked request watches (`CANCEL_DEFERRED_REQUEST`, shutdown).
#[derive(Debug, Default)]
pub struct Cancel {
    cancelled: Cell<bool>,
    notify: Notify,
}

impl Cancel {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn cancel(&self) {
        self.cancelled.set(true);
        self.notify.notify_all();
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancelled.get()
    }

    /// Completes once [`Cancel::cancel`] was called.
    pub async fn cancelled(&self) {
        while !self.cancelled.get() {
            self.notify.notified().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;

    use super::*;

    fn poll_once<F: Future>(future: Pin<&mut F>) -> Poll<F::Output> {
        future.poll(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn a_waiter_made_before_the_notification_completes() {
        let notify = Notify::new();
        let mut waiter = pin!(notify.notified());
        assert!(poll_once(waiter.as_mut()).is_pending());
        notify.notify_all();
        assert!(poll_once(waiter.as_mut()).is_ready());
        let mut late = pin!(notify.notified());
        assert!(poll_once(late.as_mut()).is_pending());
    }

    #[test]
    fn race_and_cancel() {
        let cancel = Cancel::new();
        let notify = Notify::new();
        let mut raced = pin!(race(vec![
            Box::pin(cancel.cancelled()),
            Box::pin(notify.notified())
        ]));
        assert!(poll_once(raced.as_mut()).is_pending());
        cancel.cancel();
        assert!(cancel.is_cancelled());
        assert!(poll_once(raced.as_mut()).is_ready());
    }
}
