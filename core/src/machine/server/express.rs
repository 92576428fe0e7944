//! The server's express lane: the steady state of an RPC (its call, its answer, the answer's
//! completion) without the action queue.
//!
//! Each method applies only where the general path ([`Machine::handle_input`],
//! [`Server::kernel_finished`], then [`Machine::poll_action`] until `None`) would change
//! exactly the same state and hand out exactly what the method returns: nothing queued
//! before, no RPC waiting, no orphan kernel, no deadline passed. Anywhere else it changes
//! nothing and returns `None` or `false`, and the caller takes the general path. Under
//! emulation a small RPC pays mostly for how much distinct code it runs, so the lane keeps
//! that short; on hardware it saves the queue's round trips.

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
        self.queue.is_empty() && self.pending_call.is_none() && !self.orphan_kernel
    }

    /// A call (a WRITE WITH IMMEDIATE received, work request `wr_id`) of a known kernel on
    /// an idle connection: counts the RPC and returns the kernel to run, as the general path
    /// would hand out [`super::ServerAction::RunKernel`]. `None`: nothing changed.
    pub fn express_call(&mut self, now: Instant, wr_id: WrId, imm: u32) -> Option<KernelCall> {
        if self.state != State::Idle || !self.express_clear() {
            return None;
        }
        if wr_id.kind() != Some(WrKind::DataRecv) {
            return None;
        }
        let Request::Call { fncode, user } = Request::decode(imm) else {
            return None;
        };
        if !self.config.kernels.contains(fncode) {
            return None;
        }
        self.rpcs = self.rpcs.saturating_add(1);
        self.enter(State::Calculating, Some(now + self.config.kernel_timeout));
        Some(KernelCall {
            fncode,
            user,
            rpc: self.rpcs,
        })
    }

    /// The kernel of the current RPC returned `status` at `now`, within its deadline: the
    /// answer, as [`Server::kernel_finished`] followed by the general path's posts would
    /// give it. `None`: nothing changed (a deadline passed, or something else is pending).
    pub fn express_answer(&mut self, now: Instant, status: ReturnCode) -> Option<ExpressAnswer> {
        if self.state != State::Calculating
            || !self.express_clear()
            || expired(self.poll_timeout(), now)
        {
            return None;
        }
        let imm = status.to_imm();
        let (_, writes) = self.answer_plan(imm, true);
        self.recvs = self.recvs.wrapping_add(1);
        self.plan = None;
        self.enter(
            State::WritingBack {
                writes_left: writes,
            },
            Some(now + self.config.completion_timeout),
        );
        Some(ExpressAnswer {
            recv: WrId::new(WrKind::DataRecv, self.recvs),
            imm,
            writes,
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

    /// One of the answer's writes completed (`wr_id`): counted, and the connection is idle
    /// again after the last. False: nothing changed.
    pub fn express_write_done(&mut self, now: Instant, wr_id: WrId) -> bool {
        let State::WritingBack { writes_left } = self.state else {
            return false;
        };
        if !self.express_clear() || wr_id.kind() != Some(WrKind::Write) {
            return false;
        }
        match writes_left {
            0 => return false,
            1 => self.enter(State::Idle, self.config.idle_timeout.map(|t| now + t)),
            n => self.state = State::WritingBack { writes_left: n - 1 },
        }
        true
    }
}
