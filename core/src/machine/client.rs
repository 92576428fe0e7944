//! The client (host) protocol machine: MRSP initiator and RPC caller (spec §2, §3, §4.2).

use core::time::Duration;

use heapless::{Deque, Vec};

use super::{
    ClientAction, Error, Input, Machine, Phase, Post, QUEUE_LEN, RecvBuffer, RpcResult, WorkError,
    WrId, WrKind, Write, expired,
};
use crate::config::MAX_REGIONS;
use crate::region::{ClientRegions, RegionId};
use crate::time::Instant;
use crate::wire::imm::{self, CLIENT_ERROR_VALUE};
use crate::wire::mrsp::{self, AdvertRecord, Repr};
use crate::wire::{FunctionCode, ReturnCode};

mod express;

pub use express::Express;

/// Client settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ClientConfig {
    /// Function code of the RPCs on this connection unless an RPC names its own
    /// ([`ClientConfig::rpc_args`]).
    pub fncode: FunctionCode,
    /// How long the MRSP may take.
    pub mrsp_timeout: Duration,
    /// Default per-RPC deadline (writes, kernel and reply).
    pub rpc_timeout: Duration,
    /// Most MRSP records to send: 32, or [`crate::config::MAX_RECORDS_C_PEER`] (31) when the
    /// NAA is the C software NAA (spec §2.8).
    pub max_records: u8,
}

impl ClientConfig {
    /// Defaults: MRSP timeout 10 s, RPC timeout 60 s, 32 records.
    pub const fn new(fncode: FunctionCode) -> Self {
        Self {
            fncode,
            mrsp_timeout: Duration::from_secs(10),
            rpc_timeout: Duration::from_secs(60),
            max_records: MAX_REGIONS as u8,
        }
    }

    /// The arguments of an RPC that names none of its own: this configuration's function
    /// code and RPC timeout, user bytes 0.
    pub const fn rpc_args(&self) -> RpcArgs {
        RpcArgs {
            fncode: self.fncode,
            user: [0; 3],
            timeout: self.rpc_timeout,
        }
    }
}

/// The arguments of one RPC ([`Client::start_rpc`]): what its immediate carries and its
/// deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RpcArgs {
    /// The kernel to run (spec §3.2: any code the NAA serves).
    pub fncode: FunctionCode,
    /// The immediate's three user bytes (spec §3.2).
    pub user: [u8; 3],
    /// The RPC's deadline from its start (writes, kernel and reply).
    pub timeout: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pending {
    Recv(WrId, RecvBuffer),
    SendRequest,
    Writes,
    MrspComplete,
    RpcComplete(RpcResult),
    Failed(Error),
}

/// Which writes the current RPC still has to hand out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Plan {
    /// Input regions from `next` up to and including `last`; the last write carries `imm`.
    Inputs { next: u8, last: u8, imm: u32 },
    /// One zero-length WRITE WITH IMM `imm` to `target` (no input is sent; spec D-08).
    Empty { target: u8, imm: u32 },
    /// The error write of spec §3.5: zero length, immediate 0, to region 0.
    ClientError,
}

/// The protocol state; each variant holds the data that exists only in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Created ([`Phase::Init`]).
    Init,
    /// Address resolved ([`Phase::Ready`]).
    Resolved,
    /// Connected, MRSP not started ([`Phase::Connected`]).
    Connected,
    /// The MRSP is in flight: [`Phase::MrspSending`] until our SEND completed, then
    /// [`Phase::MrspReceiving`]. The Advertisement may overtake the send completion.
    Mrsp {
        sent: bool,
        answered: bool,
        deadline: Instant,
    },
    /// Ready for an RPC: [`Phase::MrspDone`] before the first, [`Phase::Finished`] after.
    Idle,
    /// An RPC is in flight: [`Phase::DataSending`] while write completions are missing,
    /// then [`Phase::DataReceiving`]. The reply may overtake our completions (D-20).
    Rpc {
        writes_left: u8,
        reply: Option<RpcResult>,
        deadline: Instant,
    },
    /// The peer disconnected between operations ([`Phase::Disconnected`]).
    Disconnected,
    /// Terminal ([`Phase::Error`]).
    Failed(Error),
}

