//! Output: the frames to transmit, and what the queue pair has ready.

use std::time::{Duration, Instant};

use super::super::frame::Frame;
use super::{Ending, Engine, Phase, RxState, Transmit};
use crate::transport::{Completion, ConnectionEvent};

impl Engine {
    /// The next frame to transmit: a due ACK (at once if a data frame follows), a keep-alive,
    /// then data messages whose payload is at most `max_payload`; after teardown, the ACK still
    /// due and the final frames.
    pub(crate) fn poll_transmit(&mut self, now: Instant, max_payload: usize) -> Option<Transmit> {
        #[cfg(feature = "fault-injection")]
        if self.mute || !self.settings.faults.is_empty() {
            return self.poll_transmit_faulty(now, max_payload);
        }
        self.next_transmit(now, max_payload)
    }

    /// [`Engine::poll_transmit`] without faults.
    pub(super) fn next_transmit(&mut self, now: Instant, max_payload: usize) -> Option<Transmit> {
        let data = self.next_data(max_payload);
        if self.rx_msn > self.ack_sent
            && (self.phase == Phase::Closed
                || data.is_some()
                || self.ack_at.is_some_and(|t| now >= t))
        {
            self.ack_sent = self.rx_msn;
            self.ack_at = None;
            return Some(Transmit::Control(Frame::Ack { msn: self.rx_msn }));
        }
        match self.phase {
            Phase::Pending => None,
            Phase::Closed => self.finals.pop_front().map(Transmit::Control),
            Phase::Connected if self.nop_due => {
                self.nop_due = false;
                Some(Transmit::Control(Frame::Nop))
            }
            Phase::Connected => {
                let idx = data?;
                let entry = &self.sq[idx];
                let msn = self.tx_next;
                self.tx_next += 1;
                Some(Transmit::Data {
                    msn,
                    frame: entry.frame(),
                    local: entry.local.clone(),
                })
            }
        }
    }

    /// True if a data message waits to be handed out (of any size).
    pub(crate) fn has_data(&self) -> bool {
        self.phase == Phase::Connected && self.next_data(usize::MAX).is_some()
    }

    /// The earliest time [`Engine::handle_timeout`] or [`Engine::poll_transmit`] has
    /// something to do, without the delayed ACK if `with_ack_delay` is false (a thread that
    /// will transmit anyway need not be woken for it).
    pub(crate) fn poll_timeout(&self, with_ack_delay: bool) -> Option<Instant> {
        if self.phase != Phase::Connected {
            return None;
        }
        let ack = self.ack_at.filter(|_| with_ack_delay);
        let rnr = match &self.rx {
            RxState::Stalled {
                deadline, next_nop, ..
            } => Some((*deadline).min(*next_nop)),
            _ => None,
        };
        [self.ack_expiry(), ack, rnr].into_iter().flatten().min()
    }

    /// The next completion.
    pub(crate) fn poll_completion(&mut self) -> Option<Completion> {
        self.cq.pop_front()
    }

    /// The next connection event.
    pub(crate) fn poll_event(&mut self) -> Option<ConnectionEvent> {
        self.events.pop_front()
    }

    /// True if a completion or a connection event is ready.
    pub(crate) fn has_ready(&self) -> bool {
        !self.cq.is_empty() || !self.events.is_empty()
    }

    /// True once torn down.
    pub(crate) fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }

    /// True while established.
    pub(crate) fn is_connected(&self) -> bool {
        self.phase == Phase::Connected
    }

    /// True if an incoming message waits for a receive.
    pub(crate) fn is_stalled(&self) -> bool {
        matches!(self.rx, RxState::Stalled { .. })
    }

    /// True if a stalled message can continue.
    pub(crate) fn can_resume(&self) -> bool {
        self.is_stalled() && !self.recvs.is_empty()
    }

    /// True if a receive is posted.
    pub(crate) fn has_recv(&self) -> bool {
        !self.recvs.is_empty()
    }

    /// True if teardown queued a final frame (NAK or DREQ) for the peer.
    pub(crate) fn final_queued(&self) -> bool {
        self.final_queued
    }

    /// How the connection ended.
    pub(crate) fn ending(&self) -> Ending {
        self.ending
    }

    pub(super) fn keepalive(&self) -> Duration {
        (self.settings.ack_timeout / 4).max(Duration::from_millis(1))
    }

    pub(super) fn next_data(&self, max_payload: usize) -> Option<usize> {
        let idx = usize::try_from(self.tx_next.checked_sub(self.acked + 1)?).ok()?;
        let entry = self.sq.get(idx)?;
        (entry.local.as_ref().map_or(0, |l| l.len) <= max_payload).then_some(idx)
    }

    pub(super) fn awaiting_ack(&self) -> bool {
        self.tx_done > self.acked
    }

    /// When the acknowledgement timer fires: `ack_timeout` after the later of the start of the
    /// wait and the last byte received from the peer.
    pub(super) fn ack_expiry(&self) -> Option<Instant> {
        self.awaiting_ack()
            .then(|| self.ack_clock.max(self.last_rx) + self.settings.ack_timeout)
    }
}
