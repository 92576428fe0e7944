//! The in-process transport: both ends of a connection in one process, joined by memory.
//!
//! Local mode ([`crate::swnaa::local`]) serves its handles with a software NAA in the same
//! process. This transport connects them without sockets: an endpoint's work requests are
//! carried out by the posting thread, which copies the data straight from the source region
//! into the peer's target region (checked like a NIC checks them: known rkey, in bounds, not
//! held by the application) and hands the peer its completion. A waiting peer spins on a flag
//! or sleeps on an eventfd that is rung only while it sleeps, so a round trip between two
//! running threads makes no system call.
//!
//! What does not move is not copied: an in-process NAA may use a region of its client as its
//! own ([`Endpoint::shared_memory`](super::Endpoint::shared_memory)); a write between a
//! region and itself then moves nothing. Everything else is the queue pair of the seam, with
//! its semantics: one completion per work request, ordered delivery, flushed receives and a
//! `Disconnected` event when either end leaves.
//!
//! Addresses are those of the discard-only prefix `100::/64` (RFC 6666), with port 0: no
//! network reaches them, so they cannot be mistaken for a real NAA's.

mod bell;
mod endpoint;
mod listener;
mod side;

use std::net::{Ipv6Addr, SocketAddr};

pub use endpoint::{LocalEndpoint, LocalRegion};
pub use listener::{LocalIncoming, LocalListener, LocalTransport};

/// True if `addr` is a listening in-process endpoint of this process.
pub fn is_listening(addr: SocketAddr) -> bool {
    listener::is_listening(addr)
}

/// The in-process address number `n` (a listener's, or a connecting end's).
fn address(n: u64) -> SocketAddr {
    let [a, b, c, d] = [
        (n >> 48) as u16,
        (n >> 32) as u16,
        (n >> 16) as u16,
        n as u16,
    ];
    SocketAddr::from((Ipv6Addr::new(0x100, 0, 0, 0, a, b, c, d), 0))
}

/// True if `addr` lies in the in-process transport's address block.
fn in_block(addr: SocketAddr) -> bool {
    match addr {
        SocketAddr::V6(v6) => v6.port() == 0 && v6.ip().segments()[..4] == [0x100, 0, 0, 0],
        SocketAddr::V4(_) => false,
    }
}

#[cfg(test)]
mod tests;
