//! Leases: a poll's check and finish against published views, the hand-off rule reading the
//! flights, and the two orders in which a revocation and a poll's finish can meet.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::*;
use crate::data::{GroupConfig, GroupRuntime};
use crate::refusal::{Missing, Refusal};

const CONFIG: GroupConfig = GroupConfig {
    rebalancing_timeout_us: 30_000_000,
    heartbeat_interval_us: 5_000_000,
};

/// The sequencer's loop for one change: publish, read the flights, complete, publish.
fn settle(group: &mut GroupRuntime, views: &GroupViews, key: GroupKey, now: u64) {
    let publish_now = |group: &GroupRuntime| {
        let previous = views.pin().get(&key).cloned();
        publish(views, key, view_of(group, previous.as_deref()));
    };
    publish_now(group);
    let view = views.pin().get(&key).cloned().unwrap();
    for (partition, grant) in &view.grants {
        let polling = grant.flight.polling();
        group.set_flight(*partition, polling, grant.flight.served());
    }
    if group.complete_revocations(now, &CONFIG) {
        publish_now(group);
    }
}

fn current(views: &GroupViews, key: GroupKey) -> Arc<GroupView> {
    views.pin().get(&key).cloned().unwrap()
}

const KEY: GroupKey = GroupKey {
    stream_id: 1,
    topic_id: 1,
    group_id: 0,
};

#[test]
fn a_poll_counts_itself_until_dropped_and_notes_what_it_served() {
    let views = GroupViews::new();
    let mut group = GroupRuntime::new([0, 1]);
    group.join(7, 0);
    settle(&mut group, &views, KEY, 0);
    let view = current(&views, KEY);
    assert!(matches!(
        view.check(8, 0),
        Err(Refusal::Missing(Missing::GroupMember))
    ));
    let (generation, lease) = view.check(7, 1).unwrap();
    assert_eq!(generation, group.generation());
    let flight = Arc::clone(&view.grants[&1].flight);
    assert_eq!(flight.polling(), 1);
    assert!(lease.finish(Some(&view), 7, 1, Some(41)));
    assert_eq!(flight.served(), Some(41));
    drop(lease);
    assert_eq!((flight.polling(), flight.served()), (0, Some(41)));
}

/// The revocation is published before the poll finishes: the poll serves nothing, and with
/// nothing served the partition moves at once.
#[test]
fn a_poll_that_finishes_after_a_revocation_serves_nothing() {
    let views = GroupViews::new();
    let mut group = GroupRuntime::new([0, 1]);
    group.join(7, 0);
    settle(&mut group, &views, KEY, 0);
    let before = current(&views, KEY);
    let (_, lease) = before.check(7, 1).unwrap();
    // Member 8 joins: partition 1 is revoked from 7 while 7's poll reads it.
    group.join(8, 10);
    settle(&mut group, &views, KEY, 10);
    assert!(
        group.is_handing_off(),
        "the counted poll holds the partition"
    );
    let now = current(&views, KEY);
    assert!(
        !lease.finish(Some(&now), 7, 1, Some(5)),
        "revoked: serves nothing"
    );
    drop(lease);
    settle(&mut group, &views, KEY, 11);
    assert_eq!(current(&views, KEY).servers_of(1), vec![8]);
}

/// The poll finishes first: what it served holds the partition with its owner until the
/// group's commit catches up.
#[test]
fn a_poll_that_finished_first_holds_the_partition_until_committed() {
    let views = GroupViews::new();
    let mut group = GroupRuntime::new([0, 1]);
    group.join(7, 0);
    settle(&mut group, &views, KEY, 0);
    let view = current(&views, KEY);
    let (_, lease) = view.check(7, 1).unwrap();
    assert!(lease.finish(Some(&view), 7, 1, Some(9)));
    drop(lease);
    group.join(8, 10);
    settle(&mut group, &views, KEY, 10);
    assert!(group.is_handing_off());
    assert_eq!(current(&views, KEY).servers_of(1), Vec::<u128>::new());
    group.note_committed(1, Some(9));
    settle(&mut group, &views, KEY, 11);
    let moved = current(&views, KEY);
    assert_eq!(moved.servers_of(1), vec![8]);
    assert!(
        !Arc::ptr_eq(&moved.grants[&1].flight, &view.grants[&1].flight),
        "a new owner starts a new flight"
    );
}

/// A lease taken under one owner is not honoured once the partition went to another and
/// came back: the flight is new.
#[test]
fn a_lease_does_not_outlive_its_owners_flight() {
    let views = GroupViews::new();
    let mut group = GroupRuntime::new([0]);
    group.join(7, 0);
    settle(&mut group, &views, KEY, 0);
    let (_, lease) = current(&views, KEY).check(7, 0).unwrap();
    group.leave(7, 1).unwrap();
    settle(&mut group, &views, KEY, 1);
    group.join(7, 2);
    settle(&mut group, &views, KEY, 2);
    assert!(!lease.finish(Some(&current(&views, KEY)), 7, 0, Some(3)));
    assert!(
        !lease.finish(None, 7, 0, Some(3)),
        "a deleted group serves nothing"
    );
}

/// Two threads, as two shards: the sequencer hands a partition back and forth between two
/// members with the publish-then-read order, the poller polls as whichever member owns it.
/// No poll of a member may finish (serve) after the sequencer saw that member's flight idle
/// and moved the partition away.
#[test]
fn a_hand_off_and_a_finishing_poll_never_overlap_across_threads() {
    let views = Arc::new(GroupViews::new());
    let stop = Arc::new(AtomicBool::new(false));
    let poller = {
        let (views, stop) = (Arc::clone(&views), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut served = 0_u64;
            while !stop.load(Ordering::SeqCst) {
                let Some(view) = views.pin().get(&KEY).cloned() else {
                    continue;
                };
                for member in [1, 2] {
                    if let Ok((_, lease)) = view.check(member, 0) {
                        served += 1;
                        let now = views.pin().get(&KEY).cloned();
                        lease.finish(now.as_deref(), member, 0, Some(served));
                    }
                }
            }
        })
    };
    let mut moves = 0;
    let mut owner = 1_u128;
    let mut flight: Arc<Flight> = Arc::default();
    let ownership = |owner: u128, revoking: Option<u128>| Ownership {
        owner,
        revoking: revoking.map(|to| crate::data::Revocation { to, since_us: 0 }),
    };
    let view = |ownership, flight: &Arc<Flight>| GroupView {
        generation: 0,
        members: vec![1, 2],
        grants: [(
            0,
            Grant {
                ownership,
                flight: Arc::clone(flight),
            },
        )]
        .into(),
    };
    publish(&views, KEY, view(ownership(owner, None), &flight));
    while moves < 2_000 {
        let to = 3 - owner;
        publish(&views, KEY, view(ownership(owner, Some(to)), &flight));
        if flight.polling() > 0 {
            continue;
        }
        let served = flight.served();
        let old = Arc::clone(&flight);
        flight = Arc::default();
        publish(&views, KEY, view(ownership(to, None), &flight));
        std::thread::yield_now();
        assert_eq!(
            old.served(),
            served,
            "a poll served after its partition moved"
        );
        owner = to;
        moves += 1;
    }
    stop.store(true, Ordering::SeqCst);
    poller.join().unwrap();
}
