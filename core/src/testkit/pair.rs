//! The two-peer simulation: a [`Client`] and a [`Server`] wired together in memory, with
//! simulated region memory, a simulated RC link and a virtual clock (after quinn-proto's
//! `Pair`).
//!
//! * Each side has a [`Nic`]: its registered regions (index = the machine's `RegionId`), its
//!   posted receives (FIFO), the work requests it posted that have not reached the peer yet
//!   (`wire`, FIFO as on an RC QP) and a log of every action its machine emitted.
//! * Executing a work request at the peer: a SEND consumes the peer's next receive and shows up
//!   there as [`Input::Received`]; an RDMA WRITE checks rkey and bounds at the target (failure:
//!   `RemoteAccess` at the initiator) and copies the bytes; a WRITE WITH IMM also consumes a
//!   receive ([`Input::WriteImmReceived`]; none posted: `RnrRetryExceeded` at the initiator).
//!   Zero-length writes skip the rkey check, as on real hardware.
//! * Completions and events go into one queue in the order they happen, target first.
//!   A side's own completions can be held back ([`Nic::hold_completions`]) and a side's work
//!   requests can be kept off the wire ([`Nic::hold_wire`]) or edited in flight, to reorder,
//!   drop or corrupt traffic.
//! * The server's host: allocations are answered automatically (or withheld or refused, see
//!   [`AllocMode`]); kernels are the reference kernels of spec §5.3 (fncode 1 adds 1 to every
//!   byte of every non-internal region, 2 adds 2, anything else does nothing), finished at once
//!   with a configurable return code or left running ([`KernelMode`]).

use core::time::Duration;
use std::collections::VecDeque;
use std::vec;
use std::vec::Vec;

use super::AnyAction;
use crate::config::MRSP_RECV_LEN;
use crate::machine::{
    Allocation, Error, Input, KernelCall, Machine, MachineAction, Placement, Post, RecvBuffer,
    RpcArgs, ServerAction, WorkError, WrId,
};
use crate::{
    Client, ClientConfig, ClientRegions, Instant, Phase, ReturnCode, Server, ServerConfig,
};

/// One of the two peers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The host.
    Client,
    /// The NAA.
    Server,
}

impl Side {
    fn peer(self) -> Self {
        match self {
            Self::Client => Self::Server,
            Self::Server => Self::Client,
        }
    }
}

/// First client buffer address: vector B's p0 (spec §10.2); p1, p2 … follow at 64 KiB steps.
pub const CLIENT_VA: u64 = 0x0000_7F00_000A_0000;
/// rkey of client parameter 0 (vector B); the next parameters count up.
pub const CLIENT_RKEY: u32 = 0x0001_0001;
/// First address the simulated NAA hands out: vector B's first Advertisement record.
pub const SERVER_VA: u64 = 0x0000_55BB_0000_1000;
/// rkey of server region 0 (vector B); the next regions count up.
pub const SERVER_RKEY: u32 = 0xB001;

/// An event or completion, owned (an [`Input`] borrows its data).
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs, reason = "the variants mirror `Input`")]
pub enum Ev {
    Disconnected,
    SendCompleted(WrId),
    WriteCompleted(WrId),
    Received { wr_id: WrId, data: Vec<u8> },
    WriteImmReceived { wr_id: WrId, imm: u32, len: u32 },
    WorkFailed { wr_id: WrId, error: WorkError },
}

impl Ev {
    fn input(&self) -> Input<'_> {
        match *self {
            Self::Disconnected => Input::Disconnected,
            Self::SendCompleted(id) => Input::SendCompleted(id),
            Self::WriteCompleted(id) => Input::WriteCompleted(id),
            Self::Received { wr_id, ref data } => Input::Received { wr_id, data },
            Self::WriteImmReceived { wr_id, imm, len } => {
                Input::WriteImmReceived { wr_id, imm, len }
            }
            Self::WorkFailed { wr_id, error } => Input::WorkFailed { wr_id, error },
        }
    }
}

