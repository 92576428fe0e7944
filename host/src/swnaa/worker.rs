//! One connection of the software NAA: accept, MRSP, then RPCs until the client leaves.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use heapless::Vec as StackVec;
use naaice_core::config::MAX_REGIONS;
use naaice_core::machine::{Input, KernelCall, Machine, Post, ServerAction};
use naaice_core::{Phase, RegionFlags, ReturnCode, Server, ServerConfig};

use super::kernel::{KERNEL_FAILED, KernelContext, KernelRegion, KernelRegistry};
use super::watchdog::{Expire, Watchdog};
use crate::clock;
use crate::link::{Link, MessageBuffers, RegionMemory};
use crate::memory::Buffer;
use crate::transport::{Endpoint, Incoming, MemoryRegion};

/// How often a worker looks at the shutdown flag while idle.
const SHUTDOWN_POLL: Duration = Duration::from_millis(100);

/// The connection state shared by the worker and the watchdog.
struct Conn<E: Endpoint> {
    link: Link<E>,
    server: Server,
    /// Region buffers with their flags, for kernels (filled after the MRSP; shared so an
    /// RPC costs a reference count, not a copy).
    buffers: Arc<[(RegionFlags, Buffer)]>,
}

struct Shared<E: Endpoint> {
    conn: Mutex<Conn<E>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<E: Endpoint> Expire for Shared<E> {
    /// The kernel overran: answer KERNEL_TIMEOUT now, from the watchdog thread.
    fn expire(&self) {
        let mut c = lock(&self.conn);
        let Conn { link, server, .. } = &mut *c;
        server.handle_timeout(clock::now());
        while let Some(action) = link.drive(server) {
            match action {
                ServerAction::Failed(e) => tracing::warn!(error = %e, "connection failed"),
                ServerAction::Disconnect => link.ep.disconnect(),
                other => tracing::debug!(?other, "action left for the worker"),
            }
        }
        tracing::warn!("kernel timed out: answered KERNEL_TIMEOUT");
    }
}

/// Serves one connection request to the end. Never panics on peer input; returns when the
/// client disconnects, the connection fails, or `shutdown` is set.
pub(crate) fn serve<I: Incoming>(
    mut incoming: I,
    config: ServerConfig,
    kernels: &KernelRegistry,
    watchdog: &Watchdog,
    shutdown: &AtomicBool,
) where
    I::Endpoint: 'static,
{
    let peer = incoming.peer_addr();
    let mut server = Server::new(config, clock::now());
    // Register the MRSP buffers and post the first receive *before* accepting (spec §1.3).
    let buffers = match MessageBuffers::register(incoming.endpoint()) {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(?peer, error = %e, "cannot register MRSP buffers; rejecting");
            incoming.reject("NAA out of resources");
            return;
        }
    };
    let mut scratch = [0u8; naaice_core::config::MRSP_RECV_LEN];
    if let Some(ServerAction::Post(Post::Recv { wr_id, .. })) = server.poll_action(&mut scratch)
        && let Err(e) = incoming
            .endpoint()
            .post_recv(wr_id.raw(), Some(buffers.recv_sge()))
    {
        tracing::warn!(?peer, error = %e, "cannot post the MRSP receive; rejecting");
        incoming.reject("NAA out of resources");
        return;
    }
    let ep = match incoming.accept() {
        Ok(ep) => ep,
        Err(e) => {
            tracing::warn!(?peer, error = %e, "accept failed");
            return;
        }
    };
    let mut link = Link::from_parts(ep, buffers);
    link.set_connected();
    server.handle_input(clock::now(), Input::Established);
    tracing::info!(?peer, "client connected");
    let shared = Arc::new(Shared {
        conn: Mutex::new(Conn {
            link,
            server,
            buffers: Arc::new([]),
        }),
    });
    run(&shared, kernels, watchdog, shutdown);
    tracing::info!(?peer, "connection closed");
}

