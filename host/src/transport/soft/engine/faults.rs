//! Fault injection on transmitted frames (tests only: the cargo feature `fault-injection`).

use std::time::Instant;

use super::super::fault::{Direction, FaultAction};
use super::{Engine, Transmit};

impl Engine {
    /// [`Engine::poll_transmit`] with the fault plan applied to every frame.
    pub(super) fn poll_transmit_faulty(
        &mut self,
        now: Instant,
        max_payload: usize,
    ) -> Option<Transmit> {
        loop {
            let t = self.next_transmit(now, max_payload)?;
            if let Some(t) = self.inject(now, t) {
                return Some(t);
            }
        }
    }

    /// A fault the I/O part must carry out before it writes what it took last (a delay, or
    /// a reset of the connection instead).
    pub(crate) fn take_io_fault(&mut self) -> Option<FaultAction> {
        self.io_fault.take()
    }

    /// Applies the fault plan to a frame about to be handed out; `None` if it is swallowed.
    fn inject(&mut self, now: Instant, t: Transmit) -> Option<Transmit> {
        let frame = match &t {
            Transmit::Control(f) | Transmit::Data { frame: f, .. } => *f,
        };
        let action = if self.mute {
            Some(FaultAction::Drop)
        } else {
            self.settings.faults.check(Direction::Sent, &frame)
        };
        match action {
            None => Some(t),
            Some(FaultAction::Delay(d)) => {
                self.io_fault = Some(FaultAction::Delay(d));
                Some(t)
            }
            Some(a @ (FaultAction::Drop | FaultAction::Reset)) => {
                if a == FaultAction::Reset {
                    self.io_fault = Some(a);
                }
                // Lost on the way: a data message counts as transmitted (its ACK never comes).
                self.mute = true;
                if let Transmit::Data { msn, .. } = t {
                    self.handle_transmitted(now, msn);
                }
                None
            }
        }
    }
}
