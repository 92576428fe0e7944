//! The server's express lane in the driver: a steady RPC from its call's completion to its
//! posted answer without the machine's action queue (see `naaice_core`'s
//! `Server::express_call`). Whatever the lane does not take goes through [`Driver::pump`].

use naaice_core::machine::{KernelCall, RecvBuffer, WrId};
use naaice_core::{ReturnCode, Server};

use super::Driver;
use crate::clock;
use crate::transport::{Endpoint, Result, SendOp, WcOpcode, WcStatus};

impl<E: Endpoint> Driver<E, Server> {
    /// Takes what the transport has ready. Completions of the steady state (the answer's
    /// write, then a call of a known kernel as the last completion taken) are served by the
    /// machine's express lane, a call with its kernel and its posted answer; from the first
    /// other completion on, everything goes through [`Driver::pump`]. False when the owner is
    /// stopping (`kernel` returned `None`: that RPC is left unanswered).
    pub(super) fn pump_express(
        &mut self,
        kernel: &mut impl FnMut(KernelCall) -> Option<(ReturnCode, std::time::Instant)>,
    ) -> Result<bool> {
        let n = self.ep.poll(&mut self.completions)?;
        if n == 0 {
            self.pump()?;
            return Ok(true);
        }
        let now = clock::now();
        for i in 0..n {
            let wc = self.completions[i];
            let wr_id = WrId::from_raw(wc.wr_id);
            let taken = wc.status == WcStatus::Success
                && match wc.opcode {
                    WcOpcode::RdmaWrite => self.machine.express_write_done(now, wr_id),
                    WcOpcode::RecvRdmaWithImm if i + 1 == n => {
                        let imm = wc.imm.unwrap_or(0);
                        match self.machine.express_call(now, wr_id, imm) {
                            Some(call) => {
                                let Some((rc, done)) = kernel(call) else {
                                    return Ok(false);
                                };
                                self.answer(rc, clock::to_core(done));
                                true
                            }
                            None => false,
                        }
                    }
                    _ => false,
                };
            if !taken {
                let mut events_fed = false;
                self.feed_batch(i..n, now, &mut events_fed);
                self.pump()?;
                return Ok(true);
            }
        }
        if n == self.completions.len() {
            self.pump()?;
        }
        Ok(true)
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
        self.post_recv(answer.recv, RecvBuffer::Empty);
        if let Err(e) = self.ep.post_send(&self.express) {
            let first = WrId::from_raw(self.express[0].wr_id);
            self.post_failed(first, &e);
        }
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
