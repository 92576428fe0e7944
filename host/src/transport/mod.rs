//! The transport seam: one narrow interface that mirrors a reliable-connected (RC) queue pair.
//!
//! It is shaped after verbs + rdma_cm so that the verbs transport maps onto it one to one
//! (spec §1), and the software transport ([`soft`]) gives the same semantics over TCP:
//!
//! * connection management: [`Transport::connect`], [`Transport::listen`],
//!   [`Listener::next_request`] → [`Incoming::accept`] / [`Incoming::reject`]
//!   (the server posts its first receive on the [`Incoming`] endpoint *before* accepting);
//! * memory registration: [`Endpoint::register`] gives an lkey/rkey pair for a [`Buffer`];
//! * work requests: [`Endpoint::post_recv`], [`Endpoint::post_send`] (SEND, RDMA WRITE and
//!   RDMA WRITE WITH IMMEDIATE, optionally solicited, posted as one list);
//! * completions: [`Endpoint::poll`] (never blocks) and [`Endpoint::wait`] (blocks until a
//!   completion or a connection event is ready, or the deadline passes);
//! * connection events: [`Endpoint::poll_event`];
//! * readiness for one thread waiting on many endpoints: [`Endpoint::arm_ready`] and
//!   [`Endpoint::ready_fd`] (a file descriptor for poll(2) or an async reactor).
//!
//! [`AnyTransport`] is the transport chosen at run time (`"soft".parse()`, `"verbs".parse()`),
//! behind the same traits. [`local`] is local mode's: both ends in one process, joined by
//! memory.
//!
//! Every posted work request produces exactly one [`Completion`] (like `sq_sig_all = 1`),
//! successful or not. When the connection breaks, outstanding work requests complete with
//! [`WcStatus::WrFlush`] and a [`ConnectionEvent::Disconnected`] is reported.

mod any;
mod any_endpoint;
pub mod auto;
mod kind;
pub mod local;
mod regions;
pub mod soft;
#[cfg(feature = "verbs")]
#[allow(unsafe_code)]
pub mod verbs;
pub mod waiting;

use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::Instant;

#[allow(deprecated)]
pub use any::{AnyListener, AnyTransport, AutoListener, AutoTransport};
pub use any_endpoint::{AnyEndpoint, AnyIncoming, AnyRegion};
pub use auto::Served;
pub use kind::{ParseTransportError, TransportChoice, TransportKind};

use crate::memory::Buffer;

/// The default rdma_cm / software-transport port (spec §1.1).
pub const DEFAULT_PORT: u16 = 12345;

/// Errors of the transport layer (setup, posting, waiting).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// An operating-system call failed.
    #[error("{call} failed: {source}")]
    Io {
        /// The call that failed (e.g. "connect", "rdma_create_event_channel").
        call: &'static str,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The peer rejected the connection; carries the peer's reason, if it sent one.
    #[error("connection rejected by the peer: {0}")]
    Rejected(String),
    /// The deadline passed before the operation completed.
    #[error("timed out")]
    TimedOut,
    /// The connection is gone (peer disconnected, or torn down after an error).
    #[error("not connected")]
    NotConnected,
    /// A work request or registration was invalid for local reasons (unknown lkey,
    /// out-of-bounds SGE, too many outstanding work requests, zero-length buffer ...).
    #[error("invalid work request: {0}")]
    InvalidRequest(&'static str),
    /// The peer broke the transport protocol (malformed frame, unknown opcode ...).
    #[error("peer protocol violation: {0}")]
    Protocol(&'static str),
    /// No device or transport of this kind is available on this machine.
    #[error("transport unavailable: {0}")]
    Unavailable(String),
    /// `auto` reached the NAA over no transport: what each said, and what to check.
    #[error("NAA not reached: {0}")]
    NotReached(String),
}

/// Result type of the transport layer.
pub type Result<T, E = TransportError> = std::result::Result<T, E>;

/// A local scatter/gather element: `len` bytes at virtual address `addr` of the region `lkey`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sge {
    /// Virtual address of the first byte (must lie inside the region).
    pub addr: u64,
    /// Length in bytes.
    pub len: u32,
    /// Local key of the registered region.
    pub lkey: u32,
}

/// A remote target of an RDMA WRITE: virtual address and rkey as advertised by the peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteAddr {
    /// Remote virtual address.
    pub addr: u64,
    /// Remote key.
    pub rkey: u32,
}

