//! The RC protocol engine of one queue pair, sans-IO: frames and work requests in, frames,
//! completions and connection events out, time supplied by the caller (in the style of
//! quinn-proto's `Connection`).
//!
//! It holds the send queue (messages numbered 1, 2, 3 … in stream order: the msn), the posted
//! receives, the completion and event queues and the region table. The responder side checks
//! rkey and bounds before any byte is placed, consumes posted receives, waits for one up to the
//! RNR timeout (keeping the peer's timer alive with NOPs), and acknowledges cumulatively (an
//! ACK is held back for `ack_delay` so that a reply can carry it). The requester side completes
//! requests in order on ACK, fails them on NAK, and fails them with `RetryExceeded` when the
//! peer stays silent for the ACK timeout. Any error tears the queue pair down: outstanding work
//! requests are flushed, `Disconnected` is reported, and the final frames (a NAK for a refused
//! message, a DREQ for a local disconnect) are handed out by [`Engine::poll_transmit`] before
//! it runs dry, so the I/O part sends them before it closes the socket.
//!
//! Payload bytes never pass through here: for an incoming data frame the engine answers with
//! the validated memory range to place the payload into ([`Inbound::Place`]); for an outgoing
//! one it hands out the range to stream ([`Transmit::Data`]). The I/O part reports back with
//! [`Engine::handle_placed`] / [`Engine::handle_transmitted`].

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::fault::{Direction, FaultAction, FaultPlan};
use super::frame::Frame;
use super::regions::{Local, Regions};
use crate::transport::{
    Completion, ConnectionEvent, Result, SendOp, SendWr, Sge, TransportError, WcOpcode, WcStatus,
};

/// Protocol settings of the engine.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    /// Silence of the peer after which a transmitted request fails with `RetryExceeded`.
    pub(crate) ack_timeout: Duration,
    /// How long a message waits for a posted receive before it is refused.
    pub(crate) rnr_timeout: Duration,
    /// How long a due ACK is held back for a reply to carry it.
    pub(crate) ack_delay: Duration,
    /// Most outstanding send-queue work requests.
    pub(crate) max_send_wr: usize,
    /// Most outstanding receives.
    pub(crate) max_recv_wr: usize,
    /// Faults to inject into transmitted frames.
    pub(crate) faults: FaultPlan,
}

/// Connection phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Incoming request, not accepted yet: registration and receives only.
    Pending,
    /// Established.
    Connected,
    /// Torn down: everything was flushed.
    Closed,
}

/// Why the connection is torn down.
#[derive(Clone, Copy, Debug)]
enum Cause {
    /// Flush everything.
    Flush,
    /// Send-queue request `msn` failed with `status`; the requests before it succeeded if
    /// `earlier_ok` (a NAK acknowledges them), otherwise they are flushed too.
    Failed {
        msn: u64,
        status: WcStatus,
        earlier_ok: bool,
    },
}

/// A posted receive.
#[derive(Debug)]
struct RecvEntry {
    wr_id: u64,
    local: Option<Local>,
}

/// A posted send-queue work request, until it completes.
#[derive(Debug)]
struct SendEntry {
    wr: SendWr,
    local: Option<Local>,
}

impl SendEntry {
    fn opcode(&self) -> WcOpcode {
        match self.wr.op {
            SendOp::Send => WcOpcode::Send,
            SendOp::Write(_) | SendOp::WriteWithImm(..) => WcOpcode::RdmaWrite,
        }
    }

    fn frame(&self) -> Frame {
        let len = self.local.as_ref().map_or(0, |l| l.len as u32);
        let solicited = self.wr.solicited;
        match self.wr.op {
            SendOp::Send => Frame::Send { len, solicited },
            SendOp::Write(remote) => Frame::Write { len, remote },
            SendOp::WriteWithImm(remote, imm) => Frame::WriteImm {
                len,
                remote,
                imm,
                solicited,
            },
        }
    }
}

/// The incoming message being processed.
#[derive(Debug)]
enum RxState {
    /// Between messages.
    Idle,
    /// Waiting for a posted receive (receiver not ready).
    Stalled {
        frame: Frame,
        target: Option<Local>,
        deadline: Instant,
        next_nop: Instant,
    },
    /// The payload is being placed.
    Placing { frame: Frame },
}

/// What the I/O part does after an incoming frame (header) was handled.
#[derive(Debug)]
pub(crate) enum Inbound {
    /// Nothing more: the frame is fully handled.
    Done,
    /// Place the `len` payload bytes into this range, then call [`Engine::handle_placed`] (or
    /// [`Engine::handle_place_failed`] if the memory became inaccessible).
    Place(Local),
    /// No receive is posted: read nothing more until [`Engine::resume`] gives the next step.
    Stalled,
    /// The connection is torn down: read nothing more.
    Closed,
}

/// A frame to transmit.
#[derive(Debug)]
pub(crate) enum Transmit {
    /// A control frame (ACK, NAK, NOP, DREQ).
    Control(Frame),
    /// Data message `msn`: its header, then the payload from `local`; report it with
    /// [`Engine::handle_transmitted`] once fully written.
    Data {
        /// Message sequence number.
        msn: u64,
        /// Header.
        frame: Frame,
        /// Payload.
        local: Option<Local>,
    },
}

/// How the connection ended (what the I/O part does with the socket).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Orderly (refusal, NAK received, disconnect): let the peer's bytes drain before closing,
    /// so that our close does not reset frames still in flight to it.
    Linger,
    /// The peer is gone, silent or broke the protocol, or a local error: close at once.
    Abort,
}

