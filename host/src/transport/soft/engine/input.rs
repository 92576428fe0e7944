//! Input: frames from the peer, placed payloads, failures and timers.

use std::time::Instant;

use super::super::frame::Frame;
use super::{Cause, Ending, Engine, Inbound, Phase, RxState};
use crate::transport::regions::Local;
use crate::transport::{Completion, ConnectionEvent, WcOpcode, WcStatus};

impl Engine {
    /// Bytes arrived from the peer (keeps the acknowledgement timer alive).
    pub(crate) fn handle_activity(&mut self, now: Instant) {
        self.last_rx = now;
    }

    /// Handles one incoming frame (its header; a payload follows for data frames).
    pub(crate) fn handle_frame(&mut self, now: Instant, frame: Frame) -> Inbound {
        if self.phase != Phase::Connected {
            return Inbound::Closed;
        }
        if !matches!(self.rx, RxState::Idle) {
            return self.violation("frame while a message is pending");
        }
        match frame {
            Frame::Ack { msn } => {
                if msn < self.acked || msn >= self.tx_next {
                    return self.violation("ACK outside the send window");
                }
                self.complete_sends(now, msn);
                Inbound::Done
            }
            Frame::Nak { msn, status } => {
                if msn <= self.acked || msn >= self.tx_next {
                    return self.violation("NAK outside the send window");
                }
                tracing::debug!(msn, ?status, "soft transport: peer refused a request");
                let cause = Cause::Failed {
                    msn,
                    status,
                    earlier_ok: true,
                };
                self.close(cause, None);
                Inbound::Closed
            }
            Frame::Dreq => {
                self.handle_peer_gone();
                Inbound::Closed
            }
            Frame::Nop => Inbound::Done,
            Frame::Hello
            | Frame::Accept
            | Frame::Reject { .. }
            | Frame::CatalogRequest
            | Frame::Catalog { .. } => {
                self.violation("handshake frame on an established connection")
            }
            Frame::Send { .. } => self.start_message(now, frame, None),
            Frame::Write { len, remote } | Frame::WriteImm { len, remote, .. } => {
                // Validate the target before placing a byte (zero-length writes touch no
                // memory and, as in InfiniBand, are not checked).
                let target = match len {
                    0 => None,
                    _ => match self.regions.target(remote, len) {
                        Some(t) => Some(t),
                        None => return self.refuse(WcStatus::RemoteAccess),
                    },
                };
                self.start_message(now, frame, target)
            }
        }
    }

    /// The next step of a stalled message once a receive is posted (`None`: still stalled or
    /// nothing stalled).
    pub(crate) fn resume(&mut self) -> Option<Inbound> {
        if !matches!(self.rx, RxState::Stalled { .. }) || self.recvs.is_empty() {
            return None;
        }
        let RxState::Stalled { frame, target, .. } = std::mem::replace(&mut self.rx, RxState::Idle)
        else {
            return None;
        };
        Some(self.accept_message(frame, target))
    }

    /// The payload of the current message was placed.
    pub(crate) fn handle_placed(&mut self, now: Instant) {
        if let RxState::Placing { frame } = std::mem::replace(&mut self.rx, RxState::Idle) {
            self.finish_message(now, frame);
        }
    }

    /// The memory of the current message became inaccessible while it was placed.
    pub(crate) fn handle_place_failed(&mut self) {
        if let RxState::Placing { frame } = std::mem::replace(&mut self.rx, RxState::Idle) {
            if matches!(frame, Frame::Send { .. }) {
                self.complete_recv(WcStatus::LocalProtection, WcOpcode::Recv, 0, None);
            }
            self.refuse(WcStatus::RemoteAccess);
        }
    }

    /// Data message `msn` was fully written to the peer.
    pub(crate) fn handle_transmitted(&mut self, now: Instant, msn: u64) {
        if msn > self.tx_done {
            if !self.awaiting_ack() {
                self.ack_clock = now;
            }
            self.tx_done = msn;
        }
    }

    /// The peer closed the connection or the socket failed.
    pub(crate) fn handle_peer_gone(&mut self) {
        if self.phase != Phase::Closed {
            tracing::debug!("soft transport: peer disconnected");
            self.ending = Ending::Abort;
        }
        self.close(Cause::Flush, None);
    }