/// What a send-queue work request does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    /// Two-sided SEND; consumes one receive at the peer.
    Send,
    /// One-sided RDMA WRITE; invisible to the peer's application.
    Write(RemoteAddr),
    /// RDMA WRITE WITH IMMEDIATE: data lands at `remote`, and the 32-bit immediate (host
    /// order here, big-endian on the wire) consumes one receive at the peer.
    WriteWithImm(RemoteAddr, u32),
}

impl SendOp {
    /// An RDMA WRITE to `addr`/`rkey`, WITH IMMEDIATE when `imm` is given.
    pub fn write(addr: u64, rkey: u32, imm: Option<u32>) -> Self {
        let remote = RemoteAddr { addr, rkey };
        match imm {
            Some(imm) => Self::WriteWithImm(remote, imm),
            None => Self::Write(remote),
        }
    }
}

/// A send-queue work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendWr {
    /// Caller's identifier, returned in the completion.
    pub wr_id: u64,
    /// Operation and remote target.
    pub op: SendOp,
    /// Local data (`None` = zero length, `num_sge = 0`).
    pub local: Option<Sge>,
    /// Set the Solicited Event bit (spec §1.5).
    pub solicited: bool,
}

impl SendWr {
    /// A work request that does not set the Solicited Event bit.
    pub fn new(wr_id: u64, op: SendOp, local: Option<Sge>) -> Self {
        Self {
            wr_id,
            op,
            local,
            solicited: false,
        }
    }
}

/// Completion opcode (valid only when the status is [`WcStatus::Success`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WcOpcode {
    /// A SEND finished locally.
    Send,
    /// An RDMA WRITE (with or without immediate) finished locally.
    RdmaWrite,
    /// A receive was consumed by an incoming SEND.
    Recv,
    /// A receive was consumed by an incoming RDMA WRITE WITH IMMEDIATE.
    RecvRdmaWithImm,
}

/// Completion status, after `ibv_wc_status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WcStatus {
    /// Success.
    Success,
    /// Incoming message longer than the posted receive buffer.
    LocalLength,
    /// Local SGE outside its region, or region inaccessible.
    LocalProtection,
    /// Flushed because the connection went to the error state.
    WrFlush,
    /// The peer refused the access (wrong rkey, out of bounds, region inaccessible).
    RemoteAccess,
    /// The peer found the request invalid.
    RemoteInvalidRequest,
    /// The peer had no receive posted and did not post one in time.
    RnrRetryExceeded,
    /// Transport retries exhausted (peer unreachable).
    RetryExceeded,
    /// Any other failure.
    General,
}

impl WcStatus {
    /// The protocol machine's name for this failure
    /// ([`WorkError::Other`](naaice_core::machine::WorkError::Other) for `Success` and
    /// `General`).
    pub fn work_error(self) -> naaice_core::machine::WorkError {
        use naaice_core::machine::WorkError;
        match self {
            Self::LocalLength => WorkError::LocalLength,
            Self::LocalProtection => WorkError::LocalProtection,
            Self::WrFlush => WorkError::Flushed,
            Self::RemoteAccess => WorkError::RemoteAccess,
            Self::RemoteInvalidRequest => WorkError::RemoteInvalidRequest,
            Self::RnrRetryExceeded => WorkError::RnrRetryExceeded,
            Self::RetryExceeded => WorkError::RetryExceeded,
            Self::Success | Self::General => WorkError::Other,
        }
    }
}

