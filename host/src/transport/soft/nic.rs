//! The receiver thread: the NIC of the responder when no application thread is receiving.
//!
//! It owns the receive [`Engine`] while input keeps coming. When the input runs dry it offers
//! the engine to application threads (`inline`) and waits for the socket to become readable;
//! an application thread that waits for a completion takes the engine and receives itself.
//! While an application thread holds the engine, or gave it back less than
//! [`SoftConfig::receive_handover`](super::SoftConfig) ago, the receiver thread stays parked,
//! so that a steady request/response exchange never wakes it. After that it takes over again:
//! placing data, acknowledging and waiting for receives happen without the application.

use std::net::Shutdown;
use std::sync::{Arc, PoisonError};
use std::time::Instant;

use super::frame::{Frame, HDR_LEN};
use super::qp::{Cause, Phase, Reader, Shared};
use super::rx::{End, Engine, Readiness, Rx, wait_readable};
use super::tx::send_final;

/// The receiver thread.
pub(crate) fn run_receiver(shared: Arc<Shared>) {
    let mut rx = Rx {
        shared: &shared,
        e: Engine::default(),
    };
    let end = match rx.acquire() {
        Ok(()) => rx.run().err().unwrap_or(End::Closed),
        Err(end) => end,
    };
    rx.flush_wake();
    rx.set_timeout(None);
    let linger = shared.config.ack_timeout;
    match end {
        End::PeerGone => {
            tracing::debug!("soft transport: peer disconnected");
            shared.close(&mut shared.lock(), Cause::Flush);
            shared.shutdown(Shutdown::Both);
        }
        End::Violation(why) => {
            tracing::warn!(why, "soft transport: peer protocol violation; tearing down");
            shared.close(&mut shared.lock(), Cause::Flush);
            shared.shutdown(Shutdown::Both);
        }
        End::Refuse(status) => {
            let msn = {
                let mut st = shared.lock();
                let msn = st.rx_msn + 1;
                shared.close(&mut st, Cause::Flush);
                msn
            };
            tracing::debug!(msn, ?status, "soft transport: refusing message");
            send_final(&shared, Frame::Nak { msn, status });
            shared.shutdown(Shutdown::Write);
            rx.drain(linger);
            shared.shutdown(Shutdown::Both);
        }
        End::Closed => {
            // Torn down locally (disconnect, NAK received, sender failure): let the peer's
            // remaining bytes arrive until it closes too, so that our close does not reset
            // frames still in flight to it.
            rx.drain(linger);
            shared.shutdown(Shutdown::Both);
        }
    }
}

impl Rx<'_> {
    /// The receive loop; returns only with the reason it ended.
    fn run(&mut self) -> Result<(), End> {
        loop {
            if let Some(end) = self.e.pending_end.take() {
                return Err(end);
            }
            if self.buffered() < HDR_LEN {
                self.flush_wake();
                // Input ran dry. A due ACK waits a moment, so that a reply the application
                // posts meanwhile carries it (no extra segment, no extra wake-up at the
                // peer); the engine is offered to application threads meanwhile.
                let delay = self.shared.config.ack_delay;
                let ack_due = self.buffered() == 0 && self.ack_due();
                if ack_due && delay.is_zero() {
                    self.send_ack();
                }
                let timeout = (ack_due && !delay.is_zero()).then_some(delay);
                if self.idle(timeout)? {
                    self.send_ack();
                }
                continue;
            }
            let frame = self.peek()?;
            self.consume_header();
            self.handle(frame)?;
        }
    }

    /// Takes the engine from the queue-pair state (waiting while an application thread holds
    /// it) and marks the receiver thread as the reader.
    fn acquire(&mut self) -> Result<(), End> {
        let shared = self.shared;
        let mut st = shared.lock();
        loop {
            let handover_over = match st.reader {
                Reader::Thread | Reader::Reserved => true,
                Reader::App => false,
                Reader::AppIdle(since) => since.elapsed() >= shared.config.receive_handover,
            };
            if (handover_over || st.phase == Phase::Closed)
                && let Some(e) = st.engine.take()
            {
                st.reader = Reader::Thread;
                self.e = e;
                return Ok(());
            }
            st = park(shared, st);
        }
    }

    /// Input ran dry: offers the engine to application threads (waking one that waits for a
    /// completion, so that it receives for itself from now on), waits until input arrives, an
    /// application thread hands the engine back, or `timeout` passes, and takes the engine
    /// again; then reads what has arrived. Returns true if `timeout` passed without input.
    fn idle(&mut self, timeout: Option<std::time::Duration>) -> Result<bool, End> {
        let shared = self.shared;
        self.set_timeout(None);
        {
            let mut st = shared.lock();
            if st.phase == Phase::Closed {
                return Err(End::Closed);
            }
            st.engine = Some(std::mem::take(&mut self.e));
            st.rx_polling = true;
            if st.app_waiters > 0 {
                shared.app_cv.notify_all();
            }
        }
        let ready = wait_readable(shared, true, timeout);
        let mut st = shared.lock();
        st.rx_polling = false;
        if ready != Readiness::Bell
            && matches!(st.reader, Reader::Thread | Reader::Reserved)
            && let Some(e) = st.engine.take()
        {
            // Nobody took it, or it was handed back: read what came (an application thread
            // may have left frames in it).
            st.reader = Reader::Thread;
            self.e = e;
            drop(st);
            if ready == Readiness::Timeout && self.buffered() == 0 {
                return Ok(true);
            }
            if self.buffered() < HDR_LEN && self.e.pending_end.is_none() {
                self.read_available()?;
            }
            return Ok(false);
        }
        drop(st);
        // An application thread holds the engine, or handed it back (bell): take it when
        // allowed. It may hold frames for us (a large payload, a receive to wait for, an end).
        self.acquire()?;
        if self.buffered() < HDR_LEN && self.e.pending_end.is_none() {
            self.read_available()?;
        }
        Ok(false)
    }
}

/// Parks the receiver thread until an application thread hands the engine back, the handover
/// time after its last use passes, or the connection closes.
fn park<'a>(
    shared: &'a Shared,
    st: std::sync::MutexGuard<'a, super::qp::State>,
) -> std::sync::MutexGuard<'a, super::qp::State> {
    let handover = shared.config.receive_handover;
    let timeout = match st.reader {
        Reader::AppIdle(since) => (since + handover).saturating_duration_since(Instant::now()),
        _ => handover,
    };
    shared
        .park_cv
        .wait_timeout(st, timeout)
        .unwrap_or_else(PoisonError::into_inner)
        .0
}
