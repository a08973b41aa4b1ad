//! Handing an accepted connection to another shard: its descriptor over a bounded channel of
//! that shard's (TCP's, and plain WebSocket's before the upgrade).

use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};

use compio::net::TcpStream;

/// The sending end of a shard's hand-off channel.
pub type Sender<T> = crossfire::MAsyncTx<crossfire::mpsc::Array<T>>;
/// A shard's end of its hand-off channel.
pub type Receiver<T> = crossfire::AsyncRx<crossfire::mpsc::Array<T>>;

/// Connections that may wait in one shard's channel before accepting pauses.
const HANDOFF_MAX: usize = 64;

/// A hand-off channel for one shard.
pub fn channel<T: Send + 'static>() -> (Sender<T>, Receiver<T>) {
    crossfire::mpsc::bounded_async(HANDOFF_MAX)
}

/// Sends `stream`'s descriptor, wrapped by `arrival`, to the shard behind `sender`; says
/// whether it was taken (else the connection is closed and logged under `name`). The
/// descriptor is duplicated first because compio's stream closes its own on drop; nothing
/// has been read from it.
pub(crate) async fn pass<T: Send + Unpin + 'static>(
    name: &str,
    sender: &Sender<T>,
    stream: TcpStream,
    peer: SocketAddr,
    arrival: impl FnOnce(OwnedFd) -> T,
) -> bool {
    let descriptor = match stream.as_fd().try_clone_to_owned() {
        Ok(descriptor) => descriptor,
        Err(error) => {
            log::warn!("{name}: {peer}: duplicate descriptor for hand-off: {error}");
            return false;
        }
    };
    drop(stream);
    if sender.send(arrival(descriptor)).await.is_err() {
        log::warn!("{name}: {peer}: its shard stopped; connection closed");
        return false;
    }
    true
}
