//! Bounded memory and bounded view-change messages: entries leave memory once applied and
//! written, view changes and recovery carry only a log's suffix, and a replica that lacks the
//! committed ops before a suffix fetches them before it takes the log.

use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;

use crate::{
    Completion, Config, Durable, EVICT_SLACK, Effect, Entry, Message, Op, Outbox, PIPELINE_MAX,
    ROOT_CHECKSUM, Replica, Status, Suffix,
};

/// Ops `1..=length` of one chain, as view 0's primary prepared them.
fn chain(length: Op) -> Vec<Entry> {
    let mut log: Vec<Entry> = Vec::new();
    for op in 1..=length {
        let parent = log.last().map_or(ROOT_CHECKSUM, |entry| entry.checksum);
        log.push(Entry::new(op, 0, 1, op, parent, Arc::from(&b"body"[..])));
    }
    log
}

/// `log` after its first `commit` ops.
fn suffix_of(log: &[Entry], commit: Op) -> Suffix {
    let split = usize::try_from(commit).unwrap();
    Suffix {
        commit,
        head: log[..split].last().map_or(ROOT_CHECKSUM, |e| e.checksum),
        entries: log[split..].to_vec(),
    }
}

fn opened(id: u8, log: Vec<Entry>, out: &mut Outbox) -> Replica {
    let durable = Durable {
        view: 0,
        log_view: 0,
        log,
        recovering: false,
        ..Durable::default()
    };
    Replica::open(Config::new(3), id, durable, 0, out)
}

fn sent(out: &mut Outbox) -> Vec<(u8, Message)> {
    out.drain()
        .filter_map(|effect| match effect {
            Effect::Send { to, message } => Some((to, message)),
            _ => None,
        })
        .collect()
}

/// Completes every write among `effects`, in order.
fn complete_writes(replica: &mut Replica, effects: Vec<Effect>, out: &mut Outbox) {
    for effect in effects {
        if let Effect::Write { id, .. } = effect {
            replica.on_io_done(0, Completion::Written { id }, out);
        }
    }
}

/// The `RequestPrepares` among `messages`, as `(to, op_min, op_max)`.
fn fetches(messages: &[(u8, Message)]) -> Vec<(u8, Op, Op)> {
    messages
        .iter()
        .filter_map(|(to, message)| match message {
            Message::RequestPrepares { op_min, op_max, .. } => Some((*to, *op_min, *op_max)),
            _ => None,
        })
        .collect()
}

/// Answers a fetch: the prepares `op_min..=op_max` of `log`, from `from`.
fn answer(replica: &mut Replica, from: u8, log: &[Entry], ops: (Op, Op), out: &mut Outbox) {
    for op in ops.0..=ops.1 {
        let entry = log[usize::try_from(op - 1).unwrap()].clone();
        let prepare = Message::Prepare {
            view: 0,
            replica: from,
            commit: 36,
            entry,
        };
        replica.on_message(1, &prepare, out);
    }
}

#[test]
fn applied_and_written_ops_leave_memory_and_are_read_back_for_a_lagging_backup() {
    let mut primary = Replica::format(Config::new(3), 0);
    let mut out = Outbox::new();
    for request in 1..=100u64 {
        let body = Arc::from(&b"payload"[..]);
        primary.on_message(
            1,
            &Message::Request {
                client: 7,
                request,
                body,
            },
            &mut out,
        );
        let effects: Vec<Effect> = out.drain().collect();
        complete_writes(&mut primary, effects, &mut out);
        let ok = Message::PrepareOk {
            view: 0,
            replica: 1,
            op: request,
        };
        primary.on_message(1, &ok, &mut out);
        out.drain().for_each(drop);
    }
    assert_eq!((primary.commit(), primary.applied()), (100, 100));
    assert_eq!(primary.log_base(), 100 - EVICT_SLACK);
    assert_eq!(primary.log().len(), usize::try_from(EVICT_SLACK).unwrap());
    // Replica 2 lags: the ops it asks for that left memory come from the disk.
    let ask = |op_min, op_max| Message::RequestPrepares {
        view: 0,
        replica: 2,
        op_min,
        op_max,
    };
    primary.on_message(2, &ask(1, 500), &mut out);
    let effects: Vec<Effect> = out.drain().collect();
    assert_eq!(
        effects,
        vec![Effect::SendPrepares {
            to: 2,
            view: 0,
            commit: 100,
            op_min: 1,
            op_max: 32
        }]
    );
    primary.on_message(3, &ask(80, 90), &mut out);
    let effects: Vec<Effect> = out.drain().collect();
    assert!(matches!(
        effects[0],
        Effect::SendPrepares {
            op_min: 80,
            op_max: 84,
            ..
        }
    ));
    assert_eq!(effects.len(), 1 + 6, "ops 85..=90 from memory");
}

