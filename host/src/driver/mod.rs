//! The driver of one connection, for either role: it owns the transport endpoint, the core
//! protocol machine, the MRSP message buffers and the region memory, executes the machine's
//! transport work and reports what is left for its owner as events (quinn's
//! `ConnectionDriver`, without async).
//!
//! Owners run [`Driver::next_event`] and [`Driver::pump`] until nothing is left to do (the
//! software NAA's worker through [`Driver::poll_serving`], which also runs its kernels), then
//! [`Driver::wait`]; commands (start an MRSP, start an RPC, a kernel finished, …) are methods
//! of the role-specific views in `client` and `server`. The one pump takes a [`Lane`]: a
//! steady RPC takes the machines' express lanes (`lane`): the NAA serves a call from its
//! completion to its posted answer, the client posts an RPC at its start and takes its
//! completions, without the action queue.
//!
//! **Waiting.** The driver owns the connection's waiting decision: how long [`Driver::wait`]
//! spins before it sleeps ([`Waiter`], under the connection's [`WaitPolicy`]); waits over
//! many connections ([`crate::client::naa_set`]) plan with the waiter of one of them. The transport
//! carries the decision out and reports how each wait ended.

mod client;
mod lane;
mod ready_fd;
mod regions;
mod role;
mod server;
mod work;

pub(crate) use lane::{Calling, Lane, Offer, Serving, Took};
pub(crate) use regions::MessageBuffers;
pub(crate) use role::{ClientEvent, Event, Role, ServerEvent};
pub(crate) use server::{ServedEvent, accept};

use std::time::{Duration, Instant};

use naaice_core::config::MRSP_RECV_LEN;
use naaice_core::machine::{Input, MachineAction, Post, Step};

use crate::clock;
use crate::transport::waiting::{WaitEnd, WaitPolicy, Waiter, Woken};
use crate::transport::{
    Completion, ConnectionEvent, Endpoint, Result, SendWr, TransportError, WcOpcode, WcStatus,
};
use regions::RegionMemory;

/// How long [`Driver::wait`] sleeps at most when nothing has a deadline.
const IDLE_WAIT: Duration = Duration::from_secs(3600);

/// Completions fetched per [`Endpoint::poll`] call.
const COMPLETION_BATCH: usize = 64;

/// One connection: endpoint, machine, message buffers, region memory and reusable scratch
/// space (nothing is allocated per RPC).
pub(crate) struct Driver<E: Endpoint, M: Role> {
    ep: E,
    machine: M,
    buffers: MessageBuffers<E::Region>,
    regions: Vec<Option<RegionMemory<E::Region>>>,
    scratch: Box<[u8]>,
    writes: Vec<SendWr>,
    completions: Vec<Completion>,
    /// The write list the machine's express lane posts on every RPC (built once).
    express: Vec<SendWr>,
    connected: bool,
    /// How long waits spin: the connection's waiting decision (see `transport::waiting`).
    waiter: Waiter,
    /// The last wait found its completion while spinning after this long: learned at the
    /// next wait, off the RPC's path.
    unrecorded: Option<Duration>,
}

impl<E: Endpoint, M: Role> Driver<E, M> {
    /// Wraps an established endpoint whose message buffers are registered, and tells the
    /// machine that the connection is up; its waits follow `policy`.
    pub(crate) fn established(
        ep: E,
        buffers: MessageBuffers<E::Region>,
        mut machine: M,
        policy: WaitPolicy,
    ) -> Self {
        machine.established(clock::now());
        let blank = Completion {
            wr_id: 0,
            status: WcStatus::Success,
            opcode: WcOpcode::Send,
            byte_len: 0,
            imm: None,
        };
        Self {
            ep,
            machine,
            buffers,
            regions: Vec::new(),
            scratch: vec![0; MRSP_RECV_LEN].into_boxed_slice(),
            writes: Vec::with_capacity(naaice_core::config::MAX_REGIONS),
            completions: vec![blank; COMPLETION_BATCH],
            express: Vec::new(),
            connected: true,
            waiter: Waiter::new(policy),
            unrecorded: None,
        }
    }

    /// The protocol machine.
    pub(crate) fn machine(&self) -> &M {
        &self.machine
    }

    /// The protocol machine, for commands.
    pub(crate) fn machine_mut(&mut self) -> &mut M {
        &mut self.machine
    }

    /// True once the connection was established and has not broken since.
    pub(crate) fn is_connected(&self) -> bool {
        self.connected
    }

    /// Starts an orderly disconnect (idempotent).
    pub(crate) fn disconnect(&mut self) {
        self.ep.disconnect();
        self.connected = false;
    }

    /// Executes the machine's transport work until it reports an event (returned) or has
    /// nothing left to do (`None`). Reads nothing from the transport.
    pub(crate) fn next_event(&mut self) -> Option<Event<M>> {
        loop {
            let Some(action) = self.machine.poll_action(&mut self.scratch) else {
                self.flush_writes();
                return None;
            };
            // Writes are collected and posted as one list before the next other step.
            match action.sort() {
                Step::Post(Post::Write(w)) => self.queue_write(w),
                Step::Post(Post::Recv { wr_id, buffer }) => {
                    self.flush_writes();
                    self.post_recv(wr_id, buffer);
                }
                Step::Post(Post::Send { wr_id, len }) => {
                    self.flush_writes();
                    self.post_message(wr_id, len);
                }
                Step::Event(event) => {
                    self.flush_writes();
                    return Some(event);
                }
            }
        }
    }

