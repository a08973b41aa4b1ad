//! The replica's clock: ticks of wall time since start, except that a stall — the process
//! stopped (`SIGSTOP`), the machine suspended, the driver held up — counts as at most
//! [`STALL_TICKS`]. With wall time alone, a backup woken from a stall longer than the
//! heartbeat timeout took it for the primary's silence at its first tick, before it read
//! the primary's messages queued meanwhile, and started a view change that deposed a
//! healthy primary (5 of 7 wake-ups in a probe, clients stalled 4–7 s). The other replicas'
//! clocks measure a stalled node's silence; its own must not.

use std::time::Instant;

use super::TICK;

/// The most ticks one step of the clock advances (100 ms).
pub(crate) const STALL_TICKS: u64 = 10;

pub(crate) struct ReplicaClock {
    started: Instant,
    /// The wall ticks at the last step.
    wall_seen: u64,
    ticks: u64,
}

impl ReplicaClock {
    pub(crate) fn new(started: Instant) -> Self {
        Self {
            started,
            wall_seen: 0,
            ticks: 0,
        }
    }

    /// Wall ticks since start.
    pub(crate) fn wall(&self) -> u64 {
        let ticks = self.started.elapsed().as_millis() / TICK.as_millis();
        u64::try_from(ticks).unwrap_or(u64::MAX)
    }

    /// The replica's ticks, as of the last step.
    pub(crate) fn now(&self) -> u64 {
        self.ticks
    }

    /// Steps the clock to the wall time: the replica's ticks now.
    pub(crate) fn step(&mut self) -> u64 {
        self.step_to(self.wall())
    }

    fn step_to(&mut self, wall: u64) -> u64 {
        let elapsed = wall.saturating_sub(self.wall_seen).min(STALL_TICKS);
        self.wall_seen = self.wall_seen.max(wall);
        self.ticks = self.ticks.saturating_add(elapsed);
        self.ticks
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::{ReplicaClock, STALL_TICKS};

    #[test]
    fn the_clock_follows_wall_time_and_a_stall_counts_as_at_most_a_few_ticks() {
        let mut clock = ReplicaClock::new(Instant::now());
        for wall in 1..=50 {
            assert_eq!(clock.step_to(wall), wall, "one tick at a time");
        }
        // A 15 s stop: 1,500 ticks of wall time.
        assert_eq!(clock.step_to(1_550), 50 + STALL_TICKS);
        assert_eq!(
            clock.step_to(1_551),
            51 + STALL_TICKS,
            "then it follows again"
        );
        assert_eq!(clock.step_to(1_551), 51 + STALL_TICKS, "no time, no tick");
        assert_eq!(clock.now(), 51 + STALL_TICKS);
    }
}
