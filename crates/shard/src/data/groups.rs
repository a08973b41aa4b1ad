//! The consumer-group runtime of one (stream, topic, group): members, partition ownership,
//! generations and cooperative hand-off (PROTOCOL.md §4.9).
//!
//! Sans-IO: time comes in as an argument (µs); nothing here reads a clock or awaits. The
//! group's stored offsets come in through [`GroupRuntime::note_committed`] and what its members
//! are being and were served through [`GroupRuntime::set_flight`]. The sequencer runs the
//! runtime and publishes its decisions to every shard ([`super::leases`]), where polls are
//! checked.
//!
//! - Members are keyed by the VSR client id; a member's id is its slot, the lowest free one.
//! - The target assignment is [`assign`]: partition *i* (in id order) → member *i mod n* (in
//!   slot order).
//! - Cooperative hand-off, as the reference server does it: a partition whose target moves from
//!   one live member to another is first marked as being revoked (the owner's sync no longer
//!   lists it and its polls of it are refused, while it may still commit), then moves once
//!   it has no data *in flight* — a poll of it running, or offsets served beyond what the
//!   group has committed — or `rebalancing_timeout` passes; with nothing in flight, at the
//!   next [`GroupRuntime::complete_revocations`] (the sequencer calls it right after it
//!   published the revocation). A partition whose owner is gone moves at once.
//! - Members are not evicted here: liveness is per connection (any request counts), and a
//!   client whose last connection closes, or whose session ends, leaves its groups.
//! - `generation` grows by one on every change of membership, partitions or ownership.
//!
//! Deliberate differences from the reference server (its `rebalance_cooperative`,
//! `reconcile_pending_revocations` and session handling), in PROTOCOL.md §4.9 terms:
//! - Target assignment is partition *i* → member *i mod n*; the reference moves only an
//!   over-assigned member's highest extras to members that own nothing. Both spread evenly;
//!   ours may move more partitions on a join, each under the same in-flight rule.
//! - A pending hand-off completes at the next membership request of the group (sync, join,
//!   leave) or the runtime's next hand-off check (`Server::complete_handoffs`: every 10 ms
//!   in the server, as often as the reference looks), not on a stored offset itself.
//! - A `SYNC` whose caller has partitions on their way to it waits for them (at most 0.5 s,
//!   `handler::groups`), so a member that joins while they are in flight learns of them at
//!   once rather than at its next heartbeat.
//! - A closed connection leaves its client's groups at once, as there; its session stays
//!   for a `BIND_SESSION` until it expires, where the reference logs it out.
//! - A 0.12.2 poll of a partition the member does not own (or is handing off) is refused
//!   with `5009` in the header status; the reference answers status 0 with the re-sync
//!   sentinel partition. The SDK re-syncs on both.
//!
//! Invariants (checked by [`GroupRuntime::check_invariants`] in tests): with members, every
//! partition has exactly one owner and it is a member; without members nothing is owned; a
//! revocation targets a member other than the owner.

use crate::refusal::{Missing, Refusal};
use std::collections::BTreeMap;

/// `consumer_group.rebalancing_timeout` default: 30 s.
pub const REBALANCING_TIMEOUT_US_DEFAULT: u64 = 30_000_000;
/// `heartbeat.interval` default: 5 s.
pub const HEARTBEAT_INTERVAL_US_DEFAULT: u64 = 5_000_000;

/// The timing rules of every group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupConfig {
    pub rebalancing_timeout_us: u64,
    /// A connection of a group member that is silent for 1.2 × this is evicted (§1.14).
    pub heartbeat_interval_us: u64,
}

impl Default for GroupConfig {
    fn default() -> Self {
        Self {
            rebalancing_timeout_us: REBALANCING_TIMEOUT_US_DEFAULT,
            heartbeat_interval_us: HEARTBEAT_INTERVAL_US_DEFAULT,
        }
    }
}

impl GroupConfig {
    /// How long a member may stay silent: 1.2 × the heartbeat interval.
    pub fn silence_max_us(&self) -> u64 {
        self.heartbeat_interval_us
            .saturating_mul(6)
            .checked_div(5)
            .unwrap_or(0)
    }

