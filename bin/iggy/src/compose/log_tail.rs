//! The last log lines, kept in memory for the HTTP console's live log (`GET /system/logs`,
//! the web UI's log page): at most [`LINES_MAX`] lines and [`BYTES_MAX`] bytes, numbered
//! from 1 in the order written, so a reader asks for what came after the last number it
//! saw. The logger hands each line here (`crate::logger::tail_to`) in builds with `http`.

use std::collections::VecDeque;
use std::sync::Mutex;

/// Lines kept at most.
const LINES_MAX: usize = 5_000;
/// Bytes of text kept at most (a few very long lines cannot hold much memory).
const BYTES_MAX: usize = 2 << 20;

struct Recent {
    lines: VecDeque<(u64, String)>,
    bytes: usize,
    next: u64,
}

static RECENT: Mutex<Recent> = Mutex::new(Recent {
    lines: VecDeque::new(),
    bytes: 0,
    next: 1,
});

fn lock() -> std::sync::MutexGuard<'static, Recent> {
    // A panic while holding the lock leaves whole entries behind: the ring stays usable.
    RECENT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Keeps `line` (without its line break), dropping the oldest lines past the bounds.
pub(crate) fn push(line: &str) {
    let mut recent = lock();
    let seq = recent.next;
    recent.next += 1;
    recent.bytes += line.len();
    recent.lines.push_back((seq, line.to_owned()));
    while recent.lines.len() > LINES_MAX || recent.bytes > BYTES_MAX {
        let Some((_, dropped)) = recent.lines.pop_front() else {
            break;
        };
        recent.bytes -= dropped.len();
    }
}

/// The number of the newest line (0 before any).
pub(crate) fn last() -> u64 {
    lock().next - 1
}

/// The lines numbered above `after`, oldest first, at most `limit`.
pub(crate) fn after(after: u64, limit: usize) -> Vec<(u64, String)> {
    lock()
        .lines
        .iter()
        .filter(|(seq, _)| *seq > after)
        .take(limit)
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{LINES_MAX, after, push};

    #[test]
    fn lines_are_numbered_bounded_and_read_after_a_number() {
        let start = after(0, usize::MAX).last().map_or(0, |(seq, _)| *seq);
        for index in 0..LINES_MAX + 10 {
            push(&format!("line {index}"));
        }
        let all = after(0, usize::MAX);
        assert!(all.len() <= LINES_MAX);
        let last = all.last().unwrap().0;
        assert_eq!(last, start + LINES_MAX as u64 + 10);
        let tail = after(last - 3, 2);
        assert_eq!(tail.len(), 2);
        assert_eq!(tail[0].0, last - 2);
        assert!(after(last, 10).is_empty());
        assert!(super::last() >= last);
    }
}
