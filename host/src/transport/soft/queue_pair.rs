//! The queue pair shared by an endpoint's application threads and its NIC thread: the RC
//! [`Engine`], the socket, and who may use each direction of it.
//!
//! **One ownership concept per direction.** The [`Reader`] and the [`Writer`] are the I/O
//! objects of the two directions; a thread that holds one may use the socket in that
//! direction, and takes it out of its slot for that (the slot is the token):
//!
//! * the writer lies in [`Core::writer`] whenever nobody writes. Every thread that changes the
//!   engine pumps (takes the writer, writes what can go out without blocking, puts it back),
//!   so frames and ACKs leave from the posting thread itself, up to [`POST_BUDGET`] bytes per
//!   call; the NIC thread takes over the rest of larger frames and leftovers. Whoever puts
//!   the writer back re-examines the engine, so work queued meanwhile is never forgotten.
//! * the reader lies in [`Core::read`] (a [`ReadSlot`]) when the NIC thread waits for input;
//!   an application thread that waits for a completion may take it and receive itself
//!   (`receive`), which saves the thread hand-off on the latency path.
//!
//! **Synchronisation.** One mutex over [`Core`] (engine, slots, sleeping NIC thread): every
//! protocol step is short, and no thread holds it across a system call. One condition
//! variable, [`Shared::app_cv`], for application threads blocked in `wait` while the NIC
//! thread reads. The NIC thread sleeps in `poll` on the socket and an eventfd bell
//! ([`Socket::ring`]), so that one wait covers input, room to write, timers and work handed
//! to it; [`Shared::nudge`] rings only when it sleeps through something it must do.

use std::sync::atomic::AtomicBool;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::config::SoftConfig;
use super::engine::Engine;
use super::eventfd::ReadyBell;
#[cfg(feature = "fault-injection")]
use super::fault::FaultAction;
use super::reader::Reader;
use super::socket::Socket;
use super::writer::{Writer, Wrote};

/// How long the NIC thread leaves the reader to application threads after one used it; within
/// it, a steady exchange of small messages wakes no engine thread at all.
pub(crate) const HANDOVER: Duration = Duration::from_millis(2);
/// Largest piece of registered memory accessed at once (one system call).
pub(crate) const CHUNK: usize = 256 * 1024;
/// Bytes an application thread writes per call (non-blocking) when it posts or before it
/// sleeps: a frame up to this size usually leaves from the posting thread, without waking
/// the NIC thread (when the send buffer has room for it); the NIC thread writes the
/// rest of larger ones, so an application thread never streams a very large payload.
///
/// 8 MiB rather than 1 MiB: handing a 1–8 MiB payload over to the NIC thread cost up to 40 %
/// of the bulk throughput on loopback (a 4 MB RPC took 2.8–3.8 ms with 1 MiB, 2.0–2.4 ms with
/// 8 MiB, three runs each). The price: a post may spend the time the socket takes to drain
/// 8 MiB (about 2 ms on loopback) writing.
pub(crate) const POST_BUDGET: usize = 8 << 20;

/// Where the reader is.
#[derive(Debug)]
pub(crate) enum ReadSlot {
    /// Free: the NIC thread waits for input, an application thread may take it.
    Free(Reader),
    /// Held by the NIC thread.
    Nic,
    /// Held by an application thread.
    App,
    /// An application thread gave it back at this time (possibly in the middle of a
    /// payload); the NIC thread takes over once [`HANDOVER`] has passed, unless an
    /// application thread takes it again first.
    AppIdle(Reader, Instant),
    /// Handed back for the NIC thread to continue (a large payload, a missing receive, the
    /// end of the connection); application threads keep off it.
    Reserved(Reader),
}

/// How the NIC thread sleeps (what a nudge must compare against).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sleep {
    /// It wakes by itself at this time.
    pub(crate) until: Option<Instant>,
    /// It waits for room to write.
    pub(crate) write: bool,
}

