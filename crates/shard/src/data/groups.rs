//! The consumer-group runtime of one (stream, topic, group): members, partition ownership,
//! generations, cooperative hand-off and heartbeat eviction (PROTOCOL.md §4.9).
//!
//! Sans-IO: time comes in as an argument (µs); nothing here reads a clock or awaits.
//!
//! - Members are keyed by the VSR client id; a member's id is its slot, the lowest free one.
//! - The target assignment is [`assign`]: partition *i* (in id order) → member *i mod n* (in
//!   slot order).
//! - Cooperative hand-off: a partition whose target moves from one live member to another stays
//!   with its current owner, marked as being revoked, until that owner syncs (its sync reply no
//!   longer lists it, so it stops polling it) or `rebalancing_timeout` passes. A partition whose
//!   owner is gone moves at once.
//! - `generation` grows by one on every change of membership, partitions or ownership.
//!
//! Invariants (checked by [`GroupRuntime::check_invariants`] in tests): with members, every
//! partition has exactly one owner and it is a member; without members nothing is owned; a
//! revocation targets a member other than the owner.

use std::collections::BTreeMap;

use proto::ErrorCode;

/// `consumer_group.rebalancing_timeout` default: 30 s.
pub const REBALANCING_TIMEOUT_US_DEFAULT: u64 = 30_000_000;
/// `heartbeat.interval` default: 5 s.
pub const HEARTBEAT_INTERVAL_US_DEFAULT: u64 = 5_000_000;

/// The timing rules of every group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupConfig {
    pub rebalancing_timeout_us: u64,
    /// A member silent for 1.2 × this is evicted.
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Member {
    slot: u32,
    last_seen_us: u64,
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

    pub fn owner(&self, partition_id: u32) -> Option<Ownership> {
        self.owners.get(&partition_id).copied()
    }

    /// Adds `client_id`; joining twice is a no-op (returns `false`).
    pub fn join(&mut self, client_id: u128, now_us: u64) -> bool {
        if let Some(member) = self.members.get_mut(&client_id) {
            member.last_seen_us = now_us;
            return false;
        }
        let slot = self.free_slot();
        self.members.insert(
            client_id,
            Member {
                slot,
                last_seen_us: now_us,
            },
        );
        self.generation += 1;
        self.rebalance(now_us);
        true
    }

    /// Removes `client_id`; its partitions move at once.
    pub fn leave(&mut self, client_id: u128, now_us: u64) -> Result<(), ErrorCode> {
        if self.members.remove(&client_id).is_none() {
            return Err(ErrorCode::ConsumerGroupMemberNotFound);
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

    /// The member's heartbeat: releases what is being revoked from it and returns the
    /// partitions it owns; `None` when it is not a member.
    pub fn sync(&mut self, client_id: u128, now_us: u64) -> Option<Vec<u32>> {
        self.members.get_mut(&client_id)?.last_seen_us = now_us;
        let mut released = false;
        for ownership in self.owners.values_mut() {
            if ownership.owner == client_id
                && let Some(revocation) = ownership.revoking.take()
            {
                ownership.owner = revocation.to;
                released = true;
            }
        }
        if released {
            self.generation += 1;
        }
        Some(self.owned_by(client_id))
    }

    /// Whether `client_id` may poll (or commit for) `partition_id`; returns the generation to
    /// report. Refusals: `5006` not a member, `5009` not the owner.
    pub fn check_owner(
        &mut self,
        client_id: u128,
        partition_id: u32,
        now_us: u64,
    ) -> Result<u64, ErrorCode> {
        let member = self
            .members
            .get_mut(&client_id)
            .ok_or(ErrorCode::ConsumerGroupMemberNotFound)?;
        member.last_seen_us = now_us;
        match self.owners.get(&partition_id) {
            Some(ownership) if ownership.owner == client_id => Ok(self.generation),
            _ => Err(ErrorCode::ConsumerGroupPartitionNotOwned),
        }
    }

    /// Evicts members silent for longer than the config allows and completes revocations
    /// older than the rebalancing timeout; returns the evicted client ids.
    pub fn tick(&mut self, now_us: u64, config: &GroupConfig) -> Vec<u128> {
        let silence_max_us = config.silence_max_us();
        let evicted: Vec<u128> = self
            .members
            .iter()
            .filter(|(_, member)| now_us.saturating_sub(member.last_seen_us) > silence_max_us)
            .map(|(client_id, _)| *client_id)
            .collect();
        for client_id in &evicted {
            self.members.remove(client_id);
        }
        let mut changed = !evicted.is_empty();
        if changed {
            self.rebalance(now_us);
        }
        for ownership in self.owners.values_mut() {
            if let Some(revocation) = ownership.revoking
                && now_us.saturating_sub(revocation.since_us) >= config.rebalancing_timeout_us
            {
                *ownership = Ownership {
                    owner: revocation.to,
                    revoking: None,
                };
                changed = true;
            }
        }
        if changed {
            self.generation += 1;
        }
        evicted
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
            owners.insert(partition, ownership);
        }
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