    /// Writing to the peer failed (it reset or closed the connection). The connection is not
    /// torn down yet: a NAK may wait in the input, and a real RC requester would see it, so
    /// the I/O part reads on and calls [`Engine::handle_peer_gone`] once the input runs dry.
    pub(crate) fn handle_send_failed(&mut self) {
        if self.phase == Phase::Connected && !self.send_failed {
            tracing::debug!("soft transport: send failed; reading what the peer sent before");
            self.send_failed = true;
        } else if self.phase == Phase::Pending {
            self.handle_peer_gone();
        }
    }

    /// True if a write failed and the connection ends once the input runs dry.
    pub(crate) fn send_failed(&self) -> bool {
        self.send_failed
    }

    /// The peer broke the protocol (malformed frame).
    pub(crate) fn handle_violation(&mut self, why: &'static str) {
        self.violation(why);
    }

    /// Transmitting request `msn` failed locally (its memory became inaccessible).
    pub(crate) fn handle_local_failure(&mut self, msn: u64) {
        if self.phase != Phase::Closed {
            self.ending = Ending::Abort;
        }
        let cause = Cause::Failed {
            msn,
            status: WcStatus::LocalProtection,
            earlier_ok: false,
        };
        self.close(cause, None);
    }

    /// No byte could be written for the ACK timeout (the peer does not read).
    pub(crate) fn handle_write_stall(&mut self) {
        tracing::debug!("soft transport: the peer stopped reading");
        self.retry_exceeded();
    }

