//! Work requests the driver posts for its machine, and completions it feeds back.

use naaice_core::config::MRSP_RECV_LEN;
use naaice_core::machine::{Input, RecvBuffer, WorkError, WrId, Write};

use super::regions::sge;
use super::{Driver, Role};
use crate::clock;
use crate::transport::{
    Completion, Endpoint, MemoryRegion, SendOp, SendWr, Sge, TransportError, WcOpcode, WcStatus,
};

impl<E: Endpoint, M: Role> Driver<E, M> {
    pub(super) fn post_recv(&mut self, wr_id: WrId, buffer: RecvBuffer) {
        let sge = match buffer {
            RecvBuffer::Message => Some(self.buffers.recv_sge()),
            RecvBuffer::Empty => None,
        };
        if let Err(e) = self.ep.post_recv(wr_id.raw(), sge) {
            self.post_failed(wr_id, &e);
        }
    }

    /// Tells the machine that posting `wr_id` failed. A post onto a connection that is already
    /// gone is reported as the disconnect it is (the error then names the peer's departure and
    /// the phase, not a work-request number).
    pub(super) fn post_failed(&mut self, wr_id: WrId, error: &TransportError) {
        let input = if matches!(error, TransportError::NotConnected) {
            tracing::debug!(wr_id = wr_id.raw(), "posting onto a closed connection");
            Input::Disconnected
        } else {
            tracing::warn!(wr_id = wr_id.raw(), %error, "posting a work request failed");
            Input::PostFailed(wr_id)
        };
        self.machine.handle_input(clock::now(), input);
    }

    /// Posts the message the machine encoded into the scratch buffer as a solicited SEND.
    pub(super) fn post_message(&mut self, wr_id: WrId, len: usize) {
        let send = &self.buffers.send;
        let copied = send.buffer().try_lock().map(|mut g| {
            g[..len].copy_from_slice(&self.scratch[..len]);
        });
        let wr = SendWr {
            wr_id: wr_id.raw(),
            op: SendOp::Send,
            local: Some(sge(send, len)),
            solicited: true,
        };
        if copied.is_none() {
            self.machine
                .handle_input(clock::now(), Input::PostFailed(wr_id));
        } else if let Err(e) = self.ep.post_send(&[wr]) {
            self.post_failed(wr_id, &e);
        }
    }

    pub(super) fn queue_write(&mut self, w: Write) {
        match self.send_wr(&w) {
            Some(wr) => self.writes.push(wr),
            None => self
                .machine
                .handle_input(clock::now(), Input::PostFailed(w.wr_id)),
        }
    }

    /// The work request of a machine's write; `None` (logged) when its region has no
    /// registered memory.
    pub(super) fn send_wr(&self, w: &Write) -> Option<SendWr> {
        let local = if w.len == 0 {
            None
        } else if let Some(r) = self.registered(w.region.index()) {
            Some(Sge {
                addr: r.addr(),
                len: w.len,
                lkey: r.lkey(),
            })
        } else {
            tracing::error!(
                region = w.region.index(),
                "write from a region without memory"
            );
            return None;
        };
        Some(SendWr {
            wr_id: w.wr_id.raw(),
            op: SendOp::write(w.remote_addr, w.rkey, w.imm),
            local,
            solicited: w.solicited,
        })
    }

    /// Posts the queued writes as one list (spec §3.1).
    pub(super) fn flush_writes(&mut self) {
        if self.writes.is_empty() {
            return;
        }
        if let Err(e) = self.ep.post_send(&self.writes) {
            let first = WrId::from_raw(self.writes[0].wr_id);
            self.post_failed(first, &e);
        }
        self.writes.clear();
    }

    /// Feeds one completion to the machine, as happened at `now`.
    pub(super) fn feed_completion(&mut self, wc: Completion, now: naaice_core::Instant) {
        let wr_id = WrId::from_raw(wc.wr_id);
        if wc.status != WcStatus::Success {
            let error = wc.status.work_error();
            tracing::debug!(wr_id = wc.wr_id, ?error, "work request failed");
            return self
                .machine
                .handle_input(now, Input::WorkFailed { wr_id, error });
        }
        let input = match wc.opcode {
            WcOpcode::Send => Input::SendCompleted(wr_id),
            WcOpcode::RdmaWrite => Input::WriteCompleted(wr_id),
            WcOpcode::RecvRdmaWithImm => Input::WriteImmReceived {
                wr_id,
                imm: wc.imm.unwrap_or(0),
                len: wc.byte_len,
            },
            WcOpcode::Recv => {
                let len = (wc.byte_len as usize).min(MRSP_RECV_LEN);
                let mut msg = [0u8; MRSP_RECV_LEN];
                let copied = self
                    .buffers
                    .recv
                    .buffer()
                    .try_lock()
                    .map(|g| msg[..len].copy_from_slice(&g[..len]));
                let input = match copied {
                    Some(()) => Input::Received {
                        wr_id,
                        data: &msg[..len],
                    },
                    None => Input::WorkFailed {
                        wr_id,
                        error: WorkError::LocalProtection,
                    },
                };
                return self.machine.handle_input(now, input);
            }
        };
        self.machine.handle_input(now, input);
    }
}
