//! The cluster simulator's seeds: safety after every step, liveness after healing, the same
//! trace for the same seed, and every planted bug caught. `cargo xtask vopr --cluster 3 --seed
//! S` replays one seed, `--seeds N` runs N from it (`VSR_SEED`, `VSR_SEEDS`, `VSR_SEED_START`
//! and `VSR_REPLICAS` underneath).

#[allow(
    unreachable_pub,
    clippy::unwrap_used,
    reason = "the simulator is one test crate's module tree; its conversions of counts cannot fail"
)]
mod sim;

use sim::{Options, World};
use vsr::Break;

fn run(seed: u64, broken: Option<Break>) -> Result<sim::Summary, String> {
    let mut options = Options::swarm(seed);
    options.broken = broken;
    World::new(seed, options).run()
}

fn env(name: &str) -> Option<u64> {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
}

/// `VSR_SEEDS` seeds (100 unless set) from `VSR_SEED_START` (0 unless set).
fn seeds() -> std::ops::Range<u64> {
    let start = env("VSR_SEED_START").unwrap_or(0);
    start..start + env("VSR_SEEDS").unwrap_or(100)
}

#[test]
fn seeds_keep_every_committed_op_and_make_progress() {
    let mut totals = sim::Summary::default();
    for seed in seeds() {
        let summary = match std::panic::catch_unwind(|| run(seed, None)) {
            Ok(Ok(summary)) => summary,
            Ok(Err(error)) => panic!("seed {seed}: {error}"),
            Err(panic) => panic!("seed {seed}: a replica's assertion failed: {panic:?}"),
        };
        assert!(summary.requests >= 1000, "seed {seed}: {summary:?}");
        assert!(
            summary.crashes + summary.partitions > 0,
            "seed {seed} had no fault"
        );
        totals.requests += summary.requests;
        totals.crashes += summary.crashes;
        totals.wipes += summary.wipes;
        totals.partitions += summary.partitions;
        totals.views = totals.views.max(summary.views);
        totals.disk_reads += summary.disk_reads;
        totals.fetched += summary.fetched;
        totals.evicted += summary.evicted;
    }
    println!("{totals:?}");
}

#[test]
fn a_seed_replays_to_the_same_trace() {
    for seed in [1, 7, 42] {
        assert_eq!(run(seed, None), run(seed, None), "seed {seed}");
    }
}

#[test]
fn replay() {
    if let Some(seed) = env("VSR_SEED") {
        println!("{:?}", run(seed, None));
    }
}

fn caught_at(seed: u64, broken: Break) -> bool {
    match std::panic::catch_unwind(|| run(seed, Some(broken))) {
        Ok(Ok(_)) => false,
        Ok(Err(error)) => {
            println!("{broken:?}, seed {seed}: {error}");
            !error.starts_with("liveness")
        }
        Err(_panic) => true,
    }
}

/// A planted bug is caught when a seed fails a safety check or trips a replica's own
/// assertion (a liveness failure alone does not count).
fn caught_within_100_seeds(broken: Break) {
    let seeds = env("VSR_BREAK_SEEDS").unwrap_or(100);
    let caught = (0..seeds).find(|&seed| caught_at(seed, broken));
    assert!(caught.is_some(), "{broken:?} survived {seeds} seeds");
    println!("{broken:?} caught at seed {caught:?}");
}

#[test]
fn committing_without_a_quorum_is_caught() {
    caught_within_100_seeds(Break::CommitWithoutQuorum);
}

#[test]
fn a_view_change_that_drops_a_committed_op_is_caught() {
    caught_within_100_seeds(Break::ViewChangeKeepsOwnLog);
}

#[test]
fn a_recovering_replica_that_votes_is_caught() {
    caught_within_100_seeds(Break::RecoveringReplicaVotes);
}

#[test]
fn a_log_view_persisted_before_its_log_is_caught() {
    caught_within_100_seeds(Break::LogViewBeforeLog);
}

/// Seeds that once failed, kept (the swarm has grown since, so each now draws another run;
/// the bug each found has its own regression test in `src/tests.rs`):
/// - 78: a `StartView` shorter than the replica's log labelled the disk with the new view
///   before the longer tail was cut
///   (`a_shorter_view_log_is_labelled_only_after_the_cut_is_written`);
/// - 663: a replica whose disk was lost crashed during recovery and restarted from the empty
///   disk as if it were intact (`a_disk_still_being_recovered_cannot_be_opened`);
/// - 987: a primary that crashed between views built the same view twice, with two logs
///   (`a_primary_restarted_between_views_moves_to_the_next_view`).
#[test]
fn seeds_that_once_failed_pass() {
    for seed in [78, 663, 987] {
        run(seed, None).unwrap_or_else(|error| panic!("seed {seed}: {error}"));
    }
}
