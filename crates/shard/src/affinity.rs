//! Which shard a connection's data requests land on, and when the connection should move
//! there (PROTOCOL-independent: a server-side placement rule).
//!
//! A partition lives on one shard; a request for it arriving on another shard crosses
//! threads twice (there and back). A connection whose data requests keep reaching the same
//! other shard therefore moves to it: the transport hands its socket over between two frames,
//! and from then on its sends and polls run where their partition lives. The rule:
//!
//! - every send or poll notes the shard owning its partition; requests to the same owner in a
//!   row make a streak;
//! - after [`MOVE_AFTER`] in a row to one other shard, the connection moves there;
//! - a connection whose requests keep changing owner (a producer spreading over partitions of
//!   several shards) stops being considered after [`SWITCHES_MAX`] changes, so it is not
//!   moved back and forth, and it keeps its full pipelining (a connection that may move reads
//!   its next frame only after answering the previous one, so a move never splits a frame).

/// Requests in a row to one other shard before the connection moves there.
pub const MOVE_AFTER: u32 = 4;

/// Owner changes after which a connection is considered spread over shards and stays.
pub const SWITCHES_MAX: u32 = 8;

/// What a connection's data requests have shown about where their partitions live.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Affinity {
    /// The owner of the last data request's partition.
    owner: Option<usize>,
    /// Data requests in a row to `owner`.
    streak: u32,
    /// Times the owner changed from one request to the next.
    switches: u32,
}

impl Affinity {
    /// A data request reached a partition owned by shard `owner`.
    pub fn note(&mut self, owner: usize) {
        if self.owner == Some(owner) {
            self.streak = self.streak.saturating_add(1);
            return;
        }
        if self.owner.is_some() {
            self.switches = self.switches.saturating_add(1);
        }
        self.owner = Some(owner);
        self.streak = 1;
    }

    /// Whether a connection served on shard `here` may move soon: its last data request went
    /// to another shard and it has not shown itself spread over shards.
    pub fn may_move(&self, here: usize) -> bool {
        self.owner.is_some_and(|owner| owner != here) && self.switches <= SWITCHES_MAX
    }

    /// The shard a connection served on `here` should move to now, if any.
    pub fn move_to(&self, here: usize) -> Option<usize> {
        (self.may_move(here) && self.streak >= MOVE_AFTER)
            .then_some(self.owner)
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_streak_on_another_shard_moves_the_connection() {
        let mut affinity = Affinity::default();
        assert!(!affinity.may_move(0), "no data request yet");
        for noted in 1..MOVE_AFTER {
            affinity.note(1);
            assert!(affinity.may_move(0));
            assert_eq!(affinity.move_to(0), None, "after {noted} request(s)");
        }
        affinity.note(1);
        assert_eq!(affinity.move_to(0), Some(1));
        // Once there, it stays.
        assert!(!affinity.may_move(1));
        assert_eq!(affinity.move_to(1), None);
    }

    #[test]
    fn a_connection_spread_over_shards_stays() {
        let mut affinity = Affinity::default();
        for index in 0..=SWITCHES_MAX + 1 {
            affinity.note(usize::try_from(index % 2).unwrap());
        }
        assert!(!affinity.may_move(0));
        for _ in 0..MOVE_AFTER * 2 {
            affinity.note(1);
        }
        assert_eq!(affinity.move_to(0), None, "spread: never moved");
    }

    proptest! {
        /// Whatever the requests, a move goes to the last request's owner, never to the shard
        /// the connection is on, and only after a full streak.
        #[test]
        fn moves_follow_the_rule(
            owners in proptest::collection::vec(0_usize..4, 0..64),
            here in 0_usize..4,
        ) {
            let mut affinity = Affinity::default();
            for owner in &owners {
                affinity.note(*owner);
            }
            if let Some(target) = affinity.move_to(here) {
                prop_assert_ne!(target, here);
                prop_assert_eq!(Some(&target), owners.last());
                let tail = owners.iter().rev().take_while(|owner| **owner == target).count();
                prop_assert!(tail >= MOVE_AFTER as usize);
            }
        }
    }
}