/// A work completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The work request's identifier.
    pub wr_id: u64,
    /// Outcome.
    pub status: WcStatus,
    /// What completed (meaningful only on success).
    pub opcode: WcOpcode,
    /// Bytes received (receives only): the incoming SEND's length, or the length of the one
    /// WRITE WITH IMMEDIATE that consumed the receive.
    pub byte_len: u32,
    /// Immediate value in host order (only for [`WcOpcode::RecvRdmaWithImm`]).
    pub imm: Option<u32>,
}

impl Completion {
    /// A placeholder to fill the array handed to [`Endpoint::poll`] (no work request, not a
    /// success).
    pub const BLANK: Self = Self {
        wr_id: 0,
        status: WcStatus::General,
        opcode: WcOpcode::Send,
        byte_len: 0,
        imm: None,
    };
}

/// Connection-level events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnectionEvent {
    /// The connection is established (both sides may post sends).
    Established,
    /// The peer disconnected or the connection broke.
    Disconnected,
}

/// A registered memory region: the keys a [`Buffer`] is known by on one endpoint.
///
/// Dropping it deregisters the memory; the buffer itself lives on as long as anyone holds it.
pub trait MemoryRegion: Send + std::fmt::Debug {
    /// Virtual address of the first byte: by default the buffer's
    /// ([`Buffer::addr`]); a transport that registers memory at an address of its choosing
    /// says which.
    fn addr(&self) -> u64 {
        self.buffer().addr()
    }
    /// Registered length: by default the whole buffer.
    fn len(&self) -> usize {
        self.buffer().len()
    }
    /// True if zero bytes are registered.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Local key.
    fn lkey(&self) -> u32;
    /// Remote key (the peer may RDMA WRITE into the region with it).
    fn rkey(&self) -> u32;
    /// The registered buffer.
    fn buffer(&self) -> &Buffer;
}

/// Ends an endpoint's [`Endpoint::wait`] early, from any thread (see [`Endpoint::waker`]).
///
/// A thread that serves a connection can then sleep until something happens to it, however
/// long, and still notice what other threads decide (stop, give the slot away), instead of
/// waking now and then to look.
#[derive(Clone)]
pub struct Waker(Arc<dyn Fn() + Send + Sync>);

impl Waker {
    /// A waker that calls `wake` (a transport's implementation).
    pub fn new(wake: impl Fn() + Send + Sync + 'static) -> Self {
        Self(Arc::new(wake))
    }

    /// Makes the endpoint's current wait return `Ok(false)` soon (within 50 ms), or its next
    /// wait at once if none is in progress.
    pub fn wake(&self) {
        (self.0)();
    }
}

impl std::fmt::Debug for Waker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Waker")
    }
}

/// Tells from any thread whether an endpoint's connection is over (see
/// [`Endpoint::liveness`]).
#[derive(Clone)]
pub struct Liveness(Arc<dyn Fn() -> bool + Send + Sync>);

impl Liveness {
    /// A probe that calls `over` (a transport's implementation).
    pub fn new(over: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        Self(Arc::new(over))
    }

    /// True once the connection is over (disconnected by either end, or broken). Never
    /// blocks.
    pub fn is_over(&self) -> bool {
        (self.0)()
    }
}

impl std::fmt::Debug for Liveness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Liveness")
    }
}

/// A connected (or about to be accepted) RC endpoint.
pub trait Endpoint: Send {
    /// The region type of this transport.
    type Region: MemoryRegion;

