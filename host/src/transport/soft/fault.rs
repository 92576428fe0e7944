//! Fault injection: [`FaultPlan`] (documented there, as it is the public face of this private
//! module) and the fault points it describes.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use super::frame::Frame;

/// The kinds of frames a fault can be placed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameKind {
    /// Two-sided SEND.
    Send,
    /// RDMA WRITE.
    Write,
    /// RDMA WRITE WITH IMMEDIATE.
    WriteImm,
    /// Acknowledgement.
    Ack,
    /// Negative acknowledgement (the RC error of a refused message).
    Nak,
    /// Disconnect request.
    Dreq,
    /// Keep-alive of a responder waiting for a receive.
    Nop,
}

impl FrameKind {
    const ALL: usize = 7;

    /// The kind of `frame` (`None` for handshake frames).
    pub(crate) fn of(frame: &Frame) -> Option<Self> {
        Some(match frame {
            Frame::Send { .. } => Self::Send,
            Frame::Write { .. } => Self::Write,
            Frame::WriteImm { .. } => Self::WriteImm,
            Frame::Ack { .. } => Self::Ack,
            Frame::Nak { .. } => Self::Nak,
            Frame::Dreq => Self::Dreq,
            Frame::Nop => Self::Nop,
            Frame::Hello
            | Frame::Accept
            | Frame::Reject { .. }
            | Frame::CatalogRequest
            | Frame::Catalog { .. } => return None,
        })
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Which way a frame goes, seen from the endpoint the plan is configured on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Written to the peer.
    Sent,
    /// Read from the peer.
    Received,
}

/// What happens at a fault point (see [`FaultPlan`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultAction {
    /// The frame and everything after it in that direction are lost.
    Drop,
    /// The frame (and what follows it) goes out, or is handled, this much later.
    Delay(Duration),
    /// The TCP connection is aborted instead.
    Reset,
}

/// One fault: `action` at the `nth` (from 1) frame of `kind` going `direction`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fault {
    /// Sent or received frames.
    pub direction: Direction,
    /// Which kind of frame is counted.
    pub kind: FrameKind,
    /// Which one of them (1 is the first).
    pub nth: u64,
    /// What happens there.
    pub action: FaultAction,
}

/// Counters shared by every connection configured with the plan.
struct Tally {
    seen: [[AtomicU64; FrameKind::ALL]; 2],
    fired: AtomicUsize,
}

/// A deterministic list of faults that makes the software transport drop, delay or reset the
/// connection at a chosen frame, so that the deadlines and error paths of clients and servers
/// can be tested without a flaky network; empty (inert) by default.
///
/// A [`Fault`] names a point, *the `nth` frame of a [`FrameKind`] sent (or received) by this
/// transport*, and what happens there ([`FaultAction`]):
///
/// * [`FaultAction::Drop`]: the frame is lost, and so is everything after it in that
///   direction (the link goes dark one way; TCP never loses a single frame, and RC numbers its
///   messages implicitly, so a lone lost data frame would not be a fault a real RC queue pair
///   can show). Sent: nothing more is written (data messages count as transmitted, so the
///   peer's silence runs into the ACK timeout). Received: all further input is read and
///   discarded unseen (without refreshing the ACK timer). The end of the TCP connection is
///   still noticed both ways.
/// * [`FaultAction::Delay`]: the thread that writes (or reads) the frame stalls for the given
///   time before it does, as on a slow link or host; what follows it in that direction waits
///   behind it, so order is kept. The endpoint's own timers wait too if its NIC thread stalls.
///   Control frames (ACKs) written in the same system call ahead of it wait with it.
/// * [`FaultAction::Reset`]: the TCP connection is aborted (an RST to the peer) instead of the
///   frame being written (or handled); both sides see the connection end with
///   `ConnectionEvent::Disconnected` and flushed work requests. Control frames batched ahead
///   of a sent one into the same system call are lost with it.
///
/// Counting is per plan: every connection of the transports configured with a plan (and its
/// clones) counts into the same counters, in the order the frames are written or read. With
/// one connection at a time (or a fault on a frame only one connection sends) the fault
/// therefore strikes the same frame in every run, and strikes once: the connections after it
/// are served normally. Handshake frames (HELLO, ACCEPT, REJECT) are not counted.
///
/// The plan is always compiled and inert by default ([`FaultPlan::default`] is empty: one
/// branch per frame). A cargo feature would add a build configuration to test and keep apart
/// (the workspace's tests would enable it for every crate anyway, through feature
/// unification), for no measurable saving next to a system call per frame.
///
/// Clones share the frame counters; two plans are equal if they list the same faults.
#[derive(Clone, Default)]
pub struct FaultPlan {
    faults: Vec<Fault>,
    tally: Option<Arc<Tally>>,
}

