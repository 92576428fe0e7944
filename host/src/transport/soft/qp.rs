//! Queue-pair state shared by an endpoint and its two engine threads: registered regions,
//! receive and send queues, the completion and event queues, the transmit token, and teardown.

use std::collections::{HashMap, VecDeque};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use std::os::fd::OwnedFd;

use rustix::event::{EventfdFlags, eventfd};

use super::SoftConfig;
use super::frame::{Frame, HDR_LEN};
use super::rx::Engine;
use crate::memory::Buffer;
use crate::transport::{Completion, ConnectionEvent, SendOp, SendWr, WcOpcode, WcStatus};

/// Connection phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Incoming request, not accepted yet: registration and receives only.
    Pending,
    /// Established.
    Connected,
    /// Torn down (error, disconnect): everything was flushed.
    Closed,
}

/// Who holds the transmit token (the right to write frames to the socket).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TxToken {
    /// Nobody.
    Free,
    /// A thread doing non-blocking sends (bounded: a few system calls).
    Short,
    /// The sender thread (may block on a full socket).
    Long,
}

/// Who reads the socket (owns the receive [`Engine`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reader {
    /// The receiver thread (the engine may lie in the state while it waits for input: an
    /// application thread that waits for a completion may take it).
    Thread,
    /// An application thread, right now.
    App,
    /// An application thread handed the engine back for the receiver thread to continue (a
    /// large payload, a receive to wait for, the end of the connection); application threads
    /// keep off it until the receiver thread has taken it.
    Reserved,
    /// An application thread gave it back at this time; the receiver thread takes over once
    /// the handover time has passed, unless an application thread takes it again first.
    AppIdle(Instant),
}

/// How the sender thread sleeps (so that posting threads wake it only when it must act).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TxSleep {
    /// It is running.
    Awake,
    /// It sleeps until the acknowledgement timer fires (or it is woken). The timer only moves
    /// later while it sleeps, so it never needs waking to re-arm it.
    Timed,
    /// It sleeps without a timer (nothing was awaiting an acknowledgement).
    Untimed,
}

/// A validated local memory range.
#[derive(Clone, Debug)]
pub(crate) struct Local {
    /// The registered buffer.
    pub(crate) buffer: Buffer,
    /// Offset of the first byte in the buffer.
    pub(crate) offset: usize,
    /// Length.
    pub(crate) len: usize,
}

/// A posted receive.
#[derive(Debug)]
pub(crate) struct RecvEntry {
    /// Caller's identifier.
    pub(crate) wr_id: u64,
    /// Where an incoming SEND is placed (`None`: zero-length receive).
    pub(crate) local: Option<Local>,
}

/// A posted send-queue work request, until it completes.
#[derive(Debug)]
pub(crate) struct SendEntry {
    /// The work request.
    pub(crate) wr: SendWr,
    /// Its validated local data.
    pub(crate) local: Option<Local>,
}

impl SendEntry {
    /// The completion opcode of this request.
    pub(crate) fn opcode(&self) -> WcOpcode {
        match self.wr.op {
            SendOp::Send => WcOpcode::Send,
            SendOp::Write(_) | SendOp::WriteWithImm(..) => WcOpcode::RdmaWrite,
        }
    }

    /// The frame header announcing this request.
    pub(crate) fn header(&self) -> [u8; HDR_LEN] {
        let len = self.local.as_ref().map_or(0, |l| l.len as u32);
        let solicited = self.wr.solicited;
        match self.wr.op {
            SendOp::Send => Frame::Send { len, solicited },
            SendOp::Write(remote) => Frame::Write { len, remote },
            SendOp::WriteWithImm(remote, imm) => Frame::WriteImm {
                len,
                remote,
                imm,
                solicited,
            },
        }
        .encode()
    }
}

/// A control frame partly written to the socket; it must be finished before anything else.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PartialCtrl {
    /// The frame.
    pub(crate) bytes: [u8; HDR_LEN],
    /// Bytes already written.
    pub(crate) sent: usize,
}

/// Why the connection is torn down.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Cause {
    /// Orderly or abrupt disconnect, protocol violation, local error: flush everything.
    Flush,
    /// Send-queue request `msn` failed with `status`; requests before it succeeded if
    /// `earlier_ok` (a NAK acknowledges them), otherwise they are flushed too.
    Failed {
        /// The failed request.
        msn: u64,
        /// Its status.
        status: WcStatus,
        /// Whether the requests before it completed successfully.
        earlier_ok: bool,
    },
}

