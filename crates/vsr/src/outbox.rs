//! What a replica asks its caller to do, and the completions that come back.

use alloc::vec::Vec;

use crate::{Entry, Message, Op, ReplicaId, View};

/// One action for the caller. Effects are executed in order: a [`Effect::Persist`] is
/// durable before any later effect of the same outbox is performed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Send `message` to replica `to` (best effort: the protocol tolerates loss).
    Send { to: ReplicaId, message: Message },
    /// Make `view`, `log_view` and `recovering` durable (synchronously, before the next
    /// effect); see [`crate::Durable`].
    Persist {
        view: View,
        log_view: View,
        recovering: bool,
    },
    /// Send replica `to` the committed entries `op_min..=op_max`, read back from the durable
    /// log (they are no longer in memory), each as a [`Message::Prepare`] of `view` from this
    /// replica naming `commit`.
    SendPrepares {
        to: ReplicaId,
        view: View,
        commit: Op,
        op_min: Op,
        op_max: Op,
    },
    /// Drop every durable entry above `op_min - 1`, then append `entries` (ops `op_min`…).
    /// Writes complete in the order they were issued, each as [`Completion::Written`].
    Write {
        id: u64,
        op_min: Op,
        entries: Vec<Entry>,
    },
    /// Apply the committed `entry` to the state machine; ops arrive in order, each once per
    /// replica process.
    Commit { entry: Entry },
    /// Answer the client: its `request` committed at `op` (also sent again for a retry).
    Reply { client: u128, request: u64, op: Op },
}

/// An I/O the caller finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// The [`Effect::Write`] `id` is durable.
    Written { id: u64 },
}

/// The effects of one step, in order.
#[derive(Debug, Default)]
pub struct Outbox {
    effects: Vec<Effect>,
}

impl Outbox {
    pub fn new() -> Self {
        Self::default()
    }

    pub(crate) fn push(&mut self, effect: Effect) {
        self.effects.push(effect);
    }

    pub(crate) fn send(&mut self, to: ReplicaId, message: Message) {
        self.push(Effect::Send { to, message });
    }

    /// Takes the effects out, oldest first.
    pub fn drain(&mut self) -> alloc::vec::Drain<'_, Effect> {
        self.effects.drain(..)
    }

    pub fn is_empty(&self) -> bool {
        self.effects.is_empty()
    }

    pub fn len(&self) -> usize {
        self.effects.len()
    }
}