    /// Feeds every ready connection event and completion to the machine, then its expired
    /// deadlines; each completion is offered to `lane` first, until the first one it leaves.
    /// Never blocks. False when the lane says that the owner is stopping.
    ///
    /// Order: completions that precede the first flushed one, then the connection events,
    /// then the rest. The completions of a connection that fails carry the cause first (the
    /// NAK's status or `RetryExceeded` on the failed request, as on a real RC queue pair),
    /// then the flushes; the machine must see that cause before the disconnect it led to,
    /// while a connection that simply ended is reported as the disconnect, not as flushes.
    /// When the lane took every completion (at least one), the connection events wait for the
    /// next pump: the RPC went on, and whatever ended the connection also flushes a request.
    ///
    /// The clock is read at most once per call, when first needed: everything fed in one pump
    /// happens at that instant (a time read is a real share of a small RPC's instructions),
    /// except what follows a kernel the lane ran.
    pub(crate) fn pump(&mut self, lane: &mut impl Lane<E, M>) -> Result<bool> {
        let mut now = None;
        let mut general = false;
        let mut taken = false;
        let mut events_fed = false;
        loop {
            let n = self.ep.poll(&mut self.completions)?;
            for i in 0..n {
                let wc = self.completions[i];
                if !general {
                    let offer = Offer {
                        wc,
                        last: i + 1 == n,
                        now: &mut now,
                    };
                    match lane.offer(self, offer) {
                        Took::Yes => {
                            taken = true;
                            continue;
                        }
                        Took::Stop => return Ok(false),
                        Took::No => general = true,
                    }
                }
                let at = *now.get_or_insert_with(clock::now);
                if wc.status == WcStatus::WrFlush && !events_fed {
                    self.feed_events(at);
                    events_fed = true;
                }
                self.feed_completion(wc, at);
            }
            let again = lane.again() && !general;
            if n < self.completions.len() && !again {
                break;
            }
        }
        if general || !taken {
            let now = *now.get_or_insert_with(clock::now);
            self.feed_events(now);
            self.machine.handle_timeout(now);
        } else if self.machine.poll_timeout().is_some() {
            self.machine.handle_timeout(now.unwrap_or_else(clock::now));
        }
        Ok(true)
    }

    /// Feeds the ready connection events.
    fn feed_events(&mut self, now: naaice_core::Instant) {
        while let Some(event) = self.ep.poll_event() {
            match event {
                // Fed by `established` when connect/accept returned.
                ConnectionEvent::Established => self.connected = true,
                ConnectionEvent::Disconnected => {
                    self.connected = false;
                    self.machine.handle_input(now, Input::Disconnected);
                }
            }
        }
    }

    /// The endpoint's [`Waker`](crate::transport::Waker), if its transport has one: it ends
    /// a [`Driver::wait`] early from another thread.
    pub(crate) fn waker(&self) -> Option<crate::transport::Waker> {
        self.ep.waker()
    }

    /// The endpoint's [`Liveness`](crate::transport::Liveness) probe, if it has one.
    pub(crate) fn liveness(&self) -> Option<crate::transport::Liveness> {
        self.ep.liveness()
    }

    /// Blocks until the transport has something ready, the machine's next deadline, or
    /// `deadline` (`None`: only the machine's; an hour when it has none). The clock is read
    /// only when neither gives a deadline. True if something is ready (or the connection is
    /// gone), false when the deadline passed first.
    ///
    /// How long the wait spins before it sleeps is decided here, by the connection's
    /// [`Waiter`] under its policy (the transport carries it out and says how it ended).
    pub(crate) fn wait(&mut self, deadline: Option<Instant>) -> Result<bool> {
        let start = Instant::now();
        let until = match (self.machine.poll_timeout().map(clock::from_core), deadline) {
            (Some(a), Some(b)) => a.min(b),
            (Some(t), None) | (None, Some(t)) => t,
            (None, None) => start + IDLE_WAIT,
        };
        if let Some(spun) = self.unrecorded.take() {
            self.waiter.record(WaitEnd::Spun(spun));
        }
        let plan = self.waiter.plan(start);
        let woken = self.ep.wait(plan.spin_until(start, until), until);
        drop(plan);
        match woken {
            Ok(Woken::Spun(t)) => {
                self.unrecorded = Some(t);
                Ok(true)
            }
            Ok(woken) => {
                self.waiter.learn(woken);
                Ok(woken.ready())
            }
            Err(TransportError::NotConnected) => Ok(true),
            Err(e) => Err(e),
        }
    }

    /// From now on, waits follow `policy` (what was learned under the old one is dropped).
    pub(crate) fn set_wait(&mut self, policy: WaitPolicy) {
        self.waiter = Waiter::new(policy);
        self.unrecorded = None;
    }

    /// The connection's waiter, for a wait over many connections that plans with it and
    /// tells it how the wait ended.
    pub(crate) fn waiter(&mut self) -> &mut Waiter {
        if let Some(spun) = self.unrecorded.take() {
            self.waiter.record(WaitEnd::Spun(spun));
        }
        &mut self.waiter
    }
}
