//! Receiving on an application thread: an application thread that waits for a completion
//! takes the receive engine (when the receiver thread is idle) and reads the socket itself,
//! so that the completion it waits for costs no hand-off between threads.
//!
//! Only frames that can be handled without blocking are processed here: payloads that fit the
//! receive buffer, and SEND / WRITE WITH IMM only when a receive is posted. Anything else (a
//! large payload to stream, receiver-not-ready, the end of the connection) is handed back to
//! the receiver thread, which handles it as a NIC would.

use std::time::{Duration, Instant};

use super::frame::{Frame, HDR_LEN};
use super::qp::{Reader, Shared};
use super::rx::{Engine, RX_BUF, Rx, wait_readable};

/// Longest single sleep of an application thread in the socket (it re-checks the connection
/// after each).
const SLICE: Duration = Duration::from_millis(50);

/// How receiving on the application thread ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Inline {
    /// A completion or connection event is ready.
    Ready,
    /// The deadline passed (or, without one, nothing more has arrived).
    Idle,
    /// The receiver thread must take over (it has been handed the engine).
    HandedBack,
}

/// Receives on the calling application thread with `engine` (taken from the state, with the
/// reader set to [`Reader::App`]) until something is ready, `deadline` passes (`None`: do not
/// block), or the receiver thread must take over. Gives the engine back in every case.
pub(crate) fn receive_inline(shared: &Shared, engine: Engine, deadline: Option<Instant>) -> Inline {
    let mut rx = Rx { shared, e: engine };
    let outcome = rx.inline(deadline);
    rx.flush_wake();
    let mut st = shared.lock();
    st.engine = Some(std::mem::take(&mut rx.e));
    if outcome == Inline::HandedBack {
        st.reader = Reader::Reserved;
        shared.park_cv.notify_all();
        if st.rx_polling {
            shared.ring_bell();
        }
    } else {
        st.reader = Reader::AppIdle(Instant::now());
        if st.rx_polling {
            // The receiver thread may have missed input this thread consumed (poll re-checks
            // readiness when it wakes): make it park until the handover time is over, so
            // that what is left (a due acknowledgement) gets done.
            shared.ring_bell();
        }
    }
    outcome
}

impl Rx<'_> {
    fn inline(&mut self, deadline: Option<Instant>) -> Inline {
        loop {
            if self
                .shared
                .closed
                .load(std::sync::atomic::Ordering::Acquire)
            {
                return Inline::HandedBack;
            }
            // Frames already buffered.
            while self.buffered() >= HDR_LEN {
                let frame = match self.peek() {
                    Ok(f) => f,
                    Err(end) => {
                        self.e.pending_end = Some(end);
                        return Inline::HandedBack;
                    }
                };
                let (payload, needs_recv) = match frame {
                    Frame::Send { len, .. } | Frame::WriteImm { len, .. } => (len as usize, true),
                    Frame::Write { len, .. } => (len as usize, false),
                    _ => (0, false),
                };
                if payload > RX_BUF - HDR_LEN || (needs_recv && self.shared.lock().recvs.is_empty())
                {
                    return Inline::HandedBack;
                }
                if self.buffered() < HDR_LEN + payload {
                    break;
                }
                self.consume_header();
                if let Err(end) = self.handle(frame) {
                    self.e.pending_end = Some(end);
                    return Inline::HandedBack;
                }
            }
            {
                let st = self.shared.lock();
                if !st.cq.is_empty() || !st.events.is_empty() {
                    return Inline::Ready;
                }
            }
            if let Some(deadline) = deadline {
                // Sleep in the socket until input arrives (at once if it already has). This
                // thread cannot post a reply while it waits, so a due acknowledgement goes
                // out first.
                self.send_ack();
                let now = Instant::now();
                if now >= deadline {
                    return Inline::Idle;
                }
                wait_readable(self.shared, false, Some((deadline - now).min(SLICE)));
            }
            match self.read_available() {
                Ok(true) => {}
                Ok(false) if deadline.is_some() => {}
                Ok(false) => return Inline::Idle,
                Err(end) => {
                    self.e.pending_end = Some(end);
                    return Inline::HandedBack;
                }
            }
        }
    }
}
