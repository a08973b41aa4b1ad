//! Consumer-group leases: which member may be served each partition of a group, as every
//! shard sees it, so a group poll is checked on the shard that serves it instead of by a
//! round trip through the sequencer.
//!
//! The sequencer decides (membership, assignment, hand-offs: [`super::GroupRuntime`]) and publishes
//! each group's decisions as an immutable [`GroupView`] in a map all shards share. A poll
//! takes a [`Lease`] on the partition's current [`Flight`] when its check passes and checks
//! the view again before it serves; the sequencer reads the flights to decide whether a
//! hand-off may complete.
//!
//! Why a hand-off never overlaps a poll that serves: the sequencer publishes a revocation
//! *before* it reads the flight to complete it, and a poll counts itself in the flight
//! *before* it checks the view again. Both sides order the write before the read with a
//! sequentially consistent fence, so at least one sees the other: either the poll sees the
//! revocation and serves nothing, or the sequencer sees the poll (counted, or already noted as
//! served) and keeps the partition with its owner until the commit catches up.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

use super::GroupKey;
use super::groups::{Ownership, serves};
use crate::refusal::{Missing, Refusal};

/// Every group's published view, by group.
pub type GroupViews = papaya::HashMap<GroupKey, Arc<GroupView>>;

/// One group as the sequencer last published it.
#[derive(Debug, Default)]
pub struct GroupView {
    pub generation: u64,
    /// The members' client ids, ascending.
    pub members: Vec<u128>,
    pub grants: BTreeMap<u32, Grant>,
}

/// One partition's owner, and the flight of the polls it is being served by.
#[derive(Debug, Clone)]
pub struct Grant {
    pub ownership: Ownership,
    /// The owner's polls in flight; a new one whenever the owner changes.
    pub flight: Arc<Flight>,
}

/// The polls of one owner of one partition: how many are between their check and their
/// reply, and the highest offset served to it.
#[derive(Debug, Default)]
pub struct Flight {
    polling: AtomicU32,
    /// The highest offset served plus one; 0 when nothing was served.
    served_next: AtomicU64,
}

impl Flight {
    /// Polls between their check and their reply.
    pub fn polling(&self) -> u32 {
        self.polling.load(Ordering::SeqCst)
    }

    /// The highest offset served to this owner, if any.
    pub fn served(&self) -> Option<u64> {
        self.served_next.load(Ordering::SeqCst).checked_sub(1)
    }

    fn note_served(&self, offset: u64) {
        self.served_next
            .fetch_max(offset.saturating_add(1), Ordering::SeqCst);
    }
}

impl GroupView {
    /// Whether `client_id` may poll `partition_id` now: its generation and the flight to
    /// count the poll in. Refusals: `5006` not a member, `5009` not the owner (or the
    /// partition is being handed off from it).
    pub fn check(&self, client_id: u128, partition_id: u32) -> Result<(u64, Lease), Refusal> {
        if self.members.binary_search(&client_id).is_err() {
            return Err(Refusal::Missing(Missing::GroupMember));
        }
        let grant = self
            .grants
            .get(&partition_id)
            .filter(|grant| serves(&grant.ownership, client_id))
            .ok_or(Refusal::NotOwned)?;
        Ok((self.generation, Lease::begin(&grant.flight)))
    }

    /// Whether `client_id` may write the group's offset of `partition_id`: a member that owns
    /// it, a partition being handed off from it included (it commits what it was served
    /// before it lets go). Refusals as for a poll: `5006`, `5009`.
    pub fn may_commit(&self, client_id: u128, partition_id: u32) -> Result<(), Refusal> {
        if self.members.binary_search(&client_id).is_err() {
            return Err(Refusal::Missing(Missing::GroupMember));
        }
        match self.grants.get(&partition_id) {
            Some(grant) if grant.ownership.owner == client_id => Ok(()),
            _ => Err(Refusal::NotOwned),
        }
    }

    /// Whether the poll holding `lease` may still serve `client_id` from `partition_id`: the
    /// same owner's flight, not being handed off.
    fn still_serves(&self, client_id: u128, partition_id: u32, lease: &Lease) -> bool {
        self.grants.get(&partition_id).is_some_and(|grant| {
            serves(&grant.ownership, client_id) && Arc::ptr_eq(&grant.flight, &lease.flight)
        })
    }

    /// The members that may be served `partition_id` now: one at most (the simulator checks
    /// it after every step).
    pub fn servers_of(&self, partition_id: u32) -> Vec<u128> {
        let Some(grant) = self.grants.get(&partition_id) else {
            return Vec::new();
        };
        self.members
            .iter()
            .copied()
            .filter(|member| serves(&grant.ownership, *member))
            .collect()
    }
}

/// A group poll between its ownership check and its reply, counted in its flight until
/// dropped.
#[derive(Debug)]
pub struct Lease {
    flight: Arc<Flight>,
}

impl Lease {
    fn begin(flight: &Arc<Flight>) -> Self {
        flight.polling.fetch_add(1, Ordering::SeqCst);
        // The count must be visible before this poll checks the view again (module doc).
        fence(Ordering::SeqCst);
        Self {
            flight: Arc::clone(flight),
        }
    }

    /// Ends the poll's check: when `view` still lets `client_id` be served `partition_id`
    /// under this lease, notes `last_offset` as served and says so; otherwise the partition
    /// moved while the poll read or waited, and it must serve nothing.
    pub fn finish(
        &self,
        view: Option<&GroupView>,
        client_id: u128,
        partition_id: u32,
        last_offset: Option<u64>,
    ) -> bool {
        let still = view.is_some_and(|view| view.still_serves(client_id, partition_id, self));
        if let (true, Some(last)) = (still, last_offset) {
            self.flight.note_served(last);
        }
        still
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.flight.polling.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The view of `runtime`'s decisions to publish, keeping each grant's flight while its
/// owner stays (`previous` is the view published before).
pub fn view_of(runtime: &super::GroupRuntime, previous: Option<&GroupView>) -> GroupView {
    let grants = runtime
        .partitions()
        .iter()
        .filter_map(|partition| {
            let ownership = runtime.owner(*partition)?;
            let flight = previous
                .and_then(|view| view.grants.get(partition))
                .filter(|grant| grant.ownership.owner == ownership.owner)
                .map_or_else(Arc::default, |grant| Arc::clone(&grant.flight));
            Some((*partition, Grant { ownership, flight }))
        })
        .collect();
    GroupView {
        generation: runtime.generation(),
        members: runtime.member_ids(),
        grants,
    }
}

/// Publishes `view` for `key`, ordered before any flight the caller reads next (module doc).
pub fn publish(views: &GroupViews, key: GroupKey, view: GroupView) {
    views.pin().insert(key, Arc::new(view));
    fence(Ordering::SeqCst);
}

#[cfg(test)]
#[path = "leases_tests.rs"]
mod tests;
