//! One connection of the software NAA: accept, MRSP, then RPCs until the client leaves.
//!
//! The worker thread is the connection's only driver. Kernels run inline on it (no thread
//! hand-off on the RPC path), so a kernel that overruns its deadline is answered with
//! KERNEL_TIMEOUT when it returns: its regions are the kernel's until then, and the next RPC
//! cannot arrive before the client has its answer (see [`super`] for the reasoning).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use heapless::Vec as StackVec;
use naaice_core::config::MAX_REGIONS;
use naaice_core::machine::{self, Allocation, KernelCall, Machine, WorkError};
use naaice_core::{Instant as CoreInstant, Phase, RegionFlags, ReturnCode, Server, ServerConfig};

use super::budget::{MemoryBudget, Reservation};
use super::kernel::{KERNEL_FAILED, KernelContext, KernelRegion, KernelRegistry};
use super::metrics::{ConnectionMetrics, Registration};
use super::slots::Activity;
use super::switch::KernelSwitch;
use crate::clock;
use crate::driver::{self, Driver, ServedEvent};
use crate::memory::Buffer;
use crate::transport::waiting::WaitPolicy;
use crate::transport::{Endpoint, Incoming, Liveness};

/// How often a worker looks at the shutdown flag while idle.
const SHUTDOWN_POLL: Duration = Duration::from_millis(100);

/// What a worker needs besides its connection request.
pub(crate) struct WorkerContext {
    /// The protocol machine's settings.
    pub(crate) config: ServerConfig,
    /// The kernels by function code (replaced by a reload between RPCs).
    pub(crate) kernels: KernelSwitch,
    /// How long a kernel may run unless it has its own timeout.
    pub(crate) kernel_timeout: Duration,
    /// The NAA's memory budget, shared by all connections.
    pub(crate) budget: Arc<MemoryBudget>,
    /// What this worker tells the slot policy (idle or busy; eviction).
    pub(crate) activity: Arc<Activity>,
    /// The connection's counters, when the NAA's metrics are on.
    pub(crate) metrics: Option<Registration>,
    /// How the worker waits for its client.
    pub(crate) wait: WaitPolicy,
}

/// Serves one connection request to the end. Never panics on peer input; returns when the
/// client disconnects, the connection fails, it is evicted, or `shutdown` is set.
pub(crate) fn serve<I: Incoming>(incoming: I, ctx: &WorkerContext, shutdown: &AtomicBool) {
    let peer = incoming.peer_addr();
    // Declared before the driver: given back only after the region memory is freed or kept.
    let mut memory: Option<Reservation> = None;
    let server = Server::new(ctx.config, clock::now());
    let Some(mut driver) = driver::accept(incoming, server, ctx.wait) else {
        return;
    };
    tracing::info!(?peer, "client connected");
    let usage = Usage::start();
    run(&mut driver, ctx, &mut memory, shutdown);
    // Over: the slot is free for the next client while this one is torn down.
    ctx.activity.leave();
    driver.disconnect();
    let rpcs = driver.machine().rpc_count();
    let (elapsed, cpu) = usage.since();
    let per_rpc = if rpcs > 0 {
        format!("{:.1}", cpu.as_secs_f64() * 1e6 / f64::from(rpcs))
    } else {
        "-".to_owned()
    };
    tracing::info!(
        ?peer,
        rpcs,
        elapsed_ms = %format_args!("{:.3}", elapsed.as_secs_f64() * 1e3),
        cpu_ms = %format_args!("{:.3}", cpu.as_secs_f64() * 1e3),
        cpu_per_rpc_us = %per_rpc,
        "connection closed"
    );
    // The region memory, once nothing else holds it (the endpoint's registrations go with
    // the driver), is kept for the next connections.
    let regions = driver.own_region_memory();
    drop(driver);
    if let Some(reservation) = memory.take() {
        reservation.release_keeping(regions);
    }
}

/// The wall time and this thread's CPU time since a connection was accepted: what a
/// connection cost the NAA (a spinning wait shows up as CPU time).
struct Usage {
    started: Instant,
    cpu: Duration,
}

impl Usage {
    fn start() -> Self {
        Self {
            started: Instant::now(),
            cpu: thread_cpu(),
        }
    }

    /// (wall time, CPU time of this thread) since [`Usage::start`].
    fn since(&self) -> (Duration, Duration) {
        (
            self.started.elapsed(),
            thread_cpu().saturating_sub(self.cpu),
        )
    }
}

/// The CPU time of the calling thread.
fn thread_cpu() -> Duration {
    Duration::from_nanos(clock::nanos(rustix::time::ClockId::ThreadCPUTime))
}