#[test]
fn a_restarted_replica_votes_with_at_most_a_pipeline_of_ops() {
    let mut out = Outbox::new();
    let mut backup = opened(2, chain(1000), &mut out);
    assert_eq!(
        backup.commit(),
        0,
        "a restarted replica has heard no commit"
    );
    let svc = Message::StartViewChange {
        view: 1,
        replica: 0,
    };
    backup.on_message(1, &svc, &mut out);
    let dvc = sent(&mut out)
        .into_iter()
        .find_map(|(to, message)| match message {
            Message::DoViewChange { log, .. } => Some((to, log)),
            _ => None,
        })
        .expect("a DoViewChange to view 1's primary");
    assert_eq!(dvc.0, 1);
    let pipeline = Op::try_from(PIPELINE_MAX).unwrap();
    assert_eq!(dvc.1.commit, 1000 - pipeline);
    assert_eq!(dvc.1.op(), 1000);
    assert!(dvc.1.is_chain());
}

#[test]
fn a_new_primary_fetches_the_committed_ops_it_lacks_before_starting_its_view() {
    let full = chain(100);
    let mut out = Outbox::new();
    let mut primary = opened(1, full[..10].to_vec(), &mut out);
    out.drain().for_each(drop);
    let svc = Message::StartViewChange {
        view: 1,
        replica: 2,
    };
    primary.on_message(1, &svc, &mut out);
    out.drain().for_each(drop);
    let dvc = Message::DoViewChange {
        view: 1,
        replica: 2,
        log_view: 0,
        log: suffix_of(&full, 36),
    };
    primary.on_message(1, &dvc, &mut out);
    let asked = fetches(&sent(&mut out));
    assert_eq!(
        asked,
        vec![(2, 1, 32)],
        "from its own committed prefix (none)"
    );
    assert_eq!(primary.status(), Status::ViewChange);
    answer(&mut primary, 2, &full, (1, 32), &mut out);
    assert_eq!(fetches(&sent(&mut out)), vec![(2, 33, 36)]);
    assert_eq!(primary.status(), Status::ViewChange);
    answer(&mut primary, 2, &full, (33, 36), &mut out);
    assert_eq!(primary.status(), Status::Normal);
    assert_eq!((primary.view(), primary.op()), (1, 100));
    let effects: Vec<Effect> = out.drain().collect();
    let write = effects.iter().find_map(|effect| match effect {
        Effect::Write {
            op_min, entries, ..
        } => Some((*op_min, entries.len())),
        _ => None,
    });
    assert_eq!(write, Some((11, 90)), "its own first ten ops are kept");
}

/// Seed 62 of the cluster simulator (found while building this): a backup that took only
/// its committed prefix of a `StartView` was labelled with the new view, won the next view
/// change with that shorter log and lost committed ops.
#[test]
fn a_backup_takes_a_view_log_only_whole() {
    let full = chain(100);
    let mut out = Outbox::new();
    let mut backup = opened(2, full[..10].to_vec(), &mut out);
    let start_view = Message::StartView {
        view: 1,
        replica: 1,
        log: suffix_of(&full, 36),
    };
    backup.on_message(1, &start_view, &mut out);
    let effects: Vec<Effect> = out.drain().collect();
    assert!(effects.contains(&Effect::Persist {
        view: 1,
        log_view: 0,
        recovering: false
    }));
    assert_eq!(backup.status(), Status::ViewChange);
    assert_eq!(
        (backup.view(), backup.log_view()),
        (1, 0),
        "still its old log"
    );
    answer(&mut backup, 1, &full, (1, 32), &mut out);
    out.drain().for_each(drop);
    // A DoViewChange now carries its old log and old label.
    answer(&mut backup, 1, &full, (33, 36), &mut out);
    assert_eq!(backup.status(), Status::Normal);
    assert_eq!((backup.log_view(), backup.op()), (1, 100));
}

