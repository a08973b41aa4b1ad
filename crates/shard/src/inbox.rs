//! Serving a shard's inbox: the loops that take messages from its two lanes — the ordered
//! lane one at a time, the concurrent lane as tasks of their own, at most [`RUNNING_MAX`] at
//! once — and hand each to the shard's [`Receive`] side (the handlers implement it).

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;

use crossfire::{AsyncRx, mpsc};
use event_listener::Event;
use futures_util::future::{Either, select};

use crate::clock::{Clock, LocalFuture};
use crate::mail::{RUNNING_MAX, ShardMessage};
use crate::node::Inbox;

/// What a shard does with the messages other shards send it.
pub trait Receive: 'static {
    /// Handles one message and sends its reply.
    fn receive(&self, message: ShardMessage) -> LocalFuture<'_, ()>;
    /// The clock a message waits in transit on.
    fn clock(&self) -> &dyn Clock;
}

impl Inbox {
    /// Handles every message sent to this shard until `stop` completes.
    pub async fn serve<R: Receive>(self, receiver: Rc<R>, stop: impl Future<Output = ()>) {
        self.serve_in_transit(receiver, stop, || 0).await;
    }

    /// [`Self::serve`], with every message held for `transit()` µs of the node's clock
    /// before it is handled (the simulator's delivery delay; concurrent-lane messages may so
    /// overtake each other).
    pub async fn serve_in_transit<R: Receive>(
        self,
        receiver: Rc<R>,
        stop: impl Future<Output = ()>,
        transit: impl FnMut() -> u64,
    ) {
        let transit = Rc::new(RefCell::new(transit));
        let delay = move || (transit.borrow_mut())();
        let ordered = serve_ordered(self.ordered, Rc::clone(&receiver), delay.clone());
        let concurrent = serve_concurrent(self.concurrent, receiver, delay);
        let receiving = futures_util::future::join(ordered, concurrent);
        let receiving = std::pin::pin!(receiving);
        let stop = std::pin::pin!(stop);
        if let Either::Left(_) = select(receiving, stop).await {
            log::debug!("shard inbox closed");
        }
    }
}

/// Waits `transit_us` of the receiver's clock (nothing when 0).
async fn in_transit<R: Receive>(receiver: &R, transit_us: u64) {
    if transit_us > 0 {
        let clock = receiver.clock();
        let deadline = clock.now_us().saturating_add(transit_us);
        clock.sleep_until(deadline).await;
    }
}

/// The ordered lane: one message at a time, in arrival order.
async fn serve_ordered<R: Receive>(
    lane: AsyncRx<mpsc::Array<ShardMessage>>,
    receiver: Rc<R>,
    mut transit: impl FnMut() -> u64,
) {
    while let Ok(message) = lane.recv().await {
        in_transit(&*receiver, transit()).await;
        receiver.receive(message).await;
    }
}

/// The concurrent lane: each message its own task, at most [`RUNNING_MAX`] at once.
async fn serve_concurrent<R: Receive>(
    lane: AsyncRx<mpsc::Array<ShardMessage>>,
    receiver: Rc<R>,
    mut transit: impl FnMut() -> u64,
) {
    let running = Rc::new(Running::default());
    loop {
        running.wait_below(RUNNING_MAX).await;
        let Ok(message) = lane.recv().await else {
            return;
        };
        let slot = Running::take(&running);
        let receiver = Rc::clone(&receiver);
        let transit_us = transit();
        compio::runtime::spawn(async move {
            in_transit(&*receiver, transit_us).await;
            receiver.receive(message).await;
            drop(slot);
        })
        .detach();
    }
}

/// How many concurrent-lane messages run on this shard, and a wake-up when one ends.
#[derive(Default)]
pub(crate) struct Running {
    pub(crate) count: Cell<usize>,
    ended: Event,
}

/// One running message's place in [`Running`]; given back on drop.
pub(crate) struct Slot(Rc<Running>);

impl Running {
    pub(crate) fn take(running: &Rc<Self>) -> Slot {
        running.count.set(running.count.get() + 1);
        Slot(Rc::clone(running))
    }

    /// Completes once fewer than `max` run.
    pub(crate) async fn wait_below(&self, max: usize) {
        while self.count.get() >= max {
            // Registered before the check below, so an end between the two is not missed.
            let ended = self.ended.listen();
            if self.count.get() < max {
                return;
            }
            ended.await;
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.count.set(self.0.count.get().saturating_sub(1));
        self.0.ended.notify(1);
    }
}

#[cfg(test)]
#[path = "inbox_tests.rs"]
mod tests;