/// The mutable state, behind [`Shared::state`].
#[derive(Debug)]
pub(crate) struct State {
    /// Connection phase.
    pub(crate) phase: Phase,
    /// Registered regions by key (lkey = rkey).
    pub(crate) regions: HashMap<u32, Registered>,
    /// Registrations so far (key generator).
    pub(crate) registrations: u32,
    /// Posted receives, oldest first.
    pub(crate) recvs: VecDeque<RecvEntry>,
    /// Posted send requests not completed yet, oldest first; `sq[i]` has msn `acked + 1 + i`.
    pub(crate) sq: VecDeque<SendEntry>,
    /// Highest acknowledged (completed) msn.
    pub(crate) acked: u64,
    /// msn of the next request to (continue to) transmit.
    pub(crate) tx_next: u64,
    /// Bytes of that request's frame already written.
    pub(crate) tx_offset: usize,
    /// The transmit token.
    pub(crate) token: TxToken,
    /// A partly written control frame.
    pub(crate) ctrl: Option<PartialCtrl>,
    /// A blocking transmission failed part-way: the byte stream may end inside a frame.
    pub(crate) wire_torn: bool,
    /// Data messages received and placed (responder side msn).
    pub(crate) rx_msn: u64,
    /// Highest msn acknowledged to the peer.
    pub(crate) ack_sent: u64,
    /// A keep-alive should be sent.
    pub(crate) nop_due: bool,
    /// Start of the current acknowledgement wait (see [`Shared::ack_expiry`]).
    pub(crate) ack_clock: Instant,
    /// Completions ready for `poll`.
    pub(crate) cq: VecDeque<Completion>,
    /// Connection events ready for `poll_event`.
    pub(crate) events: VecDeque<ConnectionEvent>,
    /// Application threads blocked in `wait`.
    pub(crate) app_waiters: u32,
    /// Whether (and how) the sender thread sleeps on `tx_cv`.
    pub(crate) tx_sleep: TxSleep,
    /// The receiver thread is blocked on `rx_cv` (waiting for a receive).
    pub(crate) rx_waiting: bool,
    /// The receive engine, when no thread holds it.
    pub(crate) engine: Option<Engine>,
    /// Who reads the socket.
    pub(crate) reader: Reader,
    /// The receiver thread waits for input in `poll` (ring the bell to wake it).
    pub(crate) rx_polling: bool,
}

impl State {
    /// Takes the receive engine for an application thread, if it is free for one.
    pub(crate) fn take_engine_for_app(&mut self) -> Option<Engine> {
        if self.phase != Phase::Connected || self.reader == Reader::Reserved {
            return None;
        }
        let engine = self.engine.take()?;
        self.reader = Reader::App;
        Some(engine)
    }

    /// Index in `sq` of the next request to transmit, if any (normalises `tx_next`).
    pub(crate) fn next_tx_index(&mut self) -> Option<usize> {
        if self.tx_next <= self.acked {
            // Acknowledged before we noticed it was sent (a peer acking early); skip it.
            self.tx_next = self.acked + 1;
            self.tx_offset = 0;
        }
        let idx = usize::try_from(self.tx_next - self.acked - 1).ok()?;
        (idx < self.sq.len()).then_some(idx)
    }

    /// True if some transmitted request waits for its acknowledgement.
    pub(crate) fn awaiting_ack(&self) -> bool {
        self.tx_next > self.acked + 1 && !self.sq.is_empty()
    }

    /// Records that request `tx_next` was fully written.
    pub(crate) fn frame_done(&mut self, now: Instant) {
        if !self.awaiting_ack() {
            self.ack_clock = now;
        }
        self.tx_next += 1;
        self.tx_offset = 0;
    }

    /// The control frame to send next (ACK or keep-alive); updates the bookkeeping as if sent.
    pub(crate) fn take_ctrl(&mut self) -> Option<[u8; HDR_LEN]> {
        if self.rx_msn > self.ack_sent {
            self.ack_sent = self.rx_msn;
            self.nop_due = false;
            Some(Frame::Ack { msn: self.rx_msn }.encode())
        } else if self.nop_due {
            self.nop_due = false;
            Some(Frame::Nop.encode())
        } else {
            None
        }
    }
}

