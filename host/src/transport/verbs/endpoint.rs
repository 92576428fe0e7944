//! [`VerbsEndpoint`]: one RC connection (QP, CQ, PD, rdma_cm id) behind the transport seam.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::sys::{
    ibv_recv_wr, ibv_send_flags, ibv_send_wr, ibv_sge, ibv_wc, ibv_wc_flags, ibv_wc_opcode,
    ibv_wc_status, ibv_wr_opcode, rdma_cm_event_type, rdma_disconnect, rdma_get_local_addr,
    rdma_get_peer_addr,
};

use super::cm::{CmId, wait_readable};
use super::cq::{CompletionChannel, CompletionQueue};
use super::event_check::EventCheck;
use super::mr::{KeyCache, KeyTable, VerbsRegion};
use super::outstanding::Outstanding;
use super::pd::ProtectionDomain;
use super::qp::QueuePair;
use super::{RECV_WR, SEND_WR, sockaddr};
use crate::memory::Buffer;
use crate::transport::waiting::{OpenConnection, Woken};
use crate::transport::{
    Completion, ConnectionEvent, Endpoint, Liveness, Result, SendOp, SendWr, Sge, TransportError,
    Waker, WcOpcode, WcStatus,
};

/// Completions fetched from the CQ per `ibv_poll_cq`.
const POLL_BATCH: usize = 32;
/// How long a wait spins without yielding the CPU. A yield is a system call (microseconds
/// under emulation): measured on Soft-RoCE, 50 µs instead of 5 µs cut the CPU time per small
/// RPC by 10–30 % at the same or lower latency.
const PURE_SPIN: Duration = Duration::from_micros(50);

/// What ended a sleep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WokenBy {
    /// A completion is ready (after the thread slept).
    Completion,
    /// A completion was found by the poll right after arming the CQ: the thread never slept.
    BeforeSleep,
    /// A connection event is ready.
    Event,
}

/// How a wait that went to sleep after `waited` in all ended, for the waiting policy. A
/// completion found right after arming paid no wake-up, so it counts as found by spinning:
/// taken as a sleep, it would drag the wake-up estimate down to the cost of the arming alone
/// (a system call, about 20 µs under emulation, where a real wake-up costs 80–150 µs), and
/// with it the spin budget that keeps waits from sleeping.
fn woken(by: Option<WokenBy>, waited: Duration) -> Woken {
    match by {
        Some(WokenBy::Completion) => Woken::Slept(waited),
        Some(WokenBy::BeforeSleep) => Woken::Spun(waited),
        Some(WokenBy::Event) => Woken::Other,
        None => Woken::TimedOut(waited),
    }
}

/// Where a connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    /// Requested, not accepted or established yet (receives may be posted).
    Pending,
    /// Established (or accepted): everything may be posted.
    Connected,
    /// Disconnected or broken.
    Closed,
}

/// One end of a verbs RC connection (see the [module](super) documentation).
///
/// Dropping it disconnects; its queue pair, CQ and channels are destroyed, and the protection
/// domain and rdma_cm id live on while a [`VerbsRegion`] registered on it does.
///
/// `post_send` checks the whole list (state, length, every SGE against the live
/// registrations, room in the send queue) before posting; if the provider still refuses a
/// request part-way, the error is returned and the requests before it are posted: they
/// complete with the next signaled send, or flushed when the connection ends.
pub struct VerbsEndpoint {
    /// Readiness descriptor (epoll over both channels), made by the first `arm_ready`;
    /// declared first so that it closes before the channels.
    ready_fd: Option<OwnedFd>,
    qp: QueuePair,
    cq: Arc<CompletionQueue>,
    pd: Arc<ProtectionDomain>,
    id: Arc<CmId>,
    keys: Arc<KeyTable>,
    /// The registration the last SGE was checked against.
    key_cache: KeyCache,
    state: State,
    /// Armed for all completions, and no CQ event consumed since.
    armed: bool,
    /// When the rdma_cm channel is read next while polling.
    event_check: EventCheck,
    /// The outstanding work requests (tags, room, made-up completions).
    outstanding: Outstanding,
    /// Completions taken off the CQ, not handed out yet.
    ready: VecDeque<Completion>,
    events: VecDeque<ConnectionEvent>,
    wcs: Vec<ibv_wc>,
    send_wrs: Vec<ibv_send_wr>,
    send_sges: Vec<ibv_sge>,
    peer: Option<SocketAddr>,
    /// Counts this connection in the process's CPU demand (see `waiting`).
    _open: OpenConnection,
    /// What the endpoint's [`Waker`] sets and rings (a sleeping wait also watches it).
    wake: Arc<WakeBell>,
    /// What the endpoint's [`Liveness`] probe reads.
    link: Arc<Link>,
}

