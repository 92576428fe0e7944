//! One in-process connection ([`Pair`]) and each of its two ends ([`Side`]): the end's
//! registered memory, its receive queue, the completions and events ready for it, and the
//! flag and bell its waiter watches.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use super::bell::Bell;
use crate::transport::regions::{Local, Regions};
use crate::transport::{Completion, ConnectionEvent, Result, TransportError, WcOpcode, WcStatus};

/// Index of the connecting end in [`Pair::sides`].
pub(super) const CLIENT: usize = 0;
/// Index of the accepting end in [`Pair::sides`].
pub(super) const SERVER: usize = 1;

/// Most receives one end may have posted.
const MAX_RECV_WR: usize = 1024;
/// Most messages that may wait for a receive the peer has not posted yet (beyond them, the
/// sender's work request fails with RNR retries exceeded, as on a queue pair whose peer
/// never posts).
const MAX_ARRIVALS: usize = 64;

/// Locks `m`, also after a panic elsewhere (the queues stay consistent between statements).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A message for the receive queue of an end.
#[derive(Debug)]
pub(super) enum Arrival {
    /// A SEND with its bytes.
    Send(Vec<u8>),
    /// The immediate of an RDMA WRITE WITH IMMEDIATE of `len` bytes (already placed).
    WriteImm {
        /// Bytes written.
        len: u32,
        /// The immediate.
        imm: u32,
    },
}

/// Where an end's connection stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Requested, not accepted yet.
    Pending,
    /// Established.
    Connected,
    /// Over (disconnected, broken, or refused).
    Closed,
}

/// A posted receive.
#[derive(Debug)]
struct PostedRecv {
    wr_id: u64,
    buf: Option<Local>,
}

/// What an end has queued (under its lock).
#[derive(Debug)]
struct Queue {
    phase: Phase,
    completions: VecDeque<Completion>,
    events: VecDeque<ConnectionEvent>,
    recvs: VecDeque<PostedRecv>,
    arrivals: VecDeque<Arrival>,
}

impl Queue {
    fn has_ready(&self) -> bool {
        !self.completions.is_empty() || !self.events.is_empty()
    }
}

/// One end of an in-process connection.
#[derive(Debug)]
pub(super) struct Side {
    /// The end's registered memory (its peer's writes land here).
    pub(super) regions: Mutex<Regions>,
    queue: Mutex<Queue>,
    /// A completion or event is queued: what a spinning waiter watches, without the lock.
    ready: AtomicBool,
    /// The connection is over (also watched without the lock).
    closed: AtomicBool,
    /// The end's waker ended (or is to end) a wait.
    woken: AtomicBool,
    /// What a sleeping waiter sleeps on.
    pub(super) bell: Bell,
}

impl Side {
    fn new() -> Result<Self> {
        Ok(Self {
            regions: Mutex::new(Regions::new()),
            queue: Mutex::new(Queue {
                phase: Phase::Pending,
                completions: VecDeque::new(),
                events: VecDeque::new(),
                recvs: VecDeque::new(),
                arrivals: VecDeque::new(),
            }),
            ready: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            woken: AtomicBool::new(false),
            bell: Bell::new().map_err(|source| TransportError::Io {
                call: "eventfd",
                source,
            })?,
        })
    }

    /// Publishes what `q` holds to the lock-free flag, unlocks, and rings a sleeping waiter
    /// if something is ready. The ring comes after the unlock, so that the woken waiter
    /// does not find the lock still held: a waiter armed its bell under the lock before its
    /// last look, so the unlocked ring still sees it armed.
    fn publish(&self, q: MutexGuard<'_, Queue>) {
        let ready = q.has_ready();
        let closed = q.phase == Phase::Closed;
        self.ready.store(ready, Ordering::Release);
        drop(q);
        if ready || closed {
            self.bell.ring();
        }
    }

    /// Publishes what `q` holds after taking something out (nobody to wake).
    fn settle(&self, q: &Queue) {
        self.ready.store(q.has_ready(), Ordering::Release);
    }

    /// True if a completion or event is ready (no lock).
    pub(super) fn has_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// True once the connection is over (no lock).
    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// True if the connection is established and not over.
    pub(super) fn is_connected(&self) -> bool {
        lock(&self.queue).phase == Phase::Connected
    }

    /// Takes the waker's mark.
    pub(super) fn take_woken(&self) -> bool {
        self.woken.swap(false, Ordering::AcqRel)
    }

    /// Marks a wait to end early and rings.
    pub(super) fn wake(&self) {
        self.woken.store(true, Ordering::Release);
        self.bell.wake();
    }

    /// Arms the bell for a sleep; true if the caller must not sleep (something is ready, or
    /// the connection is over).
    pub(super) fn arm(&self) -> bool {
        let q = lock(&self.queue);
        self.bell.arm();
        q.has_ready() || q.phase == Phase::Closed
    }

    /// Queues a completion of this end's own work request.
    pub(super) fn complete(&self, c: Completion) {
        let mut q = lock(&self.queue);
        q.completions.push_back(c);
        self.publish(q);
    }

    /// Moves ready completions into `out`; returns how many.
    pub(super) fn poll(&self, out: &mut [Completion]) -> usize {
        if !self.has_ready() || out.is_empty() {
            return 0;
        }
        let mut q = lock(&self.queue);
        let mut n = 0;
        while n < out.len()
            && let Some(c) = q.completions.pop_front()
        {
            out[n] = c;
            n += 1;
        }
        self.settle(&q);
        n
    }

    /// The next connection event, if any.
    pub(super) fn poll_event(&self) -> Option<ConnectionEvent> {
        if !self.has_ready() {
            return None;
        }
        let mut q = lock(&self.queue);
        let event = q.events.pop_front();
        self.settle(&q);
        event
    }

