//! The client's express lane: a guard in front of the general transitions, and an inline
//! drain of what they queued.
//!
//! Each method checks that the RPC is in its steady state (nothing queued, the kind of event
//! the lane serves), runs the general transition itself ([`Client::start_rpc`], the write
//! completion or reply handler of [`Machine::handle_input`]) and takes from the queue what
//! that queued, where the general path's [`Machine::poll_action`] would have handed it out.
//! The lane changes state only through the general transitions, so both paths agree by
//! construction; where the guard refuses, nothing changed and the caller takes the general
//! path.
//!
//! [`Machine::handle_input`]: crate::machine::Machine::handle_input
//! [`Machine::poll_action`]: crate::machine::Machine::poll_action

use super::{Client, Pending, RpcArgs, State};
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
    /// Taken, and the transition queued actions the lane does not serve (the RPC failed):
    /// drain [`Machine::poll_action`](crate::machine::Machine::poll_action) as usual.
    Queued,
}

impl Client {
    /// Starts an RPC as [`Client::start_rpc`] does. When nothing else was queued and its
    /// reply's receive was posted ahead, its posts are handed out at once instead of through
    /// the queue: `Some(spare)`, post the writes of [`Client::express_write`] until `None`, as
    /// one list, then the receive `spare` (no buffer) for the next RPC. `None`: drain
    /// [`crate::machine::Machine::poll_action`] as usual.
    pub fn express_rpc(
        &mut self,
        now: Instant,
        args: RpcArgs,
    ) -> Result<Option<WrId>, crate::machine::Error> {
        let clear = self.queue.is_empty();
        self.start_rpc(now, args)?;
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
    /// NAA's final write arrived), through the general handler while nothing is queued, with
    /// the RPC's end taken from the queue.
    pub fn express_input(&mut self, input: Input<'_>) -> Express {
        if !self.queue.is_empty() || !matches!(self.state, State::Rpc { .. }) {
            return Express::NotTaken;
        }
        match input {
            Input::WriteCompleted(id) if id.kind() == Some(WrKind::Write) => {
                self.on_write_completed(id);
            }
            Input::WriteImmReceived { wr_id, imm, len } => self.on_reply(wr_id, imm, len),
            _ => return Express::NotTaken,
        }
        match self.queue.front() {
            None => Express::Taken,
            Some(&Pending::RpcComplete(result)) if self.queue.len() == 1 => {
                self.queue.clear();
                Express::Finished(result)
            }
            Some(_) => Express::Queued,
        }
    }
}
