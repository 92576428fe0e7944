//! The software transport: reliable-connected (RC) queue-pair semantics over TCP.
//!
//! It is split into the protocol and the I/O:
//!
//! * `engine`: the RC protocol of one queue pair, sans-IO (send queue, posted receives,
//!   completion queue, message numbers, cumulative ACK/NAK, receiver-not-ready, flush on
//!   error, timers on caller-supplied time), with frame-level tests; `regions` is its region
//!   table (rkey and bounds checks), `frame` the wire format.
//! * the I/O: `socket` (non-blocking TCP plus a wake-up bell), `reader` (receive buffer and
//!   chunked placement of payloads into registered memory through the buffer's access gate),
//!   `writer` (frames being written, payloads streamed from registered memory), and
//!   `queue_pair`, which says who may use each direction of the socket: whoever holds the
//!   reader reads, whoever holds the writer writes.
//! * the threads: a posting thread writes small frames itself (`pump`), and an application
//!   thread that waits for a completion receives itself (`receive`) while the endpoint's NIC
//!   thread (`nic`) is idle, so that a small request/response exchange costs no hand-off
//!   between threads. The NIC thread does the rest: large payloads in both directions, a
//!   message waiting for a receive, timers, and teardown.
//!
//! Every posted work request completes exactly once; teardown (error, disconnect, peer loss)
//! flushes what is outstanding with [`WcStatus::WrFlush`](crate::transport::WcStatus) and
//! reports [`ConnectionEvent::Disconnected`](crate::transport::ConnectionEvent).

mod endpoint;
mod engine;
mod frame;
mod listener;
mod nic;
mod queue_pair;
mod reader;
mod receive;
mod regions;
mod socket;
mod writer;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

pub use endpoint::{SoftEndpoint, SoftRegion};
pub use listener::{SoftIncoming, SoftListener};

use super::{Result, Transport};

/// Settings of the software transport.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SoftConfig {
    /// How long an initiator waits for the acknowledgement of a transmitted request while the
    /// peer sends nothing at all (or for a write to the socket to make progress) before the
    /// request fails with `RetryExceeded` and the connection is torn down (like the RC local
    /// ACK timeout times `retry_count`). Default 4 s.
    pub ack_timeout: Duration,
    /// How long a responder waits for a posted receive before refusing a SEND or WRITE WITH
    /// IMM with `RnrRetryExceeded` (like `rnr_retry_count`). Default 1 s.
    pub rnr_timeout: Duration,
    /// Upper bound for connection setup: the client's handshake (also limited by the deadline
    /// given to `connect`), and how long a listener waits for a connected client's HELLO.
    /// Default 10 s.
    pub connect_timeout: Duration,
    /// How long a responder holds back a due ACK, so that a reply the application posts
    /// meanwhile carries it (zero: acknowledge at once). Default 200 µs.
    pub ack_delay: Duration,
    /// Most outstanding send-queue work requests. Default 1025.
    pub max_send_wr: usize,
    /// Most outstanding receives. Default 1025.
    pub max_recv_wr: usize,
}

impl Default for SoftConfig {
    fn default() -> Self {
        Self {
            ack_timeout: Duration::from_secs(4),
            rnr_timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(10),
            ack_delay: Duration::from_micros(200),
            max_send_wr: 1025,
            max_recv_wr: 1025,
        }
    }
}

impl SoftConfig {
    /// The configuration with out-of-range values raised to their minimum.
    fn sanitized(mut self) -> Self {
        let ms = Duration::from_millis(1);
        self.ack_timeout = self.ack_timeout.max(ms);
        self.connect_timeout = self.connect_timeout.max(ms);
        self.max_send_wr = self.max_send_wr.max(1);
        self.max_recv_wr = self.max_recv_wr.max(1);
        self
    }

    /// The engine's share of the settings.
    fn settings(&self) -> engine::Settings {
        engine::Settings {
            ack_timeout: self.ack_timeout,
            rnr_timeout: self.rnr_timeout,
            ack_delay: self.ack_delay,
            max_send_wr: self.max_send_wr,
            max_recv_wr: self.max_recv_wr,
        }
    }
}

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