/// How far the connection got, for a [`Liveness`] probe on another thread.
#[derive(Debug, Default)]
struct Link {
    /// ESTABLISHED was read: any later event of the connection's own channel ends it.
    established: AtomicBool,
    /// Closed (see [`VerbsEndpoint::close`]).
    closed: AtomicBool,
}

/// The flag and the eventfd of an endpoint's [`Waker`].
#[derive(Debug)]
struct WakeBell {
    fd: OwnedFd,
    woken: AtomicBool,
}

impl WakeBell {
    fn new() -> Result<Self> {
        let fd = rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )
        .map_err(|e| TransportError::Io {
            call: "eventfd",
            source: e.into(),
        })?;
        Ok(Self {
            fd,
            woken: AtomicBool::new(false),
        })
    }

    /// True (once) after the waker was called; silences the eventfd.
    fn take(&self) -> bool {
        let mut count = [0u8; 8];
        // Non-blocking: an error only means it was silent already.
        let _ = rustix::io::read(&self.fd, &mut count);
        self.woken.swap(false, Ordering::SeqCst)
    }
}

impl std::fmt::Debug for VerbsEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsEndpoint")
            .field("peer", &self.peer)
            .field("state", &self.state)
            .field("max_inline", &self.qp.max_inline())
            .finish_non_exhaustive()
    }
}

// SAFETY: the verbs objects are `Send` (see their types). The scratch vectors `send_wrs` and
// `send_sges` hold raw pointers only between filling and posting inside one `post_send` call
// (`&mut self`), never across calls or threads.
unsafe impl Send for VerbsEndpoint {}

impl VerbsEndpoint {
    /// Creates PD, completion channel, CQ (armed solicited-only) and QP on `id`.
    pub(super) fn new(id: Arc<CmId>, state: State) -> Result<Self> {
        let pd = ProtectionDomain::new(&id)?;
        let channel = CompletionChannel::new(&pd)?;
        let cq = CompletionQueue::new(&channel)?;
        let qp = QueuePair::new(&id, &pd, &cq)?;
        // SAFETY: the id is live; rdma_cm keeps its addresses in `sockaddr_storage` fields.
        let peer = unsafe { sockaddr::from_c(rdma_get_peer_addr(&*id.as_ptr())) };
        // SAFETY: as above.
        let local = unsafe { sockaddr::from_c(rdma_get_local_addr(&*id.as_ptr())) };
        let open = OpenConnection::new(local, peer);
        tracing::debug!(
            ?local,
            ?peer,
            cpu_demand = crate::transport::waiting::cpu_demand(),
            "verbs: connection registered"
        );
        Ok(Self {
            ready_fd: None,
            qp,
            cq,
            pd,
            id,
            keys: Arc::new(KeyTable::default()),
            key_cache: KeyCache::default(),
            state,
            armed: false,
            event_check: EventCheck::default(),
            outstanding: Outstanding::new(SEND_WR as usize, RECV_WR as usize),
            ready: VecDeque::with_capacity(2 * POLL_BATCH),
            events: VecDeque::new(),
            // SAFETY: `ibv_wc` is plain old data; all-zero is a valid value.
            wcs: (0..POLL_BATCH)
                .map(|_| unsafe { std::mem::zeroed::<ibv_wc>() })
                .collect(),
            send_wrs: Vec::new(),
            send_sges: Vec::new(),
            peer,
            _open: open,
            wake: Arc::new(WakeBell::new()?),
            link: Arc::default(),
        })
    }