/// A work request on its way to the peer.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs, reason = "the fields mirror `Post`")]
pub enum InFlight {
    Send {
        wr_id: WrId,
        data: Vec<u8>,
    },
    Write {
        wr_id: WrId,
        data: Vec<u8>,
        remote_addr: u64,
        rkey: u32,
        imm: Option<u32>,
    },
}

/// A registered (or, for NAA internal regions, merely allocated) memory region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mr {
    /// Start address.
    pub addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// The bytes.
    pub data: Vec<u8>,
    /// Registered for remote write (false: NAA internal region).
    pub remote: bool,
}

/// One side's simulated NIC and host bookkeeping.
#[derive(Debug, Default)]
pub struct Nic {
    /// Regions by the machine's `RegionId` index.
    pub mrs: Vec<Option<Mr>>,
    /// Posted receives, consumed in order.
    pub recvs: VecDeque<(WrId, RecvBuffer)>,
    /// Posted work requests not yet executed at the peer.
    pub wire: VecDeque<InFlight>,
    /// Keep this side's work requests on the wire (a silent or stalled peer link).
    pub hold_wire: bool,
    /// Keep this side's own send/write completions back (see [`Pair::release`]).
    pub hold_completions: bool,
    held: VecDeque<Ev>,
    /// The QP went to the error state: later work requests are flushed.
    pub qp_error: bool,
    /// Fail the next posting of an empty (data) receive with [`Input::PostFailed`].
    pub fail_data_recv: bool,
    /// Every action the machine emitted, not yet taken by the test.
    pub log: Vec<AnyAction>,
    /// Every MRSP message this side sent, in order.
    pub sent: Vec<Vec<u8>>,
}

impl Nic {
    /// The bytes of region `index`.
    pub fn mem(&self, index: usize) -> &[u8] {
        &self.mrs[index].as_ref().expect("no such region").data
    }

    /// The bytes of region `index`, for changes.
    pub fn mem_mut(&mut self, index: usize) -> &mut Vec<u8> {
        &mut self.mrs[index].as_mut().expect("no such region").data
    }

    /// The first SEND still on the wire, for editing in flight.
    pub fn send_in_flight(&mut self) -> &mut Vec<u8> {
        self.wire
            .iter_mut()
            .find_map(|op| match op {
                InFlight::Send { data, .. } => Some(data),
                InFlight::Write { .. } => None,
            })
            .expect("no SEND in flight")
    }

    fn set_mr(&mut self, index: usize, mr: Mr) {
        if self.mrs.len() <= index {
            self.mrs.resize(index + 1, None);
        }
        self.mrs[index] = Some(mr);
    }
}

/// A compact form of the actions for exact sequence assertions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(
    missing_docs,
    reason = "each variant abbreviates the action of the same name"
)]
pub enum Act {
    Recv(RecvBuffer),
    Send(usize),
    Write {
        region: u8,
        len: u32,
        imm: Option<u32>,
    },
    Alloc {
        region: u8,
        size: u32,
        internal: bool,
    },
    Kernel {
        fncode: u8,
        user: [u8; 3],
        rpc: u32,
    },
    MrspComplete,
    RpcComplete {
        status: ReturnCode,
        bytes: u32,
        rpc: u32,
    },
    Disconnect,
    Failed(Error),
}

