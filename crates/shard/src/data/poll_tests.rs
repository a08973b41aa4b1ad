//! Deferred polls and fetches: parking until an append wakes them, the wait running out,
//! cancellation, and the per-section budget and statuses of a fetch.

use std::rc::Rc;
use std::time::{Duration, Instant};

use proto::commands::messages::{FetchMessages, FetchTarget};
use proto::primitives::{ConsumerKind, PollingStrategy};
use segment::storage::memory::MemoryStorage;

use super::*;
use crate::data::tests::{metadata, plane, poll_selector, request, runtime, send};
use crate::refusal::{Missing, Refusal};
use crate::reply_budget::ReplyRoom;

#[test]
fn deferred_poll_wakes_on_append_times_out_and_cancels() {
    let storage = MemoryStorage::new();
    runtime().block_on(async {
        let plane = Rc::new(plane(&storage));
        let meta = Rc::new(metadata(1, &[]));
        plane.open_all(&meta).await.unwrap();
        let selector = poll_selector(ConsumerKind::Consumer, Some(0), 10);
        let plan = plane.plan_poll(&meta, &request(&selector, 1)).unwrap();

        let started = Instant::now();
        let cancel = Cancel::new();
        let unbounded = ReplyRoom::unbounded();
        let (timed_out, _) = plane
            .poll_deferred(&plan, (1, 50_000), &cancel, &unbounded)
            .await
            .unwrap();
        assert_eq!(timed_out.records.messages_count, 0);
        assert!(started.elapsed() >= Duration::from_millis(50));

        let producer = {
            let (plane, meta) = (Rc::clone(&plane), Rc::clone(&meta));
            compio::runtime::spawn(async move {
                compio::time::sleep(Duration::from_millis(10)).await;
                send(&plane, &meta, 2).await;
            })
        };
        let started = Instant::now();
        let (woken, _) = plane
            .poll_deferred(&plan, (2, 5_000_000), &cancel, &unbounded)
            .await
            .unwrap();
        assert_eq!(woken.records.messages_count, 2);
        assert!(started.elapsed() < Duration::from_secs(4));
        producer.await.unwrap();

        let plan = plane.plan_poll(&meta, &request(&selector, 1)).unwrap();
        assert_eq!(plan.start, ReadStart::Offset(2));
        cancel.cancel();
        let (cancelled, _) = plane
            .poll_deferred(&plan, (1, 5_000_000), &cancel, &unbounded)
            .await
            .unwrap();
        assert_eq!(cancelled.records.messages_count, 0);
    });
}

/// A deferred poll waiting for messages holds none of the server's reply budget, so clients
/// parked on quiet partitions cannot starve others' polls; it takes its room again to read
/// and keeps it until its answer is handed on.
#[test]
fn a_waiting_deferred_poll_holds_no_reply_room() {
    let storage = MemoryStorage::new();
    runtime().block_on(async {
        let plane = Rc::new(plane(&storage));
        let meta = Rc::new(metadata(1, &[]));
        plane.open_all(&meta).await.unwrap();
        let budget = crate::reply_budget::ReplyBudget::new(1 << 20);
        let selector = poll_selector(ConsumerKind::Consumer, Some(0), 10);
        let plan = plane.plan_poll(&meta, &request(&selector, 1)).unwrap();
        let waiter = {
            let room = ReplyRoom::new(vec![budget.clone()], 1 << 20);
            let plane = Rc::clone(&plane);
            compio::runtime::spawn(async move {
                let deferred = (1, 5_000_000);
                let cancel = Cancel::new();
                let polled = plane.poll_deferred(&plan, deferred, &cancel, &room);
                polled.await.unwrap()
            })
        };
        compio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(budget.used(), 0, "a parked poll holds no room");
        // Another poll takes the whole budget at once.
        drop(budget.acquire(1 << 20).await);
        send(&plane, &meta, 1).await;
        let (polled, permits) = waiter.await.unwrap();
        assert_eq!(polled.records.messages_count, 1);
        assert_eq!(budget.used(), 1 << 20, "the answer holds its room");
        drop(permits);
        assert_eq!(budget.used(), 0);
    });
}

/// A deferred poll whose wait ends while it waits for reply room answers with nothing then,
/// not once the room comes back.
#[test]
fn a_deferred_poll_whose_wait_ends_before_there_is_room_answers_empty() {
    let storage = MemoryStorage::new();
    runtime().block_on(async {
        let plane = plane(&storage);
        let meta = metadata(1, &[]);
        plane.open_all(&meta).await.unwrap();
        send(&plane, &meta, 1).await;
        let budget = crate::reply_budget::ReplyBudget::new(1 << 20);
        let held = budget.acquire(1 << 20).await;
        let room = ReplyRoom::new(vec![budget.clone()], 1 << 20);
        let selector = poll_selector(ConsumerKind::Consumer, Some(0), 10);
        let plan = plane.plan_poll(&meta, &request(&selector, 1)).unwrap();
        let cancel = Cancel::new();
        let polled = plane.poll_deferred(&plan, (1, 50_000), &cancel, &room);
        let (polled, _) = compio::time::timeout(Duration::from_secs(2), polled)
            .await
            .expect("answered while the room is still held")
            .unwrap();
        assert_eq!(
            polled.records.messages_count, 0,
            "nothing read without room"
        );
        drop(held);
    });
}

fn target(partition_id: u32, offset: u64) -> FetchTarget {
    FetchTarget {
        partition_id,
        strategy: PollingStrategy::offset(offset),
        max_bytes: 1 << 20,
        incarnation: 0,
        owner_generation: 0,
    }
}

#[test]
fn fetch_reads_sections_within_the_totals() {
    let storage = MemoryStorage::new();
    runtime().block_on(async {
        let plane = plane(&storage);
        let meta = metadata(2, &[]);
        plane.open_all(&meta).await.unwrap();
        for _ in 0..4 {
            send(&plane, &meta, 2).await;
        }
        let request = FetchMessages {
            consumer: poll_selector(ConsumerKind::Consumer, None, 1).consumer,
            stream_id: proto::primitives::Identifier::Numeric(0),
            topic_id: proto::primitives::Identifier::Numeric(0),
            wait_us: 0,
            request_timeout_us: 1_000_000,
            min_count: 1,
            count: 5,
            max_bytes: 1 << 20,
            auto_commit: true,
            targets: vec![target(0, 1), target(1, 0), target(7, 0)],
        };
        let plan = plane.plan_fetch(&meta, &request, 1).unwrap();
        let (fetched, _) = plane
            .fetch(&plan, &Cancel::new(), &ReplyRoom::unbounded())
            .await
            .unwrap();
        let counts: Vec<u32> = fetched
            .sections
            .iter()
            .map(|section| section.records.messages_count)
            .collect();
        assert_eq!(counts, vec![3, 2, 0]);
        assert_eq!(fetched.sections[0].next_offset, 4);
        assert_eq!(
            fetched.sections[2].status,
            Refusal::Missing(Missing::Partition).code().as_u32()
        );
        let body = fetched.encode();
        let decoded = proto::codec::decode_exact::<proto::commands::messages::FetchedMessages<'_>>(
            &body,
            Dialect::V0_12_2,
        )
        .unwrap();
        assert_eq!(decoded.sections.len(), 3);
        let key = PartitionKey {
            stream_id: 0,
            topic_id: 0,
            partition_id: 1,
        };
        let owner = OffsetOwner::Consumer(0);
        assert_eq!(plane.partition(key).unwrap().stored_offset(owner), Some(1));
    });
}
