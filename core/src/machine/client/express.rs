//! The client's express lane: a guard in front of the general transitions of an RPC.
//!
//! Each method checks that the RPC is in its steady state (nothing queued, the kind of event
//! the lane serves), runs the transition the general path runs there (the start of
//! [`Client::start_rpc`], the write-completion or reply handler of
//! [`Machine::handle_input`]) and returns what the general path would queue for
//! [`Machine::poll_action`] to hand out. The lane changes state only through those
//! transitions, so both paths agree by construction; where the guard refuses, nothing
//! changed and the caller takes the general path.
//!
//! [`Machine::handle_input`]: crate::machine::Machine::handle_input
//! [`Machine::poll_action`]: crate::machine::Machine::poll_action

use super::{Client, RpcArgs, State};
use crate::machine::{Input, RpcResult, WrId, WrKind, Write};
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
        if !self.queue.is_empty() {
            self.start_rpc(now, args)?;
            return Ok(None);
        }
        if !self.begin_rpc(now, args)? {
            self.queue_rpc_posts(false);
            return Ok(None);
        }
        Ok(Some(self.next_spare()))
    }

    /// The next write of an RPC started by [`Client::express_rpc`].
    pub fn express_write(&mut self) -> Option<Write> {
        self.next_write()
    }

    /// A completion of the RPC in flight (`input`: one of our writes completed, or the
    /// NAA's final write arrived), through the general handler while nothing is queued; the
    /// RPC's end, which the general path would queue, is returned.
    pub fn express_input(&mut self, input: Input<'_>) -> Express {
        if !self.queue.is_empty() || !matches!(self.state, State::Rpc { .. }) {
            return Express::NotTaken;
        }
        let finished = match input {
            Input::WriteCompleted(id) if id.kind() == Some(WrKind::Write) => {
                self.on_write_completed(id)
            }
            Input::WriteImmReceived { wr_id, imm, len } => self.on_reply(wr_id, imm, len),
            _ => return Express::NotTaken,
        };
        match (finished, self.queue.is_empty()) {
            (Some(result), _) => Express::Finished(result),
            (None, true) => Express::Taken,
            (None, false) => Express::Queued,
        }
    }
}
