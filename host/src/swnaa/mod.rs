//! The software NAA: a server that behaves like the FPGA NAA (spec §5), for testing and
//! development without hardware.
//!
//! A master thread accepts connections; each connection is served by its own worker thread
//! (MRSP, then any number of RPCs); kernels are chosen by function code from a
//! [`KernelRegistry`]. Unlike the C software NAA it answers unknown function codes with
//! SOCKET_UNAVAIL, enforces a kernel timeout (KERNEL_TIMEOUT), survives a client
//! disconnecting at any phase, and rejects connections over its limit with a clear reason.
//!
//! **Kernel timeout.** Kernels run on their connection's worker thread, on the region memory
//! itself (no copy, no thread hand-off per RPC). A thread cannot be stopped from outside, and
//! while a kernel runs its regions are locked: the transport would refuse (NAK) any RDMA
//! WRITE into them, which ends the connection. So the software NAA answers an RPC whose kernel
//! overran [`SoftNaaConfig::kernel_timeout`] with KERNEL_TIMEOUT *when the kernel returns*
//! (its outputs are not written back): the client cannot start its next RPC while the
//! runaway kernel still holds the regions, and the connection survives. Kernels that may run
//! long check [`KernelContext::timed_out`] and return early. A kernel that never returns
//! leaves the client to its own RPC deadline, or to [`Naa::cancel`](crate::Naa::cancel): the
//! client disconnects, and the worker, still inside the kernel, finds the connection gone
//! when the kernel returns, drops the results and ends (freeing its connection slot; a kernel
//! that never returns keeps its thread and its slot).
//!
//! **Hostile and hogging peers.** Every resource a client can make the NAA hold is bounded:
//!
//! * *Connection slots* ([`SoftNaaConfig::max_connections`]): when all are taken, the
//!   connection idle the longest between RPCs gives its slot to the newcomer if it has been
//!   idle for [`SoftNaaConfig::evict_idle_after`] (default 30 s); it is disconnected cleanly
//!   and its client's next call fails with a disconnect error. Otherwise the newcomer is
//!   rejected with [`OVERLOAD_REASON`]. A connection that keeps running RPCs is never
//!   evicted; the MRSP, kernels and write-backs have their own deadlines; an optional
//!   [`SoftNaaConfig::idle_timeout`] drops idle connections even when nobody waits.
//! * *Memory*: each region 1 byte ..= 1 GiB, at most
//!   [`SoftNaaConfig::max_bytes_per_connection`] per connection, and at most
//!   [`SoftNaaConfig::memory_budget`] for all connections together (default: half of the
//!   physical memory). The whole request is reserved from the budget before its first region
//!   is allocated; a request that does not fit is refused with MRSP error 0x01.
//! * *Handshakes* (software transport): see [`crate::transport::soft::SoftListener`] (at most
//!   [`MAX_PENDING_HANDSHAKES`](crate::transport::soft::MAX_PENDING_HANDSHAKES), running out of
//!   descriptors pauses `accept` without stopping the rest).
//!
//! **Refused MRSP requests** get an MRSP Error message with a code (spec §2.7 defines three;
//! the NAA's log names the precise cause) before the connection is closed:
//!
//! | request | code |
//! |---|---|
//! | more records than [`SoftNaaConfig::max_regions`] (or than 32) | 0x03 too many regions |
//! | a region over 1 GiB; more than the connection's or the NAA's memory budget; allocation failed | 0x01 not enough memory |
//! | count 0; only internal regions; a zero-size region; unknown flag bits (e.g. 0xFF); an internal region with an address or rkey; a truncated message; type 0x00, 0x02, 0x03 or unknown | 0x02 invalid address (the request is invalid) |
//!
//! ```no_run
//! use naaice::swnaa::{KernelRegistry, SoftNaa, SoftNaaConfig};
//! use naaice::transport::soft::SoftTransport;
//! use naaice_core::{FunctionCode, ReturnCode};
//! # fn main() -> naaice::Result<()> {
//! let mut kernels = KernelRegistry::builtin();
//! kernels.register(FunctionCode::new(10).unwrap(), |ctx: &mut naaice::swnaa::KernelContext<'_, '_>| {
//!     if let Some(p) = ctx.param(0) { p.reverse(); }
//!     ReturnCode::SUCCESS
//! });
//! let naa = SoftNaa::bind(SoftTransport::default(), "127.0.0.1:0".parse().unwrap(),
//!                         SoftNaaConfig::default(), kernels)?;
//! println!("listening on {}", naa.local_addr());
//! let handle = naa.spawn()?;
//! // ... clients connect ...
//! handle.shutdown();
//! # Ok(()) }
//! ```

