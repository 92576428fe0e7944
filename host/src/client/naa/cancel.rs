//! Cancellation: abandon the RPC in flight without waiting for the NAA.
//!
//! The semantics are documented on [`Naa::cancel`].

use super::Naa;
use crate::error::Result;
use crate::transport::Endpoint;

impl<E: Endpoint> Naa<E> {
    /// Cancels the RPC in flight: tears the connection down without waiting for the NAA.
    /// Returns true if an RPC was in flight (or had failed) and was discarded, false if there
    /// was nothing to cancel.
    ///
    /// **Semantics.** The protocol has no cancel message, and an NAA (the FPGA's kernel unit, the
    /// software NAA's worker) cannot be interrupted in the middle of a kernel. So `cancel`
    /// tears the handle's connection down:
    ///
    /// * **The NAA** sees the client disconnect. It drops the RPC: the kernel runs to its end (it
    ///   cannot be stopped), its outputs are not written back (there is no connection left to
    ///   write them to), and the connection's resources are freed. The NAA keeps serving its other
    ///   clients. In the software NAA, the connection's worker thread stays inside the kernel
    ///   until it returns, then finds the connection gone and ends, freeing its connection slot;
    ///   a kernel that never returns keeps its thread and its slot (a long kernel should check
    ///   `KernelContext::timed_out`).
    /// * **The handle** returns at once (no message is exchanged, nothing is waited for) and is in
    ///   [`Phase::Disconnected`](naaice_core::Phase::Disconnected). [`Naa::test`] and
    ///   [`Naa::wait`] return [`Error::Cancelled`](crate::Error::Cancelled) until the next invoke.
    ///   It stays usable: the next [`Naa::invoke`] (or [`Naa::invoke_with`], or
    ///   [`Naa::reconnect`]) connects to the same NAA again and redoes the MRSP (blocking, within
    ///   the connect and MRSP deadlines) before starting the RPC, as on a fresh handle (every
    ///   input, single-send ones included, goes out with the first RPC).
    /// * **The regions**: the connection's memory registrations are released before `cancel`
    ///   returns, so neither the NAA nor the transport can touch the buffers any more. Inputs are
    ///   unchanged. Outputs are undefined: they hold either their previous contents or (part of)
    ///   the cancelled RPC's results, if the NAA was already writing them back.
    ///
    /// `cancel` also recovers a handle whose RPC failed (deadline passed, connection lost): the
    /// failed connection is dropped and the next invoke reconnects. With nothing in flight and
    /// no failure, it does nothing.
    pub fn cancel(&mut self) -> bool {
        let failed = self
            .conn
            .as_ref()
            .is_some_and(|c| !c.is_connected() || c.phase() == naaice_core::Phase::Error);
        if !self.is_busy() && !failed {
            return false;
        }
        // Dropping the connection disconnects and releases the endpoint (the transport's
        // threads end, the queue pair and the registrations are gone) before `cancel`
        // returns.
        drop(self.conn.take());
        tracing::debug!(fncode = %self.fncode, "RPC cancelled; the next invoke reconnects");
        true
    }

    /// Connects again to the handle's NAA now (after [`Naa::cancel`]; the next invoke does it
    /// otherwise) and redoes the MRSP. A connected handle is left as it is.
    pub fn reconnect(&mut self) -> Result<()> {
        if self.conn.is_none() {
            self.conn = Some(self.link.reconnect(&mut self.stats)?);
        }
        Ok(())
    }

    /// True after [`Naa::cancel`] until the handle is connected again.
    pub fn is_cancelled(&self) -> bool {
        self.conn.is_none()
    }
}