    /// Registers `buffer` for local access and remote write (spec §1.1 access flags).
    fn register(&mut self, buffer: &Buffer) -> Result<Self::Region>;
    /// Posts one receive. `buf = None` posts a zero-length receive (for WRITE WITH IMM).
    fn post_recv(&mut self, wr_id: u64, buf: Option<Sge>) -> Result<()>;
    /// Posts a list of send-queue work requests in order, as one `ibv_post_send`.
    fn post_send(&mut self, wrs: &[SendWr]) -> Result<()>;
    /// Moves ready completions into `out`; returns how many. Never blocks.
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize>;
    /// Returns the next connection event, if any. Never blocks.
    fn poll_event(&mut self) -> Option<ConnectionEvent>;
    /// Waits until a completion or connection event is ready, or `deadline` passes: looks
    /// for completions without sleeping ("spins") until `spin_until`, then sleeps until
    /// `deadline` (`spin_until` at or before now: sleeps at once; at or after `deadline`:
    /// never sleeps). Returns at once if something is already ready. The caller decides how
    /// long to spin (the connection's waiting decision, made by the driver); the transport
    /// carries it out and reports how the wait ended ([`waiting::Woken`]). The endpoint's
    /// [`Waker`] ends it early ([`waiting::Woken::TimedOut`]).
    fn wait(&mut self, spin_until: Instant, deadline: Instant) -> Result<waiting::Woken>;
    /// [`Endpoint::wait`] that sleeps at once: true if something is ready, false once
    /// `deadline` passed.
    fn wait_sleeping(&mut self, deadline: Instant) -> Result<bool> {
        Ok(self.wait(Instant::now(), deadline)?.ready())
    }
    /// Starts an orderly disconnect (DREQ). Outstanding work requests are flushed.
    fn disconnect(&mut self);
    /// The peer's address.
    fn peer_addr(&self) -> Option<SocketAddr>;
    /// The peer's registered buffer that is exactly `peer_addr .. peer_addr + len`, for an
    /// endpoint that may use it as its own memory (an in-process NAA and its client, whose
    /// writes between the region and itself then move nothing); `None` (the default) for a
    /// transport whose peer is elsewhere.
    fn shared_memory(&self, peer_addr: u64, len: usize) -> Option<Buffer> {
        let _ = (peer_addr, len);
        None
    }
    /// A [`Liveness`] probe of this endpoint's connection, for other threads than the one
    /// that drives the endpoint: one that works on [`Endpoint::shared_memory`], or an NAA's
    /// admission, which counts a connection whose peer has left as gone before its worker
    /// has seen the end. The probe knows the end as soon as the peer's side of it has
    /// arrived (the soft transport: the peer closed its socket; verbs: an event after
    /// ESTABLISHED on the connection's channel), read or not. `None` (the default): no
    /// probe.
    fn liveness(&self) -> Option<Liveness> {
        None
    }

    /// Prepares [`Endpoint::ready_fd`] for a wait by another means than [`Endpoint::wait`]
    /// (poll(2) over many endpoints, an async reactor). Returns `Ok(true)` if a completion or
    /// connection event is ready, or the connection is gone: the caller must not sleep but
    /// poll. After `Ok(false)`, the descriptor becomes readable once something is ready
    /// (it may also wake spuriously); the caller polls, and arms again before its next sleep.
    /// Never blocks. The default (a transport without a descriptor) returns `Ok(false)`: the
    /// caller sleeps briefly and polls again.
    fn arm_ready(&mut self) -> Result<bool> {
        Ok(false)
    }
    /// The file descriptor that [`Endpoint::arm_ready`] prepares (level-triggered: readable
    /// until the next `arm_ready`), or `None` if the transport has none. Valid once
    /// `arm_ready` was called.
    fn ready_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
    /// A [`Waker`] that ends this endpoint's waits early from another thread, or `None` if
    /// the transport has none (the default): a caller that must notice other threads'
    /// decisions then waits in slices.
    fn waker(&self) -> Option<Waker> {
        None
    }
}

