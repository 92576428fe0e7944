//! The machines' express lanes in the driver's one [`Driver::pump`]: a [`Lane`] is offered
//! each completion first and takes it through the machine's lane (a guard in front of the
//! general transition, see `naaice_core`'s `Client::express_input` and
//! `Server::express_call`); from the first completion a lane leaves, everything goes the
//! general way. On the NAA a steady RPC runs from its call's completion to its posted answer
//! ([`Serving`]), on the client an RPC's completions are taken ([`Calling`]), both without
//! the machine's action queue.

use naaice_core::machine::{Express, Input, KernelCall, RecvBuffer, RpcArgs, RpcResult, WrId};
use naaice_core::{Client, ReturnCode, Server};

use super::{Driver, Role};
use crate::clock;
use crate::transport::{Completion, Endpoint, SendOp, WcOpcode, WcStatus};

/// What a lane did with a completion.
pub(crate) enum Took {
    /// Left it: it goes the general way, and so does everything after it.
    No,
    /// Took it.
    Yes,
    /// The owner is stopping: the pump returns at once.
    Stop,
}

/// A completion [`Driver::pump`] offers to its lane.
pub(crate) struct Offer<'a> {
    /// The completion, successful or failed.
    pub(crate) wc: Completion,
    /// It is the last of its batch.
    pub(crate) last: bool,
    /// The pump's instant, read on first use, and moved on when the lane ran something that
    /// took time.
    pub(crate) now: &'a mut Option<naaice_core::Instant>,
}

/// A lane of [`Driver::pump`] for machine `M`.
pub(crate) trait Lane<E: Endpoint, M: Role> {
    /// Offers a completion; [`Took::No`] leaves it (and everything after it) to the general
    /// path.
    fn offer(&mut self, driver: &mut Driver<E, M>, offer: Offer<'_>) -> Took;

    /// True if the transport is worth polling again although its last batch was not full
    /// (the lane posted something that completes at once); resets the mark.
    fn again(&mut self) -> bool {
        false
    }
}

/// The NAA's lane: the answer's write completions, and a call of a known kernel as the last
/// completion of its batch, which runs through `kernel` (given the call and when it was
/// taken, it returns the return code and when the kernel returned, or `None` when the owner
/// is stopping) and is answered before the next completion is taken.
pub(crate) struct Serving<'k, K> {
    pub(crate) kernel: &'k mut K,
    answered: bool,
}

impl<'k, K> Serving<'k, K>
where
    K: FnMut(KernelCall, naaice_core::Instant) -> Option<(ReturnCode, naaice_core::Instant)>,
{
    pub(crate) fn new(kernel: &'k mut K) -> Self {
        Self {
            kernel,
            answered: false,
        }
    }
}

impl<E: Endpoint, K> Lane<E, Server> for Serving<'_, K>
where
    K: FnMut(KernelCall, naaice_core::Instant) -> Option<(ReturnCode, naaice_core::Instant)>,
{
    #[inline]
    fn offer(&mut self, driver: &mut Driver<E, Server>, offer: Offer<'_>) -> Took {
        let Offer { wc, last, now } = offer;
        if wc.status != WcStatus::Success {
            return Took::No;
        }
        let at = *now.get_or_insert_with(clock::now);
        let wr_id = WrId::from_raw(wc.wr_id);
        match wc.opcode {
            WcOpcode::RdmaWrite if driver.machine.express_write_done(at, wr_id) => Took::Yes,
            WcOpcode::RecvRdmaWithImm if last => {
                let imm = wc.imm.unwrap_or(0);
                let Some(call) = driver.machine.express_call(at, wr_id, imm) else {
                    return Took::No;
                };
                let Some((rc, done)) = (self.kernel)(call, at) else {
                    return Took::Stop;
                };
                // Completions taken after an answer happened after its kernel returned.
                *now = Some(done);
                driver.answer(rc, done);
                self.answered = true;
                Took::Yes
            }
            _ => Took::No,
        }
    }

    /// After an answer: Soft-RoCE has usually completed its write by the next poll.
    fn again(&mut self) -> bool {
        std::mem::take(&mut self.answered)
    }
}

/// The client's lane: the completions of the RPC in flight; its result goes straight to the
/// owner of the connection (`finished`).
pub(crate) struct Calling<'r> {
    pub(crate) finished: &'r mut Option<RpcResult>,
}

impl<E: Endpoint> Lane<E, Client> for Calling<'_> {
    #[inline]
    fn offer(&mut self, driver: &mut Driver<E, Client>, offer: Offer<'_>) -> Took {
        let Some(input) = rpc_input(&offer.wc) else {
            return Took::No;
        };
        match driver.machine.express_input(input) {
            Express::NotTaken => Took::No,
            Express::Taken | Express::Queued => Took::Yes,
            Express::Finished(result) => {
                *self.finished = Some(result);
                Took::Yes
            }
        }
    }
}

impl<E: Endpoint> Driver<E, Server> {
    /// Answers the current RPC, whose kernel returned `rc` at `now`: through the express lane
    /// when the machine takes it, else as [`Driver::kernel_done`] does.
    fn answer(&mut self, rc: ReturnCode, now: naaice_core::Instant) {
        if rc == ReturnCode::KERNEL_TIMEOUT || (self.express.is_empty() && !self.build_answer()) {
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
    /// Starts an RPC with `args`. Through the machine's express lane its write list, then
    /// the next RPC's receive, are posted before this returns; otherwise the machine's
    /// actions wait for [`Driver::next_event`].
    pub(crate) fn start_rpc(&mut self, args: RpcArgs) -> Result<(), naaice_core::machine::Error> {
        if let Some(spare) = self.machine.express_rpc(clock::now(), args)? {
            while let Some(w) = self.machine.express_write() {
                self.queue_write(w);
            }
            self.flush_writes();
            self.post_recv(spare, RecvBuffer::Empty);
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
