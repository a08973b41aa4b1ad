//! The listener's UDP socket, bound with its kernel buffers sized.
//!
//! A datagram that arrives while the socket's receive buffer is full is dropped by the kernel,
//! and QUIC answers a loss by resending and by shrinking its congestion window. The kernel's
//! default buffer (`net.core.rmem_default`, 208 KiB on most systems) is less than one 1 MB
//! request, so a few producers sending at once overflowed it whenever the endpoint's single
//! task fell behind: with eight producers of 1 MB batches on loopback, 1.7 % of the
//! datagrams of a 1 GB run were dropped and the producers' p99 was 98 ms; with 8 MiB none
//! were, and the p99 was 45 ms (bench/RESULTS.md).

use std::io;
use std::net::SocketAddr;

use rustix::net::sockopt;

/// The buffer sizes the kernel granted, for the start-up log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Granted {
    pub(super) receive: usize,
    pub(super) send: usize,
}

/// Binds `address` with receive and send buffers of at least the sizes asked (0: the
/// kernel's default), past `net.core.rmem_max` / `wmem_max` where the process may
/// (`CAP_NET_ADMIN`); elsewhere the kernel caps them, and the caller logs what it granted.
pub(super) fn bind(
    address: SocketAddr,
    receive: usize,
    send: usize,
) -> io::Result<(compio::net::UdpSocket, Granted)> {
    let socket = std::net::UdpSocket::bind(address)?;
    if receive > 0 {
        sockopt::set_socket_recv_buffer_size_force(&socket, receive)
            .or_else(|_| sockopt::set_socket_recv_buffer_size(&socket, receive))?;
    }
    if send > 0 {
        sockopt::set_socket_send_buffer_size_force(&socket, send)
            .or_else(|_| sockopt::set_socket_send_buffer_size(&socket, send))?;
    }
    // Linux reports twice the size set (the rest is its bookkeeping), so halve it back.
    let granted = Granted {
        receive: sockopt::socket_recv_buffer_size(&socket)? / 2,
        send: sockopt::socket_send_buffer_size(&socket)? / 2,
    };
    Ok((compio::net::UdpSocket::from_std(socket)?, granted))
}

#[cfg(test)]
mod tests {
    use rustix::net::sockopt;

    #[test]
    fn buffers_are_sized_as_asked_or_as_far_as_the_kernel_allows() {
        let runtime = compio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let address = "127.0.0.1:0".parse().unwrap();
            let default = std::net::UdpSocket::bind(address).unwrap();
            let default = sockopt::socket_recv_buffer_size(&default).unwrap() / 2;
            let asked = 8 * default;
            let (_socket, granted) = super::bind(address, asked, asked).unwrap();
            // Root (or CAP_NET_ADMIN) gets what it asks; others what net.core.rmem_max
            // allows, which on any usual system is above the default.
            assert!(granted.receive > default, "{granted:?}, default {default}");
            assert!(granted.send > 0);
            let (_socket, untouched) = super::bind(address, 0, 0).unwrap();
            assert_eq!(untouched.receive, default);
        });
    }
}