/// The mutable state behind [`Shared::core`].
#[derive(Debug)]
pub(crate) struct Core {
    /// The protocol.
    pub(crate) rc: Engine,
    /// The receive direction.
    pub(crate) read: ReadSlot,
    /// The transmit direction (`None` while a thread writes).
    pub(crate) writer: Option<Box<Writer>>,
    /// Application threads blocked on [`Shared::app_cv`].
    pub(crate) app_waiters: u32,
    /// Set while the NIC thread sleeps.
    pub(crate) nic_sleep: Option<Sleep>,
    /// When an application thread last gave the reader back (see [`ReadSlot::AppIdle`]): while
    /// that is recent, the NIC thread keeps a hand-over timer even while an application thread
    /// holds the reader; otherwise it sleeps without one.
    pub(crate) last_release: Option<Instant>,
    /// An injected fault dropped a received frame: all further input is discarded unseen.
    #[cfg(feature = "fault-injection")]
    pub(crate) deaf: bool,
}

impl Core {
    /// Takes the reader for an application thread, if it is free for one.
    pub(crate) fn take_reader_for_app(&mut self) -> Option<Reader> {
        if !self.rc.is_connected() {
            return None;
        }
        match std::mem::replace(&mut self.read, ReadSlot::App) {
            ReadSlot::Free(r) | ReadSlot::AppIdle(r, _) => Some(r),
            other => {
                self.read = other;
                None
            }
        }
    }

    /// Takes the reader for the NIC thread, if it may have it at `now`.
    pub(crate) fn take_reader_for_nic(&mut self, now: Instant) -> Option<Reader> {
        let due = match &self.read {
            ReadSlot::Free(_) | ReadSlot::Reserved(_) => true,
            ReadSlot::AppIdle(_, since) => {
                now >= *since + HANDOVER || self.rc.is_closed() || self.rc.send_failed()
            }
            ReadSlot::Nic | ReadSlot::App => false,
        };
        if !due {
            return None;
        }
        match std::mem::replace(&mut self.read, ReadSlot::Nic) {
            ReadSlot::Free(r) | ReadSlot::Reserved(r) | ReadSlot::AppIdle(r, _) => Some(r),
            other => {
                self.read = other;
                None
            }
        }
    }
}

impl Core {
    /// When the NIC thread must look at the reader again, seen at `now` (its hand-over timer):
    /// `HANDOVER` after an application thread gave it back; while an application thread holds
    /// it, only while readers come and go (a release within the last `HANDOVER`: in a steady
    /// exchange a release then needs no ring, see [`Core::nic_must_act`]). A connection whose
    /// application thread sleeps in a long wait (an idle connection) arms no timer; its next
    /// release rings the NIC thread, which then sets the timer.
    pub(crate) fn handover_timer(&self, now: Instant) -> Option<Instant> {
        match &self.read {
            ReadSlot::App => self
                .last_release
                .filter(|t| *t + HANDOVER > now)
                .map(|_| now + HANDOVER),
            ReadSlot::AppIdle(_, since) => Some(*since + HANDOVER),
            _ => None,
        }
    }

    /// True if the NIC thread, sleeping as `sleep` says, would sleep through something it
    /// must do: teardown, a write left over or too large for a posting thread, a stalled
    /// message that can continue, a reader handed back, or a timer earlier than its wake-up.
    /// The NIC thread checks it before it sleeps (so that nothing is lost between its last
    /// look and its sleep), every other thread after changing the state ([`Shared::nudge`]).
    pub(crate) fn nic_must_act(&self, sleep: Sleep) -> bool {
        let later =
            |t: Option<Instant>| t.is_some_and(|t| sleep.until.is_none_or(|until| t < until));
        let handover_end = match &self.read {
            ReadSlot::AppIdle(_, since) => Some(*since + HANDOVER),
            _ => None,
        };
        // A writer held by another thread is that thread's business: it nudges when done.
        let write_work = self
            .writer
            .as_ref()
            .is_some_and(|w| w.has_work() || self.rc.has_data());
        // After a failed write the input is read to its end at once (unless an application
        // thread reads it).
        let lost = self.rc.send_failed() && !matches!(self.read, ReadSlot::App);
        self.rc.is_closed()
            || lost
            || (write_work && !sleep.write)
            || self.rc.can_resume()
            || matches!(self.read, ReadSlot::Reserved(_))
            || later(self.rc.poll_timeout(false))
            || later(handover_end)
    }
}

