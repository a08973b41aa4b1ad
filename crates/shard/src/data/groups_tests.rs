//! Group runtime tests: assignment, cooperative hand-off, eviction, and proptests over random
//! join/leave/sync/tick/partition sequences.

use proptest::prelude::*;

use super::*;
use crate::data::leases::view_of;
use crate::refusal::{Missing, Refusal};

/// What the sequencer does after every change, once it published it: complete the
/// hand-offs with nothing in flight.
fn settle(group: &mut GroupRuntime, now: u64) {
    group.complete_revocations(now, &CONFIG);
}

/// The check a poll of `partition` by `client` passes on any shard: the generation it
/// reports, or the refusal.
fn check(group: &GroupRuntime, client: u128, partition: u32) -> Result<u64, Refusal> {
    let view = view_of(group, None);
    view.check(client, partition)
        .map(|(generation, _lease)| generation)
}

/// The owner of `partition` was served up to `offset` (a flight's highest served offset).
fn served(group: &mut GroupRuntime, partition: u32, offset: u64) {
    let before = group.last_polled.get(&partition).copied();
    let polling = group.polling.get(&partition).copied().unwrap_or(0);
    group.set_flight(
        partition,
        polling,
        Some(before.map_or(offset, |b| b.max(offset))),
    );
}

const CONFIG: GroupConfig = GroupConfig {
    rebalancing_timeout_us: 30_000_000,
    heartbeat_interval_us: 5_000_000,
};

#[test]
fn stale_connections_idle_as_long_as_silent_members_unless_heartbeats_are_off() {
    assert_eq!(CONFIG.idle_max_us(), Some(6_000_000));
    assert_eq!(CONFIG.idle_max_us(), Some(CONFIG.silence_max_us()));
    let off = GroupConfig {
        heartbeat_interval_us: u64::MAX,
        ..CONFIG
    };
    assert_eq!(off.idle_max_us(), None);
}

#[test]
fn round_robin_assignment() {
    let target = assign(&[10, 20], &[0, 1, 2]);
    assert_eq!(target, BTreeMap::from([(0, 10), (1, 20), (2, 10)]));
    assert!(assign(&[], &[0, 1]).is_empty());
}

#[test]
fn a_partition_nothing_was_served_from_moves_at_once_on_join() {
    let mut group = GroupRuntime::new([0, 1, 2, 3]);
    assert!(group.join(1, 0));
    settle(&mut group, 0);
    assert_eq!(group.sync(1, 0, &CONFIG), Some(vec![0, 1, 2, 3]));
    let before = group.generation();
    // Member 1 never polled: the second member gets its share as soon as it is settled.
    assert!(group.join(2, 10));
    assert!(
        group.is_handing_off(),
        "revoked first, so polls see it before it moves"
    );
    settle(&mut group, 10);
    assert!(group.generation() > before);
    assert!(!group.is_handing_off());
    assert_eq!(group.sync(1, 11, &CONFIG), Some(vec![0, 2]));
    assert_eq!(group.sync(2, 11, &CONFIG), Some(vec![1, 3]));
    assert_eq!(check(&group, 2, 1), Ok(group.generation()));
    assert_eq!(check(&group, 1, 1), Err(Refusal::NotOwned));
    assert_eq!(
        check(&group, 3, 1),
        Err(Refusal::Missing(Missing::GroupMember))
    );
    let members = group.members();
    assert_eq!((members[0].slot, members[1].slot), (0, 1));
    group.check_invariants();
}

