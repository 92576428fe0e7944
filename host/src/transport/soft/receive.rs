//! Receiving: reads frames with the [`Reader`], hands them to the engine, and places payloads
//! where the engine says. Both the NIC thread and an application thread that waits for a
//! completion receive this way ([`Mode`]); the application thread handles what needs no
//! waiting for the application (frames whose receive is posted, payloads of any size, read
//! without blocking as they arrive) and hands the reader back to the NIC thread for anything
//! else. If its own completion becomes ready in the middle of a payload larger than the
//! receive buffer (a smaller one is finished while its bytes are there), or after 8 MiB of a
//! payload, it returns with the reader still placing: its next call continues, or the NIC
//! thread after the hand-over time.

use std::time::{Duration, Instant};

use super::engine::Inbound;
use super::fault::{Direction, FaultAction};
use super::frame::{Frame, HDR_LEN};
use super::queue_pair::{CHUNK, Guard, POST_BUDGET, ReadSlot, Shared};
use super::reader::{RX_BUF, Reader, SMALL_READ, Step};
use super::socket::Interest;

/// Longest single sleep of an application thread in the socket (it re-checks the connection
/// after each).
const SLICE: Duration = Duration::from_millis(50);

/// Most placement steps (each one chunk at most) of an application thread per call: as many
/// bytes as it may write per call.
const APP_PLACE_STEPS: usize = POST_BUDGET / CHUNK;

/// Who receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The NIC thread: handles everything, returns after each step of a large payload.
    Nic,
    /// An application thread: everything but a message waiting for a receive; returns once
    /// a completion or event is ready.
    App,
}

/// Why receiving stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Nothing more has arrived.
    Idle,
    /// A payload is being placed (NIC mode: it returns to transmit in between).
    Busy,
    /// The application thread must hand the reader to the NIC thread.
    HandBack,
    /// A message waits for a posted receive.
    Stalled,
    /// The connection is torn down.
    Closed,
}

/// Receives what has arrived, without blocking, until [`Stop`].
pub(crate) fn drive<'a>(
    shared: &'a Shared,
    mut st: Guard<'a>,
    r: &mut Reader,
    mode: Mode,
) -> (Guard<'a>, Stop) {
    let mut produced = false;
    // One reading of the clock per call: it never blocks, so the time stays accurate enough.
    let mut now = Instant::now();
    let mut app_steps = 0;
    let stop = loop {
        if st.rc.is_closed() {
            break Stop::Closed;
        }
        if st.deaf {
            // An injected fault dropped the input from some frame on: read on, unseen (the
            // end of the connection is still noticed).
            r.discard();
            drop(st);
            let step = r.fill(&shared.socket);
            st = shared.lock();
            match step {
                Step::WouldBlock => break dry(&mut st),
                Step::Gone => {
                    st.rc.handle_peer_gone();
                    break Stop::Closed;
                }
                _ => continue,
            }
        }
        if r.is_placing() {
            drop(st);
            let step = r.place(&shared.socket, CHUNK);
            st = shared.lock();
            match step {
                Step::Placed => {
                    st.rc.handle_placed(now);
                    produced = true;
                }
                Step::Progress => {
                    st.rc.handle_activity(now);
                    app_steps += 1;
                    match mode {
                        Mode::Nic if r.is_placing() && r.buffered() == 0 => break Stop::Busy,
                        // The caller's completion goes first (before the rest of a payload
                        // larger than the receive buffer; a smaller one is finished while
                        // its bytes are there, as if it had been read into the buffer whole),
                        // and one call places at most `APP_PLACE_STEPS` chunks (a
                        // non-blocking poll stays short); the placement continues with the
                        // next call (or the NIC thread's, see `ReadSlot::AppIdle`).
                        Mode::App
                            if (st.rc.has_ready() && !r.placing_within(RX_BUF))
                                || app_steps >= APP_PLACE_STEPS =>
                        {
                            break Stop::Idle;
                        }
                        _ => {}
                    }
                }
                Step::WouldBlock => break dry(&mut st),
                Step::Inaccessible => {
                    st.rc.handle_place_failed();
                    produced = true;
                }
                Step::Gone => {
                    st.rc.handle_peer_gone();
                    break Stop::Closed;
                }
            }
            continue;
        }
        if st.rc.is_stalled() {
            match st.rc.resume() {
                Some(inbound) => {
                    if let Some(stop) = follow(inbound, r, &mut produced) {
                        break stop;
                    }
                    continue;
                }
                None if st.rc.send_failed() => break dry(&mut st),
                None if mode == Mode::App => break Stop::HandBack,
                None => break Stop::Stalled,
            }
        }
        match r.peek() {
            Some(Err(why)) => {
                st.rc.handle_violation(why);
                break Stop::Closed;
            }
            Some(Ok(frame)) => {
                let (payload, needs_recv) = match frame {
                    Frame::Send { len, .. } | Frame::WriteImm { len, .. } => (len as usize, true),
                    Frame::Write { len, .. } => (len as usize, false),
                    _ => (0, false),
                };
                if mode == Mode::App && needs_recv && !st.rc.has_recv() {
                    break Stop::HandBack;
                }
                // A small payload is handled once it is in the receive buffer in full; a
                // larger one is placed from the socket straight away, by either mode.
                if mode == Mode::Nic || payload > SMALL_READ || r.buffered() >= HDR_LEN + payload {
                    match shared.config.faults.check(Direction::Received, &frame) {
                        None => {}
                        Some(FaultAction::Drop) => {
                            st.deaf = true;
                            continue;
                        }
                        Some(FaultAction::Delay(d)) => {
                            drop(st);
                            std::thread::sleep(d);
                            st = shared.lock();
                            now = Instant::now();
                            if st.rc.is_closed() {
                                break Stop::Closed;
                            }
                        }
                        Some(FaultAction::Reset) => {
                            shared.socket.abort();
                            st.rc.handle_peer_gone();
                            break Stop::Closed;
                        }
                    }
                    r.next_frame();
                    let inbound = st.rc.handle_frame(now, frame);
                    if let Some(stop) = follow(inbound, r, &mut produced) {
                        break stop;
                    }
                    continue;
                }
            }
            None => {}
        }
        if mode == Mode::App && st.rc.has_ready() {
            // What the caller waits for may be ready: no further read (it would mostly find
            // nothing).
            break Stop::Idle;
        }
        drop(st);
        let step = r.fill(&shared.socket);
        st = shared.lock();
        match step {
            Step::Progress => st.rc.handle_activity(now),
            Step::WouldBlock => break dry(&mut st),
            _ => {
                st.rc.handle_peer_gone();
                break Stop::Closed;
            }
        }
    };
    if produced || st.rc.is_closed() {
        shared.wake_app(&st);
    }
    (st, stop)
}

