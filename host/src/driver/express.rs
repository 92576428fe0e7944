//! The machines' express lanes in the driver: on the NAA a steady RPC from its call's
//! completion to its posted answer, on the client an RPC's posts and completions, without the
//! machine's action queue (see `naaice_core`'s `Server::express_call` and
//! `Client::express_rpc`). Whatever a lane does not take goes through [`Driver::pump`].

use std::time::Duration;

use naaice_core::machine::{Express, Input, KernelCall, Machine, RecvBuffer, WrId};
use naaice_core::{Client, ReturnCode, Server};

use super::Driver;
use crate::clock;
use crate::transport::{Completion, Endpoint, Result, SendOp, WcOpcode, WcStatus};

impl<E: Endpoint> Driver<E, Server> {
    /// Takes what the transport has ready. Completions of the steady state (the answer's
    /// write, then a call of a known kernel as the last completion taken) are served by the
    /// machine's express lane, a call with its kernel and its posted answer, after which the
    /// transport is polled once more (Soft-RoCE has completed the answer's write by then);
    /// from the first other completion on, everything goes through [`Driver::pump`]. False
    /// when the owner is stopping (`kernel` returned `None`: that RPC is left unanswered).
    pub(super) fn pump_express(
        &mut self,
        kernel: &mut impl FnMut(
            KernelCall,
            naaice_core::Instant,
        ) -> Option<(ReturnCode, naaice_core::Instant)>,
    ) -> Result<bool> {
        let mut now = None;
        loop {
            let n = self.ep.poll(&mut self.completions)?;
            if n == 0 {
                if now.is_none() {
                    self.pump()?;
                }
                return Ok(true);
            }
            // Completions taken after an answer happened after its kernel returned.
            let mut at = *now.get_or_insert_with(clock::now);
            let mut answered = false;
            for i in 0..n {
                let wc = self.completions[i];
                let wr_id = WrId::from_raw(wc.wr_id);
                let taken = wc.status == WcStatus::Success
                    && match wc.opcode {
                        WcOpcode::RdmaWrite => self.machine.express_write_done(at, wr_id),
                        WcOpcode::RecvRdmaWithImm if i + 1 == n => {
                            let imm = wc.imm.unwrap_or(0);
                            match self.machine.express_call(at, wr_id, imm) {
                                Some(call) => {
                                    let Some((rc, done)) = kernel(call, at) else {
                                        return Ok(false);
                                    };
                                    at = done;
                                    self.answer(rc, at);
                                    answered = true;
                                    true
                                }
                                None => false,
                            }
                        }
                        _ => false,
                    };
                if !taken {
                    let mut events_fed = false;
                    self.feed_batch(i..n, at, &mut events_fed);
                    self.pump()?;
                    return Ok(true);
                }
            }
            now = Some(at);
            if !answered && n < self.completions.len() {
                return Ok(true);
            }
        }
    }

    /// Answers the current RPC, whose kernel returned `rc` at `now`: through the express lane
    /// when the machine takes it, else as [`Driver::kernel_done`] does.
    fn answer(&mut self, rc: ReturnCode, now: naaice_core::Instant) {
        if self.express.is_empty() && !self.build_answer() {
            return self.kernel_done(rc, now);
        }
        let Some(answer) = self.machine.express_answer(now, rc) else {
            return self.kernel_done(rc, now);
        };
        debug_assert_eq!(usize::from(answer.writes), self.express.len());
        if let Some(last) = self.express.last_mut()
            && let SendOp::WriteWithImm(_, imm) = &mut last.op
        {
            *imm = answer.imm;
        }
        if let Err(e) = self.ep.post_send(&self.express) {
            // The machine fails with it; the general path would post nothing after.
            let first = WrId::from_raw(self.express[0].wr_id);
            return self.post_failed(first, &e);
        }
        self.post_recv(answer.recv, RecvBuffer::Empty);
    }

    /// Builds the answer's write list (the same for every RPC of the connection but the
    /// immediate). False if a region has no registered memory (the general path reports it).
    fn build_answer(&mut self) -> bool {
        let mut list = std::mem::take(&mut self.express);
        list.clear();
        for w in self.machine.answer_writes(0) {
            match self.send_wr(&w) {
                Some(wr) => list.push(wr),
                None => return false,
            }
        }
        if list.is_empty() {
            return false;
        }
        self.express = list;
        true
    }
}

impl<E: Endpoint> Driver<E, Client> {
    /// Starts an RPC with deadline `timeout` from now. Through the machine's express lane
    /// its write list, then the next RPC's receive, are posted before this returns;
    /// otherwise the machine's actions wait for [`Driver::next_event`].
    pub(crate) fn start_rpc(
        &mut self,
        timeout: Duration,
    ) -> Result<(), naaice_core::machine::Error> {
        if let Some(spare) = self.machine.express_rpc(clock::now(), timeout)? {
            while let Some(w) = self.machine.express_write() {
                self.queue_write(w);
            }
            self.flush_writes();
            self.post_recv(spare, RecvBuffer::Empty);
        }
        Ok(())
    }

    /// [`Driver::pump`], with the completions of the RPC in flight taken through the
    /// machine's express lane (its result is then the machine's last result, as after the
    /// general path); from the first completion the lane does not take on, everything goes
    /// through [`Driver::pump`].
    pub(crate) fn pump_rpc(&mut self) -> Result<()> {
        let n = self.ep.poll(&mut self.completions)?;
        if n == 0 {
            return self.pump();
        }
        for i in 0..n {
            let taken = match rpc_input(&self.completions[i]) {
                Some(input) => self.machine.express_input(input) != Express::NotTaken,
                None => false,
            };
            if !taken {
                let mut events_fed = false;
                self.feed_batch(i..n, clock::now(), &mut events_fed);
                return self.pump();
            }
        }
        if n == self.completions.len() {
            return self.pump();
        }
        // The clock is read only while a deadline runs (not after the RPC's last completion).
        if self.machine.poll_timeout().is_some() {
            self.machine.handle_timeout(clock::now());
        }
        Ok(())
    }
}

/// The input of a successful write completion or received immediate (the RPC's).
fn rpc_input(wc: &Completion) -> Option<Input<'static>> {
    let wr_id = WrId::from_raw(wc.wr_id);
    match (wc.status, wc.opcode) {
        (WcStatus::Success, WcOpcode::RdmaWrite) => Some(Input::WriteCompleted(wr_id)),
        (WcStatus::Success, WcOpcode::RecvRdmaWithImm) => Some(Input::WriteImmReceived {
            wr_id,
            imm: wc.imm.unwrap_or(0),
            len: wc.byte_len,
        }),
        _ => None,
    }
}