impl FaultPlan {
    /// An empty plan (no faults).
    pub fn new() -> Self {
        Self::default()
    }

    /// The plan with `fault` added (and its counters reset).
    #[must_use]
    pub fn with(mut self, fault: Fault) -> Self {
        self.faults.push(fault);
        self.tally = Some(Arc::new(Tally {
            seen: Default::default(),
            fired: AtomicUsize::new(0),
        }));
        self
    }

    /// Shorthand for [`FaultPlan::with`]: `action` at the `nth` frame of `kind` sent.
    #[must_use]
    pub fn on_sent(self, kind: FrameKind, nth: u64, action: FaultAction) -> Self {
        self.with(Fault {
            direction: Direction::Sent,
            kind,
            nth,
            action,
        })
    }

    /// Shorthand for [`FaultPlan::with`]: `action` at the `nth` frame of `kind` received.
    #[must_use]
    pub fn on_received(self, kind: FrameKind, nth: u64, action: FaultAction) -> Self {
        self.with(Fault {
            direction: Direction::Received,
            kind,
            nth,
            action,
        })
    }

    /// The faults.
    pub fn faults(&self) -> &[Fault] {
        &self.faults
    }

    /// True if the plan has no faults.
    pub fn is_empty(&self) -> bool {
        self.faults.is_empty()
    }

    /// How many faults have struck so far (across all connections sharing the plan).
    pub fn fired(&self) -> usize {
        self.tally
            .as_ref()
            .map_or(0, |t| t.fired.load(Ordering::Acquire))
    }

    /// Counts `frame` going `direction` and returns the action due at it, if any.
    pub(crate) fn check(&self, direction: Direction, frame: &Frame) -> Option<FaultAction> {
        let tally = self.tally.as_ref()?;
        let kind = FrameKind::of(frame)?;
        let seen = tally.seen[direction as usize][kind.index()].fetch_add(1, Ordering::AcqRel) + 1;
        let fault = self
            .faults
            .iter()
            .find(|f| f.direction == direction && f.kind == kind && f.nth == seen)?;
        tally.fired.fetch_add(1, Ordering::AcqRel);
        tracing::info!(?fault, "soft transport: injecting a fault");
        Some(fault.action)
    }
}

impl PartialEq for FaultPlan {
    fn eq(&self, other: &Self) -> bool {
        self.faults == other.faults
    }
}

impl Eq for FaultPlan {}

impl fmt::Debug for FaultPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultPlan")
            .field("faults", &self.faults)
            .field("fired", &self.fired())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strikes_the_nth_frame_of_its_kind_once_and_clones_share_the_count() {
        let plan = FaultPlan::new()
            .on_sent(FrameKind::Ack, 2, FaultAction::Drop)
            .on_received(FrameKind::Dreq, 1, FaultAction::Reset);
        let other = plan.clone();
        let ack = Frame::Ack { msn: 1 };
        assert_eq!(plan.check(Direction::Sent, &Frame::Nop), None);
        assert_eq!(plan.check(Direction::Received, &ack), None);
        assert_eq!(plan.check(Direction::Sent, &ack), None);
        assert_eq!(other.check(Direction::Sent, &ack), Some(FaultAction::Drop));
        assert_eq!(plan.check(Direction::Sent, &ack), None);
        assert_eq!(plan.check(Direction::Sent, &Frame::Dreq), None);
        assert_eq!(
            plan.check(Direction::Received, &Frame::Dreq),
            Some(FaultAction::Reset)
        );
        assert_eq!(plan.check(Direction::Received, &Frame::Hello), None);
        assert_eq!(plan.fired(), 2);
        assert!(FaultPlan::default().is_empty());
        assert_eq!(FaultPlan::default().check(Direction::Sent, &ack), None);
    }
}