impl From<AnyAction> for Act {
    fn from(a: AnyAction) -> Self {
        match a {
            AnyAction::PostRecv { buffer, .. } => Self::Recv(buffer),
            AnyAction::Send { len, .. } => Self::Send(len),
            AnyAction::Write(w) => Self::Write {
                region: w.region.index() as u8,
                len: w.len,
                imm: w.imm,
            },
            AnyAction::Allocate(Allocation {
                region,
                size,
                internal,
                ..
            }) => Self::Alloc {
                region: region.index() as u8,
                size,
                internal,
            },
            AnyAction::RunKernel(k) => Self::Kernel {
                fncode: k.fncode,
                user: k.user,
                rpc: k.rpc,
            },
            AnyAction::MrspComplete => Self::MrspComplete,
            AnyAction::RpcComplete(r) => Self::RpcComplete {
                status: r.status,
                bytes: r.bytes_received,
                rpc: r.rpc,
            },
            AnyAction::Disconnect => Self::Disconnect,
            AnyAction::Failed(e) => Self::Failed(e),
        }
    }
}

/// How the server's host answers [`ServerAction::Allocate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocMode {
    /// Allocate and call `region_assigned` at once.
    Auto,
    /// Like `Auto`, but region `n` fails (`assignment_failed`).
    FailAt(u8),
    /// Queue the request in [`Pair::allocs`]; the test calls [`Pair::assign`].
    Manual,
}

/// How the server's host runs kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelMode {
    /// Run the reference kernel and report this return code at once.
    Auto(ReturnCode),
    /// Leave it running; the test calls [`Pair::finish_kernel`].
    Manual,
}

/// Everything one allocation request carries.
pub type AllocRequest = Allocation;

/// The simulation.
#[derive(Debug)]
pub struct Pair {
    /// The virtual clock.
    pub now: Instant,
    /// The client machine.
    pub client: Client,
    /// The server machine.
    pub server: Server,
    /// The client's NIC.
    pub cnic: Nic,
    /// The server's NIC.
    pub snic: Nic,
    /// How allocations are answered.
    pub alloc_mode: AllocMode,
    /// How kernels run.
    pub kernel_mode: KernelMode,
    /// Allocation requests waiting for the test (`AllocMode::Manual`).
    pub allocs: VecDeque<AllocRequest>,
    /// Kernels started and not finished yet, oldest first.
    pub kernels: VecDeque<KernelCall>,
    /// Fewest receives the server had posted after any step since it posted its
    /// Advertisement (while it was not failed or finished).
    pub server_min_recvs: Option<usize>,
    /// Receives the server had posted when it posted each final write-back (WITH IMM).
    pub recvs_at_reply: Vec<usize>,
    /// The user bytes of the RPCs [`Pair::rpc`] starts (and [`Pair::args`] gives).
    pub user: [u8; 3],
    events: VecDeque<(Side, Ev)>,
    link_down: bool,
    next_server_addr: u64,
}

impl Pair {
    /// A client with parameter regions `params` (size, flag byte) and internal regions
    /// `internal`, and a server, both at time 0 and not yet connected. Client buffer `i` holds
    /// the pattern `j ^ (0x10 · (i + 1))`.
    pub fn new(
        params: &[(u32, u8)],
        internal: &[u32],
        ccfg: ClientConfig,
        scfg: ServerConfig,
    ) -> Self {
        let mut regions = ClientRegions::new();
        let mut cnic = Nic::default();
        for (i, &(size, flags)) in params.iter().enumerate() {
            let addr = CLIENT_VA + 0x1_0000 * i as u64;
            let rkey = CLIENT_RKEY + i as u32;
            let id = regions
                .add_param(addr, rkey, u64::from(size))
                .expect("add_param");
            if flags & 0x02 != 0 {
                regions.set_single_send(id).expect("flags");
            }
            if flags & 0x04 != 0 {
                regions.set_input(id).expect("flags");
            }
            if flags & 0x08 != 0 {
                regions.set_output(id).expect("flags");
            }
            assert_eq!(
                regions.param(id).expect("param").flags.bits(),
                flags,
                "flag byte {flags:#x}"
            );
            let data = (0..size)
                .map(|j| (j as u8) ^ (0x10 * (i as u8 + 1)))
                .collect();
            cnic.set_mr(
                i,
                Mr {
                    addr,
                    rkey,
                    data,
                    remote: true,
                },
            );
        }
        for &size in internal {
            regions.add_internal(u64::from(size)).expect("add_internal");
        }
        Self {
            now: Instant::ZERO,
            client: Client::new(ccfg, regions),
            server: Server::new(scfg, Instant::ZERO),
            cnic,
            snic: Nic::default(),
            alloc_mode: AllocMode::Auto,
            kernel_mode: KernelMode::Auto(ReturnCode::SUCCESS),
            allocs: VecDeque::new(),
            kernels: VecDeque::new(),
            server_min_recvs: None,
            recvs_at_reply: Vec::new(),
            user: [0; 3],
            events: VecDeque::new(),
            link_down: false,
            next_server_addr: SERVER_VA,
        }
    }

