//! The latest committed request of each client, so a retried request is answered once and
//! never executed twice. Every replica updates it when it commits, so a new primary has it.

use alloc::collections::BTreeMap;

use crate::{CLIENTS_MAX, Op};

/// Per client: its latest committed request number and the op it committed at.
#[derive(Debug, Default, Clone)]
pub struct ClientTable {
    latest: BTreeMap<u128, (u64, Op)>,
}

impl ClientTable {
    /// The latest committed `(request, op)` of `client`.
    pub fn latest(&self, client: u128) -> Option<(u64, Op)> {
        self.latest.get(&client).copied()
    }

    /// Records that `client`'s `request` committed at `op`. A full table forgets the client
    /// whose latest commit is oldest (its next retry is executed as a new request, as any
    /// bounded table must allow; a client retries for far less time than the table holds).
    pub fn commit(&mut self, client: u128, request: u64, op: Op) {
        if let Some(previous) = self.latest.get(&client) {
            assert!(previous.0 < request, "a request committed twice");
        }
        if !self.latest.contains_key(&client) && self.latest.len() >= CLIENTS_MAX {
            let oldest = self
                .latest
                .iter()
                .min_by_key(|(_, (_, op))| *op)
                .map(|(id, _)| *id);
            if let Some(oldest) = oldest {
                self.latest.remove(&oldest);
            }
        }
        self.latest.insert(client, (request, op));
        assert!(self.latest.len() <= CLIENTS_MAX);
    }

    pub fn len(&self) -> usize {
        self.latest.len()
    }

    pub fn is_empty(&self) -> bool {
        self.latest.is_empty()
    }
}
