//! Connection slots of a software NAA, and which connection gives way when they are full.
//!
//! **Policy.** At most `max_connections` connections are served. A connection between RPCs
//! (after its MRSP, no RPC in progress) is *idle*; one that is in its MRSP, computing, or
//! writing back is busy (each of those phases has its own deadline). When a new client
//! arrives and every slot is taken, the connection that has been idle the longest gives way,
//! if it has been idle for at least the grace period (`evict_idle_after`, default 30 s): its
//! worker disconnects it cleanly at once (the client's next call fails with a disconnect
//! error, and it may reconnect) and the newcomer is served. With no such connection the
//! newcomer is rejected ("NAA overloaded"). So a client that keeps using its connection is
//! never evicted, however long it lives, while idle or trickling clients cannot hold the
//! slots against newcomers for longer than the grace period. An optional idle timeout
//! (`idle_timeout`) drops idle connections even when nobody waits.
//!
//! The worker marks every RPC that runs a kernel (busy when it starts, idle from its end) and
//! the end of the MRSP (before its first wait for the first RPC).
//!
//! An evicted connection's slot counts as free at once; its worker, woken by the master
//! (the endpoint's waker), leaves at once, or at the end of an RPC that raced with the
//! eviction. So does the slot of a connection that is over (the client left, the connection
//! failed or its MRSP was refused) while its worker still tears it down. And when every
//! slot seems taken, the master asks each connection's transport whether its client has
//! left ([`Liveness`]): a client that disconnects and reconnects at once finds its old slot
//! free even when its worker has not run since (a busy node), as the end of its old
//! connection arrived before its new request.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::pool::Task;
use crate::clock;
use crate::transport::{Liveness, Waker};

/// What a connection's worker publishes for the slot policy, and the eviction order.
///
/// Lock-free: the worker marks every RPC (busy while its kernel runs, idle from its end), so
/// the marks cost an atomic store each.
#[derive(Debug, Default)]
pub(crate) struct Activity {
    /// Since when the connection is idle between RPCs: the core clock's microseconds plus
    /// one (0: busy).
    idle_since: AtomicU64,
    /// The master asked the worker to disconnect at its next idle moment.
    evict: AtomicBool,
    /// The connection is over; its worker only tears it down (see [`Activity::leave`]).
    left: AtomicBool,
    /// Ends the worker's wait, so that it sees an eviction or a shutdown at once (`None`
    /// until the connection is accepted, or for a transport without one: the worker then
    /// looks every 100 ms).
    waker: Mutex<Option<Waker>>,
    /// Tells the master whether the client has left (`None` until the connection is
    /// accepted, or for a transport without a probe).
    liveness: Mutex<Option<Liveness>>,
}

impl Activity {
    /// Marks the connection idle since `since`, or busy.
    pub(crate) fn set_idle(&self, since: Option<Instant>) {
        let raw = since.map_or(0, |t| clock::to_core(t).as_micros().saturating_add(1));
        self.idle_since.store(raw, Ordering::Release);
    }

    /// Since when the connection is idle (`None`: busy).
    pub(crate) fn idle_since(&self) -> Option<Instant> {
        match self.idle_since.load(Ordering::Acquire) {
            0 => None,
            raw => Some(clock::from_core(naaice_core::Instant::from_micros(raw - 1))),
        }
    }

    /// Sets the worker's waker.
    pub(crate) fn set_waker(&self, waker: Option<Waker>) {
        *self.waker.lock().unwrap_or_else(PoisonError::into_inner) = waker;
    }

    /// Sets the transport's probe of the connection.
    pub(crate) fn set_liveness(&self, liveness: Option<Liveness>) {
        *self.liveness.lock().unwrap_or_else(PoisonError::into_inner) = liveness;
    }