/// State shared by an endpoint, its regions and its NIC thread.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Configuration.
    pub(crate) config: SoftConfig,
    /// The connection's socket.
    pub(crate) socket: Socket,
    /// The engine and the direction slots (see the module documentation).
    pub(crate) core: Mutex<Core>,
    /// Wakes application threads in `wait` (completions or events queued, reader offered).
    pub(crate) app_cv: Condvar,
    /// Wakes an application thread armed on the readiness descriptor.
    pub(crate) ready: ReadyBell,
    /// Set by the endpoint's [`Waker`](crate::transport::Waker): the current or next wait
    /// returns early (it clears the flag).
    pub(crate) woken: AtomicBool,
}

/// The locked core.
pub(crate) type Guard<'a> = MutexGuard<'a, Core>;

impl Shared {
    /// A new queue pair on `socket`, not established yet.
    pub(crate) fn new(config: SoftConfig, socket: Socket, rc: Engine, ready: ReadyBell) -> Self {
        let now = Instant::now();
        Self {
            config,
            socket,
            core: Mutex::new(Core {
                rc,
                read: ReadSlot::Free(Reader::new()),
                writer: Some(Box::new(Writer::new(now))),
                app_waiters: 0,
                nic_sleep: None,
                last_release: None,
                #[cfg(feature = "fault-injection")]
                deaf: false,
            }),
            app_cv: Condvar::new(),
            ready,
            woken: AtomicBool::new(false),
        }
    }

    /// Locks the core (a panicking thread cannot leave it inconsistent in a way that matters
    /// more than losing the connection, so poisoning is ignored).
    pub(crate) fn lock(&self) -> Guard<'_> {
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes application threads blocked in `wait`.
    pub(crate) fn wake_app(&self, st: &Core) {
        if st.app_waiters > 0 {
            self.app_cv.notify_all();
        }
        self.signal_ready(st);
    }

    /// Rings the readiness descriptor if what an armed waiter waits for is there: a
    /// completion or event, or the end of the connection (a reader offered is not).
    pub(crate) fn signal_ready(&self, st: &Core) {
        if st.rc.has_ready() || st.rc.is_closed() {
            self.ready.ring();
        }
    }

    /// Rings the NIC thread's bell if it sleeps through something it must do.
    pub(crate) fn nudge(&self, st: &mut Core) {
        if let Some(sleep) = st.nic_sleep
            && st.nic_must_act(sleep)
        {
            st.nic_sleep = None;
            self.socket.ring();
        }
    }