    /// Fires the timers that are due at `now`.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        if self.phase != Phase::Connected {
            return;
        }
        if self.ack_expiry().is_some_and(|t| now >= t) {
            tracing::debug!("soft transport: acknowledgement timeout");
            self.retry_exceeded();
            return;
        }
        let keepalive = self.keepalive();
        if let RxState::Stalled {
            deadline, next_nop, ..
        } = &mut self.rx
        {
            if now >= *deadline {
                self.rx = RxState::Idle;
                self.refuse(WcStatus::RnrRetryExceeded);
            } else if now >= *next_nop {
                *next_nop = now + keepalive;
                self.nop_due = true;
            }
        }
    }

    pub(super) fn retry_exceeded(&mut self) {
        if self.phase != Phase::Closed {
            // The peer does not answer: nothing to wait for before closing.
            self.ending = Ending::Abort;
        }
        let cause = Cause::Failed {
            msn: self.acked + 1,
            status: WcStatus::RetryExceeded,
            earlier_ok: false,
        };
        self.close(cause, None);
    }

    pub(super) fn violation(&mut self, why: &'static str) -> Inbound {
        if self.phase != Phase::Closed {
            tracing::warn!(why, "soft transport: peer protocol violation; tearing down");
            self.ending = Ending::Abort;
        }
        self.close(Cause::Flush, None);
        Inbound::Closed
    }

    /// Refuses the incoming message `rx_msn + 1`: NAK it and tear down.
    pub(super) fn refuse(&mut self, status: WcStatus) -> Inbound {
        let msn = self.rx_msn + 1;
        tracing::debug!(msn, ?status, "soft transport: refusing message");
        self.close(Cause::Flush, Some(Frame::Nak { msn, status }));
        Inbound::Closed
    }

    pub(super) fn start_message(
        &mut self,
        now: Instant,
        frame: Frame,
        target: Option<Local>,
    ) -> Inbound {
        let needs_recv = matches!(frame, Frame::Send { .. } | Frame::WriteImm { .. });
        if needs_recv && self.recvs.is_empty() {
            tracing::trace!("soft transport: receiver not ready; waiting");
            self.nop_due = true;
            self.rx = RxState::Stalled {
                frame,
                target,
                deadline: now + self.settings.rnr_timeout,
                next_nop: now + self.keepalive(),
            };
            return Inbound::Stalled;
        }
        self.accept_message(frame, target)
    }

    pub(super) fn accept_message(&mut self, frame: Frame, target: Option<Local>) -> Inbound {
        let place = match frame {
            Frame::Send { len, .. } if len > 0 => {
                let local = self.recvs.front().and_then(|r| r.local.clone());
                match local {
                    Some(l) if l.len >= len as usize => {
                        if l.buffer.is_app_locked() {
                            self.complete_recv(WcStatus::LocalProtection, WcOpcode::Recv, 0, None);
                            return self.refuse(WcStatus::RemoteAccess);
                        }
                        Local {
                            len: len as usize,
                            ..l
                        }
                    }
                    _ => {
                        self.complete_recv(WcStatus::LocalLength, WcOpcode::Recv, 0, None);
                        return self.refuse(WcStatus::RemoteInvalidRequest);
                    }
                }
            }
            _ => match target {
                Some(t) => t,
                None => {
                    self.finish_message(Instant::now(), frame);
                    return Inbound::Done;
                }
            },
        };
        self.rx = RxState::Placing { frame };
        Inbound::Place(place)
    }

    /// Completes incoming message `rx_msn + 1` after its payload was placed.
    pub(super) fn finish_message(&mut self, now: Instant, frame: Frame) {
        self.rx_msn += 1;
        if self.ack_at.is_none() {
            self.ack_at = Some(now + self.settings.ack_delay);
        }
        match frame {
            Frame::Send { len, .. } => {
                self.complete_recv(WcStatus::Success, WcOpcode::Recv, len, None)
            }
            Frame::WriteImm { len, imm, .. } => {
                self.complete_recv(WcStatus::Success, WcOpcode::RecvRdmaWithImm, len, Some(imm));
            }
            _ => {}
        }
    }

    /// Consumes the oldest receive with a completion.
    pub(super) fn complete_recv(
        &mut self,
        status: WcStatus,
        opcode: WcOpcode,
        byte_len: u32,
        imm: Option<u32>,
    ) {
        if let Some(recv) = self.recvs.pop_front() {
            self.cq.push_back(Completion {
                wr_id: recv.wr_id,
                status,
                opcode,
                byte_len,
                imm,
            });
        }
    }

    /// Completes send requests up to `msn` successfully (cumulative ACK).
    pub(super) fn complete_sends(&mut self, now: Instant, msn: u64) {
        let mut progressed = false;
        while self.acked < msn {
            let Some(entry) = self.sq.pop_front() else {
                break;
            };
            self.acked += 1;
            progressed = true;
            self.cq.push_back(Completion {
                wr_id: entry.wr.wr_id,
                status: WcStatus::Success,
                opcode: entry.opcode(),
                byte_len: 0,
                imm: None,
            });
        }
        if progressed {
            self.ack_clock = now;
        }
    }

    /// Tears the connection down (once): completes every outstanding request (flushed unless
    /// `cause` says otherwise), reports `Disconnected`, and queues `last` as the final frame.
    pub(super) fn close(&mut self, cause: Cause, last: Option<Frame>) {
        if self.phase == Phase::Closed {
            return;
        }
        let was_connected = self.phase == Phase::Connected;
        self.phase = Phase::Closed;
        self.rx = RxState::Idle;
        self.nop_due = false;
        tracing::debug!(?cause, "soft transport: connection torn down");
        while let Some(entry) = self.sq.pop_front() {
            self.acked += 1;
            let msn = self.acked;
            let status = match cause {
                Cause::Failed {
                    msn: failed,
                    status,
                    earlier_ok,
                } if msn <= failed => {
                    if msn == failed {
                        status
                    } else if earlier_ok {
                        WcStatus::Success
                    } else {
                        WcStatus::WrFlush
                    }
                }
                _ => WcStatus::WrFlush,
            };
            self.cq.push_back(Completion {
                wr_id: entry.wr.wr_id,
                status,
                opcode: entry.opcode(),
                byte_len: 0,
                imm: None,
            });
        }
        while !self.recvs.is_empty() {
            self.complete_recv(WcStatus::WrFlush, WcOpcode::Recv, 0, None);
        }
        if was_connected {
            self.events.push_back(ConnectionEvent::Disconnected);
            self.final_queued = last.is_some();
            self.finals.extend(last);
        }
    }
}
