//! The software transport: reliable-connected (RC) queue-pair semantics over TCP.
//!
//! Each endpoint owns one TCP connection (TCP_NODELAY) and two engine threads:
//!
//! * the **receiver** (`nic`, with the receive engine in `rx`) acts like the NIC of the responder: it validates every frame,
//!   checks rkey and bounds against the registered regions *before* placing a byte, and places
//!   payloads straight into registered memory (read from the socket into the region, chunk by
//!   chunk, through the buffer's access gate). WRITE WITH IMM and SEND consume posted
//!   receives (waiting up to the RNR timeout for one); refused messages are NAKed and the
//!   connection is torn down. When its input runs dry it sends one cumulative ACK.
//! * the **sender** (`tx`) streams large payloads from registered memory in chunks, sends
//!   what the fast path could not, and runs the acknowledgement timer (a silent peer fails the
//!   outstanding requests with `RetryExceeded`).
//!
//! An application thread that waits for a completion ([`wait`](crate::transport::Endpoint::wait),
//! or [`poll`](crate::transport::Endpoint::poll) with nothing ready) while the receiver thread
//! is idle takes over the receive engine and reads the socket itself (`inline`), so that a
//! small request/response exchange costs no hand-off between threads on either side: the
//! receiver thread stays parked as long as application threads keep receiving
//! ([`SoftConfig::receive_handover`]), and takes over again for large payloads, missing
//! receives, teardown, and whenever the application stops waiting.
//!
//! Small frames (up to [`SoftConfig::inline_size`]) go out directly from the posting thread
//! when nobody else is transmitting, header and payload in one non-blocking system call, so a
//! small RPC costs no thread hand-off on the sending side. Send completions are produced when
//! the peer's (coalesced) ACK arrives, in posting order. The wire format is in `frame`.
//!
//! Every posted work request completes exactly once; teardown (error, disconnect, peer loss)
//! flushes what is outstanding with [`WcStatus::WrFlush`](crate::transport::WcStatus) and
//! reports [`ConnectionEvent::Disconnected`](crate::transport::ConnectionEvent).

mod endpoint;
mod frame;
mod inline;
mod listener;
mod nic;
mod qp;
mod rx;
mod tx;

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
    /// Largest piece of registered memory accessed at once (one socket read or write).
    /// Default 256 KiB; at least 4 KiB is used.
    pub chunk_size: usize,
    /// Frames up to this size (24-byte header plus payload) are written by the posting thread
    /// itself when the socket is idle. Default 64 KiB.
    pub inline_size: usize,
    /// Most outstanding send-queue work requests. Default 1025.
    pub max_send_wr: usize,
    /// Most outstanding receives. Default 1025.
    pub max_recv_wr: usize,
    /// How long a responder whose input ran dry holds back a due ACK, so that a reply the
    /// application posts meanwhile carries it (zero: acknowledge at once). Default 200 µs.
    pub ack_delay: Duration,
    /// How long [`wait`](crate::transport::Endpoint::wait) spins before sleeping when the
    /// receiver thread is busy receiving (otherwise the waiting thread receives itself).
    /// Default 0.
    pub wait_spin: Duration,
    /// How long the receiver thread leaves the socket to application threads after one that
    /// received for itself (in `wait` or `poll`) returned. Within it, a steady exchange of
    /// requests and responses wakes no engine thread at all; after it, the receiver thread
    /// places data and acknowledges without the application again. Default 2 ms.
    pub receive_handover: Duration,
    /// Longest time one socket operation may hold a buffer's access gate (so that
    /// [`Buffer::lock`](crate::memory::Buffer::lock) never waits longer). Default 10 ms; at
    /// least 1 ms is used.
    pub nic_access_timeout: Duration,
}

impl Default for SoftConfig {
    fn default() -> Self {
        Self {
            ack_timeout: Duration::from_secs(4),
            rnr_timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(10),
            chunk_size: 256 * 1024,
            inline_size: 64 * 1024,
            max_send_wr: 1025,
            max_recv_wr: 1025,
            ack_delay: Duration::from_micros(200),
            wait_spin: Duration::ZERO,
            receive_handover: Duration::from_millis(2),
            nic_access_timeout: Duration::from_millis(10),
        }
    }
}

impl SoftConfig {
    /// The configuration with out-of-range values raised to their minimum.
    fn sanitized(mut self) -> Self {
        let ms = Duration::from_millis(1);
        self.ack_timeout = self.ack_timeout.max(ms);
        self.connect_timeout = self.connect_timeout.max(ms);
        self.chunk_size = self.chunk_size.max(4096);
        self.nic_access_timeout = self.nic_access_timeout.max(ms);
        self.max_send_wr = self.max_send_wr.max(1);
        self.max_recv_wr = self.max_recv_wr.max(1);
        self
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