    /// The NIC of `side`.
    pub fn nic(&self, side: Side) -> &Nic {
        match side {
            Side::Client => &self.cnic,
            Side::Server => &self.snic,
        }
    }

    /// The NIC of `side`, for changes.
    pub fn nic_mut(&mut self, side: Side) -> &mut Nic {
        match side {
            Side::Client => &mut self.cnic,
            Side::Server => &mut self.snic,
        }
    }

    /// The connection comes up: the server posts its MRSP receive before accepting (spec §1.3),
    /// then both sides see ESTABLISHED.
    pub fn connect(&mut self) {
        self.run();
        self.client.handle_input(self.now, Input::AddressResolved);
        self.client.handle_input(self.now, Input::Established);
        self.server.handle_input(self.now, Input::Established);
        self.run();
    }

    /// Connects and runs the MRSP to completion; asserts success and clears the logs.
    pub fn mrsp(&mut self) {
        self.connect();
        self.client.start_mrsp(self.now).expect("start_mrsp");
        self.run();
        assert_eq!(
            self.client.phase(),
            Phase::MrspDone,
            "client: {:?}",
            self.cnic.log
        );
        assert_eq!(
            self.server.phase(),
            Phase::MrspDone,
            "server: {:?}",
            self.snic.log
        );
        self.take(Side::Client);
        self.take(Side::Server);
    }

    /// The arguments of the next RPC: the client's configured ones with [`Pair::user`].
    pub fn args(&self) -> RpcArgs {
        RpcArgs {
            user: self.user,
            ..self.client.config().rpc_args()
        }
    }

    /// Starts an RPC with [`Pair::args`] and runs until nothing moves; returns both sides'
    /// actions.
    pub fn rpc(&mut self) -> (Vec<Act>, Vec<Act>) {
        let args = self.args();
        self.client.start_rpc(self.now, args).expect("start_rpc");
        self.run();
        (self.take(Side::Client), self.take(Side::Server))
    }

    /// Takes the action log of `side`, in compact form.
    pub fn take(&mut self, side: Side) -> Vec<Act> {
        self.take_actions(side).into_iter().map(Act::from).collect()
    }

    /// Takes the action log of `side`.
    pub fn take_actions(&mut self, side: Side) -> Vec<AnyAction> {
        core::mem::take(&mut self.nic_mut(side).log)
    }

    /// Runs until nothing moves any more.
    pub fn run(&mut self) {
        for _ in 0..100_000 {
            if !self.step() {
                return;
            }
        }
        panic!("the simulation does not settle");
    }

    /// One step: execute pending actions, else feed one event, else deliver one work request.
    /// Returns false if nothing could be done.
    pub fn step(&mut self) -> bool {
        let progressed = if self.drain(Side::Client) | self.drain(Side::Server) {
            true
        } else if let Some((side, ev)) = self.events.pop_front() {
            self.feed(side, &ev);
            true
        } else {
            self.deliver(Side::Client) || self.deliver(Side::Server)
        };
        self.watch();
        progressed
    }

