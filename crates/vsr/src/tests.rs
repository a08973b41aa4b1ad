//! Replicas driven by hand, one message at a time: the rules the simulator relies on, each
//! shown on its own.

use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;

use crate::{
    Completion, Config, Durable, Effect, Entry, Message, Outbox, ROOT_CHECKSUM, Replica, Status,
    Suffix,
};

fn request(client: u128, request: u64) -> Message {
    Message::Request {
        client,
        request,
        body: Arc::from(&b"payload"[..]),
    }
}

fn effects(out: &mut Outbox) -> Vec<Effect> {
    out.drain().collect()
}

fn written(effects: &[Effect]) -> Vec<u64> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            Effect::Write { id, .. } => Some(*id),
            _ => None,
        })
        .collect()
}

fn prepares(effects: &[Effect]) -> Vec<Message> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            Effect::Send {
                message: message @ Message::Prepare { .. },
                ..
            } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

fn replies(effects: &[Effect]) -> usize {
    effects
        .iter()
        .filter(|effect| matches!(effect, Effect::Reply { .. }))
        .count()
}

#[test]
fn a_single_replica_replies_only_after_its_write() {
    let mut replica = Replica::format(Config::new(1), 0);
    let mut out = Outbox::new();
    replica.on_message(1, &request(7, 1), &mut out);
    let first = effects(&mut out);
    assert_eq!(replies(&first), 0, "no reply before the write is durable");
    let ids = written(&first);
    assert_eq!(ids.len(), 1);
    replica.on_io_done(2, Completion::Written { id: ids[0] }, &mut out);
    let second = effects(&mut out);
    assert_eq!(replies(&second), 1);
    assert_eq!(replica.commit(), 1);
    // A retry of the committed request is answered again, never prepared again.
    replica.on_message(3, &request(7, 1), &mut out);
    let retry = effects(&mut out);
    assert_eq!(replies(&retry), 1);
    assert!(written(&retry).is_empty());
    assert_eq!(replica.op(), 1);
}

#[test]
fn the_primary_commits_with_a_backup_that_has_written() {
    let config = Config::new(3);
    let mut primary = Replica::format(config.clone(), 0);
    let mut backup = Replica::format(config, 1);
    let mut out = Outbox::new();
    primary.on_message(1, &request(7, 1), &mut out);
    let sent = effects(&mut out);
    let primary_write = written(&sent)[0];
    primary.on_io_done(2, Completion::Written { id: primary_write }, &mut out);
    assert_eq!(primary.commit(), 0, "the primary alone is not a quorum");
    let prepare = prepares(&sent).remove(0);
    backup.on_message(2, &prepare, &mut out);
    let backup_effects = effects(&mut out);
    assert!(
        !backup_effects
            .iter()
            .any(|e| matches!(e, Effect::Send { .. })),
        "no PrepareOk before the backup's write"
    );
    backup.on_io_done(
        3,
        Completion::Written {
            id: written(&backup_effects)[0],
        },
        &mut out,
    );
    let ok = effects(&mut out)
        .into_iter()
        .find_map(|effect| match effect {
            Effect::Send {
                message: message @ Message::PrepareOk { .. },
                to: 0,
            } => Some(message),
            _ => None,
        })
        .expect("a PrepareOk to the primary");
    primary.on_message(4, &ok, &mut out);
    assert_eq!(primary.commit(), 1);
    assert_eq!(replies(&effects(&mut out)), 1);
}

#[test]
fn invalid_messages_are_dropped_and_counted() {
    let config = Config::new(3);
    let mut replica = Replica::format(config, 1);
    let mut out = Outbox::new();
    // From itself, from outside the cluster, a StartView from a replica that is not the
    // view's primary, a DoViewChange whose log is not a chain.
    replica.on_message(
        1,
        &Message::Commit {
            view: 0,
            replica: 1,
            commit: 5,
        },
        &mut out,
    );
    replica.on_message(
        1,
        &Message::Commit {
            view: 0,
            replica: 9,
            commit: 5,
        },
        &mut out,
    );
    let start_view = Message::StartView {
        view: 3,
        replica: 2,
        log: Suffix {
            commit: 0,
            head: ROOT_CHECKSUM,
            entries: vec![],
        },
    };
    replica.on_message(1, &start_view, &mut out);
    let broken = Entry::new(2, 0, 1, 1, ROOT_CHECKSUM, Arc::from(&b"x"[..]));
    let do_view_change = Message::DoViewChange {
        view: 4,
        replica: 0,
        log_view: 0,
        log: Suffix {
            commit: 0,
            head: ROOT_CHECKSUM,
            entries: vec![broken],
        },
    };
    replica.on_message(1, &do_view_change, &mut out);
    assert_eq!(replica.invalid(), 4);
    assert_eq!(replica.view(), 0, "nothing invalid moves the view");
    assert_eq!(replica.status(), Status::Normal);
}

#[test]
fn a_torn_last_entry_is_cut_at_start() {
    let first = Entry::new(1, 0, 1, 1, ROOT_CHECKSUM, Arc::from(&b"a"[..]));
    let mut torn = Entry::new(2, 0, 1, 2, first.checksum, Arc::from(&b"b"[..]));
    torn.request = 3;
    let durable = Durable {
        view: 0,
        log_view: 0,
        log: vec![first, torn],
        recovering: false,
        ..Durable::default()
    };
    let mut out = Outbox::new();
    let replica = Replica::open(Config::new(3), 1, durable, 0, &mut out);
    assert_eq!(replica.op(), 1);
    assert_eq!(replica.status(), Status::Normal);
}

