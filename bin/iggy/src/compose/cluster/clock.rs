//! The replica's clock (wall time in ticks since start) and when its ticks run. After a
//! stall — the process stopped (`SIGSTOP`), the thread held up — the first tick is put off
//! for [`SETTLE_TICKS`], once, so the messages peers sent meanwhile are read first. A backup
//! woken from a stall longer than the heartbeat timeout otherwise took it for the primary's
//! silence at its first tick, before reading the primary's queued messages, and started a
//! view change that deposed a healthy primary (5 of 7 wake-ups in a probe, clients stalled
//! 4–7 s). Time itself is not bent: a primary that did die meanwhile is found at the next
//! tick.

use std::time::Instant;

use super::TICK;

/// A gap between ticks longer than this (100 ms) is a stall.
pub(crate) const STALL_TICKS: u64 = 10;
/// How long the first tick after a stall waits (30 ms).
pub(crate) const SETTLE_TICKS: u64 = 3;

pub(crate) struct ReplicaClock {
    started: Instant,
    /// The wall ticks at the last tick that ran.
    last_tick: u64,
    /// The tick due now was already put off once.
    put_off: bool,
}

/// Whether a due tick runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    Run,
    /// Put off until this wall tick.
    PutOff(u64),
}

impl ReplicaClock {
    pub(crate) fn new(started: Instant) -> Self {
        Self {
            started,
            last_tick: 0,
            put_off: false,
        }
    }

    /// Wall ticks since start: the replica's clock.
    pub(crate) fn now(&self) -> u64 {
        let ticks = self.started.elapsed().as_millis() / TICK.as_millis();
        u64::try_from(ticks).unwrap_or(u64::MAX)
    }

    /// Whether the tick due at `now` runs now.
    pub(crate) fn turn(&mut self, now: u64) -> Turn {
        let stalled = now.saturating_sub(self.last_tick) > STALL_TICKS;
        if stalled && !self.put_off {
            self.put_off = true;
            return Turn::PutOff(now.saturating_add(SETTLE_TICKS));
        }
        self.put_off = false;
        self.last_tick = now;
        Turn::Run
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::{ReplicaClock, SETTLE_TICKS, Turn};

    #[test]
    fn the_first_tick_after_a_stall_is_put_off_once() {
        let mut clock = ReplicaClock::new(Instant::now());
        for now in 1..=50 {
            assert_eq!(clock.turn(now), Turn::Run, "tick {now}");
        }
        // A 15 s stop: 1,500 ticks of wall time.
        assert_eq!(clock.turn(1_550), Turn::PutOff(1_550 + SETTLE_TICKS));
        assert_eq!(clock.turn(1_553), Turn::Run, "put off only once");
        assert_eq!(clock.turn(1_554), Turn::Run);
        // A thread held up again and again still ticks: every other turn at worst.
        assert!(matches!(clock.turn(1_600), Turn::PutOff(_)));
        assert_eq!(clock.turn(1_700), Turn::Run);
    }
}