fn run<E: Endpoint>(
    driver: &mut Driver<E, Server>,
    ctx: &WorkerContext,
    memory: &mut Option<Reservation>,
    shutdown: &AtomicBool,
) {
    let mut kernels = Kernels {
        switch: &ctx.kernels,
        seen: ctx.kernels.generation(),
        registry: ctx.kernels.current(),
        reloaded: false,
        regions: Arc::new([]),
        backups: Vec::new(),
        liveness: None,
        timeout: ctx.kernel_timeout,
    };
    kernels.serve_on(driver.machine_mut());
    // A shutdown that came while a kernel ran leaves its RPC unanswered: the client sees the
    // disconnect, as with any other RPC in progress.
    let stopping = || shutdown.load(Ordering::Relaxed);
    let waker = driver.waker();
    let wakeable = waker.is_some();
    ctx.activity.set_waker(waker);
    ctx.activity.set_liveness(driver.liveness());
    let metrics = ctx.metrics.as_ref().map(Registration::metrics);
    let mut counted = Counted::default();
    while !stopping() {
        // Kernels reloaded while idle: the machine serves their codes from the next call.
        kernels.refresh();
        if kernels.reloaded {
            kernels.serve_on(driver.machine_mut());
        }
        // The slot policy's marks: busy while the kernel runs, idle from its end. The idle
        // mark is set once the answer is posted, off the RPC's path.
        let mut kernel_end = None;
        let served = driver.poll_serving(&mut |call, taken| {
            ctx.activity.set_idle(None);
            // A call that arrived after a reload runs on the new kernels.
            kernels.refresh();
            let done = kernels.run(call, taken);
            kernel_end = Some(done.1);
            if let Some(m) = metrics {
                counted.kernel(m, call, taken, done);
            }
            (!stopping()).then_some(done)
        });
        if let Some(end) = kernel_end {
            ctx.activity.set_idle(Some(clock::from_core(end)));
        }
        if let Some(m) = metrics {
            let machine = driver.machine();
            counted.answered(m, machine.rpc_count(), machine.kernel_running());
        }
        let event = match served {
            Ok(event) => event,
            Err(e) => {
                tracing::warn!(error = %e, "transport failed");
                return;
            }
        };
        match event {
            Some(ServedEvent::Allocate(a)) => allocate(driver, ctx, memory, &mut kernels, a),
            Some(ServedEvent::MrspComplete) => {
                if let Some(m) = metrics {
                    m.mrsp_complete(&kernels.regions);
                }
                tracing::debug!(regions = kernels.regions.len(), "MRSP done");
            }
            // A flushed work request only follows the connection's end (its cause, if any,
            // was reported first): not worth a warning on every client that leaves.
            Some(ServedEvent::Failed(
                e @ machine::Error::WorkFailed {
                    error: WorkError::Flushed,
                    ..
                },
            )) => tracing::debug!(error = %e, "connection ended"),
            Some(ServedEvent::Failed(e)) => tracing::warn!(error = %e, "connection failed"),
            Some(ServedEvent::Disconnect) => return,
            None => {
                if !idle(driver, ctx, stopping(), wakeable) {
                    return;
                }
            }
        }
    }
}

/// What the worker has counted of its connection's RPCs (metrics on).
#[derive(Default)]
struct Counted {
    /// RPCs that ran a kernel.
    kernels: u32,
    /// RPCs of function codes without a kernel.
    unknown: u32,
    /// The RPC whose answer is being posted: its function code and when its call was taken.
    answering: Option<(u8, CoreInstant)>,
}

impl Counted {
    /// A kernel taken at `taken` returned `done`; its RPC is answered next.
    fn kernel(
        &mut self,
        m: &ConnectionMetrics,
        call: KernelCall,
        taken: CoreInstant,
        (rc, end): (ReturnCode, CoreInstant),
    ) {
        // An RPC served in the same pass as this one was answered by now.
        if let Some((fncode, at)) = self.answering.take() {
            m.rpc_time(fncode, taken.saturating_duration_since(at));
        }
        self.kernels = self.kernels.wrapping_add(1);
        m.kernel_rpc(
            call.fncode,
            rc,
            call.rpc,
            end.saturating_duration_since(taken),
        );
        self.answering = Some((call.fncode, taken));
    }

