//! What a shard does with each [`ShardMessage`] it receives, and the loops that take them
//! from its two lanes: the ordered lane one at a time, the concurrent lane as tasks of their
//! own, at most [`RUNNING_MAX`] at once.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;

use crossfire::{AsyncRx, mpsc};
use event_listener::Event;
use futures_util::future::{Either, select};

use crate::mail::{Forwarded, RUNNING_MAX, ShardMessage};
use crate::node::Inbox;

use super::Server;

impl Server {
    /// Handles one message from another shard and sends its reply.
    pub(crate) async fn receive(&self, message: ShardMessage) {
        match message {
            ShardMessage::Commit { op, reply } => reply.send(self.commit(op).await),
            ShardMessage::Apply { op, reply } => reply.send(self.apply_committed(&op).await),
            ShardMessage::Forward(forwarded) => {
                let Forwarded {
                    mut connection,
                    header,
                    body,
                    reply,
                } = *forwarded;
                let outcome = self.handle(&mut connection, &header, &body).await;
                reply.send((outcome, connection));
            }
            ShardMessage::ConnectionClosed { client_id, reply } => {
                self.connection_closed(client_id).await;
                reply.send(());
            }
        }
    }
}

impl Inbox {
    /// Handles every message sent to this shard until `stop` completes.
    pub async fn serve(self, server: Rc<Server>, stop: impl Future<Output = ()>) {
        self.serve_in_transit(server, stop, || 0).await;
    }

    /// [`Self::serve`], with every message held for `transit()` µs of the node's clock
    /// before it is handled (the simulator's delivery delay; concurrent-lane messages may so
    /// overtake each other).
    pub async fn serve_in_transit(
        self,
        server: Rc<Server>,
        stop: impl Future<Output = ()>,
        transit: impl FnMut() -> u64,
    ) {
        let transit = Rc::new(RefCell::new(transit));
        let delay = move || (transit.borrow_mut())();
        let ordered = serve_ordered(self.ordered, Rc::clone(&server), delay.clone());
        let concurrent = serve_concurrent(self.concurrent, server, delay);
        let receiving = futures_util::future::join(ordered, concurrent);
        let receiving = std::pin::pin!(receiving);
        let stop = std::pin::pin!(stop);
        if let Either::Left(_) = select(receiving, stop).await {
            log::debug!("shard inbox closed");
        }
    }
}

/// Waits `transit_us` of the node's clock (nothing when 0).
async fn in_transit(server: &Server, transit_us: u64) {
    if transit_us > 0 {
        let deadline = server.now_us().saturating_add(transit_us);
        server.node.clock.sleep_until(deadline).await;
    }
}

/// The ordered lane: one message at a time, in arrival order.
async fn serve_ordered(
    lane: AsyncRx<mpsc::Array<ShardMessage>>,
    server: Rc<Server>,
    mut transit: impl FnMut() -> u64,
) {
    while let Ok(message) = lane.recv().await {
        in_transit(&server, transit()).await;
        server.receive(message).await;
    }
}

/// The concurrent lane: each message its own task, at most [`RUNNING_MAX`] at once.
async fn serve_concurrent(
    lane: AsyncRx<mpsc::Array<ShardMessage>>,
    server: Rc<Server>,
    mut transit: impl FnMut() -> u64,
) {
    let running = Rc::new(Running::default());
    loop {
        running.wait_below(RUNNING_MAX).await;
        let Ok(message) = lane.recv().await else {
            return;
        };
        let slot = Running::take(&running);
        let server = Rc::clone(&server);
        let transit_us = transit();
        compio::runtime::spawn(async move {
            in_transit(&server, transit_us).await;
            server.receive(message).await;
            drop(slot);
        })
        .detach();
    }
}

/// How many concurrent-lane messages run on this shard, and a wake-up when one ends.
#[derive(Default)]
pub(super) struct Running {
    pub(super) count: Cell<usize>,
    ended: Event,
}

/// One running message's place in [`Running`]; given back on drop.
pub(super) struct Slot(Rc<Running>);

impl Running {
    pub(super) fn take(running: &Rc<Self>) -> Slot {
        running.count.set(running.count.get() + 1);
        Slot(Rc::clone(running))
    }

    /// Completes once fewer than `max` run.
    pub(super) async fn wait_below(&self, max: usize) {
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
