//! Cluster mode's table of applied sends and metadata changes by their client's request
//! identity, so a request the SDK retries after a lost answer (the primary died between
//! commit and reply) is answered with the first attempt's outcome instead of applied twice
//! (a send appended again, a create answered "already exists", partitions added twice). An
//! SDK keeps `client` and `request` of a retried request (PROTOCOL.md §1.7). Every node
//! fills the table as it applies ops, in op order, so a new primary holds the same table as
//! the old one, and a restarted node rebuilds it by replaying its log.
//!
//! Sends and metadata changes are kept in two tables ([`Retries::sends`],
//! [`Retries::changes`]): a send is recorded only when its append succeeded on this node (a
//! full disk may refuse it on one node alone), while a metadata change applies alike
//! everywhere, so the changes table, which decides whether a change applies, stays the same
//! on every node.
//!
//! Bounded per table: requests per client (more than an SDK keeps in flight) and clients;
//! the client whose latest request is oldest is forgotten first. Both rules depend only on
//! what the table recorded, in op order.

use std::collections::{BTreeMap, VecDeque};

use proto::commands::messages::SendConfirmations;

use crate::metadata::MetadataOp;

/// The SDK identity of a request: its client id and request number (both non-zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Origin {
    pub client: u128,
    pub request: u64,
}

impl Origin {
    /// The identity a request header names, if it names one (0 is "none" in both fields).
    pub fn of(client: u128, request: u64) -> Option<Self> {
        (client != 0 && request != 0).then_some(Self { client, request })
    }
}

/// Sends remembered per client.
pub const REQUESTS_PER_CLIENT: usize = 1024;
/// Clients whose sends are remembered.
pub const CLIENTS_MAX: usize = 4096;
/// Metadata changes remembered per client, and clients: changes are rare, and each keeps
/// its whole op (names, permissions, hashes), so fewer are kept.
pub const CHANGES_PER_CLIENT: usize = 64;
pub const CHANGES_CLIENTS_MAX: usize = 1024;

/// What a remembered request did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A send, and what it answered.
    Sent(SendConfirmations),
    /// A metadata change: the op as it was applied.
    Changed(MetadataOp),
    /// A purge or a segment deletion (kept with the metadata changes: it is decided in op
    /// order alike on every node, whatever its local result).
    Truncated,
}

/// One remembered request: its request number, the op that applied it, and what it did.
#[derive(Debug, Clone)]
struct Applied {
    request: u64,
    op: u64,
    outcome: Outcome,
}

/// Applied requests by origin (see the module docs).
#[derive(Debug)]
pub struct Retries {
    clients: BTreeMap<u128, VecDeque<Applied>>,
    per_client: usize,
    clients_max: usize,
}

impl Default for Retries {
    fn default() -> Self {
        Self::sends()
    }
}

impl Retries {
    /// The table of sends.
    pub fn sends() -> Self {
        Self::bounded(REQUESTS_PER_CLIENT, CLIENTS_MAX)
    }

    /// The table of metadata changes.
    pub fn changes() -> Self {
        Self::bounded(CHANGES_PER_CLIENT, CHANGES_CLIENTS_MAX)
    }

    fn bounded(per_client: usize, clients_max: usize) -> Self {
        Self {
            clients: BTreeMap::new(),
            per_client: per_client.max(1),
            clients_max: clients_max.max(1),
        }
    }

    /// What the request `origin` names did, if it was applied, and the op that applied it.
    pub fn get(&self, origin: Origin) -> Option<(&Outcome, u64)> {
        let applied = self.clients.get(&origin.client)?;
        let found = applied.iter().find(|each| each.request == origin.request)?;
        Some((&found.outcome, found.op))
    }

    /// Records that the request `origin` was applied by `op` and did `outcome`.
    pub fn record(&mut self, origin: Origin, op: u64, outcome: Outcome) {
        if !self.clients.contains_key(&origin.client) && self.clients.len() >= self.clients_max {
            let oldest = self
                .clients
                .iter()
                .min_by_key(|(_, applied)| applied.back().map_or(0, |each| each.op))
                .map(|(client, _)| *client);
            if let Some(oldest) = oldest {
                self.clients.remove(&oldest);
            }
        }
        let applied = self.clients.entry(origin.client).or_default();
        if applied.len() >= self.per_client {
            applied.pop_front();
        }
        applied.push_back(Applied {
            request: origin.request,
            op,
            outcome,
        });
        debug_assert!(self.clients.len() <= self.clients_max);
    }

    /// Clients remembered.
    pub fn len(&self) -> usize {
        self.clients.len()
    }

    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::{CLIENTS_MAX, Origin, Outcome, REQUESTS_PER_CLIENT, Retries};
    use crate::metadata::MetadataOp;
    use proto::commands::messages::{Confirmation, SendConfirmations};

    fn confirmations(base_offset: u64) -> Outcome {
        Outcome::Sent(SendConfirmations(vec![Confirmation {
            stream_id: 1,
            topic_id: 1,
            partition_id: 0,
            base_offset,
        }]))
    }

    #[test]
    fn a_retried_send_finds_its_first_outcome_and_another_request_does_not() {
        let mut retries = Retries::default();
        let first = Origin::of(7, 1).unwrap();
        retries.record(first, 10, confirmations(100));
        assert_eq!(retries.get(first), Some((&confirmations(100), 10)));
        let change = Origin::of(7, 3).unwrap();
        let op = Outcome::Changed(MetadataOp::DeleteStream { id: 4 });
        retries.record(change, 11, op.clone());
        assert_eq!(retries.get(change), Some((&op, 11)));
        assert_eq!(retries.get(Origin::of(7, 2).unwrap()), None);
        assert_eq!(retries.get(Origin::of(8, 1).unwrap()), None);
        assert_eq!(Origin::of(0, 1), None, "no client id, no identity");
        assert_eq!(Origin::of(7, 0), None, "an unbound request has no number");
    }

    #[test]
    fn the_table_forgets_the_oldest_requests_and_clients_first() {
        let mut retries = Retries::default();
        let total = u64::try_from(REQUESTS_PER_CLIENT).unwrap() + 5;
        for request in 1..=total {
            retries.record(
                Origin::of(1, request).unwrap(),
                request,
                confirmations(request),
            );
        }
        assert_eq!(retries.get(Origin::of(1, 5).unwrap()), None);
        assert!(retries.get(Origin::of(1, 6).unwrap()).is_some());
        let mut op = total;
        for client in 2..=u128::try_from(CLIENTS_MAX).unwrap() + 1 {
            op += 1;
            retries.record(Origin::of(client, 1).unwrap(), op, confirmations(op));
        }
        assert_eq!(retries.len(), CLIENTS_MAX);
        // Client 1's latest send is the oldest of all: it went first.
        assert_eq!(retries.get(Origin::of(1, total).unwrap()), None);
        assert!(retries.get(Origin::of(2, 1).unwrap()).is_some());
    }
}