/// A registered region: the buffer and the address it is known by (its own virtual address,
/// or one chosen with [`super::SoftEndpoint::register_at`]).
#[derive(Clone, Debug)]
pub(crate) struct Registered {
    /// The memory.
    pub(crate) buffer: Buffer,
    /// Address of its first byte as seen in SGEs and by the peer.
    pub(crate) addr: u64,
}

/// State shared by an endpoint, its regions and its engine threads.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Configuration.
    pub(crate) config: SoftConfig,
    /// The connection's socket (both threads use it through shared references).
    pub(crate) stream: TcpStream,
    /// Mutable state.
    pub(crate) state: Mutex<State>,
    /// Wakes application threads in `wait`.
    pub(crate) app_cv: Condvar,
    /// Wakes the sender thread.
    pub(crate) tx_cv: Condvar,
    /// Wakes the receiver thread waiting for a receive.
    pub(crate) rx_cv: Condvar,
    /// Wakes the receiver thread parked while application threads receive.
    pub(crate) park_cv: Condvar,
    /// The receiver thread's wake-up bell (an eventfd it polls beside the socket).
    pub(crate) bell: OwnedFd,
    /// Bumped whenever a completion or event is queued (lets `wait` spin without the lock).
    pub(crate) ready_gen: AtomicU64,
    /// Set once the connection is torn down (checked between chunks).
    pub(crate) closed: AtomicBool,
    /// Time base of `last_rx`.
    pub(crate) epoch: Instant,
    /// Nanoseconds after `epoch` when bytes last arrived from the peer.
    pub(crate) last_rx: AtomicU64,
    /// Salt of the memory keys.
    pub(crate) key_salt: u32,
}

impl Shared {
    /// A new queue pair on `stream`.
    pub(crate) fn new(
        config: SoftConfig,
        stream: TcpStream,
        phase: Phase,
    ) -> std::io::Result<Self> {
        let now = Instant::now();
        let bell = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        Ok(Self {
            key_salt: key_salt(),
            config,
            stream,
            state: Mutex::new(State {
                phase,
                regions: HashMap::new(),
                registrations: 0,
                recvs: VecDeque::new(),
                sq: VecDeque::new(),
                acked: 0,
                tx_next: 1,
                tx_offset: 0,
                token: TxToken::Free,
                ctrl: None,
                wire_torn: false,
                rx_msn: 0,
                ack_sent: 0,
                nop_due: false,
                ack_clock: now,
                cq: VecDeque::new(),
                events: VecDeque::new(),
                app_waiters: 0,
                tx_sleep: TxSleep::Awake,
                rx_waiting: false,
                engine: Some(Engine::new()),
                reader: Reader::Thread,
                rx_polling: false,
            }),
            app_cv: Condvar::new(),
            tx_cv: Condvar::new(),
            rx_cv: Condvar::new(),
            park_cv: Condvar::new(),
            bell,
            ready_gen: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            epoch: now,
            last_rx: AtomicU64::new(0),
        })
    }

    /// Wakes the receiver thread from its wait for input.
    pub(crate) fn ring_bell(&self) {
        if let Err(e) = rustix::io::write(&self.bell, &1u64.to_ne_bytes()) {
            tracing::trace!(error = %e, "soft transport: bell");
        }
    }

    /// Resets the bell after it rang.
    pub(crate) fn clear_bell(&self) {
        let mut count = [0u8; 8];
        // Non-blocking: an error only means it was clear already.
        let _ = rustix::io::read(&self.bell, &mut count);
    }

    /// Locks the state (a panicking thread cannot leave it inconsistent in a way that matters
    /// more than losing the connection, so poisoning is ignored).
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records that bytes arrived from the peer now.
    pub(crate) fn touch_rx(&self) {
        let nanos = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.last_rx.store(nanos, Ordering::Relaxed);
    }

    /// When the acknowledgement timer fires, if it runs: `ack_timeout` after the later of the
    /// start of the wait and the last byte received from the peer.
    pub(crate) fn ack_expiry(&self, st: &State) -> Option<Instant> {
        if !st.awaiting_ack() {
            return None;
        }
        let last_rx = self.epoch + Duration::from_nanos(self.last_rx.load(Ordering::Relaxed));
        Some(st.ack_clock.max(last_rx) + self.config.ack_timeout)
    }