    /// The connection's rdma_cm id.
    pub(super) fn id(&self) -> &CmId {
        &self.id
    }

    /// Marks the connection established (connect returned) or accepted.
    pub(super) fn set_connected(&mut self, event: bool) {
        self.state = State::Connected;
        if event {
            self.link.established.store(true, Ordering::Release);
            self.events.push_back(ConnectionEvent::Established);
        }
    }

    /// The connection's state.
    pub(super) fn state(&self) -> State {
        self.state
    }

    /// Handles every pending rdma_cm event of this connection. Never blocks.
    fn read_cm_events(&mut self) -> Result<()> {
        use rdma_cm_event_type::*;
        while let Some(event) = self.id.channel().try_next()? {
            tracing::debug!(
                event = event.name(),
                status = event.status,
                "verbs: cm event"
            );
            match event.kind {
                RDMA_CM_EVENT_ESTABLISHED if self.state != State::Closed => {
                    self.state = State::Connected;
                    self.link.established.store(true, Ordering::Release);
                    self.events.push_back(ConnectionEvent::Established);
                }
                RDMA_CM_EVENT_DISCONNECTED
                | RDMA_CM_EVENT_DEVICE_REMOVAL
                | RDMA_CM_EVENT_CONNECT_ERROR
                | RDMA_CM_EVENT_UNREACHABLE
                | RDMA_CM_EVENT_REJECTED => {
                    // What completed before the peer left is handed out before the event
                    // (e.g. an MRSP error message followed by the NAA's disconnect).
                    while self.fill()? == POLL_BATCH {}
                    self.close();
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Moves to `Closed`: the QP goes to the error state (outstanding work requests flush)
    /// and `Disconnected` is reported once.
    fn close(&mut self) {
        if self.state == State::Closed {
            return;
        }
        self.state = State::Closed;
        self.link.closed.store(true, Ordering::Release);
        // SAFETY: the id is live. On a connected id this sends DREQ and moves the QP to the
        // error state; on an id that is already disconnected it fails harmlessly.
        let rc = unsafe { rdma_disconnect(self.id.as_ptr()) };
        if rc != 0 {
            tracing::trace!(error = %std::io::Error::last_os_error(), "verbs: rdma_disconnect");
        }
        self.events.push_back(ConnectionEvent::Disconnected);
    }

    /// Moves completions from the CQ into `ready` (with those of the unsignaled sends they
    /// imply); returns how many CQ entries were read.
    fn fill(&mut self) -> Result<usize> {
        let n = self.cq.poll(&mut self.wcs)?;
        for wc in &self.wcs[..n] {
            self.outstanding.complete(completion(wc), &mut self.ready);
        }
        Ok(n)
    }

    /// Reads the connection's rdma_cm events if they are due (see [`EventCheck`]; a sleeping
    /// wait sees events at once). True if an event is ready for the caller.
    fn check_cm_events(&mut self) -> Result<bool> {
        if self.event_check.due() {
            self.read_cm_events()?;
        }
        Ok(!self.events.is_empty())
    }

    /// Arms the CQ and sleeps on the completion and rdma_cm channels until a completion or
    /// an event is ready (which one) or `deadline` passes (`None`).
    fn sleep(&mut self, deadline: Instant) -> Result<Option<WokenBy>> {
        let fds = [
            self.cq.channel_fd(),
            self.id.channel().fd(),
            self.wake.fd.as_raw_fd(),
        ];
        let mut rounds = 0u32;
        loop {
            rounds += 1;
            if rounds == 8 {
                tracing::debug!("verbs: woken 8 times in one wait without a completion");
            }
            if !self.armed {
                self.cq.arm(false)?;
                self.armed = true;
                // D-15: a completion queued before the arming raises no event. Poll again.
                if self.fill()? > 0 {
                    return Ok(Some(WokenBy::BeforeSleep));
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            let [cq_ready, cm_ready, woken] = wait_readable(&fds, deadline - now)?;
            if woken && self.wake.take() {
                return Ok(None);
            }
            if cq_ready {
                while self.cq.take_event()? {
                    self.armed = false;
                }
            }
            if cm_ready {
                self.event_check.done();
                self.read_cm_events()?;
                if !self.events.is_empty() {
                    return Ok(Some(WokenBy::Event));
                }
            }
            if self.fill()? > 0 {
                return Ok(Some(WokenBy::Completion));
            }
        }
    }

    fn sge(&mut self, sge: &Sge) -> Result<ibv_sge> {
        self.keys.check_cached(sge, &mut self.key_cache)?;
        Ok(ibv_sge {
            addr: sge.addr,
            length: sge.len,
            lkey: sge.lkey,
        })
    }
}

/// Converts a work completion.
fn completion(wc: &ibv_wc) -> Completion {
    use ibv_wc_status::*;
    let mut status = match wc.status {
        IBV_WC_SUCCESS => WcStatus::Success,
        IBV_WC_LOC_LEN_ERR => WcStatus::LocalLength,
        IBV_WC_LOC_PROT_ERR | IBV_WC_LOC_ACCESS_ERR => WcStatus::LocalProtection,
        IBV_WC_WR_FLUSH_ERR => WcStatus::WrFlush,
        IBV_WC_REM_ACCESS_ERR => WcStatus::RemoteAccess,
        IBV_WC_REM_INV_REQ_ERR => WcStatus::RemoteInvalidRequest,
        IBV_WC_RNR_RETRY_EXC_ERR => WcStatus::RnrRetryExceeded,
        IBV_WC_RETRY_EXC_ERR => WcStatus::RetryExceeded,
        _ => WcStatus::General,
    };
    let opcode = match wc.opcode {
        ibv_wc_opcode::IBV_WC_SEND => WcOpcode::Send,
        ibv_wc_opcode::IBV_WC_RDMA_WRITE => WcOpcode::RdmaWrite,
        ibv_wc_opcode::IBV_WC_RECV => WcOpcode::Recv,
        ibv_wc_opcode::IBV_WC_RECV_RDMA_WITH_IMM => WcOpcode::RecvRdmaWithImm,
        _ => {
            if status == WcStatus::Success {
                // Never posted by this transport (READ, atomics ...).
                status = WcStatus::General;
            }
            WcOpcode::Send
        }
    };
    let imm = (wc.wc_flags & ibv_wc_flags::IBV_WC_WITH_IMM.0 != 0)
        // SAFETY: with IBV_WC_WITH_IMM set, the union holds the immediate (big-endian).
        .then(|| u32::from_be(unsafe { wc.imm_data_invalidated_rkey_union.imm_data }));
    Completion {
        wr_id: wc.wr_id,
        status,
        opcode,
        byte_len: wc.byte_len,
        imm,
    }
}

impl VerbsEndpoint {
    /// Posts `wrs` as one linked list, built in `list` with its SGEs in `sges` (the
    /// endpoint's reusable vectors, empty on entry).
    fn post_list(
        &mut self,
        wrs: &[SendWr],
        sges: &mut Vec<ibv_sge>,
        list: &mut Vec<ibv_send_wr>,
    ) -> Result<()> {
        // First every SGE (so the vector never reallocates after pointers are taken).
        for wr in wrs {
            let sge = match &wr.local {
                Some(s) => self.sge(s)?,
                None => ibv_sge {
                    addr: 0,
                    length: 0,
                    lkey: 0,
                },
            };
            sges.push(sge);
        }
        let max_inline = self.qp.max_inline();
        for (i, wr) in wrs.iter().enumerate() {
            let sge = wr.local.is_some().then(|| std::ptr::from_mut(&mut sges[i]));
            let last = i + 1 == wrs.len();
            list.push(self.send_request(wr, i, last, sge, max_inline));
        }
        for i in 1..list.len() {
            let next = std::ptr::from_mut(&mut list[i]);
            list[i - 1].next = next;
        }
        let mut bad = std::ptr::null_mut();
        // SAFETY: `list` is a null-terminated chain (the last `next` stays null) of valid
        // requests whose SGEs point into `sges`, both alive for this call (the provider copies
        // requests while posting). Every SGE was checked against a live registration; the
        // regions keep the memory registered until completion.
        let posted = unsafe { self.qp.post_send(list.as_mut_ptr(), &mut bad) };
        // The requests before a refused one were posted: account for them.
        let count = match &posted {
            Ok(()) => wrs.len(),
            Err(_) if bad.is_null() => 0,
            Err(_) => {
                let offset = (bad as usize).wrapping_sub(list.as_ptr() as usize);
                (offset / size_of::<ibv_send_wr>()).min(wrs.len())
            }
        };
        for wr in &wrs[..count] {
            let opcode = match wr.op {
                SendOp::Send => WcOpcode::Send,
                SendOp::Write(_) | SendOp::WriteWithImm(..) => WcOpcode::RdmaWrite,
            };
            self.outstanding.sent(wr.wr_id, opcode);
        }
        posted
    }

    /// The verbs request of `wr`, the `i`-th of its list (only the `last` is signaled, see
    /// `Outstanding`), with its SGE (`None`: no data).
    fn send_request(
        &self,
        wr: &SendWr,
        i: usize,
        last: bool,
        sge: Option<*mut ibv_sge>,
        max_inline: u32,
    ) -> ibv_send_wr {
        let (opcode, remote, imm) = match wr.op {
            SendOp::Send => (ibv_wr_opcode::IBV_WR_SEND, None, None),
            SendOp::Write(r) => (ibv_wr_opcode::IBV_WR_RDMA_WRITE, Some(r), None),
            SendOp::WriteWithImm(r, imm) => (
                ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM,
                Some(r),
                Some(imm),
            ),
        };
        let mut flags = 0;
        if last {
            flags |= ibv_send_flags::IBV_SEND_SIGNALED.0;
        }
        if wr.solicited {
            flags |= ibv_send_flags::IBV_SEND_SOLICITED.0;
        }
        let len = wr.local.map_or(0, |s| s.len);
        if len > 0 && len <= max_inline {
            flags |= ibv_send_flags::IBV_SEND_INLINE.0;
        }
        // SAFETY: `ibv_send_wr` is plain old data (integers, raw pointers, unions of them);
        // all-zero is a valid value.
        let mut w: ibv_send_wr = unsafe { std::mem::zeroed() };
        w.wr_id = self.outstanding.send_tag(i);
        w.sg_list = sge.unwrap_or(std::ptr::null_mut());
        w.num_sge = i32::from(sge.is_some());
        w.opcode = opcode;
        w.send_flags = flags;
        if let Some(imm) = imm {
            w.imm_data_invalidated_rkey_union.imm_data = imm.to_be();
        }
        if let Some(r) = remote {
            w.wr.rdma.remote_addr = r.addr;
            w.wr.rdma.rkey = r.rkey;
        }
        w
    }
}

impl Endpoint for VerbsEndpoint {
    type Region = VerbsRegion;

    fn register(&mut self, buffer: &Buffer) -> Result<VerbsRegion> {
        VerbsRegion::register(&self.pd, &self.keys, buffer)
    }

    fn post_recv(&mut self, wr_id: u64, buf: Option<Sge>) -> Result<()> {
        if self.state == State::Closed {
            return Err(TransportError::NotConnected);
        }
        if self.outstanding.recv_room() == 0 {
            return Err(TransportError::InvalidRequest("receive queue full"));
        }
        let mut sge = buf.map(|s| self.sge(&s)).transpose()?;
        let mut wr = ibv_recv_wr {
            wr_id: self.outstanding.recv_tag(),
            next: std::ptr::null_mut(),
            sg_list: sge
                .as_mut()
                .map_or(std::ptr::null_mut(), std::ptr::from_mut),
            num_sge: i32::from(sge.is_some()),
        };
        // SAFETY: one request, null-terminated; its SGE (if any) was checked against a live
        // registration, whose region keeps the memory registered (the caller keeps the region
        // until the receive completes, as the seam requires).
        unsafe { self.qp.post_recv(&mut wr) }?;
        self.outstanding.received(wr_id);
        Ok(())
    }

    fn post_send(&mut self, wrs: &[SendWr]) -> Result<()> {
        if self.state != State::Connected {
            return Err(TransportError::NotConnected);
        }
        if wrs.is_empty() {
            return Ok(());
        }
        if wrs.len() > self.outstanding.send_room() {
            return Err(TransportError::InvalidRequest("send queue full"));
        }
        let mut sges = std::mem::take(&mut self.send_sges);
        let mut list = std::mem::take(&mut self.send_wrs);
        sges.clear();
        list.clear();
        let result = self.post_list(wrs, &mut sges, &mut list);
        self.send_sges = sges;
        self.send_wrs = list;
        result
    }

    fn poll(&mut self, out: &mut [Completion]) -> Result<usize> {
        let mut n = 0;
        while n < out.len() {
            match self.ready.pop_front() {
                Some(c) => {
                    out[n] = c;
                    n += 1;
                }
                // What a wait already took off the CQ is handed out without reading the CQ
                // again (that read would mostly find nothing: a small RPC's completion comes
                // alone); the caller polls again for more.
                None if n > 0 => break,
                None if self.fill()? == 0 => break,
                None => {}
            }
        }
        Ok(n)
    }

    fn poll_event(&mut self) -> Option<ConnectionEvent> {
        if let Err(e) = self.check_cm_events() {
            tracing::warn!(error = %e, "verbs: reading connection events failed");
        }
        // Completions taken off the CQ before a disconnect go first (see `read_cm_events`).
        if self.events.front() == Some(&ConnectionEvent::Disconnected) && !self.ready.is_empty() {
            return None;
        }
        self.events.pop_front()
    }

    fn wait(&mut self, spin_until: Instant, deadline: Instant) -> Result<Woken> {
        if !self.ready.is_empty() || self.fill()? > 0 {
            return Ok(Woken::Other);
        }
        if !self.events.is_empty() {
            return Ok(Woken::Other);
        }
        let start = Instant::now();
        if self.check_cm_events()? {
            return Ok(Woken::Other);
        }
        if self.state == State::Closed {
            return Err(TransportError::NotConnected);
        }
        if self.wake.woken.load(Ordering::SeqCst) && self.wake.take() {
            return Ok(Woken::TimedOut(Duration::ZERO));
        }
        // Spin until `spin_until` (decided by the driver's `waiting::Waiter`). After
        // `PURE_SPIN`, yield between polls, so that work the kernel deferred on this CPU can
        // run (Soft-RoCE completes work requests in softirqs and kernel threads, which a
        // spinning thread would hold off until the next scheduler tick). No PAUSE between
        // polls, as perftest and the C reference spin: the CQ read paces the loop, and under
        // qemu's TCG a PAUSE leaves the vCPU's execution loop ("let another CPU run"), which
        // cost a small RPC about 1.7 µs on Soft-RoCE. The time of a find is the last clock
        // reading before it (no extra reading on the RPC's path).
        let spin_until = spin_until.min(deadline);
        let mut now = start;
        while now < spin_until {
            if self.fill()? > 0 {
                return Ok(Woken::Spun(now - start));
            }
            if self.check_cm_events()? {
                return Ok(Woken::Other);
            }
            if now - start >= PURE_SPIN {
                std::thread::yield_now();
            }
            now = Instant::now();
        }
        if spin_until >= deadline {
            // Polling never sleeps; a wait that spun until its deadline is over.
            if self.fill()? > 0 {
                return Ok(Woken::Spun(now - start));
            }
            return Ok(Woken::TimedOut(now - start));
        }
        let ready = self.sleep(deadline)?;
        Ok(woken(ready, Instant::now() - start))
    }

    fn arm_ready(&mut self) -> Result<bool> {
        if self.ready_fd.is_none() {
            let fds = [self.cq.channel_fd(), self.id.channel().fd()];
            self.ready_fd = Some(super::epoll::epoll_over(&fds)?);
        }
        // Consume the CQ events that woke the caller (the CQ must be re-armed after them).
        while self.cq.take_event()? {
            self.armed = false;
        }
        if !self.ready.is_empty() || !self.events.is_empty() {
            return Ok(true);
        }
        self.read_cm_events()?;
        if !self.events.is_empty() || self.fill()? > 0 || self.state == State::Closed {
            return Ok(true);
        }
        if !self.armed {
            self.cq.arm(false)?;
            self.armed = true;
            // D-15: a completion queued before the arming raises no event. Poll again.
            if self.fill()? > 0 {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn ready_fd(&self) -> Option<BorrowedFd<'_>> {
        self.ready_fd.as_ref().map(AsFd::as_fd)
    }

    fn waker(&self) -> Option<Waker> {
        let bell = Arc::downgrade(&self.wake);
        Some(Waker::new(move || {
            if let Some(bell) = bell.upgrade() {
                bell.woken.store(true, Ordering::SeqCst);
                if let Err(e) = rustix::io::write(&bell.fd, &1u64.to_ne_bytes()) {
                    tracing::trace!(error = %e, "verbs: waker");
                }
            }
        }))
    }

    fn liveness(&self) -> Option<Liveness> {
        let id = Arc::downgrade(&self.id);
        let link = Arc::clone(&self.link);
        Some(Liveness::new(move || {
            if link.closed.load(Ordering::Acquire) {
                return true;
            }
            let Some(id) = id.upgrade() else {
                return true;
            };
            // After ESTABLISHED, what arrives on the connection's own channel ends it
            // (DISCONNECTED, DEVICE_REMOVAL; an address change alone would be taken for an
            // end too, rarely): over, even before this endpoint's thread has read it.
            link.established.load(Ordering::Acquire)
                && wait_readable(&[id.channel().fd()], Duration::ZERO).is_ok_and(|[r]| r)
        }))
    }

    fn disconnect(&mut self) {
        if self.state == State::Connected {
            tracing::debug!("verbs: disconnect");
            self.close();
        }
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        self.peer
    }
}

impl Drop for VerbsEndpoint {
    fn drop(&mut self) {
        self.disconnect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::waiting::{WaitEnd, WaitPolicy, Waiter};

    #[test]
    fn a_completion_found_right_after_arming_keeps_the_wake_up_estimate() {
        let us = Duration::from_micros;
        // Steady waits of 10 µs, then one that spun its budget and slept 150 µs more (a real
        // wake-up), then steady waits again.
        let mut waiter = Waiter::new(WaitPolicy::default());
        let steady = |w: &mut Waiter, n: usize| {
            for _ in 0..n {
                w.spin_budget();
                w.record(WaitEnd::Spun(us(10)));
            }
        };
        steady(&mut waiter, 36);
        let spun = waiter.spin_budget().unwrap();
        waiter.record(WaitEnd::Slept(spun + us(150)));
        steady(&mut waiter, 8);
        assert!(waiter.spin_budget().unwrap() >= us(100));
        // Then a wait that spun its whole budget and found its completion by the poll right
        // after arming (the arming took 20 µs), then steady waits again.
        let after = |by: WokenBy| {
            let mut w = waiter.clone();
            let spun = w.spin_budget().unwrap();
            w.learn(woken(Some(by), spun + us(20)));
            steady(&mut w, 16);
            w.spin_budget().unwrap()
        };
        let kept = after(WokenBy::BeforeSleep);
        assert!(
            kept >= us(100),
            "spins as long as a wake-up costs: {kept:?}"
        );
        let dragged = after(WokenBy::Completion);
        assert!(
            dragged < us(50),
            "taken as sleeps they would lower it: {dragged:?}"
        );
        assert_eq!(woken(Some(WokenBy::Event), us(30)), Woken::Other);
        assert_eq!(woken(None, us(30)), Woken::TimedOut(us(30)));
    }

    fn wc(status: u32, opcode: u32, flags: u32, imm_be: u32) -> ibv_wc {
        // SAFETY: plain old data; all-zero is valid.
        let mut wc: ibv_wc = unsafe { std::mem::zeroed() };
        wc.wr_id = 7;
        wc.status = status;
        wc.opcode = opcode;
        wc.wc_flags = flags;
        wc.byte_len = 512;
        wc.imm_data_invalidated_rkey_union.imm_data = imm_be;
        wc
    }

    #[test]
    fn completions_convert_with_the_immediate_in_host_order() {
        use ibv_wc_opcode::*;
        use ibv_wc_status::*;
        let with_imm = ibv_wc_flags::IBV_WC_WITH_IMM.0;
        // The NAA's return code 0x42 << 8 travels as wire bytes 00 00 42 00.
        let c = completion(&wc(
            IBV_WC_SUCCESS,
            IBV_WC_RECV_RDMA_WITH_IMM,
            with_imm,
            0x4200u32.to_be(),
        ));
        assert_eq!(
            c,
            Completion {
                wr_id: 7,
                status: WcStatus::Success,
                opcode: WcOpcode::RecvRdmaWithImm,
                byte_len: 512,
                imm: Some(0x4200),
            }
        );
        let c = completion(&wc(IBV_WC_SUCCESS, IBV_WC_RECV, 0, 0xdead));
        assert_eq!((c.opcode, c.imm), (WcOpcode::Recv, None));
        assert_eq!(
            completion(&wc(IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 0, 0)).opcode,
            WcOpcode::RdmaWrite
        );
        assert_eq!(
            completion(&wc(IBV_WC_SUCCESS, IBV_WC_SEND, 0, 0)).opcode,
            WcOpcode::Send
        );
        for (status, want) in [
            (IBV_WC_WR_FLUSH_ERR, WcStatus::WrFlush),
            (IBV_WC_REM_ACCESS_ERR, WcStatus::RemoteAccess),
            (IBV_WC_RNR_RETRY_EXC_ERR, WcStatus::RnrRetryExceeded),
            (IBV_WC_RETRY_EXC_ERR, WcStatus::RetryExceeded),
            (IBV_WC_LOC_LEN_ERR, WcStatus::LocalLength),
            (IBV_WC_LOC_PROT_ERR, WcStatus::LocalProtection),
            (IBV_WC_REM_INV_REQ_ERR, WcStatus::RemoteInvalidRequest),
            (IBV_WC_FATAL_ERR, WcStatus::General),
        ] {
            assert_eq!(completion(&wc(status, 0xff, 0, 0)).status, want);
        }
        // A successful completion of an operation this transport never posts is an error.
        assert_eq!(
            completion(&wc(IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 0, 0)).status,
            WcStatus::General
        );
    }
}
