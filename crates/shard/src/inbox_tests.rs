//! The concurrent lane's bound.

use std::rc::Rc;

use futures_util::FutureExt;

use super::Running;

/// The concurrent lane's bound: with `max` messages running, the lane is not read until one
/// of them ends.
#[test]
fn running_messages_are_bounded() {
    let running = Rc::new(Running::default());
    let first = Running::take(&running);
    let _second = Running::take(&running);
    assert_eq!(running.wait_below(3).now_or_never(), Some(()));
    let mut waiting = Box::pin(running.wait_below(2));
    assert_eq!(
        (&mut waiting).now_or_never(),
        None,
        "two run: the lane waits"
    );
    drop(first);
    assert_eq!(
        waiting.now_or_never(),
        Some(()),
        "one ended: the lane reads again"
    );
    assert_eq!(running.count.get(), 1);
}