    /// Ends the worker's current wait (an eviction or a shutdown), if it has a waker.
    pub(crate) fn wake(&self) {
        let waker = self
            .waker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// True once the connection should give its slot away.
    pub(crate) fn evicted(&self) -> bool {
        self.evict.load(Ordering::Acquire)
    }

    /// Marks the connection over: its slot counts as free at once, while the worker tears the
    /// connection down (disconnect, deregistration, the memory back to the budget), so that
    /// a client that reconnects right after its connection ended does not find the slots
    /// full of connections that are gone.
    pub(crate) fn leave(&self) {
        self.left.store(true, Ordering::Release);
    }

    /// True while the connection holds its slot: neither evicted nor over.
    fn holds_slot(&self) -> bool {
        !self.evicted() && !self.left.load(Ordering::Acquire)
    }

    /// Asks the transport whether the connection is over; marks it so if it is.
    fn probe(&self) {
        // Asked outside the lock: the probe may take the transport's own.
        let liveness = self
            .liveness
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if liveness.is_some_and(|l| l.is_over()) {
            self.leave();
        }
    }
}

/// What happens to a new connection request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// A slot is free.
    Free,
    /// The connection idle for `idle` gives its slot to the newcomer.
    Evicted {
        /// How long the evicted connection had been idle.
        idle: Duration,
    },
    /// Every slot is busy or idle for less than the grace period.
    Full,
}

/// The live connections of a software NAA (master thread only).
#[derive(Debug)]
pub(crate) struct Slots {
    max: usize,
    grace: Option<Duration>,
    conns: Vec<(Task, Arc<Activity>)>,
}

impl Slots {
    /// `max` slots; idle connections give way after `grace` (`None`: never).
    pub(crate) fn new(max: usize, grace: Option<Duration>) -> Self {
        Self {
            max,
            grace,
            conns: Vec::new(),
        }
    }

    /// Forgets connections whose worker has ended them.
    pub(crate) fn reap(&mut self) {
        self.conns.retain(|(w, _)| !w.is_finished());
    }

    /// Decides on a new connection request at `now` (evicting if needed and allowed).
    pub(crate) fn admit(&mut self, now: Instant) -> Admission {
        self.reap();
        if self.live() < self.max {
            return Admission::Free;
        }
        // Full by what the workers have seen: the transports may know more.
        for (_, a) in self.conns.iter().filter(|(_, a)| a.holds_slot()) {
            a.probe();
        }
        if self.live() < self.max {
            return Admission::Free;
        }
        let Some(grace) = self.grace else {
            return Admission::Full;
        };
        let longest = self
            .conns
            .iter()
            .filter(|(_, a)| a.holds_slot())
            .filter_map(|(_, a)| Some((now.saturating_duration_since(a.idle_since()?), a)))
            .filter(|(idle, _)| *idle >= grace)
            .max_by_key(|(idle, _)| *idle);
        match longest {
            Some((idle, activity)) => {
                activity.evict.store(true, Ordering::Release);
                activity.wake();
                Admission::Evicted { idle }
            }
            None => Admission::Full,
        }
    }

    /// Connections that hold a slot.
    fn live(&self) -> usize {
        self.conns.iter().filter(|(_, a)| a.holds_slot()).count()
    }

    /// Adds the worker's task of an admitted connection.
    pub(crate) fn insert(&mut self, worker: Task, activity: Arc<Activity>) {
        self.conns.push((worker, activity));
    }