    /// Queues a completion; the caller wakes waiters ([`Shared::wake_app`]) once its burst of
    /// work is done, so that several completions cost one wake-up.
    pub(crate) fn complete(&self, st: &mut State, c: Completion) {
        st.cq.push_back(c);
    }

    /// Wakes application threads blocked in `wait`.
    pub(crate) fn wake_app(&self, st: &State) {
        self.ready_gen.fetch_add(1, Ordering::Release);
        if st.app_waiters > 0 {
            self.app_cv.notify_all();
        }
    }

    /// Wakes the sender thread if it sleeps (there is work only it can do).
    pub(crate) fn wake_tx(&self, st: &State) {
        if st.tx_sleep != TxSleep::Awake {
            self.tx_cv.notify_one();
        }
    }

    /// Wakes the sender thread only if a request now awaits its acknowledgement while the
    /// sender sleeps without a timer (it must start the acknowledgement timer). On a busy
    /// connection this is rare: a small RPC then costs no sender-thread wake-up at all.
    pub(crate) fn arm_ack_timer(&self, st: &State) {
        if st.tx_sleep == TxSleep::Untimed && st.awaiting_ack() {
            self.tx_cv.notify_one();
        }
    }

    /// Completes send requests up to `msn` successfully (cumulative ACK); returns whether any
    /// completed (the caller wakes waiters).
    pub(crate) fn ack_up_to(&self, st: &mut State, msn: u64) -> bool {
        let mut progressed = false;
        while st.acked < msn {
            let Some(entry) = st.sq.pop_front() else {
                break;
            };
            st.acked += 1;
            progressed = true;
            st.cq.push_back(Completion {
                wr_id: entry.wr.wr_id,
                status: WcStatus::Success,
                opcode: entry.opcode(),
                byte_len: 0,
                imm: None,
            });
        }
        if progressed {
            st.ack_clock = Instant::now();
        }
        progressed
    }

    /// Tears the connection down (once): completes every outstanding request (flushed unless
    /// `cause` says otherwise), reports `Disconnected`, and wakes every thread. The socket is
    /// not shut down here; see [`Shared::shutdown`].
    pub(crate) fn close(&self, st: &mut State, cause: Cause) {
        if st.phase == Phase::Closed {
            return;
        }
        let was_connected = st.phase == Phase::Connected;
        st.phase = Phase::Closed;
        self.closed.store(true, Ordering::Release);
        tracing::debug!(?cause, "soft transport: connection torn down");
        while let Some(entry) = st.sq.pop_front() {
            let msn = st.acked + 1;
            st.acked = msn;
            let status = match cause {
                Cause::Failed {
                    msn: failed,
                    status,
                    earlier_ok,
                } => {
                    if msn == failed {
                        status
                    } else if msn < failed && earlier_ok {
                        WcStatus::Success
                    } else {
                        WcStatus::WrFlush
                    }
                }
                Cause::Flush => WcStatus::WrFlush,
            };
            st.cq.push_back(Completion {
                wr_id: entry.wr.wr_id,
                status,
                opcode: entry.opcode(),
                byte_len: 0,
                imm: None,
            });
        }
        while let Some(recv) = st.recvs.pop_front() {
            st.cq.push_back(Completion {
                wr_id: recv.wr_id,
                status: WcStatus::WrFlush,
                opcode: WcOpcode::Recv,
                byte_len: 0,
                imm: None,
            });
        }
        if was_connected {
            st.events.push_back(ConnectionEvent::Disconnected);
        }
        self.ready_gen.fetch_add(1, Ordering::Release);
        self.app_cv.notify_all();
        self.tx_cv.notify_all();
        self.rx_cv.notify_all();
        self.park_cv.notify_all();
        if st.rx_polling {
            self.ring_bell();
        }
    }

    /// Shuts the socket down in `how` direction(s); errors (already closed) are irrelevant.
    pub(crate) fn shutdown(&self, how: Shutdown) {
        if let Err(e) = self.stream.shutdown(how) {
            tracing::trace!(error = %e, "soft transport: shutdown");
        }
    }
}

/// A per-endpoint random salt for memory keys (so that keys of different endpoints differ).
fn key_salt() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0x6e61_6169_6365);
    h.finish() as u32
}

/// The memory key of registration number `n` with `salt` (a bijection of `n`, so unique).
pub(crate) fn memory_key(salt: u32, n: u32) -> u32 {
    salt ^ n.wrapping_mul(0x9E37_79B1)
}