mod allow;
mod budget;
// C kernels are called through a function pointer (FFI).
#[allow(unsafe_code)]
mod c_kernel;
mod kernel;
pub mod local;
mod metrics;
mod metrics_endpoint;
pub mod plugin;
mod pool;
mod region_cache;
mod slots;
mod switch;
mod worker;

pub use allow::{AddressPrefix, ParsePrefixError};
pub use budget::default_memory_budget;
pub use c_kernel::{CKernel, CKernelCall, CKernelFn, CKernelRegion};
pub use kernel::{
    KERNEL_FAILED, Kernel, KernelContext, KernelRegion, KernelRegistry, parse_catalog,
};
pub use metrics::METRIC_NAMES;
pub use metrics_endpoint::METRICS_PATH;
pub use switch::KernelSwitch;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use naaice_core::{Placement, ServerConfig};

use budget::MemoryBudget;
use metrics::NaaMetrics;
use metrics_endpoint::MetricsEndpoint;
use pool::Pool;
use slots::{Activity, Admission, Slots};

use crate::error::{Error, Result};
use crate::throttle::LogThrottle;
use crate::transport::waiting::WaitPolicy;
use crate::transport::{Incoming, Listener, Transport};

/// Settings of a software NAA.
#[derive(Debug, Clone)]
pub struct SoftNaaConfig {
    /// Most concurrent connections; more are rejected. Default: the number of cores.
    pub max_connections: usize,
    /// How long a kernel may run: an RPC whose kernel returns later is answered with
    /// KERNEL_TIMEOUT (when the kernel returns; see the module documentation).
    pub kernel_timeout: Duration,
    /// Deadline for the MRSP after a connection request.
    pub mrsp_timeout: Duration,
    /// Deadline for the NAA's own SENDs and WRITEs to complete.
    pub completion_timeout: Duration,
    /// Idle time between RPCs after which a connection is dropped (`None`: never).
    pub idle_timeout: Option<Duration>,
    /// When every slot is taken, a new client takes the slot of the connection idle the
    /// longest between RPCs, if that one has been idle at least this long (`None`: never;
    /// the newcomer is rejected). Default 30 s. See the module documentation.
    pub evict_idle_after: Option<Duration>,
    /// Most regions per connection (≤ 32).
    pub max_regions: u8,
    /// Most bytes of region memory per connection (each region at most 1 GiB).
    pub max_bytes_per_connection: u64,
    /// Most bytes of region memory of all connections together; an MRSP request that does
    /// not fit is refused with 0x01 (not enough memory) before anything is allocated.
    /// Default: half of the physical memory ([`default_memory_budget`]).
    pub memory_budget: u64,
    /// Most bytes of ended connections' region memory kept for the next connections
    /// (0: none). A request for a region of exactly a kept block's size gets that block,
    /// zeroed, instead of fresh memory, whose page faults and registration dominate the
    /// set-up of a connection with large regions. Only regions of at least 64 KiB are kept,
    /// and kept memory yields to reservations: together they stay within
    /// [`SoftNaaConfig::memory_budget`]. Default [`DEFAULT_REGION_CACHE`].
    pub region_cache: u64,
    /// The address prefixes clients may connect from (empty, the default: any). A client
    /// from elsewhere is rejected at connect with [`ACCESS_DENIED_REASON`] and a log line.
    pub allow: Vec<AddressPrefix>,
    /// Where to serve the NAA's metrics over HTTP (`GET /metrics`, the Prometheus text
    /// exposition format; port 0 picks a free port); `None`, the default: nowhere, and nothing
    /// is counted. [`SoftNaaConfig::allow`] does not apply to it: bind it to an address only
    /// the monitoring network reaches. The metrics are listed in [`METRIC_NAMES`].
    pub metrics: Option<SocketAddr>,
    /// How the worker of each connection waits for its client: how long it spins before it
    /// sleeps ([`WaitPolicy`]; `--wait` of `naaice-swnaa`, `NAAICE_WAIT` for the C and Python
    /// servers). Default adaptive.
    pub wait: WaitPolicy,
}