#[test]
fn a_replica_rebuilding_a_lost_disk_fetches_the_log_before_it_serves() {
    let full = chain(100);
    let mut out = Outbox::new();
    let mut replica = Replica::recover(Config::new(3), 2, 0, 5, &mut out);
    out.drain().for_each(drop);
    let from_backup = Message::RecoveryResponse {
        view: 0,
        replica: 1,
        nonce: 5,
        primary_state: None,
    };
    let from_primary = Message::RecoveryResponse {
        view: 0,
        replica: 0,
        nonce: 5,
        primary_state: Some(suffix_of(&full, 36)),
    };
    replica.on_message(1, &from_backup, &mut out);
    replica.on_message(1, &from_primary, &mut out);
    assert_eq!(fetches(&sent(&mut out)), vec![(0, 1, 32)]);
    answer(&mut replica, 0, &full, (1, 32), &mut out);
    assert_eq!(replica.status(), Status::Recovering);
    answer(&mut replica, 0, &full, (33, 36), &mut out);
    assert_eq!(replica.status(), Status::Normal);
    assert_eq!(replica.op(), 100);
    assert_eq!(replica.applied(), 36);
}

#[test]
fn a_fetch_answer_from_another_replica_or_out_of_chain_is_dropped() {
    let full = chain(100);
    let mut out = Outbox::new();
    let mut backup = opened(2, Vec::new(), &mut out);
    let start_view = Message::StartView {
        view: 1,
        replica: 1,
        log: suffix_of(&full, 36),
    };
    backup.on_message(1, &start_view, &mut out);
    out.drain().for_each(drop);
    // From replica 0, not the one asked; then op 2 before op 1.
    answer(&mut backup, 0, &full, (1, 36), &mut out);
    answer(&mut backup, 1, &full, (2, 36), &mut out);
    assert_eq!(backup.status(), Status::ViewChange);
    let other = chain(40);
    let forged = Entry::new(1, 0, 9, 9, ROOT_CHECKSUM, Arc::from(&b"other"[..]));
    let mut wrong = vec![forged];
    wrong.extend(other[1..].iter().cloned());
    answer(&mut backup, 1, &wrong, (1, 1), &mut out);
    answer(&mut backup, 1, &full, (2, 36), &mut out);
    assert_eq!(
        backup.status(),
        Status::ViewChange,
        "a forged first op breaks the chain"
    );
}

/// Seed 12795 of the cluster simulator: a recovering replica whose fetch stalled asked the
/// cluster again, took the same answer, and never asked the primary for the ops again.
#[test]
fn a_recovering_replica_whose_fetch_stalls_asks_again() {
    let full = chain(100);
    let mut out = Outbox::new();
    let mut replica = Replica::recover(Config::new(3), 2, 0, 5, &mut out);
    let answers = [
        Message::RecoveryResponse {
            view: 0,
            replica: 1,
            nonce: 5,
            primary_state: None,
        },
        Message::RecoveryResponse {
            view: 0,
            replica: 0,
            nonce: 5,
            primary_state: Some(suffix_of(&full, 36)),
        },
    ];
    for answer in &answers {
        replica.on_message(1, answer, &mut out);
    }
    assert_eq!(fetches(&sent(&mut out)), vec![(0, 1, 32)]);
    // Nothing comes back for a whole view-change timeout: the replica asks everyone again.
    replica.tick(300, &mut out);
    let again = sent(&mut out);
    assert!(
        again
            .iter()
            .any(|(_, message)| matches!(message, Message::Recovery { .. }))
    );
    for answer in &answers {
        replica.on_message(301, answer, &mut out);
    }
    assert_eq!(
        fetches(&sent(&mut out)),
        vec![(0, 1, 32)],
        "and the ops again"
    );
    answer(&mut replica, 0, &full, (1, 32), &mut out);
    answer(&mut replica, 0, &full, (33, 36), &mut out);
    assert_eq!(replica.status(), Status::Normal);
}

