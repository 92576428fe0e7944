//! The server's express lane: a guard in front of the general transitions of a steady RPC
//! (its call, its answer, the answer's completion).
//!
//! Each method checks that the connection is in the steady state the lane serves (nothing
//! queued, no RPC waiting, no orphan kernel), runs the transition the general path runs
//! there ([`Machine::handle_input`]'s call and write-completion handlers, the answer of
//! [`Server::kernel_finished`]) and returns what the general path would queue for
//! [`Machine::poll_action`] to hand out. The lane changes state only through those
//! transitions, so both paths agree by construction; where the guard refuses, nothing
//! changed and the caller takes the general path.
//!
//! [`Machine::handle_input`]: crate::machine::Machine::handle_input
//! [`Machine::poll_action`]: crate::machine::Machine::poll_action

use super::{Server, State};
use crate::machine::{KernelCall, Machine, WrId, WrKind, Write, expired};
use crate::time::Instant;
use crate::wire::{Request, ReturnCode};

/// The answer of an RPC served by [`Server::express_answer`]: post the write list of
/// [`Server::answer_writes`] with `imm`, then the receive `recv` (no buffer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ExpressAnswer {
    /// The receive that replaces the call's, posted after the writes (the spare serves the
    /// client's next call meanwhile, spec §3.9).
    pub recv: WrId,
    /// The immediate of the last write (`rc << 8`).
    pub imm: u32,
    /// How many writes the answer takes.
    pub writes: u8,
}

impl Server {
    /// True if nothing is queued and no call waits: the state the express lane starts from.
    fn express_clear(&self) -> bool {
        self.queue.is_empty() && self.backlog.is_clear()
    }

    /// A call (a WRITE WITH IMMEDIATE received, work request `wr_id`) of a known kernel on
    /// an idle connection: the general path's call transition counts the RPC, and the kernel
    /// to run is returned instead of queued as [`super::ServerAction::RunKernel`]. `None`:
    /// nothing changed.
    pub fn express_call(&mut self, now: Instant, wr_id: WrId, imm: u32) -> Option<KernelCall> {
        if self.state != State::Idle || !self.express_clear() {
            return None;
        }
        let Request::Call { fncode, user } = Request::decode(imm) else {
            return None;
        };
        if wr_id.kind() != Some(WrKind::DataRecv) || !self.config.kernels.contains(fncode) {
            return None;
        }
        Some(self.call_kernel(now, fncode, user))
    }

    /// The kernel of the current RPC returned `status` at `now`, within its deadline: the
    /// answer transition of [`Server::kernel_finished`], with what the general path would
    /// queue returned instead (its writes are those of [`Server::answer_writes`]). `None`:
    /// nothing changed (a deadline passed, or something else is pending).
    pub fn express_answer(&mut self, now: Instant, status: ReturnCode) -> Option<ExpressAnswer> {
        if self.state != State::Calculating
            || !self.express_clear()
            || expired(self.poll_timeout(), now)
        {
            return None;
        }
        // The writes are those of `answer_writes`, which the caller posts itself: no plan.
        let (_, writes_left) = self.answer_plan(status.to_imm(), true);
        let recv = self.enter_answer(now, writes_left, None);
        Some(ExpressAnswer {
            recv,
            imm: status.to_imm(),
            writes: writes_left,
        })
    }

    /// The write list of an answer with data and immediate `imm` (what
    /// [`Server::express_answer`] asks to post). The same for every RPC of a connection but
    /// the immediate, so a driver may keep it.
    pub fn answer_writes(&self, imm: u32) -> impl Iterator<Item = Write> + '_ {
        let (plan, _) = self.answer_plan(imm, true);
        let mut next = Some(plan);
        core::iter::from_fn(move || {
            let (write, rest) = self.write_of(next?)?;
            next = rest;
            Some(write)
        })
    }

    /// One of the answer's writes completed (`wr_id`): the general write-completion handler
    /// counts it (the connection is idle again after the last; it queues nothing here).
    /// False: nothing changed.
    pub fn express_write_done(&mut self, now: Instant, wr_id: WrId) -> bool {
        if !matches!(self.state, State::WritingBack { writes_left, .. } if writes_left > 0)
            || !self.express_clear()
            || wr_id.kind() != Some(WrKind::Write)
        {
            return false;
        }
        self.on_write_completed(now, wr_id);
        true
    }
}