    /// Releases the completions held back for `side` (they queue behind everything else).
    pub fn release(&mut self, side: Side) {
        let nic = self.nic_mut(side);
        nic.hold_completions = false;
        let held: Vec<_> = nic.held.drain(..).collect();
        self.events.extend(held.into_iter().map(|ev| (side, ev)));
    }

    /// Host `side` tears the connection down (e.g. `rdma_disconnect`): the peer sees
    /// DISCONNECTED and nothing is delivered any more.
    pub fn hang_up(&mut self, side: Side) {
        if !self.link_down {
            self.link_down = true;
            self.events.push_back((side.peer(), Ev::Disconnected));
        }
    }

    /// Moves the clock to `t`, lets both machines check their deadlines and runs.
    pub fn advance_to(&mut self, t: Instant) {
        assert!(t >= self.now, "time runs forward");
        self.now = t;
        self.client.handle_timeout(t);
        self.server.handle_timeout(t);
        self.run();
    }

    /// Moves the clock by `d` (see [`Pair::advance_to`]).
    pub fn advance(&mut self, d: Duration) {
        self.advance_to(self.now + d);
    }

    /// Finishes the oldest running kernel: applies the reference kernel's effect, then reports
    /// `rc` to the server.
    pub fn finish_kernel(&mut self, rc: ReturnCode) -> Result<(), Error> {
        let call = self.kernels.pop_front().expect("no kernel running");
        let add = match call.fncode {
            1 => 1,
            2 => 2,
            _ => 0,
        };
        for mr in self.snic.mrs.iter_mut().flatten().filter(|m| m.remote) {
            for b in &mut mr.data {
                *b = b.wrapping_add(add);
            }
        }
        self.server.kernel_finished(self.now, rc)
    }

    /// Provides memory for the oldest waiting allocation request (`AllocMode::Manual`).
    pub fn assign_next(&mut self) -> Result<(), Error> {
        let req = self.allocs.pop_front().expect("no allocation waiting");
        self.assign(req)
    }

    /// Provides memory for `req` and reports it to the server: at the requested address under
    /// [`Placement::Requested`], else at the next free page-aligned address.
    pub fn assign(&mut self, req: AllocRequest) -> Result<(), Error> {
        let addr = match self.server.config().placement {
            Placement::Requested { .. } => req.requested_addr,
            Placement::Allocate => self.next_server_addr,
        };
        let rkey = SERVER_RKEY + req.region.index() as u32;
        self.server
            .region_assigned(self.now, req.region, addr, rkey)?;
        // Refused assignments leave the simulated memory as it was.
        if self.server.config().placement == Placement::Allocate {
            self.next_server_addr += u64::from(req.size).div_ceil(0x1000).max(1) * 0x1000;
        }
        let mr = Mr {
            addr,
            rkey,
            data: vec![0; req.size as usize],
            remote: !req.internal,
        };
        self.snic.set_mr(req.region.index(), mr);
        Ok(())
    }

    fn watch(&mut self) {
        let advertised = self.snic.sent.iter().any(|m| m.first() == Some(&0x02));
        let live = !matches!(self.server.phase(), Phase::Error | Phase::Finished);
        if advertised && live {
            let n = self.snic.recvs.len();
            // Spec §3.9: once the client may send, the NAA always has a receive posted.
            assert!(
                n >= 1,
                "the server has no receive posted: {:?}",
                self.snic.log
            );
            self.server_min_recvs = Some(self.server_min_recvs.map_or(n, |m| m.min(n)));
        }
    }

    fn feed(&mut self, side: Side, ev: &Ev) {
        match side {
            Side::Client => self.client.handle_input(self.now, ev.input()),
            Side::Server => self.server.handle_input(self.now, ev.input()),
        }
    }

    /// A completion of `side`'s own work request.
    fn complete(&mut self, side: Side, ev: Ev) {
        if matches!(ev, Ev::WorkFailed { .. }) {
            self.nic_mut(side).qp_error = true;
        }
        let nic = self.nic_mut(side);
        if nic.hold_completions {
            nic.held.push_back(ev);
        } else {
            self.events.push_back((side, ev));
        }
    }

