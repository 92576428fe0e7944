//! The NIC thread: the part of the endpoint that works without the application. It receives
//! when no application thread does (large payloads, missing receives, whenever the
//! application is not waiting), writes what the posting threads leave (large frames, the rest
//! of a frame the socket could not take at once), runs the engine's timers, and tears the
//! connection down: final frames (ACK, NAK or DREQ), then the socket.

use std::net::Shutdown;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::engine::Ending;
use super::queue_pair::{CHUNK, Guard, ReadSlot, Shared, Sleep};
use super::reader::Reader;
use super::receive::{Mode, Stop, drive};
use super::socket::{Interest, transient};
use super::writer::Writer;

/// The NIC thread's loop.
pub(crate) fn run(shared: Arc<Shared>) {
    let mut held: Option<Reader> = None;
    let mut st = shared.lock();
    loop {
        let now = Instant::now();
        st.rc.handle_timeout(now);
        if let Some(w) = &st.writer
            && w.has_work()
            && now >= w.last_progress() + shared.config.ack_timeout
        {
            st.rc.handle_write_stall();
        }
        if st.rc.is_closed() {
            break;
        }
        let mut read = false;
        if held.is_none() {
            held = st.take_reader_for_nic(now);
        }
        if let Some(mut r) = held.take() {
            let (g, stop) = drive(&shared, st, &mut r, Mode::Nic, now);
            st = g;
            match stop {
                Stop::Busy => {
                    held = Some(r);
                    st = shared.pump(st, usize::MAX);
                    continue;
                }
                Stop::Idle if !r.is_placing() => {
                    // Input ran dry: offer the reader to application threads (one that waits
                    // for a completion receives for itself from now on).
                    shared.socket.set_read_mark(1);
                    st.read = ReadSlot::Free(r);
                    read = true;
                    shared.wake_app(&st);
                }
                Stop::Idle => {
                    shared.socket.set_read_mark(r.read_mark(CHUNK));
                    held = Some(r);
                    read = true;
                }
                Stop::Stalled | Stop::HandBack => held = Some(r),
                Stop::Closed => break,
            }
        }
        st = shared.pump(st, usize::MAX);
        if st.rc.is_closed() {
            break;
        }
        st = sleep(&shared, st, read, now);
    }
    teardown(&shared, st);
}

/// Sleeps until input (if `read`), room to write (if a write is left over), the bell, or the
/// next timer.
fn sleep<'a>(shared: &'a Shared, mut st: Guard<'a>, read: bool, now: Instant) -> Guard<'a> {
    let writer = st.writer.as_deref();
    let write = writer.is_some_and(Writer::has_work);
    // The delayed ACK matters only if the writer is idle and ours to use (its holder or the
    // frame in progress takes the ACK along).
    let ack_timer = writer.is_some_and(|w| !w.has_work());
    let stall = writer
        .filter(|_| write)
        .map(|w| w.last_progress() + shared.config.ack_timeout);
    let handover = st.handover_timer(now);
    let until = [st.rc.poll_timeout(ack_timer), stall, handover]
        .into_iter()
        .flatten()
        .min();
    let plan = Sleep { until, write };
    // Timers may have produced completions (flushes) that an armed waiter must see.
    shared.signal_ready(&st);
    if st.nic_must_act(plan) {
        // Something changed since this thread last looked.
        return st;
    }
    st.nic_sleep = Some(plan);
    drop(st);
    let timeout = until.map(|t| t.saturating_duration_since(Instant::now()));
    let interest = Interest {
        read,
        write,
        bell: true,
    };
    shared.socket.wait(interest, timeout);
    let mut st = shared.lock();
    st.nic_sleep = None;
    st
}

/// Sends the final frames still due (the ACK for what was placed, then the NAK or DREQ; none
/// if a data frame was cut off), waiting for the writer and for room, at most `ack_timeout`.
/// With `report`, a final frame that could not be sent is logged (a warning: the peer does
/// not learn why the connection ended).
pub(crate) fn flush_finals<'a>(shared: &'a Shared, mut st: Guard<'a>, report: bool) -> Guard<'a> {
    let give_up = Instant::now() + shared.config.ack_timeout;
    loop {
        st = shared.pump(st, usize::MAX);
        let held_elsewhere = st.writer.is_none();
        let busy = held_elsewhere || st.writer.as_deref().is_some_and(Writer::has_work);
        let now = Instant::now();
        if !busy {
            if report && st.writer.as_deref().is_some_and(Writer::is_torn) && st.rc.final_queued() {
                tracing::warn!(
                    "soft transport: final frame (NAK or DREQ) not sent: \
                     a frame was cut off or the socket failed"
                );
            }
            return st;
        }
        if now >= give_up {
            if !report {
                return st;
            }
            tracing::warn!(
                timeout = ?shared.config.ack_timeout,
                "soft transport: final frames (NAK or DREQ) not delivered: the peer does not read"
            );
            return st;
        }
        drop(st);
        if held_elsewhere {
            // Its holder writes at most one chunk more (it stops once torn down).
            std::thread::sleep(Duration::from_micros(50));
        } else {
            let write = Interest {
                write: true,
                ..Interest::default()
            };
            shared
                .socket
                .wait(write, Some((give_up - now).min(Duration::from_millis(10))));
        }
        st = shared.lock();
    }
}

/// Closes the connection after teardown: final frames, then (unless the peer is gone) lets the
/// peer's remaining bytes arrive until it closes too, so that our close does not reset frames
/// still in flight to it.
fn teardown(shared: &Shared, st: Guard<'_>) {
    let st = flush_finals(shared, st, true);
    let ending = st.rc.ending();
    shared.app_cv.notify_all();
    shared.signal_ready(&st);
    drop(st);
    shared.socket.shutdown(Shutdown::Write);
    if ending == Ending::Linger {
        drain(shared, shared.config.ack_timeout);
    }
    shared.socket.shutdown(Shutdown::Both);
}

/// Discards input until the peer closes, an error, or `linger` passes.
fn drain(shared: &Shared, linger: Duration) {
    let until = Instant::now() + linger;
    shared.socket.set_read_mark(1);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match shared.socket.recv(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if transient(&e) => {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return;
                }
                let read = Interest {
                    read: true,
                    ..Interest::default()
                };
                shared.socket.wait(read, Some(left));
            }
            Err(_) => return,
        }
    }
}