fn run<E: Endpoint + 'static>(
    shared: &Arc<Shared<E>>,
    kernels: &KernelRegistry,
    watchdog: &Watchdog,
    shutdown: &AtomicBool,
) {
    loop {
        let mut c = lock(&shared.conn);
        if shutdown.load(Ordering::Relaxed) {
            c.link.ep.disconnect();
            return;
        }
        let Conn { link, server, .. } = &mut *c;
        if let Err(e) = link.pump(server) {
            tracing::warn!(error = %e, "transport failed");
            return;
        }
        let mut call = None;
        loop {
            let Conn { link, server, .. } = &mut *c;
            let Some(action) = link.drive(server) else {
                break;
            };
            match action {
                ServerAction::Allocate {
                    region,
                    size,
                    internal,
                    ..
                } => allocate(&mut c, region, size, internal),
                ServerAction::RunKernel(k) => {
                    call = Some(k);
                    break;
                }
                ServerAction::MrspComplete => {
                    c.buffers = kernel_buffers(&c);
                    tracing::debug!(regions = c.buffers.len(), "MRSP done");
                }
                ServerAction::Failed(e) => tracing::warn!(error = %e, "connection failed"),
                ServerAction::Disconnect => {
                    c.link.ep.disconnect();
                    return;
                }
                ServerAction::Post(_) => {} // posted by the link
            }
        }
        if let Some(k) = call {
            let buffers = Arc::clone(&c.buffers);
            drop(c);
            let rc = run_kernel(shared, kernels, watchdog, k, &buffers);
            let mut c = lock(&shared.conn);
            if let Err(e) = c.server.kernel_finished(clock::now(), rc) {
                tracing::warn!(error = %e, "kernel result not accepted");
            }
            continue;
        }
        if matches!(c.server.phase(), Phase::Error | Phase::Finished) {
            c.link.ep.disconnect();
            return;
        }
        let Conn { link, server, .. } = &mut *c;
        if let Err(e) = link.wait(server, Instant::now() + SHUTDOWN_POLL) {
            tracing::warn!(error = %e, "transport wait failed");
            return;
        }
    }
}

fn allocate<E: Endpoint>(
    c: &mut Conn<E>,
    region: naaice_core::RegionId,
    size: u32,
    internal: bool,
) {
    let now = clock::now();
    let Some(buffer) = try_zeroed(size as usize) else {
        tracing::warn!(size, "allocation failed");
        let _ = c.server.assignment_failed(now, region);
        return;
    };
    let result = if internal {
        let addr = buffer.addr();
        c.link.set_region(region, RegionMemory::Internal(buffer));
        c.server.region_assigned(now, region, addr, 0)
    } else {
        match c.link.ep.register(&buffer) {
            Ok(mr) => {
                let (addr, rkey) = (mr.addr(), mr.rkey());
                c.link.set_region(region, RegionMemory::Registered(mr));
                c.server.region_assigned(now, region, addr, rkey)
            }
            Err(e) => {
                tracing::warn!(error = %e, "registration failed");
                c.server.assignment_failed(now, region)
            }
        }
    };
    if let Err(e) = result {
        tracing::error!(error = %e, "region assignment refused");
    }
}

fn try_zeroed(len: usize) -> Option<Buffer> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).ok()?;
    v.resize(len, 0);
    Some(Buffer::from_vec(v))
}

fn kernel_buffers<E: Endpoint>(c: &Conn<E>) -> Arc<[(RegionFlags, Buffer)]> {
    c.server
        .regions()
        .regions()
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let id = naaice_core::RegionId::new(i as u8);
            c.link.region_buffer(id).map(|b| (r.flags, b.clone()))
        })
        .collect()
}

/// Runs the kernel inline, under the watchdog. A panic becomes [`KERNEL_FAILED`].
fn run_kernel<E: Endpoint + 'static>(
    shared: &Arc<Shared<E>>,
    kernels: &KernelRegistry,
    watchdog: &Watchdog,
    call: KernelCall,
    buffers: &[(RegionFlags, Buffer)],
) -> ReturnCode {
    let Some(kernel) = kernels.get(call.fncode) else {
        // The machine only asks for codes in the registry's set.
        return ReturnCode::SOCKET_UNAVAIL;
    };
    let timeout = lock(&shared.conn).server.config().kernel_timeout;
    let target: Arc<dyn Expire> = shared.clone();
    let _watch = watchdog.watch(Instant::now() + timeout, Arc::downgrade(&target));
    let mut regions: StackVec<KernelRegion<'_>, MAX_REGIONS> = StackVec::new();
    for (flags, b) in buffers {
        let _ = regions.push(KernelRegion {
            flags: *flags,
            data: b.lock(),
        });
    }
    let mut ctx = KernelContext::new(call, &mut regions);
    let started = Instant::now();
    let rc =
        std::panic::catch_unwind(AssertUnwindSafe(|| kernel.run(&mut ctx))).unwrap_or_else(|_| {
            tracing::error!(fncode = call.fncode, "kernel panicked");
            KERNEL_FAILED
        });
    tracing::trace!(fncode = call.fncode, elapsed = ?started.elapsed(), %rc, "kernel done");
    rc
}
