//! Receiving: reads frames with the [`Reader`], hands them to the engine, and places payloads
//! where the engine says. Both the NIC thread and an application thread that waits for a
//! completion receive this way ([`Mode`]); the application thread handles what needs no
//! waiting for the application (frames whose receive is posted, payloads of any size, read
//! without blocking as they arrive) and hands the reader back to the NIC thread for anything
//! else. If its own completion becomes ready in the middle of a payload larger than the
//! receive buffer (a smaller one is finished while its bytes are there), or after 8 MiB of a
//! payload, it returns with the reader still placing: its next call continues, or the NIC
//! thread after the hand-over time.

use std::ops::ControlFlow;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::engine::Inbound;
#[cfg(feature = "fault-injection")]
use super::fault::{Direction, FaultAction};
use super::frame::{Frame, HDR_LEN};
use super::queue_pair::{CHUNK, Guard, POST_BUDGET, ReadSlot, Shared};
use super::reader::{RX_BUF, Reader, SMALL_READ, Step};
use super::socket::{Interest, RECV_WAIT, Socket};

/// Longest single sleep of an application thread in the socket (it re-checks the connection
/// after each): the socket's receive timeout.
const SLICE: Duration = RECV_WAIT;

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

/// Receives what has arrived, without blocking, until [`Stop`]; `now` is the caller's
/// reading of the clock (the call never blocks, so it stays accurate enough for the engine's
/// timers, which run in milliseconds).
pub(crate) fn drive<'a>(
    shared: &'a Shared,
    st: Guard<'a>,
    r: &mut Reader,
    mode: Mode,
    now: Instant,
) -> (Guard<'a>, Stop) {
    let mut rx = Receiver {
        shared,
        r,
        mode,
        now,
        produced: false,
        app_steps: 0,
    };
    let mut st = st;
    let stop = loop {
        let (g, flow) = rx.step(st);
        st = g;
        if let ControlFlow::Break(stop) = flow {
            break stop;
        }
    };
    if rx.produced || st.rc.is_closed() {
        shared.wake_app(&st);
    }
    (st, stop)
}

/// The state of one [`drive`] call. Each step takes the queue pair's lock and gives it back
/// (released around socket I/O, so that the application's posts and polls go on meanwhile),
/// with whether receiving goes on.
struct Receiver<'a, 'r> {
    shared: &'a Shared,
    r: &'r mut Reader,
    mode: Mode,
    now: Instant,
    /// A completion or event was produced (the application is woken at the end).
    produced: bool,
    /// Placement steps of an application thread in this call.
    app_steps: usize,
}

/// A step's outcome: the lock, and whether receiving goes on.
type Flow<'a> = (Guard<'a>, ControlFlow<Stop>);

