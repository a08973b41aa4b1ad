//! Group runtime tests: assignment, cooperative hand-off, eviction, and proptests over random
//! join/leave/sync/tick/partition sequences.

use proptest::prelude::*;

use super::*;

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
fn join_hands_off_cooperatively_on_sync() {
    let mut group = GroupRuntime::new([0, 1, 2, 3]);
    assert!(group.join(1, 0));
    assert_eq!(group.sync(1, 0), Some(vec![0, 1, 2, 3]));
    let before = group.generation();
    assert!(group.join(2, 10));
    assert!(group.generation() > before);
    // Partitions 1 and 3 move to member 2 but stay with member 1 until it syncs.
    assert_eq!(group.check_owner(1, 1, 11), Ok(group.generation()));
    assert_eq!(
        group.check_owner(2, 1, 11),
        Err(ErrorCode::ConsumerGroupPartitionNotOwned)
    );
    assert_eq!(group.sync(2, 12), Some(vec![]));
    assert_eq!(group.sync(1, 13), Some(vec![0, 2]));
    assert_eq!(group.sync(2, 14), Some(vec![1, 3]));
    assert_eq!(
        group.check_owner(1, 1, 15),
        Err(ErrorCode::ConsumerGroupPartitionNotOwned)
    );
    assert_eq!(
        group.check_owner(3, 1, 15),
        Err(ErrorCode::ConsumerGroupMemberNotFound)
    );
    let members = group.members();
    assert_eq!((members[0].slot, members[1].slot), (0, 1));
    group.check_invariants();
}

#[test]
fn revocation_times_out_and_silent_members_are_evicted() {
    let mut group = GroupRuntime::new([0, 1]);
    group.join(1, 0);
    group.join(2, 1_000_000);
    assert_eq!(group.owner(1).unwrap().owner, 1);
    assert!(group.tick(2_000_000, &CONFIG).is_empty());
    group.sync(2, 4_000_000);
    let evicted = group.tick(7_000_000, &CONFIG);
    assert_eq!(evicted, vec![1]);
    assert_eq!(group.sync(2, 7_000_000), Some(vec![0, 1]));
    group.check_invariants();

    let mut group = GroupRuntime::new([0, 1]);
    group.join(1, 0);
    group.join(2, 0);
    for now in (0..=30_000_000).step_by(1_000_000) {
        group.sync(2, now);
        group.check_owner(1, 0, now).unwrap();
        group.tick(now, &CONFIG);
    }
    assert_eq!(group.owner(1).unwrap().owner, 2);
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
        Err(ErrorCode::ConsumerGroupMemberNotFound)
    );
}

#[derive(Debug, Clone)]
enum Step {
    Join(u8),
    Leave(u8),
    Sync(u8),
    Poll(u8, u8),
    Tick(u32),
    Partitions(u8),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0_u8..6).prop_map(Step::Join),
        (0_u8..6).prop_map(Step::Leave),
        (0_u8..6).prop_map(Step::Sync),
        (0_u8..6, 0_u8..12).prop_map(|(client, partition)| Step::Poll(client, partition)),
        (0_u32..40_000_000).prop_map(Step::Tick),
        (0_u8..12).prop_map(Step::Partitions),
    ]
}

fn apply(group: &mut GroupRuntime, step: &Step, now: &mut u64) {
    match step {
        Step::Join(client) => {
            group.join(u128::from(*client), *now);
        }
        Step::Leave(client) => {
            let _ = group.leave(u128::from(*client), *now);
        }
        Step::Sync(client) => {
            group.sync(u128::from(*client), *now);
        }
        Step::Poll(client, partition) => {
            let _ = group.check_owner(u128::from(*client), u32::from(*partition), *now);
        }
        Step::Tick(advance) => {
            *now += u64::from(*advance);
            group.tick(*now, &CONFIG);
        }
        Step::Partitions(count) => group.set_partitions(0..u32::from(*count), *now),
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
        for client in &members {
            group.sync(*client, now);
        }
        let settled = group.clone();
        for client in &members {
            prop_assert!(!group.join(*client, now));
            group.sync(*client, now);
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