    /// Ends every worker's current wait (a shutdown: the workers see the stop flag).
    pub(crate) fn wake_all(&self) {
        for (_, a) in &self.conns {
            a.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::swnaa::pool::Pool;

    fn worker(pool: &mut Pool) -> (Task, Arc<std::sync::Barrier>) {
        let barrier = Arc::new(std::sync::Barrier::new(2));
        let b = Arc::clone(&barrier);
        let task = pool
            .run(move || {
                b.wait();
            })
            .expect("a worker thread");
        (task, barrier)
    }

    /// One slot without grace, taken by `a`'s connection, whose worker (from a pool of
    /// `threads`) waits on the barrier returned.
    fn taken_by(a: &Arc<Activity>, threads: usize) -> (Slots, Pool, Arc<std::sync::Barrier>) {
        let mut slots = Slots::new(1, None);
        let mut pool = Pool::new("slots-test", threads).expect("a pool");
        let (w, b) = worker(&mut pool);
        slots.insert(w, Arc::clone(a));
        (slots, pool, b)
    }

    #[test]
    fn the_longest_idle_past_the_grace_gives_way() {
        let grace = Duration::from_secs(10);
        let mut slots = Slots::new(2, Some(grace));
        let mut pool = Pool::new("slots-test", 3).expect("a pool");
        let t0 = Instant::now();
        let (a, b) = (Arc::new(Activity::default()), Arc::new(Activity::default()));
        let (wa, ba) = worker(&mut pool);
        let (wb, bb) = worker(&mut pool);
        slots.insert(wa, Arc::clone(&a));
        slots.insert(wb, Arc::clone(&b));
        // Both busy: full.
        assert_eq!(slots.admit(t0), Admission::Full);
        // Idle, but within the grace period: full.
        a.set_idle(Some(t0));
        b.set_idle(Some(t0 + Duration::from_secs(5)));
        assert_eq!(slots.admit(t0 + Duration::from_secs(9)), Admission::Full);
        // a has been idle longest and past the grace: it gives way, b stays.
        let now = t0 + Duration::from_secs(12);
        match slots.admit(now) {
            // The marks keep microseconds.
            Admission::Evicted { idle } => {
                assert!(idle.abs_diff(Duration::from_secs(12)) < Duration::from_millis(1));
            }
            other => panic!("{other:?}"),
        }
        assert!(a.evicted() && !b.evicted());
        // The newcomer takes the slot; b is within its grace: full again.
        let (wc, bc) = worker(&mut pool);
        slots.insert(wc, Arc::new(Activity::default()));
        assert_eq!(slots.admit(now), Admission::Full);
        // A worker that ended frees its slot.
        bb.wait();
        while slots.admit(now) == Admission::Full {
            std::thread::sleep(Duration::from_millis(5));
        }
        ba.wait();
        bc.wait();
        slots.wake_all();
        pool.join_all();
    }

    #[test]
    fn an_idle_mark_reads_back_and_clears() {
        let a = Activity::default();
        assert_eq!(a.idle_since(), None);
        let t = Instant::now() + Duration::from_secs(3);
        a.set_idle(Some(t));
        let back = a.idle_since().expect("idle");
        assert!(back.max(t) - back.min(t) < Duration::from_millis(1));
        a.set_idle(None);
        assert_eq!(a.idle_since(), None);
    }

    #[test]
    fn a_connection_that_is_over_frees_its_slot_before_its_worker_ends() {
        let a = Arc::new(Activity::default());
        let (mut slots, mut pool, b) = taken_by(&a, 2);
        let now = Instant::now();
        assert_eq!(slots.admit(now), Admission::Full);
        // The worker still runs (it waits on the barrier): the slot is free all the same.
        a.leave();
        assert_eq!(slots.admit(now), Admission::Free);
        let (w2, b2) = worker(&mut pool);
        slots.insert(w2, Arc::new(Activity::default()));
        assert_eq!(
            slots.admit(now),
            Admission::Full,
            "the newcomer holds the slot"
        );
        b.wait();
        b2.wait();
        slots.wake_all();
        pool.join_all();
    }

    #[test]
    fn a_connection_whose_client_left_frees_its_slot_before_its_worker_saw_it() {
        let a = Arc::new(Activity::default());
        let gone = Arc::new(AtomicBool::new(false));
        let g = Arc::clone(&gone);
        a.set_liveness(Some(Liveness::new(move || g.load(Ordering::SeqCst))));
        let (mut slots, pool, b) = taken_by(&a, 1);
        let now = Instant::now();
        // The client is still there: full, and the probe leaves the connection alone.
        assert_eq!(slots.admit(now), Admission::Full);
        assert!(a.holds_slot());
        // Its transport has seen it leave; its worker has not run since (it waits on the
        // barrier): the slot is free.
        gone.store(true, Ordering::SeqCst);
        assert_eq!(slots.admit(now), Admission::Free);
        assert!(!a.holds_slot());
        b.wait();
        pool.join_all();
    }

    #[test]
    fn without_grace_nobody_is_evicted() {
        let a = Arc::new(Activity::default());
        let (mut slots, pool, b) = taken_by(&a, 1);
        let t0 = Instant::now();
        a.set_idle(Some(t0));
        assert_eq!(slots.admit(t0 + Duration::from_secs(3600)), Admission::Full);
        b.wait();
        slots.wake_all();
        pool.join_all();
    }
}
