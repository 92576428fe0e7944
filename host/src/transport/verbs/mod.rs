//! The verbs transport: real RDMA (RoCEv2, InfiniBand, Soft-RoCE) through librdmacm and
//! libibverbs (`rdma-mummy-sys`, which loads rdma-core at run time), with the parameters the
//! FPGA NAA and the C peers expect (spec §1).
//!
//! * One event channel, rdma_cm id (`RDMA_PS_TCP`), protection domain, completion channel,
//!   completion queue (send and receive) and RC queue pair (72 send and 16 receive work
//!   requests of one SGE, inline data tried at 512, 256, 128, 64, 0 bytes) per connection;
//!   `initiator_depth = responder_resources = 1`, `retry_count = 7`, `rnr_retry_count = 6`,
//!   no private data (spec §1.1, whose C reference asks for 1025 requests of 32 SGEs: queue
//!   depths are local, see `SEND_WR`).
//! * The fast path: a list of sends goes out with one `ibv_post_send` (one doorbell); payloads
//!   up to the negotiated `max_inline_data` are sent inline; only the last request of a list
//!   is signaled (`sq_sig_all = 0`, unlike the C reference; local only, nothing changes on the
//!   wire), and the completions of the others are made up from it (`outstanding`), so every
//!   posted request still completes exactly once and the send queue never overflows. Posting
//!   and polling allocate nothing and make no system call of their own (Soft-RoCE's provider
//!   rings its doorbell with one).
//! * Memory is registered with `IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE` only; a
//!   [`VerbsRegion`] keeps its [`Buffer`](crate::memory::Buffer) alive while registered.
//! * The CQ is armed solicited-only at creation (spec §1.1, §1.5); waiting locally re-arms it
//!   for all completions and **polls the CQ again after every arming**, so a completion that
//!   arrived in between is never missed (the C server's lost wake-up, defect D-15).
//! * [`Endpoint::wait`](super::Endpoint::wait) polls the CQ in a loop for as long as
//!   the caller says (the connection's waiting decision, learned from its recent waits by
//!   default, see [`crate::transport::waiting`]), then sleeps in `ppoll` on the completion channel and the rdma_cm
//!   event channel until its deadline; [`Endpoint::poll`](super::Endpoint::poll) never
//!   blocks. No signals, no alarms. While polling, the rdma_cm channel is read at most once a
//!   millisecond, timed by the coarse clock (a system call each time).
//! * Each accepted connection gets its own event channel (`rdma_migrate_id`), so a
//!   disconnect in any phase reaches exactly its endpoint (defect D-31): librdmacm moves the QP
//!   to the error state, outstanding work requests complete with `WrFlush`, and a
//!   [`ConnectionEvent::Disconnected`](super::ConnectionEvent) is reported.
//! * A machine without RDMA devices, or without rdma-core (`libibverbs.so.1`,
//!   `librdmacm.so.1`), gets [`TransportError::Unavailable`] naming the problem.
//!
//! **Memory model.** A NIC writes registered memory without asking the application: the
//! [`Buffer`](crate::memory::Buffer) access gate cannot stop it. The protocol layers only
//! hand out buffer guards while no RPC is in flight (the peer has no reason to write then),
//! and a region is deregistered before its buffer can be freed; a peer that writes with a
//! valid rkey at any other time changes the bytes under the application, as with any RDMA
//! stack.
//!
//! All `unsafe` code of the transport is in this module; every block carries its reason.

mod cm;
mod cq;
mod endpoint;
mod epoll;
mod event_check;
mod listener;
mod mr;
mod ops;
mod outstanding;
mod pd;
mod qp;
mod rdma_core;
mod sockaddr;

/// The C bindings of libibverbs and librdmacm (rdma-mummy-sys, loaded at run time), under one
/// name for the modules of this transport.
use rdma_mummy_sys as sys;

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

pub use endpoint::VerbsEndpoint;
pub use listener::{VerbsIncoming, VerbsListener};
pub use mr::VerbsRegion;

use super::{Result, Transport, TransportError};

/// Settings of the verbs transport.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerbsConfig {
    /// Timeout handed to `rdma_resolve_addr` and `rdma_resolve_route` (also bounded by the
    /// connect deadline). Default 2 s.
    pub resolve_timeout: Duration,
}

impl Default for VerbsConfig {
    fn default() -> Self {
        Self {
            resolve_timeout: Duration::from_secs(2),
        }
    }
}

/// The verbs transport (see the [module](self) documentation).
#[derive(Clone, Debug, Default)]
pub struct VerbsTransport {
    config: VerbsConfig,
}

impl VerbsTransport {
    /// A transport with `config`.
    pub fn new(config: VerbsConfig) -> Self {
        Self { config }
    }

    /// The configuration in use.
    pub fn config(&self) -> &VerbsConfig {
        &self.config
    }
}