/// The RC engine of one queue pair.
#[derive(Debug)]
pub(crate) struct Engine {
    settings: Settings,
    phase: Phase,
    ending: Ending,
    /// Registered regions.
    pub(crate) regions: Regions,
    /// Send requests not completed yet; `sq[i]` has msn `acked + 1 + i`.
    sq: VecDeque<SendEntry>,
    /// Highest completed msn.
    acked: u64,
    /// msn of the next request to hand out for transmission.
    tx_next: u64,
    /// Highest msn fully written to the peer.
    tx_done: u64,
    /// Start of the current acknowledgement wait.
    ack_clock: Instant,
    /// When bytes last arrived from the peer.
    last_rx: Instant,
    recvs: VecDeque<RecvEntry>,
    rx: RxState,
    /// Data messages placed (responder msn).
    rx_msn: u64,
    /// Highest msn acknowledged to the peer.
    ack_sent: u64,
    /// When the due ACK goes out at the latest.
    ack_at: Option<Instant>,
    nop_due: bool,
    /// Frames to send before the socket closes.
    finals: VecDeque<Frame>,
    /// True once teardown queued a final frame (NAK or DREQ) for the peer.
    final_queued: bool,
    /// A fault dropped a transmitted frame: nothing is transmitted any more.
    mute: bool,
    /// A fault the I/O part carries out before it writes what it took last.
    io_fault: Option<FaultAction>,
    /// A write to the peer failed: the connection ends once the input that arrived before
    /// is read (it may hold the NAK that explains the failure).
    send_failed: bool,
    cq: VecDeque<Completion>,
    events: VecDeque<ConnectionEvent>,
}

