//! One connection of the software NAA: accept, MRSP, then RPCs until the client leaves.
//!
//! The worker thread is the connection's only driver. Kernels run inline on it (no thread
//! hand-off on the RPC path), so a kernel that overruns its deadline is answered with
//! KERNEL_TIMEOUT when it returns: its regions are the kernel's until then, and the next RPC
//! cannot arrive before the client has its answer (see [`super`] for the reasoning).

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use heapless::Vec as StackVec;
use naaice_core::config::MAX_REGIONS;
use naaice_core::machine::{self, KernelCall, Machine, WorkError};
use naaice_core::{Phase, RegionFlags, ReturnCode, Server, ServerConfig};

use super::kernel::{KERNEL_FAILED, KernelContext, KernelRegion, KernelRegistry};
use crate::clock;
use crate::driver::{self, Driver, ServerEvent};
use crate::memory::Buffer;
use crate::transport::{Endpoint, Incoming};

/// How often a worker looks at the shutdown flag while idle.
const SHUTDOWN_POLL: Duration = Duration::from_millis(100);

/// Serves one connection request to the end. Never panics on peer input; returns when the
/// client disconnects, the connection fails, or `shutdown` is set.
pub(crate) fn serve<I: Incoming>(
    incoming: I,
    config: ServerConfig,
    kernels: &KernelRegistry,
    shutdown: &AtomicBool,
) {
    let peer = incoming.peer_addr();
    let server = Server::new(config, clock::now());
    let Some(mut driver) = driver::accept(incoming, server) else {
        return;
    };
    tracing::info!(?peer, "client connected");
    run(&mut driver, kernels, shutdown);
    driver.disconnect();
    tracing::info!(?peer, "connection closed");
}

fn run<E: Endpoint>(
    driver: &mut Driver<E, Server>,
    kernels: &KernelRegistry,
    shutdown: &AtomicBool,
) {
    // Region buffers with their flags, for kernels (filled after the MRSP).
    let mut regions: std::sync::Arc<[(RegionFlags, Buffer)]> = std::sync::Arc::new([]);
    while !shutdown.load(Ordering::Relaxed) {
        let event = match driver.poll() {
            Ok(event) => event,
            Err(e) => {
                tracing::warn!(error = %e, "transport failed");
                return;
            }
        };
        match event {
            Some(ServerEvent::Allocate {
                region,
                size,
                internal,
            }) => driver.allocate(region, size, internal),
            Some(ServerEvent::RunKernel(call)) => {
                let timeout = driver.machine().config().kernel_timeout;
                let rc = run_kernel(kernels, call, &regions, Instant::now() + timeout);
                driver.kernel_done(rc);
            }
            Some(ServerEvent::MrspComplete) => {
                regions = driver.kernel_regions();
                tracing::debug!(regions = regions.len(), "MRSP done");
            }
            // A flushed work request only follows the connection's end (its cause, if any,
            // was reported first): not worth a warning on every client that leaves.
            Some(ServerEvent::Failed(
                e @ machine::Error::WorkFailed {
                    error: WorkError::Flushed,
                    ..
                },
            )) => tracing::debug!(error = %e, "connection ended"),
            Some(ServerEvent::Failed(e)) => tracing::warn!(error = %e, "connection failed"),
            Some(ServerEvent::Disconnect) => return,
            None if matches!(driver.machine().phase(), Phase::Error | Phase::Finished) => return,
            None => {
                if let Err(e) = driver.wait(Instant::now() + SHUTDOWN_POLL) {
                    tracing::warn!(error = %e, "transport wait failed");
                    return;
                }
            }
        }
    }
}

/// Runs the kernel inline. A panic becomes [`KERNEL_FAILED`].
fn run_kernel(
    kernels: &KernelRegistry,
    call: KernelCall,
    buffers: &[(RegionFlags, Buffer)],
    deadline: Instant,
) -> ReturnCode {
    let Some(kernel) = kernels.get(call.fncode) else {
        // The machine only asks for codes in the registry's set.
        return ReturnCode::SOCKET_UNAVAIL;
    };
    let mut regions: StackVec<KernelRegion<'_>, MAX_REGIONS> = StackVec::new();
    for (flags, b) in buffers {
        let _ = regions.push(KernelRegion {
            flags: *flags,
            data: b.lock(),
        });
    }
    let mut ctx = KernelContext::new(call, &mut regions, deadline);
    let started = Instant::now();
    let rc =
        std::panic::catch_unwind(AssertUnwindSafe(|| kernel.run(&mut ctx))).unwrap_or_else(|_| {
            tracing::error!(fncode = call.fncode, "kernel panicked");
            KERNEL_FAILED
        });
    tracing::trace!(fncode = call.fncode, elapsed = ?started.elapsed(), %rc, "kernel done");
    if Instant::now() > deadline {
        tracing::warn!(fncode = call.fncode, elapsed = ?started.elapsed(), "kernel overran its deadline: answering KERNEL_TIMEOUT");
    }
    rc
}
