//! The software transport: reliable-connected (RC) queue-pair semantics over TCP.
//!
//! It is split into the protocol and the I/O:
//!
//! * `engine`: the RC protocol of one queue pair, sans-IO (send queue, posted receives,
//!   completion queue, message numbers, cumulative ACK/NAK, receiver-not-ready, flush on
//!   error, timers on caller-supplied time), with frame-level tests; `regions` is its region
//!   table (rkey and bounds checks), `frame` the wire format.
//! * the I/O: `socket` (non-blocking TCP plus a wake-up bell, and the receive low-water mark,
//!   set through `lowat`: while a payload streams in, its reader is woken once per 256 KiB
//!   chunk, not once per TCP segment), `reader` (receive buffer and
//!   chunked placement of payloads into registered memory through the buffer's access gate),
//!   `writer` (frames being written, payloads streamed from registered memory; from 320 KiB
//!   the kernel sends them from their pages without a copy, through `splice`, with
//!   `sigpipe` keeping the signal a broken connection raises away from the application), and
//!   `queue_pair`, which says who may use each direction of the socket: whoever holds the
//!   reader reads, whoever holds the writer writes.
//! * the threads: a posting thread writes the first 8 MiB of its frames itself (`pump`),
//!   and an application thread that waits for a completion receives itself (`receive`),
//!   placing payloads of any size, while the endpoint's NIC thread (`nic`) is idle, so that
//!   a request/response exchange up to 8 MiB each way needs no hand-off between threads
//!   (larger ones one per direction). The NIC thread does the rest: the remainder of
//!   larger frames, what arrives while no application thread waits, a message waiting for a
//!   receive, timers, and teardown. The wire format is unchanged by this division of work.
//!   A waiting application thread first reads the socket without blocking for as long as
//!   the caller says (the connection's waiting decision, see [`crate::transport::waiting`]), then
//!   sleeps in it; the first look after a post reads only as `look_ahead` learns.
//! * `eventfd`: for a thread that waits on many endpoints (or an async reactor) instead of
//!   in `wait`, an eventfd rung when a completion or event is ready; arming it hands the
//!   reader to the NIC thread at once.
//!
//! Testing: with the cargo feature `fault-injection`, a `FaultPlan` in `SoftConfig::faults`
//! drops, delays or resets the connection at a chosen frame (the `fault` module),
//! deterministically; it is empty by default. Without the feature the fault points are not
//! compiled.
//!
//! Every posted work request completes exactly once; teardown (error, disconnect, peer loss)
//! flushes what is outstanding with [`WcStatus::WrFlush`](crate::transport::WcStatus) and
//! reports [`ConnectionEvent::Disconnected`](crate::transport::ConnectionEvent).

mod config;
mod endpoint;
mod engine;
mod eventfd;
#[cfg(feature = "fault-injection")]
mod fault;
mod frame;
mod listener;
mod look_ahead;
#[allow(unsafe_code)]
mod lowat;
mod nic;
mod queue_pair;
mod reader;
mod receive;
#[allow(unsafe_code)]
mod sigpipe;
mod socket;
#[allow(unsafe_code)]
mod splice;
mod writer;

use std::net::SocketAddr;
use std::time::Instant;

pub use config::SoftConfig;
pub use endpoint::{SoftEndpoint, SoftRegion};
#[cfg(feature = "fault-injection")]
pub use fault::{Direction, Fault, FaultAction, FaultPlan, FrameKind};
pub use listener::{
    MAX_PENDING_HANDSHAKES, STALLED_HANDSHAKE, SoftIncoming, SoftListener, catalog,
};

use super::{Result, Transport};

/// The software transport (RC semantics over TCP; any IPv4 or IPv6 address).
#[derive(Clone, Debug, Default)]
pub struct SoftTransport {
    config: SoftConfig,
}

impl SoftTransport {
    /// A transport with `config`.
    pub fn new(config: SoftConfig) -> Self {
        Self {
            config: config.sanitized(),
        }
    }

    /// The configuration in use.
    pub fn config(&self) -> &SoftConfig {
        &self.config
    }
}

impl Transport for SoftTransport {
    type Endpoint = SoftEndpoint;
    type Listener = SoftListener;

    fn kind(&self) -> Option<super::TransportKind> {
        Some(super::TransportKind::Soft)
    }

    fn connect(
        &self,
        remote: SocketAddr,
        local: Option<SocketAddr>,
        deadline: Instant,
    ) -> Result<SoftEndpoint> {
        listener::connect(&self.config, remote, local, deadline)
    }

    fn listen(&self, addr: SocketAddr) -> Result<SoftListener> {
        SoftListener::bind(self.config.clone(), addr)
    }
}