/// The client protocol machine; see the [module docs](super) for the [`Machine`] contract.
///
/// Typical use: fill [`Client::regions_mut`], feed [`Input::Established`], call
/// [`Client::start_mrsp`], drain actions until [`ClientAction::MrspComplete`]; then per RPC
/// [`Client::start_rpc`] and drain until [`ClientAction::RpcComplete`].
///
/// A steady RPC may instead take the express lane ([`Client::express_rpc`],
/// [`Client::express_input`]): the same transitions, with what they queue drained inline.
#[derive(Clone, Debug)]
pub struct Client {
    config: ClientConfig,
    state: State,
    regions: ClientRegions,
    remote: Vec<AdvertRecord, MAX_REGIONS>,
    rpcs: u32,
    last: Option<RpcResult>,
    queue: Deque<Pending, QUEUE_LEN>,
    /// The write list being handed out (output cursor).
    plan: Option<Plan>,
    /// The receive posted ahead for the next RPC's reply (see
    /// [`Client::start_rpc_with_timeout`]).
    spare: Option<WrId>,
}

impl Client {
    /// A machine in [`Phase::Init`] with the given regions.
    pub fn new(config: ClientConfig, regions: ClientRegions) -> Self {
        Self {
            config,
            state: State::Init,
            regions,
            remote: Vec::new(),
            rpcs: 0,
            last: None,
            queue: Deque::new(),
            plan: None,
            spare: None,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// The region table.
    pub fn regions(&self) -> &ClientRegions {
        &self.regions
    }

    /// The region table, for changes; only before the MRSP starts.
    pub fn regions_mut(&mut self) -> Result<&mut ClientRegions, Error> {
        if !matches!(self.state, State::Init | State::Resolved | State::Connected) {
            return Err(self.wrong_phase());
        }
        Ok(&mut self.regions)
    }

    /// The NAA regions learned from the MRSP (index = parameter index).
    pub fn remote_regions(&self) -> &[AdvertRecord] {
        &self.remote
    }

    /// RPCs started on this connection.
    pub fn rpc_count(&self) -> u32 {
        self.rpcs
    }

    /// True while an MRSP or RPC is in flight.
    pub fn is_busy(&self) -> bool {
        matches!(self.state, State::Mrsp { .. } | State::Rpc { .. })
    }

    /// True once the MRSP completed, while the connection is usable (RPCs may start unless
    /// one is in flight).
    pub fn mrsp_done(&self) -> bool {
        matches!(self.state, State::Idle | State::Rpc { .. })
    }

    /// The result of the last finished RPC; cleared when the next RPC starts.
    pub fn last_result(&self) -> Option<RpcResult> {
        self.last
    }

    /// Sets the bytes a region sends per RPC (`None` = full size); not during an RPC. After
    /// the MRSP the length must also fit the NAA's region.
    pub fn set_bytes_to_send(&mut self, id: RegionId, len: Option<u32>) -> Result<(), Error> {
        self.check_quiet()?;
        self.regions.set_bytes_to_send(id, len)?;
        Ok(())
    }

    fn check_quiet(&self) -> Result<(), Error> {
        if self.is_busy() || matches!(self.state, State::Failed(_)) {
            return Err(self.wrong_phase());
        }
        Ok(())
    }

    fn wrong_phase(&self) -> Error {
        Error::WrongPhase {
            phase: self.phase(),
        }
    }

    /// Starts the MRSP: posts the MRSP receive and sends the Advertisement+Request.
    pub fn start_mrsp(&mut self, now: Instant) -> Result<(), Error> {
        if self.state != State::Connected {
            return Err(self.wrong_phase());
        }
        let count = self.regions.record_count();
        if self.regions.params().is_empty() {
            return Err(Error::NoParameterRegions);
        }
        if count > usize::from(self.config.max_records) {
            return Err(Error::TooManyRegions {
                count: count as u8,
                max: self.config.max_records,
            });
        }
        self.regions.requested_addrs()?;
        self.push(Pending::Recv(
            WrId::new(WrKind::MrspRecv, 0),
            RecvBuffer::Message,
        ));
        self.push(Pending::SendRequest);
        self.state = State::Mrsp {
            sent: false,
            answered: false,
            deadline: now + self.config.mrsp_timeout,
        };
        Ok(())
    }

    /// Starts an RPC (spec §3.1) with `args` (for the configured ones:
    /// [`ClientConfig::rpc_args`]): posts the input writes, the last one WITH IMMEDIATE
    /// carrying the function code, then the receive for the next RPC's reply. This RPC's
    /// reply receive was posted ahead (with the MRSP's end or the previous RPC); if that post
    /// failed, it is posted first, before the writes. Single-send inputs are skipped from the
    /// second RPC on; with no input to send, one zero-length WRITE WITH IMM goes out.
    pub fn start_rpc(&mut self, now: Instant, args: RpcArgs) -> Result<(), Error> {
        let ahead = self.begin_rpc(now, args)?;
        self.queue_rpc_posts(ahead);
        Ok(())
    }

    /// The transition of an RPC's start: checks, plan, counter and state. True if the
    /// reply's receive was posted ahead (taken).
    fn begin_rpc(&mut self, now: Instant, args: RpcArgs) -> Result<bool, Error> {
        if self.state != State::Idle {
            return Err(self.wrong_phase());
        }
        if self.rpcs > 0 {
            self.regions.retire_single_send();
        }
        // Every write must fit the NAA's region (checked here: bytes-to-send may have changed).
        for (i, (p, r)) in self.regions.params().iter().zip(&self.remote).enumerate() {
            if p.is_sent() && p.send_len() > r.size {
                return Err(Error::AdvertTooSmall {
                    region: i as u8,
                    advertised: r.size,
                    needed: p.send_len(),
                });
            }
        }
        let imm = imm::encode_request(args.fncode, args.user);
        let params = self.regions.params();
        let sent = || params.iter().enumerate().filter(|(_, p)| p.is_sent());
        let plan = match (sent().next(), sent().next_back()) {
            (Some((first, _)), Some((last, _))) => Plan::Inputs {
                next: first as u8,
                last: last as u8,
                imm,
            },
            _ => {
                let target = params
                    .iter()
                    .position(|p| p.flags.contains(crate::region::RegionFlags::INPUT))
                    .unwrap_or(0);
                Plan::Empty {
                    target: target as u8,
                    imm,
                }
            }
        };
        let writes_left = match plan {
            Plan::Inputs { .. } => sent().count() as u8,
            _ => 1,
        };
        self.rpcs = self.rpcs.saturating_add(1);
        self.plan = Some(plan);
        self.last = None;
        self.state = State::Rpc {
            writes_left,
            reply: None,
            deadline: now + args.timeout,
        };
        Ok(self.spare.take().is_some())
    }

    /// Queues an RPC's posts: the reply's receive unless it was posted `ahead` (a failure to
    /// post it now makes the writes the error write, spec §3.5), the writes, then the
    /// receive for the next RPC's reply.
    fn queue_rpc_posts(&mut self, ahead: bool) {
        if !ahead {
            self.push(Pending::Recv(
                WrId::new(WrKind::DataRecv, self.rpcs),
                RecvBuffer::Empty,
            ));
        }
        self.push(Pending::Writes);
        self.post_spare();
    }

    fn on_send_completed(&mut self, id: WrId) {
        if id.kind() != Some(WrKind::MrspSend) {
            return self.fail(Error::UnknownWorkRequest(id));
        }
        match &mut self.state {
            State::Mrsp {
                sent: sent @ false, ..
            } => *sent = true,
            _ => return self.unexpected(),
        }
        self.finish_mrsp_if_done();
    }

    fn on_received(&mut self, id: WrId, data: &[u8]) {
        if id.kind() != Some(WrKind::MrspRecv)
            || !matches!(
                self.state,
                State::Mrsp {
                    answered: false,
                    ..
                }
            )
        {
            return self.unexpected();
        }
        match Repr::parse(data) {
            Err(e) => self.fail(Error::Malformed(e)),
            Ok(Repr::Error(code)) => self.fail(Error::MrspRejected(code)),
            Ok(Repr::AdvertiseRequest(_)) => {
                self.fail(Error::UnexpectedMessage(mrsp::MsgType::AdvertiseRequest));
            }
            Ok(Repr::Advertise(records)) => match self.check_advert(&records) {
                Err(e) => self.fail(e),
                Ok(()) => {
                    self.remote = records;
                    if let State::Mrsp { answered, .. } = &mut self.state {
                        *answered = true;
                    }
                    self.finish_mrsp_if_done();
                }
            },
        }
    }

    /// Spec §11.4: as many records as parameters, each at least as large as the client region.
    fn check_advert(&self, records: &[AdvertRecord]) -> Result<(), Error> {
        let params = self.regions.params();
        if records.len() != params.len() {
            return Err(Error::AdvertCountMismatch {
                expected: params.len() as u8,
                got: records.len() as u8,
            });
        }
        for (i, (p, r)) in params.iter().zip(records).enumerate() {
            if r.size < p.size {
                return Err(Error::AdvertTooSmall {
                    region: i as u8,
                    advertised: r.size,
                    needed: p.size,
                });
            }
            if r.addr.checked_add(u64::from(r.size)).is_none() {
                return Err(Error::AdvertAddressOverflow { region: i as u8 });
            }
        }
        Ok(())
    }

    fn finish_mrsp_if_done(&mut self) {
        if let State::Mrsp {
            sent: true,
            answered: true,
            ..
        } = self.state
        {
            self.state = State::Idle;
            self.post_spare();
            self.push(Pending::MrspComplete);
        }
    }

    /// Posts the receive of the next RPC's reply ahead of it (after the MRSP, and after each
    /// RPC's writes), so that an RPC's start posts only its writes: a receive's post is off
    /// the RPC's path (about a microsecond per RPC under emulation). Spec §3.9 holds: the
    /// reply's receive is posted before the writes of its RPC. No SEND comes after the MRSP,
    /// so a receive without buffer is all the client ever needs from then on.
    fn post_spare(&mut self) {
        let id = self.next_spare();
        self.push(Pending::Recv(id, RecvBuffer::Empty));
    }

    /// The receive for the next RPC's reply, noted as posted ahead.
    fn next_spare(&mut self) -> WrId {
        let id = WrId::new(WrKind::DataRecv, self.rpcs.wrapping_add(1));
        self.spare = Some(id);
        id
    }

    /// One of our writes completed: counted. The RPC's result if that finished it (not
    /// queued: [`Client::rpc_step`] or the express lane hands it out).
    fn on_write_completed(&mut self, id: WrId) -> Option<RpcResult> {
        if !matches!(id.kind(), Some(WrKind::Write | WrKind::ErrorWrite)) {
            self.fail(Error::UnknownWorkRequest(id));
            return None;
        }
        match &mut self.state {
            State::Rpc { writes_left, .. } if *writes_left > 0 => *writes_left -= 1,
            _ => {
                self.unexpected();
                return None;
            }
        }
        self.finish_rpc_if_done()
    }

    /// The NAA's final WRITE WITH IMM. It may overtake our own write completions (D-20).
    /// The RPC's result if that finished it.
    fn on_reply(&mut self, id: WrId, imm: u32, len: u32) -> Option<RpcResult> {
        let rpc = self.rpcs;
        match &mut self.state {
            State::Rpc {
                reply: reply @ None,
                ..
            } if id.kind() == Some(WrKind::DataRecv) => {
                *reply = Some(RpcResult {
                    status: ReturnCode::from_imm(imm),
                    bytes_received: len,
                    rpc,
                });
            }
            _ => {
                self.unexpected();
                return None;
            }
        }
        self.finish_rpc_if_done()
    }

    fn finish_rpc_if_done(&mut self) -> Option<RpcResult> {
        let State::Rpc {
            writes_left: 0,
            reply: Some(result),
            ..
        } = self.state
        else {
            return None;
        };
        self.state = State::Idle;
        self.last = Some(result);
        Some(result)
    }

    /// Queues the end of an RPC that `result` says finished (the general path).
    fn rpc_step(&mut self, result: Option<RpcResult>) {
        if let Some(result) = result {
            self.push(Pending::RpcComplete(result));
        }
    }

    /// Posting the reply receive failed: tell the NAA with the error write (spec §3.5). The
    /// receive posted ahead for the next RPC is only forgotten: that RPC posts its own before
    /// its writes, and the error write follows if that fails too.
    fn on_post_failed(&mut self, id: WrId) {
        if self.spare == Some(id) {
            self.spare = None;
            return;
        }
        let sending = matches!(self.state, State::Rpc { writes_left, .. } if writes_left > 0);
        if id.kind() == Some(WrKind::DataRecv) && sending {
            let error = Error::PostFailed(id);
            self.queue.clear();
            // The receive queued ahead for the next RPC goes with the queue.
            self.spare = None;
            self.plan = Some(Plan::ClientError);
            self.push(Pending::Writes);
            self.push(Pending::Failed(error));
            self.state = State::Failed(error);
        } else {
            self.fail(Error::PostFailed(id));
        }
    }

    fn unexpected(&mut self) {
        self.fail(Error::Unexpected {
            phase: self.phase(),
        });
    }

    fn fail(&mut self, error: Error) {
        self.queue.clear();
        self.plan = None;
        self.state = State::Failed(error);
        // The queue was just cleared, so this push cannot fail.
        let _ = self.queue.push_back(Pending::Failed(error));
    }

    fn push(&mut self, p: Pending) {
        if self.queue.push_back(p).is_err() {
            self.fail(Error::QueueOverflow);
        }
    }

    fn emit_request(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let records = self.regions.records()?;
        let needed = mrsp::HEADER_LEN + mrsp::REQUEST_RECORD_LEN * records.len();
        if buf.len() < needed {
            return Err(Error::BufferTooSmall {
                needed,
                len: buf.len(),
            });
        }
        mrsp::emit_advertise_request(buf, records).map_err(Error::Malformed)
    }

    fn next_write(&mut self) -> Option<Write> {
        let params = self.regions.params();
        let (write, rest) = match self.plan? {
            Plan::Inputs { next, last, imm } => {
                let (i, p) = params
                    .iter()
                    .enumerate()
                    .skip(usize::from(next))
                    .find(|(_, p)| p.is_sent())?;
                let is_last = i >= usize::from(last);
                let w = self.write_to(i, p.send_len(), is_last.then_some(imm));
                let rest = (!is_last).then_some(Plan::Inputs {
                    next: i as u8 + 1,
                    last,
                    imm,
                });
                (w, rest)
            }
            Plan::Empty { target, imm } => (self.write_to(usize::from(target), 0, Some(imm)), None),
            Plan::ClientError => {
                let mut w = self.write_to(0, 0, Some(CLIENT_ERROR_VALUE));
                w.wr_id = WrId::new(WrKind::ErrorWrite, 0);
                (w, None)
            }
        };
        self.plan = rest;
        Some(write)
    }

    fn write_to(&self, index: usize, len: u32, imm: Option<u32>) -> Write {
        let remote = self.remote.get(index).copied().unwrap_or(AdvertRecord {
            addr: 0,
            rkey: 0,
            size: 0,
        });
        Write {
            wr_id: WrId::new(WrKind::Write, index as u32),
            region: RegionId::new(index as u8),
            len,
            remote_addr: remote.addr,
            rkey: remote.rkey,
            imm,
            solicited: imm.is_some(),
        }
    }
}

impl Machine for Client {
    type Action = ClientAction;

    fn poll_action(&mut self, buf: &mut [u8]) -> Option<ClientAction> {
        loop {
            let front = *self.queue.front()?;
            let action = match front {
                Pending::Recv(wr_id, buffer) => ClientAction::Post(Post::Recv { wr_id, buffer }),
                Pending::SendRequest => match self.emit_request(buf) {
                    Ok(len) => ClientAction::Post(Post::Send {
                        wr_id: WrId::new(WrKind::MrspSend, 0),
                        len,
                    }),
                    Err(e) => {
                        self.fail(e);
                        continue;
                    }
                },
                Pending::Writes => match self.next_write() {
                    Some(w) => return Some(ClientAction::Post(Post::Write(w))),
                    None => {
                        self.queue.pop_front();
                        continue;
                    }
                },
                Pending::MrspComplete => ClientAction::MrspComplete,
                Pending::RpcComplete(r) => ClientAction::RpcComplete(r),
                Pending::Failed(e) => ClientAction::Failed(e),
            };
            self.queue.pop_front();
            return Some(action);
        }
    }

    fn handle_input(&mut self, _now: Instant, input: Input<'_>) {
        if matches!(self.state, State::Failed(_)) {
            return;
        }
        match input {
            Input::AddressResolved if self.state == State::Init => self.state = State::Resolved,
            Input::Established if matches!(self.state, State::Init | State::Resolved) => {
                self.state = State::Connected;
            }
            Input::AddressResolved | Input::Established => self.unexpected(),
            Input::Disconnected => {
                if self.is_busy() {
                    self.fail(Error::PeerDisconnected {
                        phase: self.phase(),
                    });
                } else {
                    self.state = State::Disconnected;
                }
            }
            Input::SendCompleted(id) => self.on_send_completed(id),
            Input::WriteCompleted(id) => {
                let finished = self.on_write_completed(id);
                self.rpc_step(finished);
            }
            Input::Received { wr_id, data } => self.on_received(wr_id, data),
            Input::WriteImmReceived { wr_id, imm, len } => {
                let finished = self.on_reply(wr_id, imm, len);
                self.rpc_step(finished);
            }
            // The receive posted ahead is flushed when the connection ends between RPCs: the
            // disconnect says so (or the next RPC's posts fail), not the flush.
            Input::WorkFailed {
                wr_id,
                error: WorkError::Flushed,
            } if self.spare == Some(wr_id) && !self.is_busy() => self.spare = None,
            Input::WorkFailed { wr_id, error } => self.fail(Error::WorkFailed { wr_id, error }),
            Input::PostFailed(id) => self.on_post_failed(id),
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        if expired(self.poll_timeout(), now) {
            self.fail(Error::Timeout {
                phase: self.phase(),
            });
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Mrsp { deadline, .. } | State::Rpc { deadline, .. } => Some(deadline),
            _ => None,
        }
    }

    fn phase(&self) -> Phase {
        match self.state {
            State::Init => Phase::Init,
            State::Resolved => Phase::Ready,
            State::Connected => Phase::Connected,
            State::Mrsp { sent: false, .. } => Phase::MrspSending,
            State::Mrsp { sent: true, .. } => Phase::MrspReceiving,
            State::Idle if self.rpcs == 0 => Phase::MrspDone,
            State::Idle => Phase::Finished,
            State::Rpc { writes_left: 0, .. } => Phase::DataReceiving,
            State::Rpc { .. } => Phase::DataSending,
            State::Disconnected => Phase::Disconnected,
            State::Failed(_) => Phase::Error,
        }
    }

    fn error(&self) -> Option<Error> {
        match self.state {
            State::Failed(e) => Some(e),
            _ => None,
        }
    }
}