    /// Posts a receive (`buf` already resolved against this end's regions).
    pub(super) fn post_recv(&self, wr_id: u64, buf: Option<Local>) -> Result<()> {
        let mut q = lock(&self.queue);
        if q.phase == Phase::Closed {
            return Err(TransportError::NotConnected);
        }
        if q.recvs.len() >= MAX_RECV_WR {
            return Err(TransportError::InvalidRequest("receive queue full"));
        }
        let recv = PostedRecv { wr_id, buf };
        match q.arrivals.pop_front() {
            Some(arrival) => {
                let c = consume(recv, arrival);
                q.completions.push_back(c);
                self.publish(q);
            }
            None => q.recvs.push_back(recv),
        }
        Ok(())
    }

    /// A message from the peer: consumes the first posted receive, or waits for one.
    /// `Err` is the status of the sender's work request (the connection then breaks).
    pub(super) fn arrive(&self, arrival: Arrival) -> Result<(), WcStatus> {
        let mut q = lock(&self.queue);
        if q.phase != Phase::Connected {
            return Err(WcStatus::WrFlush);
        }
        let Some(recv) = q.recvs.pop_front() else {
            if q.arrivals.len() >= MAX_ARRIVALS {
                return Err(WcStatus::RnrRetryExceeded);
            }
            q.arrivals.push_back(arrival);
            return Ok(());
        };
        let c = consume(recv, arrival);
        q.completions.push_back(c);
        self.publish(q);
        match c.status {
            WcStatus::Success => Ok(()),
            _ => Err(WcStatus::RemoteInvalidRequest),
        }
    }

    /// The connection is established: queues the event.
    pub(super) fn establish(&self) {
        let mut q = lock(&self.queue);
        if q.phase == Phase::Pending {
            q.phase = Phase::Connected;
            q.events.push_back(ConnectionEvent::Established);
            self.publish(q);
        }
    }

    /// The connection is over: flushes the posted receives and, if it was established,
    /// queues `Disconnected`.
    pub(super) fn close(&self) {
        let mut q = lock(&self.queue);
        if q.phase == Phase::Closed {
            return;
        }
        let was_connected = q.phase == Phase::Connected;
        q.phase = Phase::Closed;
        self.closed.store(true, Ordering::Release);
        q.arrivals.clear();
        while let Some(r) = q.recvs.pop_front() {
            q.completions.push_back(Completion {
                wr_id: r.wr_id,
                status: WcStatus::WrFlush,
                ..Completion::BLANK
            });
        }
        if was_connected {
            q.events.push_back(ConnectionEvent::Disconnected);
        }
        self.publish(q);
    }
}

/// Completes `recv` with `arrival`: copies a SEND's bytes into its buffer.
fn consume(recv: PostedRecv, arrival: Arrival) -> Completion {
    let done = |status, opcode, byte_len, imm| Completion {
        wr_id: recv.wr_id,
        status,
        opcode,
        byte_len,
        imm,
    };
    match arrival {
        Arrival::WriteImm { len, imm } => {
            done(WcStatus::Success, WcOpcode::RecvRdmaWithImm, len, Some(imm))
        }
        Arrival::Send(data) => {
            let len = data.len() as u32;
            let status = match &recv.buf {
                _ if data.is_empty() => WcStatus::Success,
                Some(buf) if buf.len >= data.len() => {
                    match buf
                        .buffer
                        .nic_write(buf.offset, data.len(), |d| d.copy_from_slice(&data))
                    {
                        Ok(()) => WcStatus::Success,
                        Err(_) => WcStatus::LocalProtection,
                    }
                }
                _ => WcStatus::LocalLength,
            };
            done(status, WcOpcode::Recv, len, None)
        }
    }
}

/// How a connection request was settled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Setup {
    /// Waiting for the listener's owner.
    Requested,
    /// Accepted: established on both ends.
    Accepted,
    /// Refused, with the server's reason.
    Rejected(String),
    /// The client stopped waiting (its deadline passed).
    Abandoned,
}

/// One in-process connection: its two ends and how it was set up.
#[derive(Debug)]
pub(super) struct Pair {
    /// The ends, [`CLIENT`] and [`SERVER`].
    pub(super) sides: [Side; 2],
    /// The ends' addresses.
    pub(super) addrs: [SocketAddr; 2],
    setup: Mutex<Setup>,
    settled: Condvar,
}

impl Pair {
    /// A requested connection between `client` and `server`.
    pub(super) fn new(client: SocketAddr, server: SocketAddr) -> Result<Self> {
        Ok(Self {
            sides: [Side::new()?, Side::new()?],
            addrs: [client, server],
            setup: Mutex::new(Setup::Requested),
            settled: Condvar::new(),
        })
    }

    /// Settles the request as `to` if it is still requested; returns how it is settled.
    pub(super) fn settle(&self, to: Setup) -> Setup {
        let mut setup = lock(&self.setup);
        if *setup == Setup::Requested {
            *setup = to;
            if *setup == Setup::Accepted {
                for side in &self.sides {
                    side.establish();
                }
            }
            self.settled.notify_all();
        }
        setup.clone()
    }

    /// Waits until the request is settled or `deadline` passes (then abandons it).
    pub(super) fn await_setup(&self, deadline: Instant) -> Setup {
        let mut setup = lock(&self.setup);
        loop {
            if *setup != Setup::Requested {
                return setup.clone();
            }
            let now = Instant::now();
            if now >= deadline {
                *setup = Setup::Abandoned;
                return Setup::Abandoned;
            }
            setup = self
                .settled
                .wait_timeout(setup, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Ends the connection on both ends.
    pub(super) fn break_up(&self) {
        for side in &self.sides {
            side.close();
        }
    }
}