impl Default for SoftNaaConfig {
    fn default() -> Self {
        Self {
            max_connections: std::thread::available_parallelism().map_or(1, usize::from),
            kernel_timeout: Duration::from_secs(10),
            mrsp_timeout: Duration::from_secs(10),
            completion_timeout: Duration::from_secs(10),
            idle_timeout: None,
            evict_idle_after: Some(Duration::from_secs(30)),
            max_regions: naaice_core::config::MAX_REGIONS as u8,
            max_bytes_per_connection: 4 << 30,
            memory_budget: default_memory_budget(),
            region_cache: DEFAULT_REGION_CACHE,
            allow: Vec::new(),
            metrics: None,
            wait: WaitPolicy::default(),
        }
    }
}

/// Default of [`SoftNaaConfig::region_cache`]: 256 MiB.
pub const DEFAULT_REGION_CACHE: u64 = 256 << 20;

/// Start of the reason sent to a client rejected because all connection slots are taken;
/// the limit and how to raise it follow (`NAA overloaded: connection limit reached (8; raise
/// with --max-connections / SoftNaaConfig::max_connections)`).
pub const OVERLOAD_REASON: &str = "NAA overloaded: connection limit reached";

/// The reason sent to a client rejected because all `max` connection slots are taken: short
/// enough for a verbs reject's private data (148 bytes).
fn overload_reason(max: usize) -> String {
    format!(
        "{OVERLOAD_REASON} ({max}; raise with --max-connections / SoftNaaConfig::max_connections)"
    )
}

/// How long the master logs one refusal line of a kind at most (with the count it stands
/// for; see [`Refusals`]).
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(5);

/// The end of a throttled line's message: where the refusals after it are reported.
const LATER: &str = "those in the next 5 s are summed up in one line";

/// The master's throttled log lines: failed accepts and refused clients, one line per kind
/// and [`REFUSAL_LOG_INTERVAL`] at most. Every refusal is counted in a line: those within a
/// line's window in a summary line when the window ends, and the rest when the NAA stops.
struct Refusals {
    listen_errors: LogThrottle,
    rejections: LogThrottle,
    denials: LogThrottle,
    max_connections: usize,
    allow: String,
}

impl Refusals {
    fn new(max_connections: usize, allow: &[AddressPrefix]) -> Self {
        Self {
            listen_errors: LogThrottle::new(REFUSAL_LOG_INTERVAL),
            rejections: LogThrottle::new(REFUSAL_LOG_INTERVAL),
            denials: LogThrottle::new(REFUSAL_LOG_INTERVAL),
            max_connections,
            allow: allow::describe(allow),
        }
    }

    /// Logs a summary line for each kind whose window ended by `now` with refusals not yet
    /// logged.
    fn summarize(&mut self, now: Instant) {
        let counts = [
            self.listen_errors.expired(now),
            self.rejections.expired(now),
            self.denials.expired(now),
        ];
        self.log(counts);
    }

    /// Logs a summary line for each kind with refusals not yet logged (when the NAA stops).
    fn flush(&mut self) {
        let counts = [
            self.listen_errors.flush(),
            self.rejections.flush(),
            self.denials.flush(),
        ];
        self.log(counts);
    }

    fn log(&self, [listen_errors, rejections, denials]: [Option<u64>; 3]) {
        if let Some(count) = listen_errors {
            tracing::warn!(
                count,
                "accept failed (summary: count = failures not logged yet)"
            );
        }
        if let Some(count) = rejections {
            tracing::warn!(
                max_connections = self.max_connections,
                count,
                "connection limit reached; rejected (the limit is {} connections; summary: \
                 count = rejections not logged yet)",
                self.max_connections
            );
        }
        if let Some(count) = denials {
            tracing::warn!(
                allow = %self.allow,
                count,
                "client address not allowed; rejected (summary: count = rejections not logged \
                 yet)"
            );
        }
    }
}

/// Start of the reason sent to a client whose address the allow list
/// ([`SoftNaaConfig::allow`]) does not contain; the client's address and the list follow.
pub const ACCESS_DENIED_REASON: &str = "NAA access denied";

/// A software NAA bound to its listening address.
pub struct SoftNaa<T: Transport> {
    listener: T::Listener,
    config: SoftNaaConfig,
    kernels: KernelSwitch,
    budget: Arc<MemoryBudget>,
    /// The counters and their endpoint, when [`SoftNaaConfig::metrics`] asks for them.
    metrics: Option<(Arc<NaaMetrics>, MetricsEndpoint)>,
    _transport: T,
}