    /// How long a connection whose client is a group member may send nothing before it is
    /// evicted as stale (§1.14): the same 1.2 × the heartbeat interval; `None` when
    /// heartbeats are off (an interval of `u64::MAX`).
    pub fn idle_max_us(&self) -> Option<u64> {
        (self.heartbeat_interval_us != u64::MAX).then(|| self.silence_max_us())
    }
}

/// The target owner of every partition: partition `partitions[i]` → `members[i % n]`; empty
/// when there are no members.
pub fn assign(members: &[u128], partitions: &[u32]) -> BTreeMap<u32, u128> {
    partitions
        .iter()
        .enumerate()
        .filter_map(|(index, partition)| {
            let member = members.get(index.checked_rem(members.len())?)?;
            Some((*partition, *member))
        })
        .collect()
}

/// Whether `client_id` may be served a partition of `ownership`: its owner, unless the
/// partition is being handed off.
pub(super) fn serves(ownership: &Ownership, client_id: u128) -> bool {
    if segment::broken::is(segment::broken::Break::DoubleGroupOwner) {
        // Deliberately broken (simulator check): the owner keeps serving while the member
        // it is being handed to already serves too.
        let target = ownership
            .revoking
            .is_some_and(|revoking| revoking.to == client_id);
        return ownership.owner == client_id || target;
    }
    ownership.owner == client_id && ownership.revoking.is_none()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Member {
    slot: u32,
}

/// A partition moving to `to` once its owner lets go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Revocation {
    pub to: u128,
    pub since_us: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ownership {
    pub owner: u128,
    pub revoking: Option<Revocation>,
}

/// One group's live state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupRuntime {
    generation: u64,
    members: BTreeMap<u128, Member>,
    /// The topic's partition ids, ascending.
    partitions: Vec<u32>,
    owners: BTreeMap<u32, Ownership>,
    /// Per partition, the highest offset served to the partition's current owner.
    last_polled: BTreeMap<u32, u64>,
    /// Per partition, the group's stored offset.
    committed: BTreeMap<u32, u64>,
    /// Per partition, the current owner's polls between their ownership check and their
    /// reply: what they read is in flight before it is served.
    polling: BTreeMap<u32, u32>,
}

/// A member as `GET_CONSUMER_GROUP` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberView {
    pub client_id: u128,
    pub slot: u32,
    /// Partitions it owns now (those being revoked included), ascending.
    pub partitions: Vec<u32>,
}