impl<'a> Receiver<'a, '_> {
    /// The next step: the connection's end, a payload being placed, a message waiting for
    /// its receive, the next frame, or more input.
    fn step(&mut self, st: Guard<'a>) -> Flow<'a> {
        if st.rc.is_closed() {
            return (st, ControlFlow::Break(Stop::Closed));
        }
        #[cfg(feature = "fault-injection")]
        if st.deaf {
            return self.discard(st);
        }
        if self.r.is_placing() {
            return self.place(st);
        }
        if st.rc.is_stalled() {
            return self.resume(st);
        }
        let st = match self.frame(st) {
            Ok(flow) => return flow,
            Err(st) => st,
        };
        if self.mode == Mode::App && st.rc.has_ready() {
            // What the caller waits for may be ready: no further read (it would mostly find
            // nothing).
            return (st, ControlFlow::Break(Stop::Idle));
        }
        self.fill(st)
    }

    /// Runs `io` on the reader and socket with the lock released.
    fn unlocked<T>(
        &mut self,
        st: Guard<'a>,
        io: impl FnOnce(&mut Reader, &Socket) -> T,
    ) -> (Guard<'a>, T) {
        drop(st);
        let out = io(self.r, &self.shared.socket);
        (self.shared.lock(), out)
    }

    /// Places the next chunk of the payload being placed.
    fn place(&mut self, st: Guard<'a>) -> Flow<'a> {
        let failed = st.rc.send_failed();
        let (mut st, step) = self.unlocked(st, |r, socket| r.place(socket, CHUNK));
        let flow = match step {
            Step::Placed => {
                st.rc.handle_placed(self.now);
                self.produced = true;
                ControlFlow::Continue(())
            }
            Step::Progress => {
                st.rc.handle_activity(self.now);
                self.app_steps += 1;
                self.after_chunk(&st)
            }
            Step::WouldBlock => ControlFlow::Break(dry(&mut st, failed)),
            Step::Inaccessible => {
                st.rc.handle_place_failed();
                self.produced = true;
                ControlFlow::Continue(())
            }
            Step::Gone => {
                st.rc.handle_peer_gone();
                ControlFlow::Break(Stop::Closed)
            }
        };
        (st, flow)
    }

    /// Whether placing goes on after a chunk that did not finish the payload. The NIC thread
    /// returns (to transmit) once the socket is drained. An application thread lets its
    /// completion go first (before the rest of a payload larger than the receive buffer; a
    /// smaller one is finished while its bytes are there, as if it had been read into the
    /// buffer whole), and places at most `APP_PLACE_STEPS` chunks per call (a non-blocking
    /// poll stays short); the placement continues with the next call (or the NIC thread's,
    /// see `ReadSlot::AppIdle`).
    fn after_chunk(&self, st: &Guard<'a>) -> ControlFlow<Stop> {
        let stop = match self.mode {
            Mode::Nic => self.r.is_placing() && self.r.buffered() == 0,
            Mode::App => {
                (st.rc.has_ready() && !self.r.placing_within(RX_BUF))
                    || self.app_steps >= APP_PLACE_STEPS
            }
        };
        match (stop, self.mode) {
            (true, Mode::Nic) => ControlFlow::Break(Stop::Busy),
            (true, Mode::App) => ControlFlow::Break(Stop::Idle),
            (false, _) => ControlFlow::Continue(()),
        }
    }

    /// A message waits for a receive: delivered if one is posted now.
    fn resume(&mut self, mut st: Guard<'a>) -> Flow<'a> {
        let flow = match st.rc.resume() {
            Some(inbound) => self.follow(inbound),
            None if st.rc.send_failed() => ControlFlow::Break(dry(&mut st, true)),
            None if self.mode == Mode::App => ControlFlow::Break(Stop::HandBack),
            None => ControlFlow::Break(Stop::Stalled),
        };
        (st, flow)
    }

    /// Handles the next frame if it is in the buffer and this thread takes it; `Err` (the
    /// lock back) if there is none to take now.
    fn frame(&mut self, mut st: Guard<'a>) -> Result<Flow<'a>, Guard<'a>> {
        let frame = match self.r.peek() {
            None => return Err(st),
            Some(Err(why)) => {
                st.rc.handle_violation(why);
                return Ok((st, ControlFlow::Break(Stop::Closed)));
            }
            Some(Ok(frame)) => frame,
        };
        let (payload, needs_recv) = match frame {
            Frame::Send { len, .. } | Frame::WriteImm { len, .. } => (len as usize, true),
            Frame::Write { len, .. } => (len as usize, false),
            _ => (0, false),
        };
        if self.mode == Mode::App && needs_recv && !st.rc.has_recv() {
            return Ok((st, ControlFlow::Break(Stop::HandBack)));
        }
        // A small payload is handled once it is in the receive buffer in full; a larger one
        // is placed from the socket straight away, by either mode.
        let whole = self.r.buffered() >= HDR_LEN + payload;
        if self.mode == Mode::App && payload <= SMALL_READ && !whole {
            return Err(st);
        }
        #[cfg(feature = "fault-injection")]
        let mut st = match self.inject(st, &frame) {
            Ok(st) => st,
            Err(flow) => return Ok(flow),
        };
        self.r.next_frame();
        let inbound = st.rc.handle_frame(self.now, frame);
        let flow = self.follow(inbound);
        Ok((st, flow))
    }

    /// Reads more input into the buffer.
    fn fill(&mut self, st: Guard<'a>) -> Flow<'a> {
        let failed = st.rc.send_failed();
        let (mut st, step) = self.unlocked(st, |r, socket| r.fill(socket));
        let flow = match step {
            Step::Progress => {
                st.rc.handle_activity(self.now);
                ControlFlow::Continue(())
            }
            Step::WouldBlock => ControlFlow::Break(dry(&mut st, failed)),
            _ => {
                st.rc.handle_peer_gone();
                ControlFlow::Break(Stop::Closed)
            }
        };
        (st, flow)
    }

    /// Carries out the engine's answer to a frame.
    fn follow(&mut self, inbound: Inbound) -> ControlFlow<Stop> {
        match inbound {
            Inbound::Done => {
                self.produced = true;
                ControlFlow::Continue(())
            }
            Inbound::Place(local) => {
                self.r.start_placement(local);
                ControlFlow::Continue(())
            }
            // Taken up by the stalled-message check of the next step.
            Inbound::Stalled => ControlFlow::Continue(()),
            Inbound::Closed => ControlFlow::Break(Stop::Closed),
        }
    }
}

/// Fault injection on received frames (tests only: the cargo feature `fault-injection`).
#[cfg(feature = "fault-injection")]
impl<'a> Receiver<'a, '_> {
    /// An injected fault dropped the input from some frame on: read on, unseen (the end of
    /// the connection is still noticed).
    fn discard(&mut self, st: Guard<'a>) -> Flow<'a> {
        self.r.discard();
        let failed = st.rc.send_failed();
        let (mut st, step) = self.unlocked(st, |r, socket| r.fill(socket));
        let flow = match step {
            Step::WouldBlock => ControlFlow::Break(dry(&mut st, failed)),
            Step::Gone => {
                st.rc.handle_peer_gone();
                ControlFlow::Break(Stop::Closed)
            }
            _ => ControlFlow::Continue(()),
        };
        (st, flow)
    }

    /// Applies the fault plan to a received frame before it is handled: `Err` with the step's
    /// outcome when the fault takes the frame (dropped, or the connection reset).
    fn inject(&mut self, mut st: Guard<'a>, frame: &Frame) -> Result<Guard<'a>, Flow<'a>> {
        match self.shared.config.faults.check(Direction::Received, frame) {
            None => Ok(st),
            Some(FaultAction::Drop) => {
                st.deaf = true;
                Err((st, ControlFlow::Continue(())))
            }
            Some(FaultAction::Delay(d)) => {
                let (st, ()) = self.unlocked(st, |_, _| std::thread::sleep(d));
                self.now = Instant::now();
                if st.rc.is_closed() {
                    return Err((st, ControlFlow::Break(Stop::Closed)));
                }
                Ok(st)
            }
            Some(FaultAction::Reset) => {
                self.shared.socket.abort();
                st.rc.handle_peer_gone();
                Err((st, ControlFlow::Break(Stop::Closed)))
            }
        }
    }
}

/// The input has run dry: idle, unless a write had failed before the read that found nothing
/// began (then the peer is gone: everything it sent before has been read, a NAK among it
/// included). A write that fails during that read does not count: the peer's last frames
/// (the NAK, its FIN and reset) may have reached the socket only after the read looked, while
/// another thread held the socket for the write, so the next read decides.
fn dry(st: &mut Guard<'_>, failed_before: bool) -> Stop {
    if failed_before {
        st.rc.handle_peer_gone();
        Stop::Closed
    } else {
        Stop::Idle
    }
}

/// Sleeps until input arrives for `r` or a slice of the time to `deadline` passes. Waiting
/// for a header, the thread sleeps in the receive itself (one system call: what arrives is
/// read at once); otherwise (or with less than a slice left) in poll, with the read mark
/// raised to what a payload streaming in still owes. What the receive got (`WouldBlock` if
/// nothing, or after a poll).
fn sleep_for_input(socket: &Socket, r: &mut Reader, now: Instant, deadline: Instant) -> Step {
    socket.set_read_mark(r.read_mark(CHUNK));
    let left = deadline - now;
    if left >= SLICE && !r.is_placing() {
        match r.fill_wait(socket) {
            Step::WouldBlock => {}
            got => return got,
        }
        // The receive timed out, or returned at once (the socket was non-blocking for a
        // `splice`): then the rest of the slice is slept in poll.
        let slept = now.elapsed();
        if slept >= SLICE / 2 {
            return Step::WouldBlock;
        }
        let read = Interest {
            read: true,
            ..Interest::default()
        };
        socket.wait(read, Some(SLICE - slept));
        return Step::WouldBlock;
    }
    let read = Interest {
        read: true,
        ..Interest::default()
    };
    socket.wait(read, Some(left.min(SLICE)));
    Step::WouldBlock
}

/// Receives on the calling application thread with `r` (taken from the slot) until a
/// completion or event is ready, `deadline` passes (`None`: do not block), or the NIC thread
/// must take over; until `spin_until` it reads the socket again at once instead of sleeping
/// in it. `now` is the caller's reading of the clock; the clock is read once more after each
/// sleep or spin. Puts the reader back in every case.
pub(crate) fn receive_inline<'a>(
    shared: &'a Shared,
    mut st: Guard<'a>,
    mut r: Reader,
    mut now: Instant,
    deadline: Option<Instant>,
    spin_until: Option<Instant>,
) -> Guard<'a> {
    // A blocking caller that does not spin sleeps first: the sleep reads what is there (a
    // non-blocking read first would cost a system call that mostly finds nothing).
    let mut sleep_first =
        deadline.is_some() && spin_until.is_none() && !r.is_placing() && r.peek().is_none();
    // The last sleep lasted half a slice or more and brought nothing.
    let mut quiet = false;
    let hand_back = loop {
        if !std::mem::take(&mut sleep_first) {
            let (g, stop) = drive(shared, st, &mut r, Mode::App, now);
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
        st.rc.flush_ack(now);
        st = shared.pump(st, POST_BUDGET);
        shared.nudge(&mut st);
        if st.rc.has_ready() || st.rc.is_closed() {
            break st.rc.is_closed();
        }
        if now >= deadline || shared.woken.load(Ordering::SeqCst) {
            break false;
        }
        let sleeps = spin_until.is_none_or(|t| now >= t);
        // After a slice with nothing, sleep until the deadline (an idle connection): on the
        // socket and the readiness bell, which rings for a completion produced elsewhere, the
        // end of the connection, or the endpoint's waker. Armed under the lock, then the
        // waker's flag is read: nothing rung after this look is lost.
        let long = sleeps && quiet && !r.is_placing() && deadline - now >= SLICE;
        if long {
            shared.ready.arm(true);
            if shared.woken.load(Ordering::SeqCst) {
                break false;
            }
        }
        drop(st);
        let got = if long {
            shared.ready.sleep(deadline - now);
            Step::WouldBlock
        } else if sleeps {
            sleep_for_input(&shared.socket, &mut r, now, deadline)
        } else {
            Step::WouldBlock
        };
        st = shared.lock();
        let before = now;
        now = Instant::now();
        quiet = sleeps && matches!(got, Step::WouldBlock) && now - before >= SLICE / 2;
        if matches!(got, Step::Progress) {
            st.rc.handle_activity(now);
        }
    };
    // Whoever reads next may wait for a header: the mark stays raised only mid-payload.
    shared.socket.set_read_mark(r.read_mark(CHUNK));
    st.read = if hand_back {
        ReadSlot::Reserved(r)
    } else {
        st.last_release = Some(now);
        ReadSlot::AppIdle(r, now)
    };
    shared.nudge(&mut st);
    // Another application thread may wait for the reader (or for what this one received).
    shared.wake_app(&st);
    st
}