/// Replica 2 recovering a lost disk, answered by backup 1 and by primary 0 with `log`.
fn recovering_with(log: Suffix, out: &mut Outbox) -> Replica {
    let mut replica = Replica::recover(Config::new(3), 2, 0, 5, out);
    out.drain().for_each(drop);
    for (from, primary_state) in [(1, None), (0, Some(log))] {
        let answer = Message::RecoveryResponse {
            view: 0,
            replica: from,
            nonce: 5,
            primary_state,
        };
        replica.on_message(1, &answer, out);
    }
    replica
}

/// A replica rebuilding a lost disk from a log far longer than a fetch makes each fetched
/// batch its own log (written, applied) as it comes: memory holds a batch and the slack,
/// not the cluster's log, and its recovery is durable only after every one of those writes.
#[test]
fn a_recovering_replica_writes_and_applies_what_it_fetches_as_it_comes() {
    let full = chain(1000);
    let mut out = Outbox::new();
    let mut replica = recovering_with(suffix_of(&full, 960), &mut out);
    let mut applied = Vec::new();
    let mut recovery_durable = false;
    let mut most_in_memory = 0;
    let mut next = 1;
    while replica.status() == Status::Recovering {
        let effects: Vec<Effect> = out.drain().collect();
        let asked = fetches(
            &effects
                .iter()
                .filter_map(|effect| match effect {
                    Effect::Send { to, message } => Some((*to, message.clone())),
                    _ => None,
                })
                .collect::<Vec<_>>(),
        );
        for effect in &effects {
            if let Effect::Commit { entry } = effect {
                applied.push(entry.op);
            }
        }
        complete_writes(&mut replica, effects, &mut out);
        let fetched = replica.catch_up.as_ref().map_or(0, |c| c.fetched.len());
        most_in_memory = most_in_memory.max(replica.log().len() + fetched);
        let Some(&(to, op_min, op_max)) = asked.first() else {
            continue;
        };
        assert_eq!((to, op_min), (0, next), "asked in order, of the primary");
        answer(&mut replica, 0, &full, (op_min, op_max), &mut out);
        next = op_max + 1;
    }
    assert!(applied.len() > 900, "applied while it recovered");
    for effect in out.drain().collect::<Vec<_>>() {
        match &effect {
            Effect::Commit { entry } => applied.push(entry.op),
            Effect::Persist {
                recovering: false, ..
            } => recovery_durable = true,
            _ => {}
        }
        complete_writes(&mut replica, vec![effect], &mut out);
    }
    for effect in out.drain() {
        if let Effect::Persist {
            recovering: false, ..
        } = effect
        {
            recovery_durable = true;
        }
    }
    assert_eq!(
        applied,
        (1..=960).collect::<Vec<Op>>(),
        "each op once, in order"
    );
    assert_eq!((replica.op(), replica.applied()), (1000, 960));
    let bound = usize::try_from(crate::REPAIR_PREPARES_MAX + EVICT_SLACK).unwrap();
    assert!(
        most_in_memory <= bound,
        "held {most_in_memory} entries, more than a fetch and the slack"
    );
    assert!(recovery_durable, "the recovery is marked done once written");
}

/// A cluster whose log is empty still ends a recovery: the (empty) write that makes it
/// durable is issued although nothing differs.
#[test]
fn a_recovery_into_an_empty_log_becomes_durable() {
    let mut out = Outbox::new();
    let mut replica = recovering_with(suffix_of(&[], 0), &mut out);
    assert_eq!(replica.status(), Status::Normal);
    let effects: Vec<Effect> = out.drain().collect();
    complete_writes(&mut replica, effects, &mut out);
    let done = out.drain().any(|effect| {
        matches!(
            effect,
            Effect::Persist {
                recovering: false,
                ..
            }
        )
    });
    assert!(done, "marked recovered once the write completes");
}