    /// Polls and executes every action `side` has; true if there was any.
    fn drain(&mut self, side: Side) -> bool {
        let mut any = false;
        loop {
            let mut buf = [0u8; MRSP_RECV_LEN];
            let (logged, post) = match side {
                Side::Client => match self.client.poll_action(&mut buf) {
                    Some(a) => (AnyAction::from(a), a.post()),
                    None => return any,
                },
                Side::Server => match self.server.poll_action(&mut buf) {
                    Some(ServerAction::Post(p)) => (p.into(), Some(p)),
                    Some(a) => {
                        self.nic_mut(side).log.push(a.into());
                        self.host(a);
                        any = true;
                        continue;
                    }
                    None => return any,
                },
            };
            any = true;
            self.nic_mut(side).log.push(logged);
            if let Some(p) = post {
                self.post(side, p, &buf);
            }
        }
    }

    fn post(&mut self, side: Side, post: Post, buf: &[u8]) {
        match post {
            Post::Recv { wr_id, buffer } => {
                let nic = self.nic_mut(side);
                if buffer == RecvBuffer::Empty && nic.fail_data_recv {
                    nic.fail_data_recv = false;
                    // The host reports the failed post before it polls the next action.
                    match side {
                        Side::Client => {
                            self.client.handle_input(self.now, Input::PostFailed(wr_id))
                        }
                        Side::Server => {
                            self.server.handle_input(self.now, Input::PostFailed(wr_id))
                        }
                    }
                } else {
                    nic.recvs.push_back((wr_id, buffer));
                }
            }
            Post::Send { wr_id, len } => {
                let data = buf[..len].to_vec();
                let nic = self.nic_mut(side);
                nic.sent.push(data.clone());
                nic.wire.push_back(InFlight::Send { wr_id, data });
            }
            Post::Write(w) => {
                // Spec §1.5: the Solicited Event bit on exactly the final write (WITH IMM).
                assert_eq!(
                    w.solicited,
                    w.imm.is_some(),
                    "{side:?}: SE only on WITH IMM: {w:?}"
                );
                if side == Side::Server && w.imm.is_some() {
                    self.recvs_at_reply.push(self.snic.recvs.len());
                }
                let source = self
                    .nic(side)
                    .mrs
                    .get(w.region.index())
                    .and_then(Option::as_ref);
                match source.and_then(|mr| mr.data.get(..w.len as usize)) {
                    Some(bytes) => {
                        let op = InFlight::Write {
                            wr_id: w.wr_id,
                            data: bytes.to_vec(),
                            remote_addr: w.remote_addr,
                            rkey: w.rkey,
                            imm: w.imm,
                        };
                        self.nic_mut(side).wire.push_back(op);
                    }
                    None => {
                        let error = WorkError::LocalProtection;
                        self.complete(
                            side,
                            Ev::WorkFailed {
                                wr_id: w.wr_id,
                                error,
                            },
                        );
                    }
                }
            }
        }
    }

    /// The server's host: allocations, kernels, teardown.
    fn host(&mut self, action: ServerAction) {
        match action {
            ServerAction::Allocate(req) => {
                let region = req.region;
                match self.alloc_mode {
                    AllocMode::FailAt(n) if region.index() == usize::from(n) => {
                        self.server
                            .assignment_failed(self.now, region)
                            .expect("assignment_failed");
                    }
                    AllocMode::Auto | AllocMode::FailAt(_) => {
                        self.assign(req).expect("region_assigned")
                    }
                    AllocMode::Manual => self.allocs.push_back(req),
                }
            }
            ServerAction::RunKernel(call) => {
                self.kernels.push_back(call);
                if let KernelMode::Auto(rc) = self.kernel_mode {
                    self.finish_kernel(rc).expect("kernel_finished");
                }
            }
            ServerAction::Disconnect => self.hang_up(Side::Server),
            ServerAction::Post(_) | ServerAction::MrspComplete | ServerAction::Failed(_) => {}
        }
    }