impl<T: Transport> std::fmt::Debug for SoftNaa<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SoftNaa")
            .field("addr", &self.listener.local_addr())
            .field("config", &self.config)
            .finish()
    }
}

impl<T: Transport + 'static> SoftNaa<T>
where
    T::Listener: 'static,
    T::Endpoint: 'static,
{
    /// Listens on `addr` (port 0 picks a free port).
    pub fn bind(
        transport: T,
        addr: SocketAddr,
        config: SoftNaaConfig,
        kernels: KernelRegistry,
    ) -> Result<Self> {
        if config.max_connections == 0 {
            return Err(Error::InvalidArgument(
                "max_connections must be at least 1".into(),
            ));
        }
        let budget = MemoryBudget::new(config.memory_budget, config.region_cache);
        let kernels = KernelSwitch::new(kernels);
        let metrics = match config.metrics {
            Some(at) => {
                let counters = NaaMetrics::new(kernels.clone(), Arc::clone(&budget));
                let endpoint = MetricsEndpoint::start(at, Arc::clone(&counters))?;
                Some((counters, endpoint))
            }
            None => None,
        };
        let listener = transport.listen(addr)?;
        Ok(Self {
            listener,
            config,
            kernels,
            budget,
            metrics,
            _transport: transport,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr()
    }

    /// The bound address of the metrics endpoint (`None`: [`SoftNaaConfig::metrics`] is
    /// off).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().map(|(_, e)| e.local_addr())
    }

    /// The metrics now, in the Prometheus text exposition format, as the endpoint serves
    /// them (`None`: [`SoftNaaConfig::metrics`] is off).
    pub fn metrics_text(&self) -> Option<String> {
        self.metrics.as_ref().map(|(m, _)| m.render())
    }

    /// The kernels it serves, to replace them while it runs (reload); see [`KernelSwitch`].
    pub fn kernel_switch(&self) -> KernelSwitch {
        self.kernels.clone()
    }

    /// The kernels it serves now.
    pub fn kernels(&self) -> Arc<KernelRegistry> {
        self.kernels.current()
    }

    fn server_config(&self) -> ServerConfig {
        // Each worker sets the kernels served when it starts (and after every reload).
        let mut c = ServerConfig::new(self.kernels.current().codes());
        c.max_regions = self.config.max_regions;
        c.max_total_bytes = self.config.max_bytes_per_connection;
        c.placement = Placement::Allocate;
        c.mrsp_timeout = self.config.mrsp_timeout;
        c.kernel_timeout = self.config.kernel_timeout;
        c.completion_timeout = self.config.completion_timeout;
        c.idle_timeout = self.config.idle_timeout;
        c
    }

    /// Serves until `shutdown` is set (the master loop; checks the flag every 100 ms).
    /// Workers are told to stop and joined before it returns.
    pub fn run(mut self, shutdown: &Arc<AtomicBool>) -> Result<()> {
        let server_config = self.server_config();
        let budget = Arc::clone(&self.budget);
        let counters = self.metrics.as_ref().map(|(m, _)| Arc::clone(m));
        let mut slots = Slots::new(self.config.max_connections, self.config.evict_idle_after);
        // Workers park for the next connection (up to one per slot): see `pool`.
        let mut workers =
            Pool::new("naaice-worker", self.config.max_connections).map_err(|source| {
                Error::Transport(crate::transport::TransportError::Io {
                    call: "spawn",
                    source,
                })
            })?;
        let mut refusals = Refusals::new(self.config.max_connections, &self.config.allow);
        tracing::info!(
            addr = %self.local_addr(),
            max = self.config.max_connections,
            memory_budget = %crate::units::size(self.config.memory_budget),
            region_cache = %crate::units::size(self.config.region_cache),
            allow = %if self.config.allow.is_empty() { "any".to_owned() } else { allow::describe(&self.config.allow) },
            "software NAA listening"
        );
        while !shutdown.load(Ordering::Relaxed) {
            slots.reap();
            refusals.summarize(Instant::now());
            let deadline = Instant::now() + Duration::from_millis(100);
            let incoming = match self.listener.next_request(deadline) {
                Ok(Some(i)) => i,
                Ok(None) => continue,
                Err(e) => {
                    if let Some(count) = refusals.listen_errors.hit(Instant::now()) {
                        tracing::warn!(
                            error = %e,
                            count,
                            "accept failed (count: failures this line stands for; {LATER})"
                        );
                    }
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
            };
            let peer = incoming.peer_addr();
            if !allow::allowed(&self.config.allow, peer.map(|p| p.ip())) {
                let allowed = allow::describe(&self.config.allow);
                let who =
                    peer.map_or_else(|| "an unknown address".to_owned(), |p| p.ip().to_string());
                if let Some(count) = refusals.denials.hit(Instant::now()) {
                    tracing::warn!(
                        ?peer,
                        allow = %allowed,
                        count,
                        "client address not allowed; rejecting (count: rejections this line \
                         stands for; {LATER})"
                    );
                }
                if let Some(m) = &counters {
                    m.rejected_allow();
                }
                incoming.reject(&format!(
                    "{ACCESS_DENIED_REASON}: {who} is not in the allowed prefixes ({allowed})"
                ));
                continue;
            }
            // `naaice-info --probe` asks what is served: answered, no slot taken.
            if incoming.wants_catalog() {
                tracing::debug!(?peer, "catalog request answered");
                incoming.answer_catalog(&self.kernels.current().catalog());
                continue;
            }
            match slots.admit(Instant::now()) {
                Admission::Free => {}
                Admission::Evicted { idle } => {
                    if let Some(m) = &counters {
                        m.evicted();
                    }
                    tracing::info!(
                        ?peer,
                        ?idle,
                        "all slots taken: the connection idle the longest gives way"
                    );
                }
                Admission::Full => {
                    if let Some(m) = &counters {
                        m.rejected_limit();
                    }
                    if let Some(count) = refusals.rejections.hit(Instant::now()) {
                        tracing::warn!(
                            ?peer,
                            max_connections = self.config.max_connections,
                            count,
                            "connection limit reached; rejecting (the limit is {} connections: \
                             raise it with --max-connections or \
                             SoftNaaConfig::max_connections; count: rejections this line \
                             stands for; {LATER})",
                            self.config.max_connections
                        );
                    }
                    incoming.reject(&overload_reason(self.config.max_connections));
                    continue;
                }
            }
            let activity = Arc::new(Activity::default());
            let connection = worker::WorkerContext {
                config: server_config,
                kernels: self.kernels.clone(),
                kernel_timeout: self.config.kernel_timeout,
                budget: Arc::clone(&budget),
                metrics: counters.as_ref().map(|m| m.register(Arc::clone(&activity))),
                activity: Arc::clone(&activity),
                wait: self.config.wait,
            };
            let stop = Arc::clone(shutdown);
            match workers.run(move || worker::serve(incoming, &connection, &stop)) {
                Ok(w) => slots.insert(w, activity),
                Err(e) => tracing::error!(error = %e, "cannot start a worker thread"),
            }
        }
        refusals.flush();
        slots.wake_all();
        workers.join_all();
        tracing::info!("software NAA stopped");
        Ok(())
    }

    /// Runs the NAA on a background thread; stop it with [`SoftNaaHandle::shutdown`] (or by
    /// dropping the handle).
    pub fn spawn(self) -> Result<SoftNaaHandle> {
        let addr = self.local_addr();
        let metrics_addr = self.metrics_addr();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("naaice-master".into())
            .spawn(move || {
                if let Err(e) = self.run(&flag) {
                    tracing::error!(error = %e, "software NAA failed");
                }
            })
            .map_err(|e| {
                Error::Transport(crate::transport::TransportError::Io {
                    call: "spawn",
                    source: e,
                })
            })?;
        Ok(SoftNaaHandle {
            addr,
            metrics_addr,
            stop,
            thread: Some(thread),
        })
    }
}

impl SoftNaa<crate::transport::AnyTransport> {
    /// Each transport this NAA serves with its address, or why it does not (a server on
    /// `auto` serves verbs only where an RDMA device exists); one banner line each with
    /// [`Served`](crate::transport::Served)'s `Display`.
    pub fn served(&self) -> Vec<crate::transport::Served> {
        self.listener.served()
    }
}

/// A software NAA running in the background.
#[derive(Debug)]
pub struct SoftNaaHandle {
    addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SoftNaaHandle {
    /// The address clients connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The bound address of the metrics endpoint (`None`: [`SoftNaaConfig::metrics`] is
    /// off).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// Stops accepting, disconnects every client and waits for all threads.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for SoftNaaHandle {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}