impl Transport for VerbsTransport {
    type Endpoint = VerbsEndpoint;
    type Listener = VerbsListener;

    fn kind(&self) -> Option<super::TransportKind> {
        Some(super::TransportKind::Verbs)
    }

    fn connect(
        &self,
        remote: SocketAddr,
        local: Option<SocketAddr>,
        deadline: Instant,
    ) -> Result<VerbsEndpoint> {
        rdma_core::check()?;
        listener::connect(&self.config, remote, local, deadline)
    }

    fn listen(&self, addr: SocketAddr) -> Result<VerbsListener> {
        rdma_core::check()?;
        VerbsListener::bind(addr)
    }

    fn connect_local(&self, _remote: SocketAddr, _deadline: Instant) -> Result<VerbsEndpoint> {
        Err(TransportError::Unavailable(
            "the in-process NAA of local mode (NAA_SPEC local:...) is reached with the \
             software transport: use SoftTransport or AnyTransport"
                .into(),
        ))
    }
}

/// Ok when rdma-core's libraries (`libibverbs.so.1`, `librdmacm.so.1`) are loaded;
/// [`TransportError::Unavailable`] naming the missing one and its package otherwise.
pub fn rdma_core_check() -> Result<()> {
    rdma_core::check()
}

/// The names of the RDMA devices of this machine (`ibv_get_device_list`). Empty when there
/// are none, or when rdma-core is not installed.
pub fn device_names() -> Result<Vec<String>> {
    if rdma_core::check().is_err() {
        return Ok(Vec::new());
    }
    pd::device_names()
}

/// Most outstanding send work requests per queue pair: the writes of one RPC (at most one per
/// region) and the MRSP message, with room to spare; `Outstanding` refuses a list that does
/// not fit.
///
/// The C reference asks for 1025 send and receive requests of 32 SGEs each (spec §1.1,
/// `RX_DEPTH`). Queue depths are local (nothing on the wire depends on them), and that size
/// costs: on Soft-RoCE the queues of 1025 requests of 32 SGEs (or 512 inline bytes) are
/// megabytes of kernel memory, allocated, zeroed and mapped on connect and unmapped on close
/// (measured: queue pair creation was 12 % of all samples of a connection-churn profile, 1.9 %
/// with these depths; connecting took 13–22 ms, now 5.4–11 ms).
const SEND_WR: u32 = 2 * naaice_core::config::MAX_REGIONS as u32 + 8;
/// Most outstanding receive work requests per queue pair: a connection has at most the MRSP
/// receive and two data receives posted.
const RECV_WR: u32 = 16;
/// Completion queue entries: one per request that can be outstanding.
const CQ_ENTRIES: i32 = (SEND_WR + RECV_WR + 1) as i32;
/// Scatter/gather entries per work request (this transport posts at most one).
const MAX_SGE: u32 = 1;
/// Inline sizes tried in order when creating a queue pair.
const INLINE_SIZES: [u32; 5] = [512, 256, 128, 64, 0];
/// `rdma_listen` backlog (spec §1.3).
const BACKLOG: i32 = 10;
/// Longest reject reason sent (IB CM REJ private data).
const MAX_REJECT_DATA: usize = 148;

/// The end of every "verbs cannot work here" message: the way to a software NAA without RDMA.
pub(crate) const SOFTWARE_HINT: &str = "a software NAA (naaice-swnaa) is reached without RDMA \
    over the software transport (NAAICE_TRANSPORT=auto, the default, or soft)";

/// The error of a failed call that set `errno`; device-missing errors become
/// [`TransportError::Unavailable`].
fn os_error(call: &'static str) -> TransportError {
    errno_error(call, io::Error::last_os_error())
}

/// The error of a failed call that returned an error number.
fn errno_error(call: &'static str, source: io::Error) -> TransportError {
    match source.raw_os_error() {
        Some(libc::ENODEV) | Some(libc::ENOENT) | Some(libc::ENXIO) => {
            TransportError::Unavailable(format!(
                "no usable RDMA device: {call} failed: {source} (load an RDMA driver such as \
                 rdma_rxe, or run on a host with an RDMA NIC; /dev/infiniband must exist); \
                 {SOFTWARE_HINT}"
            ))
        }
        Some(libc::EOPNOTSUPP) => TransportError::Unavailable(format!(
            "{call}: operation not supported by the RDMA provider"
        )),
        _ => TransportError::Io { call, source },
    }
}

/// Milliseconds left until `deadline`, at least 1, capped by `cap`.
fn millis_until(deadline: Instant, cap: Duration) -> i32 {
    let left = deadline.saturating_duration_since(Instant::now()).min(cap);
    i32::try_from(left.as_millis()).unwrap_or(i32::MAX).max(1)
}