    /// A pass of the worker ended with every answer posted; `rpcs`: the machine's count of
    /// RPCs (those of codes without a kernel included); `kernel_due`: the machine counted an
    /// RPC whose kernel has not returned yet (its event comes with the next pass).
    fn answered(&mut self, m: &ConnectionMetrics, rpcs: u32, kernel_due: bool) {
        if let Some((fncode, at)) = self.answering.take() {
            m.rpc_time(fncode, clock::now().saturating_duration_since(at));
        }
        let unknown = rpcs
            .saturating_sub(self.kernels)
            .saturating_sub(u32::from(kernel_due));
        if unknown > self.unknown {
            m.unknown_rpcs(u64::from(unknown - self.unknown));
            self.unknown = unknown;
        }
    }
}

/// Answers an allocation request of the MRSP: memory within the NAA's budget (the whole
/// request is reserved at its first region), or a refusal.
fn allocate<E: Endpoint>(
    driver: &mut Driver<E, Server>,
    ctx: &WorkerContext,
    memory: &mut Option<Reservation>,
    kernels: &mut Kernels<'_>,
    Allocation {
        region,
        size,
        internal,
        ..
    }: Allocation,
) {
    if memory.is_none() {
        *memory = reserve(driver, &ctx.budget);
        if memory.is_none()
            && let Some(m) = &ctx.metrics
        {
            m.metrics().naa().rejected_memory();
        }
    }
    if memory.is_some() {
        driver.allocate(region, size, internal, |len| ctx.budget.region_memory(len));
    } else {
        driver.refuse_allocation(region);
    }
    // The last region is placed and the Advertisement not yet posted: prepare the kernels'
    // view of the regions now, so that none of it runs between the Advertisement and the
    // first RPC (which the client sends at once).
    if memory.is_some() && driver.machine().phase() == Phase::MrspSending {
        kernels.regions = driver.kernel_regions();
        kernels.backups = driver
            .shared_regions()
            .filter_map(|i| {
                let len = kernels.regions.get(i)?.1.len();
                // Within the reservation: the memory the region would have had.
                let backup = Buffer::try_zeroed(len);
                if backup.is_none() {
                    tracing::warn!(
                        size = %crate::units::size(len as u64),
                        "no memory for the copy of a shared region: a kernel timeout will \
                         leave its output in the client's memory"
                    );
                }
                backup.map(|b| (i, b))
            })
            .collect();
        if !kernels.backups.is_empty() {
            kernels.liveness = driver.liveness();
        }
    }
}

/// Nothing to do: waits for the transport (woken by the master, or at most
/// [`SHUTDOWN_POLL`] for a transport without a waker). False when the
/// worker must end: the connection is over, the NAA is `stopping`, the slot was evicted, or
/// the transport failed.
fn idle<E: Endpoint>(
    driver: &mut Driver<E, Server>,
    ctx: &WorkerContext,
    stopping: bool,
    wakeable: bool,
) -> bool {
    let phase = driver.machine().phase();
    if matches!(phase, Phase::Error | Phase::Finished) || stopping {
        return false;
    }
    let between_rpcs = matches!(phase, Phase::MrspDone | Phase::DataReceiving);
    // Evicted: leaves only with nothing pending, so an RPC that arrived first is served.
    if between_rpcs && ctx.activity.evicted() {
        tracing::info!("evicted: idle the longest while a new client needed the slot");
        return false;
    }
    let now = Instant::now();
    // Idle since `now`, unless an RPC's end marked it already (the end of the MRSP is marked
    // here).
    if between_rpcs && ctx.activity.idle_since().is_none() {
        ctx.activity.set_idle(Some(now));
    }
    // With a waker, the master ends the wait on an eviction or a shutdown: an idle
    // connection costs no wake-ups. Without one, look every `SHUTDOWN_POLL`.
    let until = (!wakeable).then(|| now + SHUTDOWN_POLL);
    match driver.wait(until) {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(error = %e, "transport wait failed");
            false
        }
    }
}

/// Reserves the memory of the whole MRSP request (every region, before the first is
/// allocated); `None` when the NAA's budget has no room for it.
fn reserve<E: Endpoint>(
    driver: &Driver<E, Server>,
    budget: &Arc<MemoryBudget>,
) -> Option<Reservation> {
    let total: u64 = driver
        .machine()
        .regions()
        .regions()
        .iter()
        .map(|r| u64::from(r.size))
        .sum();
    let reservation = budget.reserve(total);
    if reservation.is_none() {
        tracing::warn!(
            requested = %crate::units::size(total),
            reserved = %crate::units::size(budget.used()),
            budget = %crate::units::size(budget.limit()),
            "memory budget exhausted: refusing the MRSP request with 0x01 (not enough memory)"
        );
    }
    reservation
}