impl Engine {
    /// A queue pair waiting to be established.
    pub(crate) fn new(settings: Settings, now: Instant) -> Self {
        Self {
            settings,
            phase: Phase::Pending,
            ending: Ending::Linger,
            regions: Regions::new(),
            sq: VecDeque::new(),
            acked: 0,
            tx_next: 1,
            tx_done: 0,
            ack_clock: now,
            last_rx: now,
            recvs: VecDeque::new(),
            rx: RxState::Idle,
            rx_msn: 0,
            ack_sent: 0,
            ack_at: None,
            nop_due: false,
            finals: VecDeque::new(),
            final_queued: false,
            send_failed: false,
            mute: false,
            io_fault: None,
            cq: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    // ---- commands -------------------------------------------------------------------------

    /// The connection is established.
    pub(crate) fn establish(&mut self, now: Instant) {
        if self.phase == Phase::Pending {
            self.phase = Phase::Connected;
            self.last_rx = now;
            self.events.push_back(ConnectionEvent::Established);
        }
    }

    /// Posts one receive.
    pub(crate) fn post_recv(&mut self, wr_id: u64, buf: Option<Sge>) -> Result<()> {
        if self.phase == Phase::Closed {
            return Err(TransportError::NotConnected);
        }
        if self.recvs.len() >= self.settings.max_recv_wr {
            return Err(TransportError::InvalidRequest("receive queue full"));
        }
        let local = buf.map(|sge| self.regions.local(&sge)).transpose()?;
        self.recvs.push_back(RecvEntry { wr_id, local });
        Ok(())
    }

    /// Posts a list of send requests, entirely or (on a validation error) not at all.
    pub(crate) fn post_send(&mut self, wrs: &[SendWr]) -> Result<()> {
        if self.phase != Phase::Connected {
            return Err(TransportError::NotConnected);
        }
        if self.sq.len() + wrs.len() > self.settings.max_send_wr {
            return Err(TransportError::InvalidRequest("send queue full"));
        }
        // All or nothing, without a list of its own: queued in place, taken back on an error.
        let queued = self.sq.len();
        for wr in wrs {
            match wr.local.map(|sge| self.regions.local(&sge)).transpose() {
                Ok(local) => self.sq.push_back(SendEntry { wr: *wr, local }),
                Err(e) => {
                    self.sq.truncate(queued);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Starts an orderly disconnect: flushes everything and queues a DREQ.
    pub(crate) fn disconnect(&mut self) {
        if self.phase == Phase::Connected {
            self.close(Cause::Flush, Some(Frame::Dreq));
        }
    }

    /// Refuses an unaccepted request (or closes a pending one).
    pub(crate) fn reject(&mut self) {
        self.close(Cause::Flush, None);
    }

    /// Asks for a due ACK to go out with the next transmission, without delay (the caller is
    /// about to sleep and cannot post a reply that would carry it).
    pub(crate) fn flush_ack(&mut self, now: Instant) {
        if self.ack_at.is_some() {
            self.ack_at = Some(now);
        }
    }

    // ---- input ----------------------------------------------------------------------------

    /// Bytes arrived from the peer (keeps the acknowledgement timer alive).
    pub(crate) fn handle_activity(&mut self, now: Instant) {
        self.last_rx = now;
    }

    /// Handles one incoming frame (its header; a payload follows for data frames).
    pub(crate) fn handle_frame(&mut self, now: Instant, frame: Frame) -> Inbound {
        if self.phase != Phase::Connected {
            return Inbound::Closed;
        }
        if !matches!(self.rx, RxState::Idle) {
            return self.violation("frame while a message is pending");
        }
        match frame {
            Frame::Ack { msn } => {
                if msn < self.acked || msn >= self.tx_next {
                    return self.violation("ACK outside the send window");
                }
                self.complete_sends(now, msn);
                Inbound::Done
            }
            Frame::Nak { msn, status } => {
                if msn <= self.acked || msn >= self.tx_next {
                    return self.violation("NAK outside the send window");
                }
                tracing::debug!(msn, ?status, "soft transport: peer refused a request");
                let cause = Cause::Failed {
                    msn,
                    status,
                    earlier_ok: true,
                };
                self.close(cause, None);
                Inbound::Closed
            }
            Frame::Dreq => {
                self.handle_peer_gone();
                Inbound::Closed
            }
            Frame::Nop => Inbound::Done,
            Frame::Hello | Frame::Accept | Frame::Reject { .. } => {
                self.violation("handshake frame on an established connection")
            }
            Frame::Send { .. } => self.start_message(now, frame, None),
            Frame::Write { len, remote } | Frame::WriteImm { len, remote, .. } => {
                // Validate the target before placing a byte (zero-length writes touch no
                // memory and, as in InfiniBand, are not checked).
                let target = match len {
                    0 => None,
                    _ => match self.regions.target(remote, len) {
                        Some(t) => Some(t),
                        None => return self.refuse(WcStatus::RemoteAccess),
                    },
                };
                self.start_message(now, frame, target)
            }
        }
    }

    /// The next step of a stalled message once a receive is posted (`None`: still stalled or
    /// nothing stalled).
    pub(crate) fn resume(&mut self) -> Option<Inbound> {
        if !matches!(self.rx, RxState::Stalled { .. }) || self.recvs.is_empty() {
            return None;
        }
        let RxState::Stalled { frame, target, .. } = std::mem::replace(&mut self.rx, RxState::Idle)
        else {
            return None;
        };
        Some(self.accept_message(frame, target))
    }

    /// The payload of the current message was placed.
    pub(crate) fn handle_placed(&mut self, now: Instant) {
        if let RxState::Placing { frame } = std::mem::replace(&mut self.rx, RxState::Idle) {
            self.finish_message(now, frame);
        }
    }

    /// The memory of the current message became inaccessible while it was placed.
    pub(crate) fn handle_place_failed(&mut self) {
        if let RxState::Placing { frame } = std::mem::replace(&mut self.rx, RxState::Idle) {
            if matches!(frame, Frame::Send { .. }) {
                self.complete_recv(WcStatus::LocalProtection, WcOpcode::Recv, 0, None);
            }
            self.refuse(WcStatus::RemoteAccess);
        }
    }

    /// Data message `msn` was fully written to the peer.
    pub(crate) fn handle_transmitted(&mut self, now: Instant, msn: u64) {
        if msn > self.tx_done {
            if !self.awaiting_ack() {
                self.ack_clock = now;
            }
            self.tx_done = msn;
        }
    }

    /// The peer closed the connection or the socket failed.
    pub(crate) fn handle_peer_gone(&mut self) {
        if self.phase != Phase::Closed {
            tracing::debug!("soft transport: peer disconnected");
            self.ending = Ending::Abort;
        }
        self.close(Cause::Flush, None);
    }

    /// Writing to the peer failed (it reset or closed the connection). The connection is not
    /// torn down yet: a NAK may wait in the input, and a real RC requester would see it, so
    /// the I/O part reads on and calls [`Engine::handle_peer_gone`] once the input runs dry.
    pub(crate) fn handle_send_failed(&mut self) {
        if self.phase == Phase::Connected && !self.send_failed {
            tracing::debug!("soft transport: send failed; reading what the peer sent before");
            self.send_failed = true;
        } else if self.phase == Phase::Pending {
            self.handle_peer_gone();
        }
    }

    /// True if a write failed and the connection ends once the input runs dry.
    pub(crate) fn send_failed(&self) -> bool {
        self.send_failed
    }

    /// The peer broke the protocol (malformed frame).
    pub(crate) fn handle_violation(&mut self, why: &'static str) {
        self.violation(why);
    }

    /// Transmitting request `msn` failed locally (its memory became inaccessible).
    pub(crate) fn handle_local_failure(&mut self, msn: u64) {
        if self.phase != Phase::Closed {
            self.ending = Ending::Abort;
        }
        let cause = Cause::Failed {
            msn,
            status: WcStatus::LocalProtection,
            earlier_ok: false,
        };
        self.close(cause, None);
    }

    /// No byte could be written for the ACK timeout (the peer does not read).
    pub(crate) fn handle_write_stall(&mut self) {
        tracing::debug!("soft transport: the peer stopped reading");
        self.retry_exceeded();
    }

    /// Fires the timers that are due at `now`.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        if self.phase != Phase::Connected {
            return;
        }
        if self.ack_expiry().is_some_and(|t| now >= t) {
            tracing::debug!("soft transport: acknowledgement timeout");
            self.retry_exceeded();
            return;
        }
        let keepalive = self.keepalive();
        if let RxState::Stalled {
            deadline, next_nop, ..
        } = &mut self.rx
        {
            if now >= *deadline {
                self.rx = RxState::Idle;
                self.refuse(WcStatus::RnrRetryExceeded);
            } else if now >= *next_nop {
                *next_nop = now + keepalive;
                self.nop_due = true;
            }
        }
    }

    // ---- output ---------------------------------------------------------------------------

    /// The next frame to transmit: a due ACK (at once if a data frame follows), a keep-alive,
    /// then data messages whose payload is at most `max_payload`; after teardown, the ACK still
    /// due and the final frames.
    pub(crate) fn poll_transmit(&mut self, now: Instant, max_payload: usize) -> Option<Transmit> {
        loop {
            let t = self.next_transmit(now, max_payload)?;
            if !self.mute && self.settings.faults.is_empty() {
                return Some(t);
            }
            if let Some(t) = self.inject(now, t) {
                return Some(t);
            }
        }
    }

    /// A fault the I/O part must carry out before it writes what it took last (a delay, or
    /// a reset of the connection instead).
    pub(crate) fn take_io_fault(&mut self) -> Option<FaultAction> {
        self.io_fault.take()
    }

    /// Applies the fault plan to a frame about to be handed out; `None` if it is swallowed.
    fn inject(&mut self, now: Instant, t: Transmit) -> Option<Transmit> {
        let frame = match &t {
            Transmit::Control(f) | Transmit::Data { frame: f, .. } => *f,
        };
        let action = if self.mute {
            Some(FaultAction::Drop)
        } else {
            self.settings.faults.check(Direction::Sent, &frame)
        };
        match action {
            None => Some(t),
            Some(FaultAction::Delay(d)) => {
                self.io_fault = Some(FaultAction::Delay(d));
                Some(t)
            }
            Some(a @ (FaultAction::Drop | FaultAction::Reset)) => {
                if a == FaultAction::Reset {
                    self.io_fault = Some(a);
                }
                // Lost on the way: a data message counts as transmitted (its ACK never comes).
                self.mute = true;
                if let Transmit::Data { msn, .. } = t {
                    self.handle_transmitted(now, msn);
                }
                None
            }
        }
    }

    /// [`Engine::poll_transmit`] without faults.
    fn next_transmit(&mut self, now: Instant, max_payload: usize) -> Option<Transmit> {
        let data = self.next_data(max_payload);
        if self.rx_msn > self.ack_sent
            && (self.phase == Phase::Closed
                || data.is_some()
                || self.ack_at.is_some_and(|t| now >= t))
        {
            self.ack_sent = self.rx_msn;
            self.ack_at = None;
            return Some(Transmit::Control(Frame::Ack { msn: self.rx_msn }));
        }
        match self.phase {
            Phase::Pending => None,
            Phase::Closed => self.finals.pop_front().map(Transmit::Control),
            Phase::Connected if self.nop_due => {
                self.nop_due = false;
                Some(Transmit::Control(Frame::Nop))
            }
            Phase::Connected => {
                let idx = data?;
                let entry = &self.sq[idx];
                let msn = self.tx_next;
                self.tx_next += 1;
                Some(Transmit::Data {
                    msn,
                    frame: entry.frame(),
                    local: entry.local.clone(),
                })
            }
        }
    }

    /// True if a data message waits to be handed out (of any size).
    pub(crate) fn has_data(&self) -> bool {
        self.phase == Phase::Connected && self.next_data(usize::MAX).is_some()
    }

    /// The earliest time [`Engine::handle_timeout`] or [`Engine::poll_transmit`] has
    /// something to do, without the delayed ACK if `with_ack_delay` is false (a thread that
    /// will transmit anyway need not be woken for it).
    pub(crate) fn poll_timeout(&self, with_ack_delay: bool) -> Option<Instant> {
        if self.phase != Phase::Connected {
            return None;
        }
        let ack = self.ack_at.filter(|_| with_ack_delay);
        let rnr = match &self.rx {
            RxState::Stalled {
                deadline, next_nop, ..
            } => Some((*deadline).min(*next_nop)),
            _ => None,
        };
        [self.ack_expiry(), ack, rnr].into_iter().flatten().min()
    }

    /// The next completion.
    pub(crate) fn poll_completion(&mut self) -> Option<Completion> {
        self.cq.pop_front()
    }

    /// The next connection event.
    pub(crate) fn poll_event(&mut self) -> Option<ConnectionEvent> {
        self.events.pop_front()
    }

    /// True if a completion or a connection event is ready.
    pub(crate) fn has_ready(&self) -> bool {
        !self.cq.is_empty() || !self.events.is_empty()
    }

    /// True once torn down.
    pub(crate) fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }

    /// True while established.
    pub(crate) fn is_connected(&self) -> bool {
        self.phase == Phase::Connected
    }

    /// True if an incoming message waits for a receive.
    pub(crate) fn is_stalled(&self) -> bool {
        matches!(self.rx, RxState::Stalled { .. })
    }

    /// True if a stalled message can continue.
    pub(crate) fn can_resume(&self) -> bool {
        self.is_stalled() && !self.recvs.is_empty()
    }

    /// True if a receive is posted.
    pub(crate) fn has_recv(&self) -> bool {
        !self.recvs.is_empty()
    }

    /// True if teardown queued a final frame (NAK or DREQ) for the peer.
    pub(crate) fn final_queued(&self) -> bool {
        self.final_queued
    }

    /// How the connection ended.
    pub(crate) fn ending(&self) -> Ending {
        self.ending
    }

    // ---- internals ------------------------------------------------------------------------

    fn keepalive(&self) -> Duration {
        (self.settings.ack_timeout / 4).max(Duration::from_millis(1))
    }

    fn next_data(&self, max_payload: usize) -> Option<usize> {
        let idx = usize::try_from(self.tx_next.checked_sub(self.acked + 1)?).ok()?;
        let entry = self.sq.get(idx)?;
        (entry.local.as_ref().map_or(0, |l| l.len) <= max_payload).then_some(idx)
    }

    fn awaiting_ack(&self) -> bool {
        self.tx_done > self.acked
    }

    /// When the acknowledgement timer fires: `ack_timeout` after the later of the start of the
    /// wait and the last byte received from the peer.
    fn ack_expiry(&self) -> Option<Instant> {
        self.awaiting_ack()
            .then(|| self.ack_clock.max(self.last_rx) + self.settings.ack_timeout)
    }

    fn retry_exceeded(&mut self) {
        if self.phase != Phase::Closed {
            // The peer does not answer: nothing to wait for before closing.
            self.ending = Ending::Abort;
        }
        let cause = Cause::Failed {
            msn: self.acked + 1,
            status: WcStatus::RetryExceeded,
            earlier_ok: false,
        };
        self.close(cause, None);
    }

    fn violation(&mut self, why: &'static str) -> Inbound {
        if self.phase != Phase::Closed {
            tracing::warn!(why, "soft transport: peer protocol violation; tearing down");
            self.ending = Ending::Abort;
        }
        self.close(Cause::Flush, None);
        Inbound::Closed
    }

    /// Refuses the incoming message `rx_msn + 1`: NAK it and tear down.
    fn refuse(&mut self, status: WcStatus) -> Inbound {
        let msn = self.rx_msn + 1;
        tracing::debug!(msn, ?status, "soft transport: refusing message");
        self.close(Cause::Flush, Some(Frame::Nak { msn, status }));
        Inbound::Closed
    }

    fn start_message(&mut self, now: Instant, frame: Frame, target: Option<Local>) -> Inbound {
        let needs_recv = matches!(frame, Frame::Send { .. } | Frame::WriteImm { .. });
        if needs_recv && self.recvs.is_empty() {
            tracing::trace!("soft transport: receiver not ready; waiting");
            self.nop_due = true;
            self.rx = RxState::Stalled {
                frame,
                target,
                deadline: now + self.settings.rnr_timeout,
                next_nop: now + self.keepalive(),
            };
            return Inbound::Stalled;
        }
        self.accept_message(frame, target)
    }

    fn accept_message(&mut self, frame: Frame, target: Option<Local>) -> Inbound {
        let place = match frame {
            Frame::Send { len, .. } if len > 0 => {
                let local = self.recvs.front().and_then(|r| r.local.clone());
                match local {
                    Some(l) if l.len >= len as usize => {
                        if l.buffer.is_app_locked() {
                            self.complete_recv(WcStatus::LocalProtection, WcOpcode::Recv, 0, None);
                            return self.refuse(WcStatus::RemoteAccess);
                        }
                        Local {
                            len: len as usize,
                            ..l
                        }
                    }
                    _ => {
                        self.complete_recv(WcStatus::LocalLength, WcOpcode::Recv, 0, None);
                        return self.refuse(WcStatus::RemoteInvalidRequest);
                    }
                }
            }
            _ => match target {
                Some(t) => t,
                None => {
                    self.finish_message(Instant::now(), frame);
                    return Inbound::Done;
                }
            },
        };
        self.rx = RxState::Placing { frame };
        Inbound::Place(place)
    }

    /// Completes incoming message `rx_msn + 1` after its payload was placed.
    fn finish_message(&mut self, now: Instant, frame: Frame) {
        self.rx_msn += 1;
        if self.ack_at.is_none() {
            self.ack_at = Some(now + self.settings.ack_delay);
        }
        match frame {
            Frame::Send { len, .. } => {
                self.complete_recv(WcStatus::Success, WcOpcode::Recv, len, None)
            }
            Frame::WriteImm { len, imm, .. } => {
                self.complete_recv(WcStatus::Success, WcOpcode::RecvRdmaWithImm, len, Some(imm));
            }
            _ => {}
        }
    }

    /// Consumes the oldest receive with a completion.
    fn complete_recv(
        &mut self,
        status: WcStatus,
        opcode: WcOpcode,
        byte_len: u32,
        imm: Option<u32>,
    ) {
        if let Some(recv) = self.recvs.pop_front() {
            self.cq.push_back(Completion {
                wr_id: recv.wr_id,
                status,
                opcode,
                byte_len,
                imm,
            });
        }
    }

    /// Completes send requests up to `msn` successfully (cumulative ACK).
    fn complete_sends(&mut self, now: Instant, msn: u64) {
        let mut progressed = false;
        while self.acked < msn {
            let Some(entry) = self.sq.pop_front() else {
                break;
            };
            self.acked += 1;
            progressed = true;
            self.cq.push_back(Completion {
                wr_id: entry.wr.wr_id,
                status: WcStatus::Success,
                opcode: entry.opcode(),
                byte_len: 0,
                imm: None,
            });
        }
        if progressed {
            self.ack_clock = now;
        }
    }

    /// Tears the connection down (once): completes every outstanding request (flushed unless
    /// `cause` says otherwise), reports `Disconnected`, and queues `last` as the final frame.
    fn close(&mut self, cause: Cause, last: Option<Frame>) {
        if self.phase == Phase::Closed {
            return;
        }
        let was_connected = self.phase == Phase::Connected;
        self.phase = Phase::Closed;
        self.rx = RxState::Idle;
        self.nop_due = false;
        tracing::debug!(?cause, "soft transport: connection torn down");
        while let Some(entry) = self.sq.pop_front() {
            self.acked += 1;
            let msn = self.acked;
            let status = match cause {
                Cause::Failed {
                    msn: failed,
                    status,
                    earlier_ok,
                } if msn <= failed => {
                    if msn == failed {
                        status
                    } else if earlier_ok {
                        WcStatus::Success
                    } else {
                        WcStatus::WrFlush
                    }
                }
                _ => WcStatus::WrFlush,
            };
            self.cq.push_back(Completion {
                wr_id: entry.wr.wr_id,
                status,
                opcode: entry.opcode(),
                byte_len: 0,
                imm: None,
            });
        }
        while !self.recvs.is_empty() {
            self.complete_recv(WcStatus::WrFlush, WcOpcode::Recv, 0, None);
        }
        if was_connected {
            self.events.push_back(ConnectionEvent::Disconnected);
            self.final_queued = last.is_some();
            self.finals.extend(last);
        }
    }
}

#[cfg(test)]
mod tests {
    //! Frame-level tests: two engines exchange frames through these helpers, payloads are
    //! copied between the buffers directly; no sockets, no threads, a virtual clock.

    use super::*;
    use crate::memory::Buffer;
    use crate::transport::RemoteAddr;

    fn settings() -> Settings {
        Settings {
            ack_timeout: Duration::from_millis(100),
            rnr_timeout: Duration::from_millis(40),
            ack_delay: Duration::from_millis(1),
            max_send_wr: 8,
            max_recv_wr: 8,
            faults: FaultPlan::default(),
        }
    }

    /// An established engine with one 64-byte region (key returned).
    fn engine(t0: Instant) -> (Engine, Buffer, u32) {
        let mut e = Engine::new(settings(), t0);
        let buf = Buffer::zeroed(64);
        let key = e.regions.next_key().unwrap();
        e.regions.insert(&buf, 0x1000, key).unwrap();
        e.establish(t0);
        assert_eq!(e.poll_event(), Some(ConnectionEvent::Established));
        (e, buf, key)
    }

    fn sge(key: u32, offset: u64, len: u32) -> Sge {
        Sge {
            addr: 0x1000 + offset,
            len,
            lkey: key,
        }
    }

    fn wr(wr_id: u64, op: SendOp, local: Option<Sge>) -> SendWr {
        SendWr {
            wr_id,
            op,
            local,
            solicited: false,
        }
    }

    fn remote(key: u32, offset: u64) -> RemoteAddr {
        RemoteAddr {
            addr: 0x1000 + offset,
            rkey: key,
        }
    }

    /// Moves every frame `from` transmits at `now` into `to`, through the wire encoding,
    /// placing payloads; returns the frames.
    fn deliver(from: &mut Engine, to: &mut Engine, now: Instant) -> Vec<Frame> {
        let mut seen = Vec::new();
        while let Some(t) = from.poll_transmit(now, usize::MAX) {
            let (frame, payload) = match t {
                Transmit::Control(f) => (f, Vec::new()),
                Transmit::Data { msn, frame, local } => {
                    let bytes = local.map_or(Vec::new(), |l| {
                        l.buffer.nic_read(l.offset, l.len, <[u8]>::to_vec).unwrap()
                    });
                    from.handle_transmitted(now, msn);
                    (frame, bytes)
                }
            };
            let frame = Frame::decode(&frame.encode()).unwrap();
            seen.push(frame);
            match to.handle_frame(now, frame) {
                Inbound::Place(l) => {
                    l.buffer
                        .nic_write(l.offset, l.len, |d| d.copy_from_slice(&payload[..l.len]))
                        .unwrap();
                    to.handle_placed(now);
                }
                Inbound::Done | Inbound::Stalled | Inbound::Closed => {}
            }
        }
        seen
    }

    fn completions(e: &mut Engine) -> Vec<(u64, WcStatus, WcOpcode)> {
        std::iter::from_fn(|| e.poll_completion())
            .map(|c| (c.wr_id, c.status, c.opcode))
            .collect()
    }

    #[test]
    fn send_is_placed_and_acknowledged_after_the_delay() {
        let t0 = Instant::now();
        let (mut a, abuf, ak) = engine(t0);
        let (mut b, bbuf, bk) = engine(t0);
        abuf.lock()[..5].copy_from_slice(b"hello");
        b.post_recv(7, Some(sge(bk, 8, 16))).unwrap();
        a.post_send(&[wr(1, SendOp::Send, Some(sge(ak, 0, 5)))])
            .unwrap();
        deliver(&mut a, &mut b, t0);
        let c = b.poll_completion().unwrap();
        assert_eq!(
            (c.wr_id, c.status, c.opcode, c.byte_len),
            (7, WcStatus::Success, WcOpcode::Recv, 5)
        );
        assert_eq!(&bbuf.lock()[8..13], b"hello");
        // The ACK is held back for the delay...
        assert!(deliver(&mut b, &mut a, t0).is_empty());
        assert_eq!(b.poll_timeout(true), Some(t0 + settings().ack_delay));
        assert_eq!(b.poll_timeout(false), None);
        // ... and goes out after it.
        let later = t0 + settings().ack_delay;
        assert_eq!(deliver(&mut b, &mut a, later), [Frame::Ack { msn: 1 }]);
        assert_eq!(
            completions(&mut a),
            [(1, WcStatus::Success, WcOpcode::Send)]
        );
        assert_eq!(a.poll_timeout(true), None, "nothing awaits an ACK");
    }

    #[test]
    fn a_list_with_a_bad_sge_queues_nothing() {
        let t0 = Instant::now();
        let (mut a, _, ak) = engine(t0);
        let (mut b, _, _) = engine(t0);
        for id in [7, 8] {
            b.post_recv(id, None).unwrap();
        }
        for bad in [sge(ak, 60, 8), sge(ak ^ 1, 0, 4)] {
            let list = [
                wr(1, SendOp::Send, Some(sge(ak, 0, 4))),
                wr(2, SendOp::Send, Some(bad)),
                wr(3, SendOp::Send, None),
            ];
            assert!(matches!(
                a.post_send(&list),
                Err(TransportError::InvalidRequest(_))
            ));
            assert!(deliver(&mut a, &mut b, t0).is_empty(), "nothing went out");
        }
        // The queue holds nothing of the refused lists: a good one goes out alone.
        a.post_send(&[wr(4, SendOp::Send, None)]).unwrap();
        assert_eq!(deliver(&mut a, &mut b, t0).len(), 1);
        assert_eq!(
            completions(&mut b),
            [(7, WcStatus::Success, WcOpcode::Recv)]
        );
    }

    #[test]
    fn a_reply_carries_the_due_ack_and_acks_are_cumulative() {
        let t0 = Instant::now();
        let (mut a, _, ak) = engine(t0);
        let (mut b, _, bk) = engine(t0);
        b.post_recv(9, None).unwrap();
        a.post_recv(10, None).unwrap();
        let w = |id, imm| {
            wr(
                id,
                SendOp::WriteWithImm(remote(bk, 0), imm),
                Some(sge(ak, 0, 4)),
            )
        };
        a.post_send(&[
            wr(1, SendOp::Write(remote(bk, 4)), Some(sge(ak, 0, 8))),
            w(2, 0x81),
        ])
        .unwrap();
        deliver(&mut a, &mut b, t0);
        let c = b.poll_completion().unwrap();
        assert_eq!(
            (c.wr_id, c.opcode, c.imm),
            (9, WcOpcode::RecvRdmaWithImm, Some(0x81))
        );
        // The reply goes out before the delay: the ACK precedes it.
        b.post_send(&[wr(5, SendOp::WriteWithImm(remote(ak, 0), 3), None)])
            .unwrap();
        let frames = deliver(&mut b, &mut a, t0);
        assert_eq!(frames[0], Frame::Ack { msn: 2 });
        assert_eq!(
            completions(&mut a),
            [
                (1, WcStatus::Success, WcOpcode::RdmaWrite),
                (2, WcStatus::Success, WcOpcode::RdmaWrite),
                (10, WcStatus::Success, WcOpcode::RecvRdmaWithImm),
            ]
        );
    }

    #[test]
    fn wrong_rkey_and_out_of_bounds_writes_are_naked() {
        for (rkey_delta, offset, len) in [(1, 0, 4), (0, 60, 8), (0, u64::MAX - 0x1000, 1)] {
            let t0 = Instant::now();
            let (mut a, _, ak) = engine(t0);
            let (mut b, _, bk) = engine(t0);
            b.post_recv(3, None).unwrap();
            let bad = RemoteAddr {
                addr: 0x1000u64.wrapping_add(offset),
                rkey: bk.wrapping_add(rkey_delta),
            };
            a.post_send(&[
                wr(1, SendOp::Write(remote(bk, 0)), Some(sge(ak, 0, 4))),
                wr(2, SendOp::Write(bad), Some(sge(ak, 0, len))),
                wr(3, SendOp::Send, None),
            ])
            .unwrap();
            // The frames after the refused one reach a closed responder and are ignored.
            deliver(&mut a, &mut b, t0);
            assert!(b.is_closed());
            assert_eq!(
                completions(&mut b),
                [(3, WcStatus::WrFlush, WcOpcode::Recv)]
            );
            assert_eq!(b.poll_event(), Some(ConnectionEvent::Disconnected));
            // The ACK for what was placed goes out before the NAK, then nothing.
            let frames = deliver(&mut b, &mut a, t0);
            assert_eq!(
                frames,
                [
                    Frame::Ack { msn: 1 },
                    Frame::Nak {
                        msn: 2,
                        status: WcStatus::RemoteAccess
                    }
                ]
            );
            assert_eq!(
                completions(&mut a),
                [
                    (1, WcStatus::Success, WcOpcode::RdmaWrite),
                    (2, WcStatus::RemoteAccess, WcOpcode::RdmaWrite),
                    (3, WcStatus::WrFlush, WcOpcode::Send),
                ]
            );
            assert_eq!(a.poll_event(), Some(ConnectionEvent::Disconnected));
            assert_eq!(a.ending(), Ending::Linger);
        }
    }

    #[test]
    fn write_into_a_locked_buffer_is_refused() {
        let t0 = Instant::now();
        let (mut a, _, ak) = engine(t0);
        let (mut b, bbuf, bk) = engine(t0);
        let guard = bbuf.lock();
        a.post_send(&[wr(1, SendOp::Write(remote(bk, 0)), Some(sge(ak, 0, 4)))])
            .unwrap();
        deliver(&mut a, &mut b, t0);
        drop(guard);
        let frames = deliver(&mut b, &mut a, t0);
        assert!(matches!(
            frames[..],
            [Frame::Nak {
                msn: 1,
                status: WcStatus::RemoteAccess
            }]
        ));
        assert_eq!(
            completions(&mut a),
            [(1, WcStatus::RemoteAccess, WcOpcode::RdmaWrite)]
        );
    }

    #[test]
    fn receiver_not_ready_keeps_the_peer_alive_then_continues() {
        let t0 = Instant::now();
        let (mut a, _, ak) = engine(t0);
        let (mut b, bbuf, bk) = engine(t0);
        a.post_send(&[wr(
            1,
            SendOp::WriteWithImm(remote(bk, 0), 5),
            Some(sge(ak, 0, 4)),
        )])
        .unwrap();
        let Some(Transmit::Data { msn, frame, .. }) = a.poll_transmit(t0, usize::MAX) else {
            panic!("no data frame");
        };
        a.handle_transmitted(t0, msn);
        assert!(matches!(b.handle_frame(t0, frame), Inbound::Stalled));
        assert!(b.is_stalled());
        // A keep-alive at once and one per quarter of the ACK timeout.
        assert_eq!(deliver(&mut b, &mut a, t0), [Frame::Nop]);
        let t1 = t0 + Duration::from_millis(25);
        assert_eq!(b.poll_timeout(true), Some(t1));
        b.handle_timeout(t1);
        a.handle_activity(t1);
        assert_eq!(deliver(&mut b, &mut a, t1), [Frame::Nop]);
        assert!(b.resume().is_none(), "still no receive");
        b.post_recv(4, None).unwrap();
        assert!(b.can_resume());
        let Some(Inbound::Place(l)) = b.resume() else {
            panic!("not resumed");
        };
        assert_eq!((l.offset, l.len), (0, 4));
        b.handle_placed(t1);
        b.flush_ack(t1);
        assert_eq!(deliver(&mut b, &mut a, t1), [Frame::Ack { msn: 1 }]);
        assert_eq!(completions(&mut b)[0].0, 4);
        assert_eq!(
            completions(&mut a),
            [(1, WcStatus::Success, WcOpcode::RdmaWrite)]
        );
        drop(bbuf);
    }

    #[test]
    fn receiver_not_ready_times_out_with_rnr_nak() {
        let t0 = Instant::now();
        let (mut a, _, _) = engine(t0);
        let (mut b, _, _) = engine(t0);
        a.post_send(&[wr(1, SendOp::Send, None)]).unwrap();
        deliver(&mut a, &mut b, t0);
        assert!(b.is_stalled());
        let late = t0 + settings().rnr_timeout;
        b.handle_timeout(late);
        assert!(b.is_closed());
        let frames = deliver(&mut b, &mut a, late);
        assert_eq!(
            frames.last(),
            Some(&Frame::Nak {
                msn: 1,
                status: WcStatus::RnrRetryExceeded
            })
        );
        assert_eq!(
            completions(&mut a),
            [(1, WcStatus::RnrRetryExceeded, WcOpcode::Send)]
        );
    }

    #[test]
    fn receive_too_small_is_a_length_error_at_both_ends() {
        let t0 = Instant::now();
        let (mut a, _, ak) = engine(t0);
        let (mut b, _, bk) = engine(t0);
        b.post_recv(1, Some(sge(bk, 0, 4))).unwrap();
        b.post_recv(2, Some(sge(bk, 0, 4))).unwrap();
        a.post_send(&[wr(1, SendOp::Send, Some(sge(ak, 0, 8)))])
            .unwrap();
        deliver(&mut a, &mut b, t0);
        assert_eq!(
            completions(&mut b),
            [
                (1, WcStatus::LocalLength, WcOpcode::Recv),
                (2, WcStatus::WrFlush, WcOpcode::Recv)
            ]
        );
        deliver(&mut b, &mut a, t0);
        assert_eq!(
            completions(&mut a),
            [(1, WcStatus::RemoteInvalidRequest, WcOpcode::Send)]
        );
    }

    #[test]
    fn silent_peer_fails_with_retry_exceeded_unless_bytes_arrive() {
        let t0 = Instant::now();
        let (mut a, _, _) = engine(t0);
        let (mut b, _, _) = engine(t0);
        b.post_recv(1, None).unwrap();
        a.post_send(&[wr(1, SendOp::Send, None), wr(2, SendOp::Send, None)])
            .unwrap();
        deliver(&mut a, &mut b, t0);
        let timeout = settings().ack_timeout;
        assert_eq!(a.poll_timeout(false), Some(t0 + timeout));
        // Bytes from the peer postpone the timer.
        let t1 = t0 + timeout / 2;
        a.handle_activity(t1);
        a.handle_timeout(t0 + timeout);
        assert!(a.is_connected());
        a.handle_timeout(t1 + timeout);
        assert_eq!(
            completions(&mut a),
            [
                (1, WcStatus::RetryExceeded, WcOpcode::Send),
                (2, WcStatus::WrFlush, WcOpcode::Send)
            ]
        );
        assert_eq!(a.poll_event(), Some(ConnectionEvent::Disconnected));
        assert_eq!(a.ending(), Ending::Abort);
        assert!(
            a.poll_transmit(t1 + timeout, usize::MAX).is_none(),
            "no final frame"
        );
    }

    #[test]
    fn acks_and_naks_outside_the_window_are_violations() {
        let t0 = Instant::now();
        for frame in [
            Frame::Ack { msn: 1 },
            Frame::Nak {
                msn: 1,
                status: WcStatus::General,
            },
            Frame::Hello,
        ] {
            let (mut a, _, _) = engine(t0);
            a.post_send(&[wr(1, SendOp::Send, None)]).unwrap();
            // Not transmitted yet: the peer cannot have seen it.
            assert!(matches!(a.handle_frame(t0, frame), Inbound::Closed));
            assert_eq!(a.ending(), Ending::Abort);
            assert_eq!(
                completions(&mut a),
                [(1, WcStatus::WrFlush, WcOpcode::Send)]
            );
        }
    }

    #[test]
    fn disconnect_flushes_and_sends_dreq_once() {
        let t0 = Instant::now();
        let (mut a, _, _) = engine(t0);
        let (mut b, _, _) = engine(t0);
        a.post_recv(1, None).unwrap();
        a.post_send(&[wr(2, SendOp::Send, None)]).unwrap();
        a.disconnect();
        a.disconnect();
        assert_eq!(
            completions(&mut a),
            [
                (2, WcStatus::WrFlush, WcOpcode::Send),
                (1, WcStatus::WrFlush, WcOpcode::Recv)
            ]
        );
        assert_eq!(a.poll_event(), Some(ConnectionEvent::Disconnected));
        assert_eq!(a.poll_event(), None);
        assert_eq!(deliver(&mut a, &mut b, t0), [Frame::Dreq]);
        assert_eq!(b.poll_event(), Some(ConnectionEvent::Disconnected));
        assert_eq!(b.ending(), Ending::Abort);
        assert!(a.post_recv(3, None).is_err());
        assert!(matches!(
            a.post_send(&[wr(3, SendOp::Send, None)]),
            Err(TransportError::NotConnected)
        ));
    }

    #[test]
    fn invalid_requests_are_refused_at_post_time_and_nothing_is_posted() {
        let t0 = Instant::now();
        let (mut a, _, ak) = engine(t0);
        let err = a.post_send(&[
            wr(1, SendOp::Send, Some(sge(ak, 0, 4))),
            wr(2, SendOp::Send, Some(sge(ak, 60, 8))),
        ]);
        assert!(matches!(err, Err(TransportError::InvalidRequest(_))));
        assert!(a.poll_transmit(t0, usize::MAX).is_none());
        assert!(a.post_recv(1, Some(sge(ak ^ 1, 0, 4))).is_err());
        let many: Vec<_> = (0..9).map(|i| wr(i, SendOp::Send, None)).collect();
        assert!(a.post_send(&many).is_err(), "more than max_send_wr");
        for i in 0..8 {
            a.post_recv(i, None).unwrap();
        }
        assert!(a.post_recv(8, None).is_err(), "more than max_recv_wr");
    }

    #[test]
    fn large_frames_are_left_to_a_transmitter_that_takes_them() {
        let t0 = Instant::now();
        let (mut a, _, ak) = engine(t0);
        let (_, _, bk) = engine(t0);
        a.post_send(&[wr(1, SendOp::Write(remote(bk, 0)), Some(sge(ak, 0, 32)))])
            .unwrap();
        assert!(a.poll_transmit(t0, 16).is_none());
        assert!(a.has_data());
        assert!(matches!(
            a.poll_transmit(t0, 32),
            Some(Transmit::Data { msn: 1, .. })
        ));
        assert!(!a.has_data());
    }

    #[test]
    fn a_dropped_frame_mutes_the_sender_and_the_request_times_out() {
        use super::super::fault::FrameKind;
        let t0 = Instant::now();
        let plan = FaultPlan::new().on_sent(FrameKind::WriteImm, 1, FaultAction::Drop);
        let mut a = Engine::new(
            Settings {
                faults: plan.clone(),
                ..settings()
            },
            t0,
        );
        let key = a.regions.next_key().unwrap();
        a.regions.insert(&Buffer::zeroed(64), 0x1000, key).unwrap();
        a.establish(t0);
        let (mut b, _, bk) = engine(t0);
        b.post_recv(1, None).unwrap();
        a.post_send(&[
            wr(1, SendOp::Write(remote(bk, 0)), Some(sge(key, 0, 4))),
            wr(2, SendOp::WriteWithImm(remote(bk, 0), 5), None),
            wr(3, SendOp::Send, None),
        ])
        .unwrap();
        // Only the WRITE before the fault reaches the peer; nothing follows it.
        let frames = deliver(&mut a, &mut b, t0);
        assert!(matches!(frames[..], [Frame::Write { .. }]), "{frames:?}");
        assert_eq!(plan.fired(), 1);
        b.flush_ack(t0);
        assert_eq!(deliver(&mut b, &mut a, t0), [Frame::Ack { msn: 1 }]);
        // The lost messages count as transmitted: the ACK timeout fails them.
        let expiry = a.poll_timeout(false).expect("ACK timer running");
        a.handle_timeout(expiry);
        assert_eq!(
            completions(&mut a),
            [
                (1, WcStatus::Success, WcOpcode::RdmaWrite),
                (2, WcStatus::RetryExceeded, WcOpcode::RdmaWrite),
                (3, WcStatus::WrFlush, WcOpcode::Send),
            ]
        );
        assert!(a.poll_transmit(expiry, usize::MAX).is_none());
    }
}