#[test]
fn a_restarted_primary_starts_a_view_change() {
    let mut out = Outbox::new();
    let replica = Replica::open(Config::new(3), 0, Durable::default(), 0, &mut out);
    assert_eq!(replica.status(), Status::ViewChange);
    assert_eq!(replica.view(), 1);
    let sent = effects(&mut out);
    let persisted = sent
        .iter()
        .position(|e| matches!(e, Effect::Persist { view: 1, .. }));
    let voted = sent.iter().position(|e| {
        matches!(
            e,
            Effect::Send {
                message: Message::StartViewChange { view: 1, .. },
                ..
            }
        )
    });
    assert!(persisted.expect("the view persisted") < voted.expect("a vote sent"));
}

#[test]
fn a_recovering_replica_neither_acknowledges_nor_votes() {
    let mut out = Outbox::new();
    let mut replica = Replica::recover(Config::new(3), 1, 0, 99, &mut out);
    assert!(matches!(
        effects(&mut out)[0],
        Effect::Persist {
            recovering: true,
            ..
        }
    ));
    let entry = Entry::new(1, 0, 1, 1, ROOT_CHECKSUM, Arc::from(&b"a"[..]));
    replica.on_message(
        1,
        &Message::Prepare {
            view: 0,
            replica: 0,
            commit: 0,
            entry,
        },
        &mut out,
    );
    replica.on_message(
        1,
        &Message::StartViewChange {
            view: 5,
            replica: 2,
        },
        &mut out,
    );
    assert!(effects(&mut out).is_empty());
    assert_eq!(replica.status(), Status::Recovering);
    assert_eq!(replica.view(), 0);
}

/// Regression (found by the simulator): a `StartView` whose log is a prefix of ours used to
/// label the disk with the new view at once, while the disk still held our longer log; a
/// crash then left the old view's tail under the new view's label.
#[test]
fn a_shorter_view_log_is_labelled_only_after_the_cut_is_written() {
    let first = Entry::new(1, 0, 1, 1, ROOT_CHECKSUM, Arc::from(&b"a"[..]));
    let second = Entry::new(2, 0, 1, 2, first.checksum, Arc::from(&b"b"[..]));
    let durable = Durable {
        view: 0,
        log_view: 0,
        log: vec![first.clone(), second],
        recovering: false,
        ..Durable::default()
    };
    let mut out = Outbox::new();
    let mut backup = Replica::open(Config::new(3), 2, durable, 0, &mut out);
    let start_view = Message::StartView {
        view: 1,
        replica: 1,
        log: Suffix {
            commit: 0,
            head: ROOT_CHECKSUM,
            entries: vec![first],
        },
    };
    backup.on_message(1, &start_view, &mut out);
    let sent = effects(&mut out);
    assert!(sent.contains(&Effect::Persist {
        view: 1,
        log_view: 0,
        recovering: false
    }));
    assert!(
        !sent
            .iter()
            .any(|e| matches!(e, Effect::Persist { log_view: 1, .. }))
    );
    assert!(!sent.iter().any(|e| matches!(
        e,
        Effect::Send {
            message: Message::PrepareOk { .. },
            ..
        }
    )));
    let cut = sent
        .iter()
        .find_map(|effect| match effect {
            Effect::Write {
                id,
                op_min: 2,
                entries,
            } if entries.is_empty() => Some(*id),
            _ => None,
        })
        .expect("the longer tail is cut on disk");
    backup.on_io_done(2, Completion::Written { id: cut }, &mut out);
    let done = effects(&mut out);
    assert!(done.contains(&Effect::Persist {
        view: 1,
        log_view: 1,
        recovering: false
    }));
    assert!(done.iter().any(|e| matches!(
        e,
        Effect::Send {
            to: 1,
            message: Message::PrepareOk { view: 1, op: 1, .. }
        }
    )));
}

/// Regression (found by the simulator): a replica that lost its disk and crashed again
/// during its recovery restarted from the still-empty disk as if it were intact.
#[test]
#[should_panic(expected = "opened with `recover`")]
fn a_disk_still_being_recovered_cannot_be_opened() {
    let durable = Durable {
        recovering: true,
        ..Durable::default()
    };
    let _ = Replica::open(Config::new(3), 1, durable, 0, &mut Outbox::new());
}

/// Regression (found by the simulator, seed 987 of the swarm at the time): the primary of a
/// view that crashed between views, after it may have sent that view's `StartView`, built
/// the same view again from other votes, so one view had two logs.
#[test]
fn a_primary_restarted_between_views_moves_to_the_next_view() {
    // View 4's primary is replica 1 (4 % 3); its disk says view 4, log of view 3.
    let durable = Durable {
        view: 4,
        log_view: 3,
        log: vec![],
        recovering: false,
        ..Durable::default()
    };
    let mut out = Outbox::new();
    let replica = Replica::open(Config::new(3), 1, durable, 0, &mut out);
    assert_eq!(replica.status(), Status::ViewChange);
    assert_eq!(replica.view(), 5);
}
