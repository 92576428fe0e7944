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

#[cfg(feature = "fault-injection")]
mod faults;
mod input;
mod output;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

#[cfg(feature = "fault-injection")]
use super::fault::{FaultAction, FaultPlan};
use super::frame::Frame;
use crate::transport::regions::{Local, Regions};
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
    #[cfg(feature = "fault-injection")]
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
    #[cfg(feature = "fault-injection")]
    mute: bool,
    /// A fault the I/O part carries out before it writes what it took last.
    #[cfg(feature = "fault-injection")]
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
            #[cfg(feature = "fault-injection")]
            mute: false,
            #[cfg(feature = "fault-injection")]
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
}
