//! The consumer groups of the data plane: the leader runs each group's [`GroupRuntime`] and
//! publishes its decisions after every change ([`leases`]); every shard checks the group
//! polls it serves against the published views.

use std::collections::BTreeMap;

use segment::offsets::OffsetOwner;
use segment::storage::Storage;

use super::leases::{self, GroupView, Lease};
use super::{DataPlane, GroupKey, GroupRuntime, PartitionKey, topics};
use crate::metadata::Metadata;
use crate::refusal::{Missing, Refusal};

impl<S: Storage + Clone + 'static> DataPlane<S> {
    /// Reads the group's runtime (leader only), if the group is known.
    pub fn with_group<T>(&self, key: GroupKey, f: impl FnOnce(&GroupRuntime) -> T) -> Option<T> {
        self.groups.borrow().get(&key).map(f)
    }

    /// Changes the group's runtime (leader only), if the group is known: `f` sees what the
    /// group's polls are doing now, and what it decides is published before any hand-off
    /// it started may complete.
    pub fn change_group<T>(
        &self,
        key: GroupKey,
        f: impl FnOnce(&mut GroupRuntime) -> T,
    ) -> Option<T> {
        let mut groups = self.groups.borrow_mut();
        let group = groups.get_mut(&key)?;
        self.load_flights(key, group);
        let result = f(group);
        self.settle(key, group);
        Some(result)
    }

    /// Publishes the group's decisions, then completes the hand-offs whose partitions have
    /// nothing in flight (the order the [`leases`] doc explains) and publishes again if any
    /// did.
    fn settle(&self, key: GroupKey, group: &mut GroupRuntime) {
        self.publish(key, group);
        if group.is_handing_off() {
            self.load_flights(key, group);
            if group.complete_revocations(self.clock.now_us(), &self.config) {
                self.publish(key, group);
            }
        }
    }

    fn publish(&self, key: GroupKey, group: &GroupRuntime) {
        let previous = self.group_views.pin().get(&key).cloned();
        let view = leases::view_of(group, previous.as_deref());
        leases::publish(&self.group_views, key, view);
    }

    /// Tells `group` what its current owners' polls are doing (from the published flights)
    /// and the stored offsets the in-flight check compares with what was served.
    fn load_flights(&self, key: GroupKey, group: &mut GroupRuntime) {
        let Some(view) = self.group_views.pin().get(&key).cloned() else {
            return;
        };
        let owner = OffsetOwner::Group(key.group_id);
        for (partition_id, grant) in &view.grants {
            // The count first: a poll notes what it served before it stops counting.
            let polling = grant.flight.polling();
            let served = grant.flight.served();
            group.set_flight(*partition_id, polling, served);
            if served.is_some() {
                let partition = PartitionKey {
                    stream_id: key.stream_id,
                    topic_id: key.topic_id,
                    partition_id: *partition_id,
                };
                let stored = self
                    .partition(partition)
                    .and_then(|handle| handle.stored_offset(owner));
                group.note_committed(*partition_id, stored);
            }
        }
    }

    /// The view polls of `key` are checked against; `5000` when the group is unknown.
    pub(super) fn group_view(&self, key: GroupKey) -> Result<std::sync::Arc<GroupView>, Refusal> {
        let view = self.group_views.pin().get(&key).cloned();
        view.ok_or(Refusal::Missing(Missing::Group))
    }

    /// Checks a group poll of `partition_id` by `client_id`: its generation, and the lease
    /// that counts it in flight until it is dropped.
    pub(super) fn lease_group_poll(
        &self,
        key: GroupKey,
        client_id: u128,
        partition_id: u32,
    ) -> Result<(u64, Lease), Refusal> {
        self.group_view(key)?.check(client_id, partition_id)
    }

    /// Ends a group poll's check before it serves (see [`Lease::finish`]).
    pub(super) fn finish_lease(
        &self,
        key: GroupKey,
        lease: &Lease,
        client_id: u128,
        partition_id: u32,
        last_offset: Option<u64>,
    ) -> bool {
        let view = self.group_views.pin().get(&key).cloned();
        lease.finish(view.as_deref(), client_id, partition_id, last_offset)
    }

    /// For every group and partition, the members that may be served it now, as the
    /// published views every shard checks polls against say.
    pub fn group_servers(&self) -> Vec<(GroupKey, u32, Vec<u128>)> {
        let views = self.group_views.pin();
        let mut servers = Vec::new();
        for (key, view) in &views {
            for partition in view.grants.keys() {
                servers.push((*key, *partition, view.servers_of(*partition)));
            }
        }
        servers.sort_unstable();
        servers
    }

    /// Whether every group's published view agrees with its runtime (leader only; the
    /// simulator checks it after every step).
    pub fn check_group_views(&self) -> Result<(), String> {
        let groups = self.groups.borrow();
        for (key, group) in groups.iter() {
            let view = self
                .group_views
                .pin()
                .get(key)
                .cloned()
                .ok_or_else(|| format!("group {key:?} has no published view"))?;
            let agrees = view.generation == group.generation()
                && view.members == group.member_ids()
                && group
                    .partitions()
                    .iter()
                    .all(|partition| view.servers_of(*partition) == group.servers_of(*partition));
            if !agrees {
                return Err(format!(
                    "group {key:?}: the published view is not the runtime's"
                ));
            }
        }
        Ok(())
    }

    /// Whether `client_id` is a member of any group (leader only).
    pub fn is_group_member(&self, client_id: u128) -> bool {
        let groups = self.groups.borrow();
        groups.values().any(|group| group.is_member(client_id))
    }

    /// Removes `client_id` from every group (logout, eviction, session end; leader only).
    pub fn leave_all_groups(&self, client_id: u128, now_us: u64) {
        // Only the groups it is in change (and are published again).
        let keys: Vec<GroupKey> = self
            .groups
            .borrow()
            .iter()
            .filter(|(_, group)| group.is_member(client_id))
            .map(|(key, _)| *key)
            .collect();
        for key in keys {
            self.change_group(key, |group| {
                // A member, checked above: the leave succeeds.
                let _ = group.leave(client_id, now_us);
            });
        }
    }

    /// Completes the hand-offs of every group that may complete (the commit caught up, or
    /// the rebalancing timeout passed); returns the groups whose ownership changed. Call it
    /// periodically (leader only).
    pub fn tick_groups(&self, now_us: u64) -> Vec<GroupKey> {
        let handing_off: Vec<GroupKey> = self
            .groups
            .borrow()
            .iter()
            .filter(|(_, group)| group.is_handing_off())
            .map(|(key, _)| *key)
            .collect();
        let config = self.config;
        handing_off
            .into_iter()
            .filter(|key| {
                let mut groups = self.groups.borrow_mut();
                let Some(group) = groups.get_mut(key) else {
                    return false;
                };
                // The revocations are published already (the `leases` order): read the
                // flights, complete what may complete, and publish only a change. This
                // runs every 10 ms while a hand-off waits.
                self.load_flights(*key, group);
                let completed = group.tick(now_us, &config);
                if completed {
                    self.publish(*key, group);
                }
                completed
            })
            .collect()
    }

    /// Creates runtimes for new groups, drops those of deleted ones and tells every group
    /// its topic's partitions, publishing each. Membership is not persisted: clients re-join
    /// after a restart.
    pub(super) fn reconcile_groups(&self, metadata: &Metadata) {
        let mut known = BTreeMap::new();
        let mut previous = std::mem::take(&mut *self.groups.borrow_mut());
        for (stream_id, topic_id, topic) in topics(metadata) {
            for group_id in topic.groups.keys() {
                let key = GroupKey {
                    stream_id,
                    topic_id,
                    group_id: *group_id,
                };
                let partitions = topic.partitions.keys().copied();
                let runtime = previous.remove(&key).map_or_else(
                    || GroupRuntime::new(partitions.clone()),
                    |mut runtime| {
                        // A hand-off this starts waits from now, not from the epoch (which
                        // would make it time out at once).
                        runtime.set_partitions(partitions.clone(), self.clock.now_us());
                        runtime
                    },
                );
                known.insert(key, runtime);
            }
        }
        for key in previous.keys() {
            self.group_views.pin().remove(key);
        }
        *self.groups.borrow_mut() = known;
        let keys: Vec<GroupKey> = self.groups.borrow().keys().copied().collect();
        for key in keys {
            self.change_group(key, |_| ());
        }
    }

    /// Drops a deleted group's runtime and view (leader only).
    pub(super) fn forget_group(&self, key: GroupKey) {
        self.groups.borrow_mut().remove(&key);
        self.group_views.pin().remove(&key);
    }
}