/// A connection request that has not been accepted yet. It already is an endpoint: the
/// server registers memory and posts its first receive before accepting (spec §1.3).
pub trait Incoming: Send {
    /// The endpoint type.
    type Endpoint: Endpoint;
    /// The endpoint, for registration and posting receives before accepting.
    fn endpoint(&mut self) -> &mut Self::Endpoint;
    /// Accepts the connection; the peer sees it established.
    fn accept(self) -> Result<Self::Endpoint>;
    /// Rejects the connection with a short reason (sent as private data).
    fn reject(self, reason: &str);
    /// The requesting peer's address.
    fn peer_addr(&self) -> Option<SocketAddr>;
    /// True for a request that only asks what the server serves (the software transport's
    /// catalog request, from `naaice-info --probe`): answer it with
    /// [`Incoming::answer_catalog`]. A transport without such requests never has one.
    fn wants_catalog(&self) -> bool {
        false
    }
    /// Answers a catalog request with `text` (one `CODE NAME` line per kernel) and closes
    /// it. The default rejects with the text.
    fn answer_catalog(self, text: &str)
    where
        Self: Sized,
    {
        self.reject(text);
    }
}

/// A listening endpoint.
pub trait Listener: Send {
    /// The incoming-request type.
    type Incoming: Incoming;
    /// Waits for the next connection request until `deadline`; `Ok(None)` on timeout.
    fn next_request(&mut self, deadline: Instant) -> Result<Option<Self::Incoming>>;
    /// The bound local address (with the actual port when 0 was asked for).
    fn local_addr(&self) -> SocketAddr;
}

/// A transport: how endpoints are created.
pub trait Transport: Send + Sync {
    /// Connected endpoint type.
    type Endpoint: Endpoint;
    /// Listener type.
    type Listener: Listener<Incoming: Incoming<Endpoint = Self::Endpoint>>;
    /// Connects to `remote`, optionally from `local` (source address), until `deadline`.
    fn connect(
        &self,
        remote: SocketAddr,
        local: Option<SocketAddr>,
        deadline: Instant,
    ) -> Result<Self::Endpoint>;
    /// Listens on `addr` (port 0 picks a free port).
    fn listen(&self, addr: SocketAddr) -> Result<Self::Listener>;
    /// Connects to an in-process NAA of local mode at `remote` ([`crate::swnaa::local`]).
    /// The default connects like [`Transport::connect`], except to an NAA of the in-process
    /// transport ([`local`]), which only a transport with an in-process endpoint reaches
    /// ([`AnyTransport`]): [`TransportError::Unavailable`] (the caller then takes the
    /// loopback NAA). A transport that cannot reach the loopback NAA either reports
    /// [`TransportError::Unavailable`] too.
    fn connect_local(&self, remote: SocketAddr, deadline: Instant) -> Result<Self::Endpoint> {
        if local::is_listening(remote) {
            return Err(TransportError::Unavailable(format!(
                "{remote} is an NAA of the in-process transport"
            )));
        }
        self.connect(remote, None, deadline)
    }
    /// The one transport this is; `None` when it decides per connection (`auto`).
    fn kind(&self) -> Option<TransportKind> {
        None
    }
    /// Connects to an NAA whose `NAA_SPEC` entry names its transport (`kind`; `None`: the
    /// entry leaves it to this transport). The default connects like [`Transport::connect`]
    /// unless `kind` differs from [`Transport::kind`], which is
    /// [`TransportError::Unavailable`] naming both.
    fn connect_as(
        &self,
        kind: Option<TransportKind>,
        remote: SocketAddr,
        local: Option<SocketAddr>,
        deadline: Instant,
    ) -> Result<Self::Endpoint> {
        match kind {
            Some(k) if Some(k) != self.kind() => Err(TransportError::Unavailable(format!(
                "the NAA_SPEC entry for {remote} names the {k} transport, which this handle's \
                 transport ({}) cannot make",
                self.kind().map_or("another", TransportKind::name)
            ))),
            _ => self.connect(remote, local, deadline),
        }
    }
}