#[test]
fn in_flight_data_holds_the_partition_until_it_is_committed() {
    let mut group = GroupRuntime::new([0, 1]);
    group.join(1, 0);
    settle(&mut group, 0);
    // Member 1 was served offsets 0..=9 of partition 1 and committed up to 4.
    served(&mut group, 1, 9);
    group.note_committed(1, Some(4));
    served(&mut group, 0, 3);
    group.note_committed(0, Some(3));
    group.join(2, 10);
    settle(&mut group, 10);
    assert!(group.is_handing_off());
    // The old owner may no longer poll it, nor does its sync list it; the new owner waits.
    assert_eq!(group.sync(1, 11, &CONFIG), Some(vec![0]));
    assert_eq!(group.sync(2, 11, &CONFIG), Some(vec![]));
    assert_eq!(check(&group, 1, 1), Err(Refusal::NotOwned));
    // Partition 1 is on its way to member 2 (a SYNC of member 2 waits a while for it).
    assert!(group.has_incoming(2) && !group.has_incoming(1));
    let members = group.members();
    assert_eq!(members[0].partitions, vec![0, 1]);
    // The commit catches up with what was served: the partition moves.
    group.note_committed(1, Some(9));
    assert_eq!(group.sync(2, 12, &CONFIG), Some(vec![1]));
    assert!(!group.in_flight(1));
    assert!(!group.has_incoming(2));
    group.check_invariants();
}

#[test]
fn a_poll_in_progress_holds_its_partition_and_then_finds_it_moving() {
    let mut group = GroupRuntime::new([0, 1]);
    group.join(1, 0);
    settle(&mut group, 0);
    check(&group, 1, 1).unwrap();
    group.set_flight(1, 1, None);
    // Partition 1 is being read by member 1: it does not move at once.
    group.join(2, 10);
    settle(&mut group, 10);
    assert!(group.is_handing_off() && group.in_flight(1));
    assert_eq!(group.owner(1).unwrap().owner, 1);
    // The poll ends: its partition is being handed off, so it serves nothing.
    assert!(!group.may_serve(1, 1));
    group.set_flight(1, 0, None);
    assert!(!group.in_flight(1));
    // Nothing was served, so the hand-off completes at the next check.
    assert_eq!(group.sync(2, 11, &CONFIG), Some(vec![1]));
    assert!(group.may_serve(2, 1) && !group.may_serve(1, 1));
    group.check_invariants();
}

#[test]
fn a_pending_hand_off_completes_at_the_rebalancing_timeout() {
    let mut group = GroupRuntime::new([0, 1]);
    group.join(1, 0);
    settle(&mut group, 0);
    served(&mut group, 1, 5);
    group.join(2, 1_000_000);
    settle(&mut group, 1_000_000);
    assert_eq!(group.owner(1).unwrap().owner, 1);
    assert!(!group.tick(2_000_000, &CONFIG));
    assert!(group.tick(31_000_000, &CONFIG));
    assert_eq!(group.owner(1).unwrap().owner, 2);
    assert_eq!(group.sync(2, 31_000_000, &CONFIG), Some(vec![1]));
    group.check_invariants();
}

#[test]
fn members_are_never_evicted_by_the_group_and_a_leave_moves_everything() {
    let mut group = GroupRuntime::new([0, 1]);
    group.join(1, 0);
    group.join(2, 0);
    settle(&mut group, 0);
    // Hours of silence: liveness is the connection's business, not the group's.
    assert!(!group.tick(10_000_000_000, &CONFIG));
    assert_eq!(group.members_count(), 2);
    served(&mut group, 0, 7);
    group.leave(2, 10_000_000_001).unwrap();
    assert_eq!(group.sync(1, 10_000_000_002, &CONFIG), Some(vec![0, 1]));
    group.check_invariants();
}

#[test]
fn slots_are_the_lowest_free_and_leave_refuses_strangers() {
    let mut group = GroupRuntime::new([0]);
    group.join(1, 0);
    group.join(2, 0);
    group.join(3, 0);
    group.leave(2, 0).unwrap();
    group.join(4, 0);
    let slots: Vec<(u128, u32)> = group
        .members()
        .iter()
        .map(|member| (member.client_id, member.slot))
        .collect();
    assert_eq!(slots, vec![(1, 0), (4, 1), (3, 2)]);
    assert_eq!(
        group.leave(9, 0),
        Err(Refusal::Missing(Missing::GroupMember))
    );
}

