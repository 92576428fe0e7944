//! Server-side commands of a driver (the software NAA's engine).

use std::sync::Arc;

use naaice_core::machine::{KernelCall, Machine, Post, ServerAction};
use naaice_core::{RegionFlags, RegionId, ReturnCode, Server};

use super::regions::RegionMemory;
use super::{Driver, MessageBuffers, ServerEvent, Serving};
use crate::clock;
use crate::memory::Buffer;
use crate::transport::waiting::WaitPolicy;
use crate::transport::{Endpoint, Incoming};

/// Accepts a connection request for `server`, whose waits follow `wait`: registers the
/// message buffers and posts the first receive *before* accepting (spec §1.3). A request
/// that cannot be served is rejected; `None` then (the reason is logged).
pub(crate) fn accept<I: Incoming>(
    mut incoming: I,
    mut server: Server,
    wait: WaitPolicy,
) -> Option<Driver<I::Endpoint, Server>> {
    let peer = incoming.peer_addr();
    let start = std::time::Instant::now();
    let buffers = match MessageBuffers::register(incoming.endpoint()) {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(?peer, error = %e, "cannot register MRSP buffers; rejecting");
            incoming.reject("NAA out of resources");
            return None;
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
        return None;
    }
    let registered = start.elapsed();
    match incoming.accept() {
        Ok(ep) => {
            tracing::debug!(
                ?peer,
                registered = ?registered,
                accepted = ?(start.elapsed() - registered),
                "accepted (message buffers registered, first receive posted)"
            );
            Some(Driver::established(ep, buffers, server, wait))
        }
        Err(e) => {
            tracing::warn!(?peer, error = %e, "accept failed");
            None
        }
    }
}

/// What [`Driver::poll_serving`] hands its owner: the server's events other than the kernels,
/// which it runs itself.
#[derive(Debug)]
pub(crate) enum ServedEvent {
    /// Provide memory for a region of the MRSP request.
    Allocate(naaice_core::machine::Allocation),
    /// The MRSP finished.
    MrspComplete,
    /// The connection failed; [`ServedEvent::Disconnect`] follows.
    Failed(naaice_core::machine::Error),
    /// Tear the connection down.
    Disconnect,
}

impl<E: Endpoint> Driver<E, Server> {
    /// Answers an allocation request: zeroed memory of `size` bytes for `region` (from
    /// `memory`, unless the in-process client's own memory serves), registered for remote
    /// write unless `internal`. Failure to allocate or register is reported to the machine
    /// (which answers the MRSP with an error).
    pub(crate) fn allocate(
        &mut self,
        region: RegionId,
        size: u32,
        internal: bool,
        memory: impl FnOnce(usize) -> Option<Buffer>,
    ) {
        let now = clock::now();
        let start = std::time::Instant::now();
        let shared = if internal {
            None
        } else {
            self.shared_memory(region, size)
        };
        let kind = if shared.is_some() {
            RegionMemory::Shared
        } else {
            RegionMemory::Registered
        };
        let Some(buffer) = shared.or_else(|| memory(size as usize)) else {
            tracing::warn!(size = %crate::units::size(u64::from(size)), "allocation failed");
            let _ = self.machine.assignment_failed(now, region);
            return;
        };
        let result = if internal {
            let addr = buffer.addr();
            self.set_region(region, RegionMemory::Internal(buffer));
            self.machine.region_assigned(now, region, addr, 0)
        } else {
            match self.register_region(region, &buffer, kind) {
                Ok((addr, rkey)) => self.machine.region_assigned(now, region, addr, rkey),
                Err(e) => {
                    tracing::warn!(error = %e, "registration failed");
                    self.machine.assignment_failed(now, region)
                }
            }
        };
        if let Err(e) = result {
            tracing::error!(error = %e, "region assignment refused");
        }
        tracing::debug!(size, internal, took = ?start.elapsed(), "region allocated and registered");
    }