/// The connection's kernels and what they run on.
struct Kernels<'a> {
    /// The NAA's kernels, replaced by reloads.
    switch: &'a KernelSwitch,
    /// The switch's generation `registry` is from.
    seen: u64,
    /// The kernels by function code.
    registry: Arc<KernelRegistry>,
    /// `registry` changed since the machine was told ([`Kernels::serve_on`]).
    reloaded: bool,
    /// Region buffers with their flags (set once the last region is placed, before the
    /// Advertisement goes out).
    regions: Arc<[(RegionFlags, Buffer)]>,
    /// For each region that is the in-process client's memory (by index in `regions`), a
    /// copy of it from before the kernel ran: a kernel that overruns its deadline, or that
    /// returns after its client left (cancel), leaves the client's data as it was, as on a
    /// remote NAA (which then writes no outputs back).
    backups: Vec<(usize, Buffer)>,
    /// Whether the connection is over, with `backups`: a kernel that returns after its
    /// client left (cancelled) leaves the client's data as it was too.
    liveness: Option<Liveness>,
    /// How long a kernel may run unless it has its own timeout.
    timeout: Duration,
}

impl Kernels<'_> {
    /// Takes the kernels of a reload, if one happened (one atomic load otherwise).
    fn refresh(&mut self) {
        if let Some(registry) = self.switch.changed(&mut self.seen) {
            tracing::debug!(kernels = %registry.describe(), "kernels reloaded");
            self.registry = registry;
            self.reloaded = true;
        }
    }

    /// Has the connection's protocol machine serve these kernels' codes, with the longest
    /// of their timeouts (each kernel's own deadline is kept by [`Kernels::run`]).
    fn serve_on(&mut self, machine: &mut Server) {
        self.reloaded = false;
        machine.set_kernels(
            self.registry.codes(),
            self.registry.longest_timeout(self.timeout),
        );
    }

    /// Runs the kernel of `call`, taken at `started` (its deadline counts from then): its
    /// return code, KERNEL_TIMEOUT if it returned after its deadline.
    fn run(&self, call: KernelCall, started: CoreInstant) -> (ReturnCode, CoreInstant) {
        let timeout = self.registry.timeout(call.fncode).unwrap_or(self.timeout);
        let deadline = started + timeout;
        let (rc, done) = run_kernel(
            &self.registry,
            call,
            &self.regions,
            &self.backups,
            self.liveness.as_ref(),
            deadline,
        );
        if done > deadline {
            (ReturnCode::KERNEL_TIMEOUT, done)
        } else {
            (rc, done)
        }
    }
}

/// Runs the kernel inline, with `deadline`; returns its return code and when it returned.
/// A panic becomes [`KERNEL_FAILED`].
fn run_kernel(
    kernels: &KernelRegistry,
    call: KernelCall,
    buffers: &[(RegionFlags, Buffer)],
    backups: &[(usize, Buffer)],
    liveness: Option<&Liveness>,
    deadline: CoreInstant,
) -> (ReturnCode, CoreInstant) {
    let Some(kernel) = kernels.get(call.fncode) else {
        // The machine only asks for codes in the registry's set.
        return (ReturnCode::SOCKET_UNAVAIL, clock::now());
    };
    let mut regions: StackVec<KernelRegion<'_>, MAX_REGIONS> = StackVec::new();
    for (flags, b) in buffers {
        let _ = regions.push(KernelRegion {
            flags: *flags,
            data: b.lock(),
        });
    }
    for (i, backup) in backups {
        if let Some(r) = regions.get(*i) {
            backup.lock().copy_from_slice(&r.data);
        }
    }
    let rc = {
        let mut ctx = KernelContext::new(call, &mut regions, clock::from_core(deadline));
        std::panic::catch_unwind(AssertUnwindSafe(|| kernel.run(&mut ctx))).unwrap_or_else(|_| {
            tracing::error!(fncode = call.fncode, "kernel panicked");
            KERNEL_FAILED
        })
    };
    let done = clock::now();
    let over = || liveness.is_some_and(Liveness::is_over);
    if !backups.is_empty() && (rc == ReturnCode::KERNEL_TIMEOUT || done > deadline || over()) {
        // No outputs after a timeout, or for a client that left: its memory as it was.
        for (i, backup) in backups {
            if let Some(r) = regions.get_mut(*i) {
                r.data.copy_from_slice(&backup.lock());
            }
        }
    }
    tracing::trace!(fncode = call.fncode, %rc, "kernel done");
    if done > deadline {
        tracing::warn!(fncode = call.fncode, late = ?done.saturating_duration_since(deadline), "kernel overran its deadline: answering KERNEL_TIMEOUT");
    }
    (rc, done)
}
