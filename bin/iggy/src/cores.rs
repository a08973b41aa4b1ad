//! Which cores run a shard, and pinning a shard's thread to its core (thread-per-core).
//!
//! A core here is a logical CPU as the OS numbers it: hwloc's PU `os_index`, what
//! `taskset -c` and `sched_setaffinity` take. The C library hwloc, through `hwlocality`,
//! reads the topology and binds threads.
//!
//! Invariants of `shard_cores`' result: it is never empty, strictly ascending (so no core
//! runs two shards), and every core in it is one the process may run on: in its affinity
//! mask (so `taskset` is honoured) and in the cpuset its cgroup allows (so a container
//! limit is).

use hwlocality::Topology;
use hwlocality::bitmap::BitmapIndex;
use hwlocality::cpu::binding::{CpuBindingError, CpuBindingFlags};
use hwlocality::cpu::cpuset::CpuSet;
use hwlocality::errors::{HybridError, RawHwlocError};

/// Why the cores of the shards could not be chosen, or a thread not pinned.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CoreError {
    /// `system.sharding.cpu_allocation` is none of the three forms.
    #[error("`{text}` is not \"all\", a core count or a core range such as \"0..4\"")]
    Allocation { text: String },
    /// The affinity mask of the process could not be read.
    #[error("read the CPU binding of the process")]
    Binding(#[source] HybridError<CpuBindingError>),
    /// Cores of a range are absent, offline or outside the process's affinity mask.
    #[error("cores {missing:?} of {start}..{end} are not available (available: {available:?})")]
    Missing {
        start: usize,
        end: usize,
        missing: Vec<usize>,
        available: Vec<usize>,
    },
    /// The process may run on no core hwloc knows of.
    #[error("no core is available to the process")]
    NoneAvailable,
    /// The core to pin to does not exist or the process's cgroup forbids it.
    #[error("core {core} is not available (allowed: {allowed})")]
    NotAllowed { core: usize, allowed: String },
    /// The OS refused to bind the thread.
    #[error("pin the thread to core {core}")]
    Pin {
        core: usize,
        #[source]
        source: HybridError<CpuBindingError>,
    },
    /// A count asks for more cores than the process may run on.
    #[error("{requested} cores requested, {available} available")]
    TooFew { requested: usize, available: usize },
    /// hwloc could not discover the machine.
    #[error("discover the CPU topology")]
    Topology(#[source] RawHwlocError),
}

/// Which cores run a shard, in shard order (shard i runs on cores[i]); OS core indexes.
///
/// `"all"` is every core the process may run on, `"N"` the first N of them and `"a..b"` the
/// cores a to b, end exclusive, each of which must be available.
pub(crate) fn shard_cores(cpu_allocation: &str) -> Result<Vec<usize>, CoreError> {
    let allocation = Allocation::parse(cpu_allocation)?;
    let available = available_cores()?;
    let cores = allocation.select(&available)?;
    assert!(!cores.is_empty());
    assert!(cores.windows(2).all(|pair| pair[0] < pair[1]));
    Ok(cores)
}

/// Pins the calling thread to OS core `core`.
///
/// Each call discovers the topology anew (milliseconds), which is fine once per shard thread
/// at start-up and keeps the function free of shared state.
pub(crate) fn pin_current_thread(core: usize) -> Result<(), CoreError> {
    let topology = Topology::new().map_err(CoreError::Topology)?;
    let allowed = topology.allowed_cpuset();
    let is_allowed = allowed.iter_set().any(|index| usize::from(index) == core);
    if !is_allowed {
        let allowed = allowed.to_string();
        return Err(CoreError::NotAllowed { core, allowed });
    }
    // The index is in the allowed cpuset, so it is a valid bitmap index.
    let index = BitmapIndex::try_from(core).expect("an allowed core is a bitmap index");
    let target = CpuSet::from(index);
    topology
        .bind_cpu(&target, CpuBindingFlags::THREAD)
        .map_err(|source| CoreError::Pin { core, source })
}

/// The parsed `system.sharding.cpu_allocation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Allocation {
    All,
    Count(usize),
    Range { start: usize, end: usize },
}

impl Allocation {
    /// The forms `bin/iggy/src/config.rs` accepts: "all", a count > 0, or `a..b` with a < b,
    /// numbers possibly surrounded by blanks.
    fn parse(text: &str) -> Result<Self, CoreError> {
        let number = |part: &str| part.trim().parse::<usize>().ok();
        let allocation = match text.split_once("..") {
            _ if text == "all" => Some(Self::All),
            Some((start, end)) => match (number(start), number(end)) {
                (Some(start), Some(end)) if start < end => Some(Self::Range { start, end }),
                _ => None,
            },
            None => number(text).filter(|&count| count > 0).map(Self::Count),
        };
        allocation.ok_or_else(|| CoreError::Allocation {
            text: text.to_owned(),
        })
    }

    /// The cores of this allocation among `available`, which is ascending and not empty.
    fn select(self, available: &[usize]) -> Result<Vec<usize>, CoreError> {
        assert!(!available.is_empty());
        assert!(available.windows(2).all(|pair| pair[0] < pair[1]));
        match self {
            Self::All => Ok(available.to_vec()),
            Self::Count(requested) => {
                available
                    .get(..requested)
                    .map(<[usize]>::to_vec)
                    .ok_or(CoreError::TooFew {
                        requested,
                        available: available.len(),
                    })
            }
            Self::Range { start, end } => {
                let (present, missing): (Vec<usize>, Vec<usize>) =
                    (start..end).partition(|core| available.binary_search(core).is_ok());
                if missing.is_empty() {
                    Ok(present)
                } else {
                    let available = available.to_vec();
                    Err(CoreError::Missing {
                        start,
                        end,
                        missing,
                        available,
                    })
                }
            }
        }
    }
}