#[derive(Debug, Clone)]
enum Step {
    Join(u8),
    Leave(u8),
    Sync(u8),
    Poll(u8, u8),
    Commit(u8, u32),
    Tick(u32),
    Partitions(u8),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0_u8..6).prop_map(Step::Join),
        (0_u8..6).prop_map(Step::Leave),
        (0_u8..6).prop_map(Step::Sync),
        (0_u8..6, 0_u8..12).prop_map(|(client, partition)| Step::Poll(client, partition)),
        (0_u8..12, 0_u32..40_000_000)
            .prop_map(|(partition, offset)| Step::Commit(partition, offset)),
        (0_u32..40_000_000).prop_map(Step::Tick),
        (0_u8..12).prop_map(Step::Partitions),
    ]
}

fn apply(group: &mut GroupRuntime, step: &Step, now: &mut u64) {
    match step {
        Step::Join(client) => {
            group.join(u128::from(*client), *now);
            settle(group, *now);
        }
        Step::Leave(client) => {
            let _ = group.leave(u128::from(*client), *now);
            settle(group, *now);
        }
        Step::Sync(client) => {
            group.sync(u128::from(*client), *now, &CONFIG);
        }
        Step::Poll(client, partition) => {
            let (client, partition) = (u128::from(*client), u32::from(*partition));
            if check(group, client, partition).is_ok() && group.may_serve(client, partition) {
                served(group, partition, *now);
            }
        }
        Step::Commit(partition, offset) => {
            group.note_committed(u32::from(*partition), Some(u64::from(*offset)));
        }
        Step::Tick(advance) => {
            *now += u64::from(*advance);
            group.tick(*now, &CONFIG);
        }
        Step::Partitions(count) => {
            group.set_partitions(0..u32::from(*count), *now);
            settle(group, *now);
        }
    }
}

proptest! {
    /// Any sequence keeps every partition with exactly one live owner, and never panics.
    #[test]
    fn sequences_keep_one_owner_per_partition(steps in proptest::collection::vec(step(), 0..80)) {
        let mut group = GroupRuntime::new(0..4);
        let mut now = 0;
        let mut generation = 0;
        for step in &steps {
            apply(&mut group, step, &mut now);
            group.check_invariants();
            prop_assert!(group.generation() >= generation);
            generation = group.generation();
        }
    }

    /// Rejoining members, repeated partition lists and re-syncs move nothing.
    #[test]
    fn nothing_moves_when_membership_is_unchanged(
        steps in proptest::collection::vec(step(), 0..60)
    ) {
        let mut group = GroupRuntime::new(0..4);
        let mut now = 0;
        for step in &steps {
            apply(&mut group, step, &mut now);
        }
        let members: Vec<u128> = group.members().iter().map(|member| member.client_id).collect();
        // Let every pending hand-off complete.
        now += CONFIG.rebalancing_timeout_us;
        group.tick(now, &CONFIG);
        let settled = group.clone();
        for client in &members {
            prop_assert!(!group.join(*client, now));
            group.sync(*client, now, &CONFIG);
        }
        let partitions = settled.partitions.clone();
        group.set_partitions(partitions, now);
        prop_assert_eq!(&group.owners, &settled.owners);
        prop_assert_eq!(group.generation(), settled.generation());
    }

    #[test]
    fn assignment_gives_each_partition_one_member_evenly(
        members in 1_usize..8,
        partitions in 0_u32..40,
    ) {
        let members: Vec<u128> = (0..members).map(|id| u128::try_from(id).unwrap()).collect();
        let partitions: Vec<u32> = (0..partitions).collect();
        let target = assign(&members, &partitions);
        prop_assert_eq!(target.len(), partitions.len());
        let counts: Vec<usize> = members
            .iter()
            .map(|member| target.values().filter(|owner| *owner == member).count())
            .collect();
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        prop_assert!(max - min <= 1);
    }
}
