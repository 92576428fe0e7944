//! The client's express lane: an RPC's posts handed out at its start, and its completions
//! taken, without the action queue.
//!
//! As the server's lane (`Server::express_call`), each method applies only where the general
//! path ([`Client::start_rpc_with_timeout`] or [`Machine::handle_input`], then
//! [`Machine::poll_action`] until `None`) would change exactly the same state and hand out
//! exactly what the method returns; anywhere else the caller takes the general path.
//!
//! [`Machine::handle_input`]: crate::machine::Machine::handle_input
//! [`Machine::poll_action`]: crate::machine::Machine::poll_action

use core::time::Duration;

use super::{Client, Pending, State};
use crate::machine::{Input, RecvBuffer, RpcResult, WrId, WrKind, Write};
use crate::time::Instant;

/// What the express lane did with a completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Express {
    /// Not taken: nothing changed; feed it through [`Machine::handle_input`].
    ///
    /// [`Machine::handle_input`]: crate::machine::Machine::handle_input
    NotTaken,
    /// Taken; the RPC goes on.
    Taken,
    /// Taken, and the RPC finished with this result (the general path's
    /// [`crate::machine::ClientAction::RpcComplete`]).
    Finished(RpcResult),
}

impl Client {
    /// Starts an RPC as [`Client::start_rpc_with_timeout`] does. When nothing else was queued
    /// and its reply's receive was posted ahead, its posts are handed out at once instead of
    /// through the queue: `Some(spare)`, post the writes of [`Client::express_write`] until
    /// `None`, as one list, then the receive `spare` (no buffer) for the next RPC. `None`:
    /// drain [`crate::machine::Machine::poll_action`] as usual.
    pub fn express_rpc(
        &mut self,
        now: Instant,
        timeout: Duration,
    ) -> Result<Option<WrId>, crate::machine::Error> {
        let clear = self.queue.is_empty();
        self.start_rpc_with_timeout(now, timeout)?;
        if !clear || self.queue.len() != 2 {
            return Ok(None);
        }
        match (self.queue.front(), self.queue.back()) {
            (Some(Pending::Writes), Some(&Pending::Recv(spare, RecvBuffer::Empty))) => {
                self.queue.clear();
                Ok(Some(spare))
            }
            _ => Ok(None),
        }
    }

    /// The next write of an RPC started by [`Client::express_rpc`].
    pub fn express_write(&mut self) -> Option<Write> {
        self.next_write()
    }

    /// A completion of the RPC in flight (`input`: one of our writes completed, or the
    /// NAA's final write arrived), taken without the queue where the general path would
    /// queue nothing but the RPC's end.
    pub fn express_input(&mut self, input: Input<'_>) -> Express {
        if !self.queue.is_empty() {
            return Express::NotTaken;
        }
        let rpc = self.rpcs;
        let State::Rpc {
            writes_left,
            reply,
            deadline,
        } = self.state
        else {
            return Express::NotTaken;
        };
        let (writes_left, reply) = match input {
            Input::WriteCompleted(id) if writes_left > 0 && id.kind() == Some(WrKind::Write) => {
                (writes_left - 1, reply)
            }
            Input::WriteImmReceived { wr_id, imm, len }
                if reply.is_none() && wr_id.kind() == Some(WrKind::DataRecv) =>
            {
                let result = RpcResult {
                    status: crate::wire::ReturnCode::from_imm(imm),
                    bytes_received: len,
                    rpc,
                };
                (writes_left, Some(result))
            }
            _ => return Express::NotTaken,
        };
        match (writes_left, reply) {
            (0, Some(result)) => {
                self.state = State::Idle;
                self.last = Some(result);
                Express::Finished(result)
            }
            _ => {
                self.state = State::Rpc {
                    writes_left,
                    reply,
                    deadline,
                };
                Express::Taken
            }
        }
    }
}
