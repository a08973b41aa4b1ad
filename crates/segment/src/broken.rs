//! Deliberately broken behaviour for the simulator's self-check (STYLE §2.8: test-only).
//!
//! Compiled in only with the feature `__broken`; one such build carries every break and the
//! simulator turns on one per run (`vopr --break NAME`), so CI builds once, not once per
//! break. Without the feature [`is`] is the constant `false` and the checks compile away.

/// One way of breaking the server that the simulator must catch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Break {
    /// Appends are acknowledged without their sync: a `persisted` ack comes before the write
    /// is durable.
    AckBeforeWrite = 1,
    /// A log reopened after an unclean stop hands out its last offset again.
    ReuseOffsetAfterCrash = 2,
    /// A partition being handed off is served to its owner and its next owner at once.
    DoubleGroupOwner = 3,
}

impl Break {
    /// Every break, in the order CI checks them.
    pub const ALL: [Break; 3] = [
        Break::AckBeforeWrite,
        Break::ReuseOffsetAfterCrash,
        Break::DoubleGroupOwner,
    ];

    /// The name `vopr --break` takes.
    pub fn name(self) -> &'static str {
        match self {
            Break::AckBeforeWrite => "ack_before_write",
            Break::ReuseOffsetAfterCrash => "reuse_offset_after_crash",
            Break::DoubleGroupOwner => "double_group_owner",
        }
    }

    /// The break called `name`, if there is one.
    pub fn from_name(name: &str) -> Option<Break> {
        Break::ALL.into_iter().find(|each| each.name() == name)
    }
}

#[cfg(feature = "__broken")]
static CHOSEN: core::sync::atomic::AtomicU8 = core::sync::atomic::AtomicU8::new(0);

/// Turns `chosen` on for the rest of the process.
#[cfg(feature = "__broken")]
pub fn choose(chosen: Break) {
    CHOSEN.store(chosen as u8, core::sync::atomic::Ordering::Relaxed);
}

/// Whether the process runs with `each` on; always `false` without the feature `__broken`.
#[inline]
pub fn is(each: Break) -> bool {
    #[cfg(feature = "__broken")]
    {
        CHOSEN.load(core::sync::atomic::Ordering::Relaxed) == each as u8
    }
    #[cfg(not(feature = "__broken"))]
    {
        let _ = each;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for each in Break::ALL {
            assert_eq!(Break::from_name(each.name()), Some(each));
        }
        assert_eq!(Break::from_name("nothing"), None);
    }

    #[cfg(not(feature = "__broken"))]
    #[test]
    fn nothing_is_broken_without_the_feature() {
        assert!(Break::ALL.into_iter().all(|each| !is(each)));
    }
}