    /// Memory of the client's that the NAA may use as this region's own (an in-process
    /// client, [`Endpoint::shared_memory`]): only for a region sent and received whole in
    /// every RPC (in place, not single-send), whose bytes then never need to move. Any other
    /// region keeps memory of its own: its content between RPCs is the NAA's, not the
    /// client's.
    fn shared_memory(&self, region: RegionId, size: u32) -> Option<Buffer> {
        let served = self.machine.regions().get(region)?;
        let in_place = served
            .flags
            .contains(RegionFlags::INPUT | RegionFlags::OUTPUT)
            && !served.flags.contains(RegionFlags::SINGLESEND);
        let peer = served.peer.filter(|_| in_place)?;
        let buffer = self.ep.shared_memory(peer.addr, size as usize)?;
        tracing::debug!(size, "region shared with the in-process client");
        Some(buffer)
    }

    /// Answers an allocation request with a refusal without allocating anything (the MRSP
    /// is answered with 0x01, not enough memory).
    pub(crate) fn refuse_allocation(&mut self, region: RegionId) {
        if let Err(e) = self.machine.assignment_failed(clock::now(), region) {
            tracing::error!(error = %e, "region refusal not accepted");
        }
    }

    /// The regions with their flags and memory, for kernels (shared, so an RPC costs a
    /// reference count, not a copy).
    pub(crate) fn kernel_regions(&self) -> Arc<[(RegionFlags, Buffer)]> {
        self.machine
            .regions()
            .regions()
            .iter()
            .enumerate()
            .filter_map(|(i, r)| {
                let id = RegionId::new(i as u8);
                self.region_buffer(id).map(|b| (r.flags, b.clone()))
            })
            .collect()
    }

    /// Executes the machine's transport work, feeding what the transport has ready when that
    /// runs out (never blocks), and returns the next event; `None` when nothing is left to
    /// do. A kernel the machine asks for runs inline through `kernel` (given the call and
    /// when it was taken, it returns its return code and when it returned) and its RPC's
    /// answer is posted before this returns: one call serves an RPC from its completion to
    /// the posted answer, without a round through the owner's loop in between (through the
    /// machine's express lane in the steady state). An owner that is stopping has `kernel`
    /// return `None`: the RPC is left unanswered and this returns `None` at once.
    pub(crate) fn poll_serving(
        &mut self,
        kernel: &mut impl FnMut(
            KernelCall,
            naaice_core::Instant,
        ) -> Option<(ReturnCode, naaice_core::Instant)>,
    ) -> crate::transport::Result<Option<ServedEvent>> {
        let mut pumped = false;
        loop {
            let served = match self.next_event() {
                Some(ServerEvent::RunKernel(call)) => {
                    let Some((rc, done)) = kernel(call, clock::now()) else {
                        return Ok(None);
                    };
                    self.kernel_done(rc, done);
                    continue;
                }
                Some(ServerEvent::Allocate(a)) => ServedEvent::Allocate(a),
                Some(ServerEvent::MrspComplete) => ServedEvent::MrspComplete,
                Some(ServerEvent::Failed(e)) => ServedEvent::Failed(e),
                Some(ServerEvent::Disconnect) => ServedEvent::Disconnect,
                None if pumped => return Ok(None),
                None => {
                    if !self.pump(&mut Serving::new(kernel))? {
                        return Ok(None);
                    }
                    pumped = true;
                    continue;
                }
            };
            return Ok(Some(served));
        }
    }

    /// Reports the return code of the kernel the machine asked for, which returned at `now`.
    /// A kernel that returns after its deadline, or returns KERNEL_TIMEOUT (its owner's own,
    /// shorter deadline passed), has its RPC answered with KERNEL_TIMEOUT (outputs not
    /// written).
    pub(crate) fn kernel_done(&mut self, rc: ReturnCode, now: naaice_core::Instant) {
        self.machine.handle_timeout(now);
        if rc == ReturnCode::KERNEL_TIMEOUT && self.machine.kernel_running() {
            // Fails only when the machine's own deadline answered it already.
            let _ = self.machine.expire_kernel(now);
        }
        if let Err(e) = self.machine.kernel_finished(now, rc) {
            tracing::warn!(error = %e, "kernel result not accepted");
        }
    }
}