    /// Executes the oldest work request of `side` at its peer, unless held; true if one was.
    fn deliver(&mut self, side: Side) -> bool {
        if self.nic(side).hold_wire {
            return false;
        }
        self.deliver_one(side)
    }

    /// Executes the oldest work request of `side` at its peer, even if held; true if there
    /// was one.
    pub fn deliver_one(&mut self, side: Side) -> bool {
        let Some(op) = self.nic_mut(side).wire.pop_front() else {
            return false;
        };
        let to = side.peer();
        if self.link_down || self.nic(side).qp_error {
            let (InFlight::Send { wr_id, .. } | InFlight::Write { wr_id, .. }) = op;
            self.complete(
                side,
                Ev::WorkFailed {
                    wr_id,
                    error: WorkError::Flushed,
                },
            );
            return true;
        }
        match op {
            InFlight::Send { wr_id, data } => match self.nic_mut(to).recvs.pop_front() {
                None => {
                    let error = WorkError::RnrRetryExceeded;
                    self.complete(side, Ev::WorkFailed { wr_id, error });
                }
                Some((rid, RecvBuffer::Message)) if data.len() <= MRSP_RECV_LEN => {
                    self.events
                        .push_back((to, Ev::Received { wr_id: rid, data }));
                    self.complete(side, Ev::SendCompleted(wr_id));
                }
                Some((rid, _)) => {
                    let error = WorkError::LocalLength;
                    self.events
                        .push_back((to, Ev::WorkFailed { wr_id: rid, error }));
                    let error = WorkError::RemoteInvalidRequest;
                    self.complete(side, Ev::WorkFailed { wr_id, error });
                }
            },
            InFlight::Write {
                wr_id,
                data,
                remote_addr,
                rkey,
                imm,
            } => {
                let target = if data.is_empty() {
                    None
                } else {
                    match self.nic(to).find_target(remote_addr, rkey, data.len()) {
                        Some(t) => Some(t),
                        None => {
                            let error = WorkError::RemoteAccess;
                            self.complete(side, Ev::WorkFailed { wr_id, error });
                            return true;
                        }
                    }
                };
                let recv = match imm {
                    None => None,
                    Some(imm) => match self.nic_mut(to).recvs.pop_front() {
                        Some((rid, _)) => Some((rid, imm)),
                        None => {
                            let error = WorkError::RnrRetryExceeded;
                            self.complete(side, Ev::WorkFailed { wr_id, error });
                            return true;
                        }
                    },
                };
                if let Some((index, offset)) = target {
                    let mem = self.nic_mut(to).mem_mut(index);
                    mem[offset..offset + data.len()].copy_from_slice(&data);
                }
                if let Some((rid, imm)) = recv {
                    let len = data.len() as u32;
                    self.events.push_back((
                        to,
                        Ev::WriteImmReceived {
                            wr_id: rid,
                            imm,
                            len,
                        },
                    ));
                }
                self.complete(side, Ev::WriteCompleted(wr_id));
            }
        }
        true
    }
}

impl Nic {
    /// The region (index, offset) a remote write of `len` bytes at `addr` with `rkey` lands in.
    fn find_target(&self, addr: u64, rkey: u32, len: usize) -> Option<(usize, usize)> {
        self.mrs.iter().enumerate().find_map(|(i, mr)| {
            let mr = mr.as_ref().filter(|mr| mr.remote && mr.rkey == rkey)?;
            let offset = usize::try_from(addr.checked_sub(mr.addr)?).ok()?;
            (offset.checked_add(len)? <= mr.data.len()).then_some((i, offset))
        })
    }
}
