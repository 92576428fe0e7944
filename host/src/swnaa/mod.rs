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

mod kernel;
mod worker;

pub use kernel::{KERNEL_FAILED, Kernel, KernelContext, KernelRegion, KernelRegistry};

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use naaice_core::{Placement, ServerConfig};

use crate::error::{Error, Result};
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
    /// Most regions per connection (≤ 32).
    pub max_regions: u8,
    /// Most bytes of region memory per connection.
    pub max_bytes_per_connection: u64,
}

impl Default for SoftNaaConfig {
    fn default() -> Self {
        Self {
            max_connections: std::thread::available_parallelism().map_or(1, usize::from),
            kernel_timeout: Duration::from_secs(10),
            mrsp_timeout: Duration::from_secs(10),
            completion_timeout: Duration::from_secs(10),
            idle_timeout: None,
            max_regions: naaice_core::config::MAX_REGIONS as u8,
            max_bytes_per_connection: 4 << 30,
        }
    }
}

/// Reason sent to a client rejected because all connection slots are taken.
pub const OVERLOAD_REASON: &str = "NAA overloaded: connection limit reached";

/// A software NAA bound to its listening address.
pub struct SoftNaa<T: Transport> {
    listener: T::Listener,
    config: SoftNaaConfig,
    kernels: Arc<KernelRegistry>,
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
        let listener = transport.listen(addr)?;
        Ok(Self {
            listener,
            config,
            kernels: Arc::new(kernels),
            _transport: transport,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr()
    }

    fn server_config(&self) -> ServerConfig {
        let mut c = ServerConfig::new(self.kernels.codes());
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
        let active = Arc::new(AtomicUsize::new(0));
        let server_config = self.server_config();
        let mut workers: Vec<JoinHandle<()>> = Vec::new();
        tracing::info!(addr = %self.local_addr(), max = self.config.max_connections, "software NAA listening");
        while !shutdown.load(Ordering::Relaxed) {
            workers.retain(|w| !w.is_finished());
            let deadline = Instant::now() + Duration::from_millis(100);
            let incoming = match self.listener.next_request(deadline) {
                Ok(Some(i)) => i,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
            };
            if active.load(Ordering::Acquire) >= self.config.max_connections {
                tracing::warn!(peer = ?incoming.peer_addr(), "connection limit reached; rejecting");
                incoming.reject(OVERLOAD_REASON);
                continue;
            }
            active.fetch_add(1, Ordering::AcqRel);
            let slot = Slot(Arc::clone(&active));
            let (kernels, stop) = (Arc::clone(&self.kernels), Arc::clone(shutdown));
            let spawned = std::thread::Builder::new()
                .name("naaice-worker".into())
                .spawn(move || {
                    let _slot = slot;
                    worker::serve(incoming, server_config, &kernels, &stop);
                });
            match spawned {
                Ok(w) => workers.push(w),
                Err(e) => tracing::error!(error = %e, "cannot start a worker thread"),
            }
        }
        for w in workers {
            let _ = w.join();
        }
        tracing::info!("software NAA stopped");
        Ok(())
    }

    /// Runs the NAA on a background thread; stop it with [`SoftNaaHandle::shutdown`] (or by
    /// dropping the handle).
    pub fn spawn(self) -> Result<SoftNaaHandle> {
        let addr = self.local_addr();
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
            stop,
            thread: Some(thread),
        })
    }
}

/// Returns a connection slot when the worker ends, however it ends.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A software NAA running in the background.
#[derive(Debug)]
pub struct SoftNaaHandle {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SoftNaaHandle {
    /// The address clients connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
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