/// The cores the process may run on, ascending: its affinity mask (the union over its
/// threads, as `taskset` set it) within the cpuset hwloc allows (the cgroup's).
fn available_cores() -> Result<Vec<usize>, CoreError> {
    let topology = Topology::new().map_err(CoreError::Topology)?;
    let binding = topology
        .cpu_binding(CpuBindingFlags::PROCESS)
        .map_err(CoreError::Binding)?;
    let available = &binding & &*topology.allowed_cpuset();
    let cores: Vec<usize> = available.iter_set().map(usize::from).collect();
    if cores.is_empty() {
        return Err(CoreError::NoneAvailable);
    }
    Ok(cores)
}

#[cfg(test)]
mod tests {
    use super::{Allocation, CoreError, pin_current_thread, shard_cores};

    #[test]
    fn parse_forms() {
        assert_eq!(Allocation::parse("all").unwrap(), Allocation::All);
        assert_eq!(Allocation::parse("4").unwrap(), Allocation::Count(4));
        assert_eq!(Allocation::parse(" 4 ").unwrap(), Allocation::Count(4));
        let range = Allocation::Range { start: 0, end: 4 };
        assert_eq!(Allocation::parse("0..4").unwrap(), range);
        assert_eq!(Allocation::parse("0 .. 4").unwrap(), range);
        for bad in [
            "", "0", "-1", "most", "All", "4..2", "2..2", "..4", "0..", "0..=4", "1.5",
        ] {
            let error = Allocation::parse(bad).unwrap_err();
            assert!(
                matches!(error, CoreError::Allocation { ref text } if text == bad),
                "{bad}"
            );
        }
    }

    #[test]
    fn select_all_and_count() {
        let available = [0, 1, 4, 5];
        assert_eq!(Allocation::All.select(&available).unwrap(), available);
        assert_eq!(Allocation::Count(1).select(&available).unwrap(), [0]);
        assert_eq!(Allocation::Count(3).select(&available).unwrap(), [0, 1, 4]);
        assert_eq!(Allocation::Count(4).select(&available).unwrap(), available);
        let error = Allocation::Count(5).select(&available).unwrap_err();
        assert!(matches!(
            error,
            CoreError::TooFew {
                requested: 5,
                available: 4
            }
        ));
        assert_eq!(error.to_string(), "5 cores requested, 4 available");
    }

    #[test]
    fn select_range() {
        let available = [0, 1, 4, 5];
        let range = |start, end| Allocation::Range { start, end };
        assert_eq!(range(0, 2).select(&available).unwrap(), [0, 1]);
        assert_eq!(range(4, 6).select(&available).unwrap(), [4, 5]);
        assert_eq!(range(5, 6).select(&available).unwrap(), [5]);
        let error = range(1, 5).select(&available).unwrap_err();
        let CoreError::Missing { missing, .. } = &error else {
            panic!("{error:?}");
        };
        assert_eq!(missing, &[2, 3]);
        let message = "cores [2, 3] of 1..5 are not available (available: [0, 1, 4, 5])";
        assert_eq!(error.to_string(), message);
        let error = range(5, 8).select(&available).unwrap_err();
        assert!(matches!(error, CoreError::Missing { ref missing, .. } if missing == &[6, 7]));
    }

    /// The real machine: "all" agrees with the thread's own affinity mask, and each core
    /// of it pins a fresh thread, as the kernel sees it.
    #[test]
    fn shard_cores_of_this_machine() {
        let cores = shard_cores("all").unwrap();
        assert_eq!(cores, allowed_list("self"));
        assert_eq!(shard_cores("1").unwrap(), cores[..1]);
        let count = (cores.len() + 1).to_string();
        let error = shard_cores(&count).unwrap_err();
        assert!(matches!(error, CoreError::TooFew { .. }), "{error:?}");
        assert!(matches!(
            shard_cores("most"),
            Err(CoreError::Allocation { .. })
        ));
    }

    #[test]
    fn pin_current_thread_pins() {
        let cores = shard_cores("all").unwrap();
        for &core in &cores {
            let pinned = std::thread::spawn(move || {
                pin_current_thread(core).unwrap();
                allowed_list("thread-self")
            });
            assert_eq!(pinned.join().unwrap(), [core]);
        }
        let error = pin_current_thread(usize::MAX).unwrap_err();
        assert!(matches!(
            error,
            CoreError::NotAllowed {
                core: usize::MAX,
                ..
            }
        ));
    }

    /// `Cpus_allowed_list` of `/proc/<which>/status` (`self` or `thread-self`), expanded:
    /// the kernel's own record of the affinity mask, independent of hwloc.
    fn allowed_list(which: &str) -> Vec<usize> {
        let status = std::fs::read_to_string(format!("/proc/{which}/status")).unwrap();
        let line = status
            .lines()
            .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
            .unwrap();
        let mut cores = Vec::new();
        for part in line.trim().split(',') {
            match part.split_once('-') {
                Some((first, last)) => {
                    cores.extend(first.parse::<usize>().unwrap()..=last.parse().unwrap());
                }
                None => cores.push(part.parse().unwrap()),
            }
        }
        cores
    }
}
