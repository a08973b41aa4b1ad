//! Wake-up primitives for the data plane: a broadcast [`Notify`], [`race`] and [`Cancel`]
//! (crossfire, which carries the partition jobs and their replies, has no broadcast).
//!
//! A partition's task rings its [`Notify`] on its owner shard while polls parked on other
//! shards wait on it, so these work across threads; ringing with nobody waiting is a couple
//! of atomic operations (event-listener's fast path), so the append path pays nothing.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use event_listener::{Event, EventListener};

/// Wakes every waiter registered before [`Notify::notify_all`]. A waiter is registered when
/// [`Notify::notified`] returns, so a notification between a check and the wait is never
/// lost.
#[derive(Debug, Default)]
pub struct Notify {
    event: Event,
}

impl Notify {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn notify_all(&self) {
        self.event.notify(usize::MAX);
    }

    /// A future that completes at the next notification after this call.
    pub fn notified(&self) -> Notified {
        Notified(self.event.listen())
    }
}

/// See [`Notify::notified`].
#[derive(Debug)]
pub struct Notified(EventListener);

impl Future for Notified {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(context)
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
    cancelled: AtomicBool,
    notify: Notify,
}

impl Cancel {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        self.notify.notify_all();
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// Completes once [`Cancel::cancel`] was called.
    pub async fn cancelled(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::sync::Arc;
    use std::task::Waker;

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

    /// Records that it was woken.
    #[derive(Default)]
    struct Flag(AtomicBool);

    impl std::task::Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    /// A waiter on one thread is woken by a notification from another.
    #[test]
    fn notifications_cross_threads() {
        let notify = Arc::new(Notify::new());
        for _ in 0..100 {
            let flag = Arc::new(Flag::default());
            let waker = Waker::from(Arc::clone(&flag));
            let mut waiter = pin!(notify.notified());
            let polled = waiter.as_mut().poll(&mut Context::from_waker(&waker));
            assert!(polled.is_pending());
            let ringer = Arc::clone(&notify);
            std::thread::spawn(move || ringer.notify_all())
                .join()
                .unwrap();
            assert!(flag.0.load(Ordering::SeqCst), "the waker was called");
            assert!(poll_once(waiter.as_mut()).is_ready());
        }
    }
}