/// The input has run dry: idle, unless a write failed (then the peer is gone: everything it
/// sent before has been read, a NAK among it included).
fn dry(st: &mut Guard<'_>) -> Stop {
    if st.rc.send_failed() {
        st.rc.handle_peer_gone();
        Stop::Closed
    } else {
        Stop::Idle
    }
}

/// Carries out the engine's answer to a frame; `Some` if receiving must stop.
fn follow(inbound: Inbound, r: &mut Reader, produced: &mut bool) -> Option<Stop> {
    match inbound {
        Inbound::Done => {
            *produced = true;
            None
        }
        Inbound::Place(local) => {
            r.start_placement(local);
            None
        }
        // Taken up by the stalled-message check of the next round.
        Inbound::Stalled => None,
        Inbound::Closed => Some(Stop::Closed),
    }
}

/// Receives on the calling application thread with `r` (taken from the slot) until a
/// completion or event is ready, `deadline` passes (`None`: do not block), or the NIC thread
/// must take over. Puts the reader back in every case.
pub(crate) fn receive_inline<'a>(
    shared: &'a Shared,
    mut st: Guard<'a>,
    mut r: Reader,
    deadline: Option<Instant>,
) -> Guard<'a> {
    // A blocking caller has just found nothing ready (its `poll` read the socket): it sleeps
    // in the socket first instead of reading once more.
    let mut sleep_first = deadline.is_some() && !r.is_placing() && r.peek().is_none();
    let hand_back = loop {
        if !std::mem::take(&mut sleep_first) {
            let (g, stop) = drive(shared, st, &mut r, Mode::App);
            st = g;
            match stop {
                Stop::Idle | Stop::Busy => {}
                Stop::HandBack | Stop::Stalled | Stop::Closed => break true,
            }
        }
        if st.rc.has_ready() {
            break false;
        }
        let Some(deadline) = deadline else {
            break false;
        };
        // This thread cannot post a reply while it sleeps: a due ACK goes out first.
        let now = Instant::now();
        st.rc.flush_ack(now);
        st = shared.pump(st, POST_BUDGET);
        shared.nudge(&mut st);
        if st.rc.has_ready() || st.rc.is_closed() {
            break st.rc.is_closed();
        }
        if now >= deadline {
            break false;
        }
        drop(st);
        let read = Interest {
            read: true,
            ..Interest::default()
        };
        shared.socket.set_read_mark(r.read_mark(CHUNK));
        shared.socket.wait(read, Some((deadline - now).min(SLICE)));
        st = shared.lock();
    };
    // Whoever reads next may wait for a header: the mark stays raised only mid-payload.
    shared.socket.set_read_mark(r.read_mark(CHUNK));
    st.read = if hand_back {
        ReadSlot::Reserved(r)
    } else {
        ReadSlot::AppIdle(r, Instant::now())
    };
    shared.nudge(&mut st);
    // Another application thread may wait for the reader (or for what this one received).
    shared.wake_app(&st);
    st
}