    /// Carries out the fault the engine asked for before the frame it handed out last is
    /// written (tests only: the cargo feature `fault-injection`).
    #[cfg(feature = "fault-injection")]
    fn io_fault<'a>(&'a self, mut st: Guard<'a>, now: Instant) -> (Guard<'a>, Instant) {
        match st.rc.take_io_fault() {
            Some(FaultAction::Delay(d)) => {
                drop(st);
                std::thread::sleep(d);
                (self.lock(), Instant::now())
            }
            Some(FaultAction::Reset) => {
                self.socket.abort();
                st.rc.handle_peer_gone();
                (st, now)
            }
            Some(FaultAction::Drop) | None => (st, now),
        }
    }

    /// Writes what can go out without blocking, as long as the writer is free, until this call
    /// has written `budget` bytes (it finishes the write that crosses it); returns with the
    /// writer put back (or held by another thread). Frames of every size may be started: a
    /// posting thread writes the first [`POST_BUDGET`] bytes itself and leaves the rest to the
    /// NIC thread (see [`Shared::nudge`]).
    pub(crate) fn pump<'a>(&'a self, mut st: Guard<'a>, budget: usize) -> Guard<'a> {
        let budget = u64::try_from(budget).unwrap_or(u64::MAX);
        let mut spent = 0u64;
        let mut now = Instant::now();
        // Bytes written since the clock was read: a chunk takes a while, smaller writes not.
        let mut unclocked = 0u64;
        loop {
            let Some(mut w) = st.writer.take() else {
                return st;
            };
            w.refill(&mut st.rc, now, usize::MAX);
            #[cfg(feature = "fault-injection")]
            {
                (st, now) = self.io_fault(st, now);
            }
            if !w.has_work() {
                st.writer = Some(w);
                return st;
            }
            drop(st);
            let before = w.written();
            let wrote = w.write(&self.socket, CHUNK, now);
            let wrote_bytes = w.written() - before;
            spent += wrote_bytes;
            unclocked += wrote_bytes;
            st = self.lock();
            if unclocked >= CHUNK as u64 {
                // A chunk took a while: what follows is timed afresh.
                now = Instant::now();
                unclocked = 0;
            }
            let more = match wrote {
                Wrote::Progress(done) => {
                    if let Some(msn) = done {
                        st.rc.handle_transmitted(now, msn);
                    }
                    true
                }
                Wrote::WouldBlock => false,
                Wrote::Inaccessible(msn) => {
                    st.rc.handle_local_failure(msn);
                    true
                }
                Wrote::Failed => {
                    // The receive side reads what arrived before (a NAK) and then ends it.
                    st.rc.handle_send_failed();
                    false
                }
            };
            st.writer = Some(w);
            if st.rc.is_closed() || st.rc.has_ready() {
                self.wake_app(&st);
            }
            if !more || spent >= budget {
                return st;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    use super::*;
    use crate::memory::Buffer;
    use crate::transport::soft::eventfd::ReadyBell;
    use crate::transport::soft::frame::{Frame, HDR_LEN};
    use crate::transport::{RemoteAddr, SendOp, SendWr, Sge};

    /// The NIC thread's hand-over timer: set after a release, kept while readers come and
    /// go, and gone while an application thread sleeps with the reader (an idle connection
    /// wakes no thread).
    #[test]
    fn the_hand_over_timer_runs_only_while_readers_come_and_go() {
        let (shared, _, _peer) = queue_pair(64);
        let mut st = shared.lock();
        let t0 = Instant::now();
        // Before any application thread took the reader: the NIC thread reads, no timer.
        assert_eq!(st.handover_timer(t0), None);
        // An application thread holds it for the first time: no timer.
        let r = st.take_reader_for_app().expect("the reader is free");
        assert_eq!(st.handover_timer(t0), None);
        // It gives it back: the NIC thread looks again HANDOVER later.
        st.read = ReadSlot::AppIdle(r, t0);
        st.last_release = Some(t0);
        assert_eq!(st.handover_timer(t0), Some(t0 + HANDOVER));
        // Taken again soon (a steady exchange): the timer goes on.
        let r = st.take_reader_for_app().expect("idle reader");
        let soon = t0 + HANDOVER / 2;
        assert_eq!(st.handover_timer(soon), Some(soon + HANDOVER));
        // Held past HANDOVER since the last release (a long wait): no timer.
        assert_eq!(st.handover_timer(t0 + HANDOVER), None);
        assert_eq!(st.handover_timer(t0 + 1000 * HANDOVER), None);
        // Its release after the quiet spell rings the sleeping NIC thread, which then sets
        // the timer.
        let later = t0 + 1000 * HANDOVER;
        st.read = ReadSlot::AppIdle(r, later);
        st.last_release = Some(later);
        let asleep = Sleep {
            until: None,
            write: false,
        };
        assert!(st.nic_must_act(asleep));
        assert_eq!(st.handover_timer(later), Some(later + HANDOVER));
    }

    /// An established queue pair with one registered `len`-byte region (its key), and the
    /// peer's plain stream.
    fn queue_pair(len: usize) -> (Shared, u32, TcpStream) {
        queue_pair_over(&Buffer::zeroed(len))
    }

    /// An established queue pair with `buffer` registered (its key), and the peer's plain
    /// stream.
    fn queue_pair_over(buffer: &Buffer) -> (Shared, u32, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let peer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (ours, _) = listener.accept().unwrap();
        let config = SoftConfig::default();
        let now = Instant::now();
        let mut rc = Engine::new(config.settings(), now);
        let key = rc.regions.next_key().unwrap();
        rc.regions.insert(buffer, 0, key).unwrap();
        rc.establish(now);
        let socket = Socket::new(ours).unwrap();
        let ready = ReadyBell::new(socket.fd()).unwrap();
        (Shared::new(config, socket, rc, ready), key, peer)
    }

    fn write_of(key: u32, len: usize) -> SendWr {
        write_at(key, 0, len)
    }

    fn write_at(key: u32, addr: u64, len: usize) -> SendWr {
        SendWr {
            wr_id: 1,
            op: SendOp::Write(RemoteAddr { addr: 0, rkey: 7 }),
            local: Some(Sge {
                addr,
                len: len as u32,
                lkey: key,
            }),
            solicited: false,
        }
    }

    fn header_from(peer: &mut TcpStream) -> Frame {
        let mut hdr = [0u8; HDR_LEN];
        peer.read_exact(&mut hdr).unwrap();
        Frame::decode(&hdr).unwrap()
    }

    #[test]
    fn a_posting_thread_writes_its_budget_and_leaves_the_rest_to_the_nic_thread() {
        const LEN: usize = 2 * POST_BUDGET;
        let (shared, key, mut peer) = queue_pair(LEN);
        let mut st = shared.lock();
        st.rc.post_send(&[write_of(key, LEN)]).unwrap();
        let st = shared.pump(st, POST_BUDGET);
        let w = st.writer.as_ref().expect("the writer is put back");
        let written = usize::try_from(w.written()).unwrap();
        assert!(
            written > 0,
            "a frame of any size is started by the posting thread"
        );
        assert!(
            written < POST_BUDGET + HDR_LEN + CHUNK,
            "{written} bytes written on a budget of {POST_BUDGET}"
        );
        assert!(w.has_work());
        // The NIC thread, asleep on the bell, must be woken for the rest.
        let asleep = Sleep {
            until: None,
            write: false,
        };
        assert!(st.nic_must_act(asleep));
        drop(st);
        let remote = RemoteAddr { addr: 0, rkey: 7 };
        assert_eq!(
            header_from(&mut peer),
            Frame::Write {
                len: LEN as u32,
                remote
            }
        );
    }

    #[test]
    fn a_frame_within_the_budget_leaves_whole_from_the_posting_thread() {
        // Small enough for the send buffer of any fresh loopback connection.
        const LEN: usize = 8 * 1024;
        let (shared, key, mut peer) = queue_pair(LEN);
        let mut st = shared.lock();
        st.rc
            .post_send(&[write_of(key, LEN), write_of(key, LEN)])
            .unwrap();
        let st = shared.pump(st, POST_BUDGET);
        let w = st.writer.as_ref().expect("the writer is put back");
        assert_eq!(w.written(), 2 * (HDR_LEN + LEN) as u64);
        assert!(!w.has_work() && !st.rc.has_data());
        drop(st);
        let mut payload = vec![0u8; LEN];
        for _ in 0..2 {
            assert!(
                matches!(header_from(&mut peer), Frame::Write { len, .. } if len as usize == LEN)
            );
            peer.read_exact(&mut payload).unwrap();
        }
    }

    /// A payload of at least `SPLICE_MIN` leaves from its pages (through the pipe) and a
    /// small one copied, each intact and in order, while the peer reads as they come: the
    /// pipe's bytes go out before the next header.
    #[test]
    fn a_large_payload_leaves_from_its_pages_intact_and_in_order() {
        use crate::transport::soft::writer::SPLICE_MIN;
        let large = 3 * SPLICE_MIN + 12_345;
        let small = 1000;
        let pattern: Vec<u8> = (0..large + small).map(|i| (i % 251) as u8).collect();
        let buffer = Buffer::from_slice(&pattern);
        let (shared, key, mut peer) = queue_pair_over(&buffer);
        // A small send buffer: the socket takes a fraction of each chunk in the pipe at a
        // time, so bytes wait in the pipe between writes.
        socket2::SockRef::from(&shared.socket.fd())
            .set_send_buffer_size(16 * 1024)
            .unwrap();
        // Bytes lost or out of order must fail the test, not hang it.
        peer.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            for _ in 0..2 {
                let Frame::Write { len, .. } = header_from(&mut peer) else {
                    panic!("not a write");
                };
                let mut payload = vec![0u8; len as usize];
                peer.read_exact(&mut payload).unwrap();
                got.push(payload);
            }
            got
        });
        let mut st = shared.lock();
        st.rc
            .post_send(&[write_at(key, 0, large), write_at(key, large as u64, small)])
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut spliced = false;
        let mut blocked_in_pipe = false;
        loop {
            st = shared.pump(st, POST_BUDGET);
            let w = st.writer.as_ref().expect("the writer is put back");
            spliced |= w.uses_pipe();
            blocked_in_pipe |= w.piped() > 0;
            if !w.has_work() && !st.rc.has_data() {
                break;
            }
            assert!(Instant::now() < deadline, "the frames did not leave");
            drop(st);
            let write = super::super::socket::Interest {
                write: true,
                ..Default::default()
            };
            shared.socket.wait(write, Some(Duration::from_millis(100)));
            st = shared.lock();
        }
        drop(st);
        assert!(spliced, "the large payload was copied");
        assert!(blocked_in_pipe, "the socket always took a whole chunk");
        let got = reader.join().unwrap();
        assert!(got[0] == pattern[..large], "large payload");
        assert!(got[1] == pattern[large..], "small payload");
    }

    /// A large payload whose buffer the application holds when it is due fails as on the
    /// copying path: not even its header leaves, so the stream stays well-formed (the writer
    /// is not torn) and the final frames can still tell the peer why the connection ended.
    #[test]
    fn a_held_large_payload_fails_without_tearing_the_connection() {
        use crate::transport::soft::writer::SPLICE_MIN;
        let len = 2 * SPLICE_MIN;
        let buffer = Buffer::zeroed(len);
        let (shared, key, _peer) = queue_pair_over(&buffer);
        let guard = buffer.lock();
        let mut st = shared.lock();
        st.rc.post_send(&[write_of(key, len)]).unwrap();
        let st = shared.pump(st, POST_BUDGET);
        drop(guard);
        let w = st.writer.as_ref().expect("the writer is put back");
        assert!(!w.is_torn(), "the header left without its payload");
        assert_eq!(w.written(), 0);
    }

    /// An application thread that finds a completion ready in the middle of a payload that
    /// fits the receive buffer finishes the payload while its bytes are there (as if it had
    /// read it whole into the buffer) instead of returning mid-payload. The payload follows a
    /// large one, so it is read from the socket into its region, past a probe's worth.
    #[test]
    fn an_application_thread_finishes_a_payload_it_has_begun() {
        use crate::transport::soft::reader::{PROBE, Reader};
        use crate::transport::soft::receive::{Mode, drive};
        const LEN: usize = 40_000;
        let buffer = Buffer::zeroed(2 * LEN);
        let (shared, key, mut peer) = queue_pair_over(&buffer);
        let write = |at: usize, fill: u8| {
            let remote = RemoteAddr {
                addr: at as u64,
                rkey: key,
            };
            let mut w = Frame::Write {
                len: LEN as u32,
                remote,
            }
            .encode()
            .to_vec();
            w.extend(std::iter::repeat_n(fill, LEN));
            w
        };
        let mut r = Reader::new();
        // A first large write, placed: the reader now expects large payloads.
        peer.write_all(&write(0, 1)).unwrap();
        let mut st = shared.lock();
        let deadline = Instant::now() + Duration::from_secs(10);
        while buffer.lock()[LEN - 1] != 1 {
            assert!(Instant::now() < deadline, "the first write was not placed");
            st = drive(&shared, st, &mut r, Mode::Nic, Instant::now()).0;
        }
        // Our one-byte write goes out; the peer acknowledges it and writes 40 000 bytes more,
        // all of it in our socket before we read.
        st.rc.post_send(&[write_of(key, 1)]).unwrap();
        st = shared.pump(st, POST_BUDGET);
        // (Our acknowledgement of the peer's write may come first.)
        let mut frame = header_from(&mut peer);
        while let Frame::Ack { .. } = frame {
            frame = header_from(&mut peer);
        }
        assert!(matches!(frame, Frame::Write { len: 1, .. }), "{frame:?}");
        peer.read_exact(&mut [0u8]).unwrap();
        let mut wire = Frame::Ack { msn: 1 }.encode().to_vec();
        wire.extend(write(LEN, 2));
        peer.write_all(&wire).unwrap();
        drop(st);
        let read = super::super::socket::Interest {
            read: true,
            ..Default::default()
        };
        shared.socket.set_read_mark(wire.len());
        assert!(shared.socket.wait(read, Some(Duration::from_secs(10))));
        shared.socket.set_read_mark(1);
        let mut st = shared.lock();
        while st.rc.poll_event().is_some() {}
        assert!(!st.rc.has_ready());
        let copied = r.copied;
        let (st, _) = drive(&shared, st, &mut r, Mode::App, Instant::now());
        assert!(st.rc.has_ready(), "the acknowledged write did not complete");
        assert!(
            !r.is_placing(),
            "the thread returned in the middle of the payload"
        );
        assert!(buffer.lock()[LEN..].iter().all(|&b| b == 2));
        assert!(
            r.copied - copied <= PROBE,
            "{} bytes copied",
            r.copied - copied
        );
    }

    /// An application thread that sleeps for its completion (nothing buffered, not spinning)
    /// sleeps in the receive itself, which reads the acknowledgement as it arrives: one
    /// system call, no poll before it.
    #[test]
    fn an_application_thread_sleeps_in_the_receive() {
        use std::sync::atomic::Ordering;

        use crate::transport::soft::receive::receive_inline;
        let (shared, key, mut peer) = queue_pair(64);
        while shared.lock().rc.poll_event().is_some() {}
        for msn in 1..=20 {
            let mut st = shared.lock();
            st.rc.post_send(&[write_of(key, 1)]).unwrap();
            st = shared.pump(st, POST_BUDGET);
            drop(st);
            let mut frame = header_from(&mut peer);
            while let Frame::Ack { .. } = frame {
                frame = header_from(&mut peer);
            }
            assert!(matches!(frame, Frame::Write { len: 1, .. }), "{frame:?}");
            peer.read_exact(&mut [0u8]).unwrap();
            let acker = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(5));
                peer.write_all(&Frame::Ack { msn }.encode()).unwrap();
                peer
            });
            let mut st = shared.lock();
            let r = st.take_reader_for_app().expect("the reader is free");
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut st = receive_inline(&shared, st, r, Instant::now(), Some(deadline), None);
            assert!(
                st.rc.poll_completion().is_some(),
                "write {msn} did not complete"
            );
            drop(st);
            peer = acker.join().unwrap();
        }
        assert_eq!(
            shared.socket.polls.load(Ordering::Relaxed),
            0,
            "the thread slept in poll"
        );
    }
}