impl GroupRuntime {
    /// A group without members over `partitions`.
    pub fn new(partitions: impl IntoIterator<Item = u32>) -> Self {
        let mut partitions: Vec<u32> = partitions.into_iter().collect();
        partitions.sort_unstable();
        partitions.dedup();
        Self {
            partitions,
            ..Self::default()
        }
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn is_member(&self, client_id: u128) -> bool {
        self.members.contains_key(&client_id)
    }

    pub fn members_count(&self) -> u32 {
        u32::try_from(self.members.len()).unwrap_or(u32::MAX)
    }

    /// The members' client ids, ascending.
    pub fn member_ids(&self) -> Vec<u128> {
        self.members.keys().copied().collect()
    }

    /// Whether a partition is waiting to move to another member.
    pub fn is_handing_off(&self) -> bool {
        self.owners
            .values()
            .any(|ownership| ownership.revoking.is_some())
    }

    pub fn owner(&self, partition_id: u32) -> Option<Ownership> {
        self.owners.get(&partition_id).copied()
    }

    /// Adds `client_id`; joining twice is a no-op (returns `false`).
    pub fn join(&mut self, client_id: u128, now_us: u64) -> bool {
        if self.members.contains_key(&client_id) {
            return false;
        }
        let slot = self.free_slot();
        self.members.insert(client_id, Member { slot });
        self.generation += 1;
        self.rebalance(now_us);
        true
    }

    /// Removes `client_id`; its partitions move at once.
    pub fn leave(&mut self, client_id: u128, now_us: u64) -> Result<(), Refusal> {
        if self.members.remove(&client_id).is_none() {
            return Err(Refusal::Missing(Missing::GroupMember));
        }
        self.generation += 1;
        self.rebalance(now_us);
        Ok(())
    }

    /// The topic's partitions changed.
    pub fn set_partitions(&mut self, partitions: impl IntoIterator<Item = u32>, now_us: u64) {
        let mut partitions: Vec<u32> = partitions.into_iter().collect();
        partitions.sort_unstable();
        partitions.dedup();
        if partitions == self.partitions {
            return;
        }
        self.partitions = partitions;
        self.generation += 1;
        self.rebalance(now_us);
    }

    /// The member's heartbeat: completes the hand-offs that may complete and returns the
    /// partitions it may poll; `None` when it is not a member.
    ///
    /// Partitions still being handed to the member are not listed. Listing them (so the
    /// member would poll them early) was tried: their polls are refused until they move,
    /// and the 0.11.1-edge.9 reader backs off from such a refusal for 1, 2, 4, … s and stops
    /// the partition at the sixth, while a 0.11.0 client restarts its round-robin on the
    /// re-sync sentinel and starves the partitions listed after it.
    pub fn sync(&mut self, client_id: u128, now_us: u64, config: &GroupConfig) -> Option<Vec<u32>> {
        if !self.members.contains_key(&client_id) {
            return None;
        }
        self.complete_revocations(now_us, config);
        Some(self.owned_by(client_id))
    }

    /// Whether a partition is being handed to `client_id`.
    pub fn has_incoming(&self, client_id: u128) -> bool {
        self.owners.values().any(|ownership| {
            ownership
                .revoking
                .is_some_and(|revocation| revocation.to == client_id)
        })
    }

    /// The group's stored offset on `partition_id` is `offset` (`None`: nothing stored).
    pub fn note_committed(&mut self, partition_id: u32, offset: Option<u64>) {
        match offset {
            Some(offset) => self.committed.insert(partition_id, offset),
            None => self.committed.remove(&partition_id),
        };
    }

    /// The polls of `partition_id`'s current owner: `polling` between their check and their
    /// reply, and the highest offset it was `served` (from the shared flight).
    pub fn set_flight(&mut self, partition_id: u32, polling: u32, served: Option<u64>) {
        match polling {
            0 => self.polling.remove(&partition_id),
            count => self.polling.insert(partition_id, count),
        };
        match served {
            Some(offset) => self.last_polled.insert(partition_id, offset),
            None => self.last_polled.remove(&partition_id),
        };
    }

    /// Whether `client_id` owns `partition_id` and is not handing it off (what the published
    /// view lets polls do).
    pub fn may_serve(&self, client_id: u128, partition_id: u32) -> bool {
        self.owners
            .get(&partition_id)
            .is_some_and(|ownership| serves(ownership, client_id))
    }

    /// The members that may be served `partition_id` now: one at most (the simulator checks
    /// it after every step).
    pub fn servers_of(&self, partition_id: u32) -> Vec<u128> {
        self.members
            .keys()
            .copied()
            .filter(|member| self.may_serve(*member, partition_id))
            .collect()
    }

    /// Every partition of the topic.
    pub fn partitions(&self) -> &[u32] {
        &self.partitions
    }

    /// Whether the group has data in flight on `partition_id`: a poll of it between its check
    /// and its reply, or offsets served beyond what the group committed.
    pub fn in_flight(&self, partition_id: u32) -> bool {
        if self.polling.contains_key(&partition_id) {
            return true;
        }
        let Some(polled) = self.last_polled.get(&partition_id) else {
            return false;
        };
        self.committed
            .get(&partition_id)
            .is_none_or(|committed| committed < polled)
    }

    /// Completes the hand-offs whose data is no longer in flight or whose wait reached the
    /// rebalancing timeout; says whether any did.
    pub fn complete_revocations(&mut self, now_us: u64, config: &GroupConfig) -> bool {
        let due: Vec<u32> = self
            .owners
            .iter()
            .filter_map(|(partition, ownership)| {
                let revocation = ownership.revoking?;
                let waited_us = now_us.saturating_sub(revocation.since_us);
                let due = !self.in_flight(*partition) || waited_us >= config.rebalancing_timeout_us;
                due.then_some(*partition)
            })
            .collect();
        for partition in &due {
            if let Some(ownership) = self.owners.get_mut(partition)
                && let Some(revocation) = ownership.revoking.take()
            {
                ownership.owner = revocation.to;
                self.last_polled.remove(partition);
                self.polling.remove(partition);
            }
        }
        if !due.is_empty() {
            self.generation += 1;
        }
        !due.is_empty()
    }

    /// Periodic work: completes the hand-offs that may complete; says whether any did.
    pub fn tick(&mut self, now_us: u64, config: &GroupConfig) -> bool {
        self.complete_revocations(now_us, config)
    }

    /// Members in slot order with what they own.
    pub fn members(&self) -> Vec<MemberView> {
        let mut members: Vec<MemberView> = self
            .members
            .iter()
            .map(|(client_id, member)| MemberView {
                client_id: *client_id,
                slot: member.slot,
                partitions: self.owned_including_revoking(*client_id),
            })
            .collect();
        members.sort_by_key(|member| member.slot);
        members
    }

    fn owned_by(&self, client_id: u128) -> Vec<u32> {
        self.owners
            .iter()
            .filter(|(_, ownership)| ownership.owner == client_id && ownership.revoking.is_none())
            .map(|(partition, _)| *partition)
            .collect()
    }

    fn owned_including_revoking(&self, client_id: u128) -> Vec<u32> {
        self.owners
            .iter()
            .filter(|(_, ownership)| ownership.owner == client_id)
            .map(|(partition, _)| *partition)
            .collect()
    }

    fn free_slot(&self) -> u32 {
        let mut used: Vec<u32> = self.members.values().map(|member| member.slot).collect();
        used.sort_unstable();
        let mut slot = 0_u32;
        for taken in used {
            if taken != slot {
                break;
            }
            slot = slot.saturating_add(1);
        }
        slot
    }

    /// Moves ownership toward the target assignment, cooperatively where both ends live.
    fn rebalance(&mut self, now_us: u64) {
        let mut by_slot: Vec<(u32, u128)> = self
            .members
            .iter()
            .map(|(client_id, member)| (member.slot, *client_id))
            .collect();
        by_slot.sort_unstable();
        let members: Vec<u128> = by_slot
            .into_iter()
            .map(|(_, client_id)| client_id)
            .collect();
        let target = assign(&members, &self.partitions);
        let mut owners = BTreeMap::new();
        for (partition, to) in target {
            let ownership = match self.owners.get(&partition) {
                Some(current)
                    if current.owner != to && self.members.contains_key(&current.owner) =>
                {
                    let since_us = match current.revoking {
                        Some(revocation) if revocation.to == to => revocation.since_us,
                        _ => now_us,
                    };
                    Ownership {
                        owner: current.owner,
                        revoking: Some(Revocation { to, since_us }),
                    }
                }
                _ => Ownership {
                    owner: to,
                    revoking: None,
                },
            };
            let moved = self
                .owners
                .get(&partition)
                .is_none_or(|current| current.owner != ownership.owner);
            if moved {
                // What the previous owner was served, or is polling (it will find it no longer
                // owns the partition before it serves), is not this owner's in-flight data.
                self.last_polled.remove(&partition);
                self.polling.remove(&partition);
            }
            owners.insert(partition, ownership);
        }
        self.last_polled
            .retain(|partition, _| owners.contains_key(partition));
        self.polling
            .retain(|partition, _| owners.contains_key(partition));
        self.owners = owners;
    }

    /// Panics when an invariant of the module doc does not hold.
    pub fn check_invariants(&self) {
        if self.members.is_empty() {
            assert!(self.owners.is_empty(), "owners without members");
            return;
        }
        let owned: Vec<u32> = self.owners.keys().copied().collect();
        assert_eq!(
            owned, self.partitions,
            "every partition has exactly one owner"
        );
        for ownership in self.owners.values() {
            assert!(
                self.members.contains_key(&ownership.owner),
                "owner is a member"
            );
            if let Some(revocation) = ownership.revoking {
                assert!(self.members.contains_key(&revocation.to));
                assert_ne!(revocation.to, ownership.owner);
            }
        }
    }
}

#[cfg(test)]
#[path = "groups_tests.rs"]
mod tests;
