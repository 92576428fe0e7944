//! Many handles progressed together, after MPI's `Waitany` / `Waitall` / `Testany` /
//! `Testall`: one thread keeps RPCs on many NAAs (any function codes) in flight and waits for
//! all of them at once (spinning while that pays, then in one poll(2) over the connections'
//! readiness descriptors) until one of them has news.
//!
//! ```no_run
//! use naaice::Naa;
//! use naaice::client::naa_set;
//! # fn main() -> naaice::Result<()> {
//! # let mut naas: Vec<Naa> = Vec::new();
//! for naa in &mut naas {
//!     naa.invoke()?;
//! }
//! for (i, outcome) in naa_set::wait_all(&mut naas).into_iter().enumerate() {
//!     match outcome {
//!         Some(Ok(status)) => println!("NAA {i}: return code {}", status.naa_error),
//!         Some(Err(e)) => println!("NAA {i} failed: {e}"),
//!         None => println!("NAA {i} had no RPC in flight"),
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! **Which handles take part.** The functions take the handles in any order as an iterator
//! (`&mut vec`, `[&mut a, &mut b]`, `iter_mut().filter(…)`); indices are positions in that
//! order. A handle takes part while it has an RPC **in flight**: invoked, and its outcome not
//! reported yet by `test`, `wait` or a function here. A handle that was never invoked, or
//! whose last outcome was already reported, is **inactive**: `wait_any`/`test_any` skip it,
//! `wait_all`/`test_all` give `None` in its place (MPI's inactive requests).
//!
//! **Outcomes.** A finished RPC gives `Ok(status)` (the NAA's return code is in
//! [`Status::naa_error`]); an RPC whose connection failed (deadline passed, NAA gone,
//! protocol error) gives `Err` for that handle alone, never for the set. Each outcome is
//! reported once, as by [`Naa::test`]; afterwards the handle is inactive and may be invoked
//! again (or, after a failure, finalized). Exception: in `wait_all`/`test_all` a handle whose
//! connection failed earlier gives its error again (a dead handle is never silently skipped
//! by a call that is to wait for all).
//!
//! **Progress.** Every call progresses each participating connection without blocking.
//! The `wait_*` functions then spin, progressing them again and again, as long as the first
//! handle in flight would let its own wait spin (its
//! [`WaitPolicy`](crate::transport::waiting::WaitPolicy) and what its waits learned: by default while
//! the machine has a core to spare), and then sleep in one poll(2) on their readiness
//! descriptors and the earliest RPC deadline; a transport without a descriptor is polled
//! every millisecond instead.

use std::os::fd::BorrowedFd;
use std::task::Poll;
use std::time::{Duration, Instant};

use naaice_core::Phase;

use super::arming::{self, Arming};
use crate::client::connection::Connection;
use crate::client::naa::{Naa, Status};
use crate::error::{Error, Result};
use crate::transport::Endpoint;
use crate::transport::waiting::{WaitEnd, Waiter};

/// One RPC of a set that finished or failed: the handle's position and its outcome.
#[derive(Debug)]
pub struct Finished {
    /// The handle's position among those passed.
    pub index: usize,
    /// The RPC's status, or why it failed.
    pub result: Result<Status>,
}

/// A handle's part in a call over many handles.
fn in_flight<E: Endpoint>(naa: &Naa<E>) -> bool {
    naa.is_busy()
}

/// The error of a handle whose connection failed (for `*_all`).
fn failed<E: Endpoint>(naa: &Naa<E>) -> Option<Error> {
    if naa.is_busy() || naa.state() != Phase::Error {
        return None;
    }
    naa.connection().and_then(|c| c.failure())
}

/// `Testany`: progresses the in-flight handles without blocking, in order, and reports the
/// first whose RPC finished or failed. `Ready(None)` if no handle has an RPC in flight
/// (MPI_UNDEFINED); `Pending` if none finished yet.
pub fn test_any<'a, E, I>(handles: I) -> Poll<Option<Finished>>
where
    E: Endpoint + 'a,
    I: IntoIterator<Item = &'a mut Naa<E>>,
{
    let mut handles: Vec<&mut Naa<E>> = handles.into_iter().collect();
    test_any_of(&mut handles)
}

fn test_any_of<E: Endpoint>(handles: &mut [&mut Naa<E>]) -> Poll<Option<Finished>> {
    // Where this thread's scan starts: after the handle it reported last, so that one busy
    // handle cannot keep the others' finished RPCs waiting (round robin).
    thread_local! {
        static NEXT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }
    let n = handles.len();
    let start = NEXT.with(std::cell::Cell::get) % n.max(1);
    let mut active = false;
    for index in (start..n).chain(0..start) {
        let naa = &mut handles[index];
        if !in_flight(naa) {
            continue;
        }
        active = true;
        let result = match naa.test() {
            Ok(None) => continue,
            Ok(Some(status)) => Ok(status),
            Err(e) => Err(e),
        };
        NEXT.with(|next| next.set(index + 1));
        return Poll::Ready(Some(Finished { index, result }));
    }
    if active {
        Poll::Pending
    } else {
        Poll::Ready(None)
    }
}

/// `Waitany`: blocks until one in-flight handle's RPC finishes or fails and reports it;
/// `None` at once if no handle has an RPC in flight.
pub fn wait_any<'a, E, I>(handles: I) -> Option<Finished>
where
    E: Endpoint + 'a,
    I: IntoIterator<Item = &'a mut Naa<E>>,
{
    let mut handles: Vec<&mut Naa<E>> = handles.into_iter().collect();
    wait_until(&mut handles, test_any_of)
}

/// Waits on `handles` until `test` is ready, in rounds as a single connection's waits go:
/// each round spins, calling `test` in a loop, for the budget that the [`Waiter`] of the first
/// handle in flight gives under its policy, then sleeps once on their descriptors; that
/// waiter learns from how each round ended.
fn wait_until<E: Endpoint, T>(
    handles: &mut [&mut Naa<E>],
    test: impl Fn(&mut [&mut Naa<E>]) -> Poll<T>,
) -> T {
    loop {
        if let Poll::Ready(t) = test(handles) {
            return t;
        }
        let start = Instant::now();
        let deadline = earliest_deadline(handles).unwrap_or(start + SPIN_HORIZON);
        let first = handles.iter().position(|naa| in_flight(naa));
        let plan = first
            .and_then(|i| waiter(handles, i))
            .map(|w| w.plan(start));
        let spin_until = plan
            .as_ref()
            .map_or(start, |p| p.spin_until(start, deadline));
        while Instant::now() < spin_until {
            std::hint::spin_loop();
            if let Poll::Ready(t) = test(handles) {
                if let Some(w) = first.and_then(|i| waiter(handles, i)) {
                    w.record(WaitEnd::Spun(start.elapsed()));
                }
                return t;
            }
        }
        drop(plan);
        if sleep(handles)
            && let Some(w) = first.and_then(|i| waiter(handles, i))
        {
            w.record(WaitEnd::Slept(start.elapsed()));
        }
    }
}

/// Longest round of a wait over handles without a deadline under
/// [`WaitPolicy::Poll`](crate::transport::waiting::WaitPolicy::Poll) (which spins until the deadline):
/// it then looks at their descriptors once.
const SPIN_HORIZON: Duration = Duration::from_secs(1);

/// The waiter of handle `i`'s connection (none after a cancel).
fn waiter<'a, E: Endpoint>(handles: &'a mut [&mut Naa<E>], i: usize) -> Option<&'a mut Waiter> {
    handles[i].connection_mut().map(Connection::waiter)
}

/// The earliest deadline of the handles in flight.
fn earliest_deadline<E: Endpoint>(handles: &[&mut Naa<E>]) -> Option<Instant> {
    handles
        .iter()
        .filter(|naa| in_flight(naa))
        .filter_map(|naa| naa.connection().and_then(Connection::next_deadline))
        .min()
}

/// `Testall`: progresses every in-flight handle without blocking. `Ready` with one entry per
/// handle once none of them is still running (`None` for inactive handles; a handle whose
/// connection failed earlier gives its error); `Pending` otherwise, and then nothing is
/// reported: handles that finished stay in flight until a call reports them (MPI semantics).
pub fn test_all<'a, E, I>(handles: I) -> Poll<Vec<Option<Result<Status>>>>
where
    E: Endpoint + 'a,
    I: IntoIterator<Item = &'a mut Naa<E>>,
{
    let mut handles: Vec<&mut Naa<E>> = handles.into_iter().collect();
    test_all_of(&mut handles)
}

fn test_all_of<E: Endpoint>(handles: &mut [&mut Naa<E>]) -> Poll<Vec<Option<Result<Status>>>> {
    let mut running = false;
    for naa in handles.iter_mut() {
        // A failure is kept by the connection and reported below (or by a later call).
        if in_flight(naa) && matches!(naa.connection_mut().map(|c| c.advance()), Some(Ok(false))) {
            running = true;
        }
    }
    if running {
        return Poll::Pending;
    }
    Poll::Ready(handles.iter_mut().map(|naa| outcome(naa)).collect())
}

/// A handle's entry in a `*_all` result once it is not running any more.
fn outcome<E: Endpoint>(naa: &mut Naa<E>) -> Option<Result<Status>> {
    if let Some(e) = failed(naa) {
        return Some(Err(e));
    }
    if !in_flight(naa) {
        return None;
    }
    match naa.test() {
        Ok(Some(status)) => Some(Ok(status)),
        Err(e) => Some(Err(e)),
        Ok(None) => Some(Err(Error::State("RPC still in flight"))),
    }
}

/// `Waitall`: blocks until every in-flight handle's RPC finished or failed; one entry per
/// handle (`None` for inactive handles; a handle whose connection failed earlier gives its
/// error).
pub fn wait_all<'a, E, I>(handles: I) -> Vec<Option<Result<Status>>>
where
    E: Endpoint + 'a,
    I: IntoIterator<Item = &'a mut Naa<E>>,
{
    let mut handles: Vec<&mut Naa<E>> = handles.into_iter().collect();
    wait_until(&mut handles, test_all_of)
}

/// Sleeps until one of the in-flight handles may have news: one poll(2) over their readiness
/// descriptors, at most until the earliest deadline. False if it did not sleep (one of them
/// had news already).
fn sleep<E: Endpoint>(handles: &mut [&mut Naa<E>]) -> bool {
    let now = Instant::now();
    let mut until: Option<Instant> = None;
    let mut armed = Vec::with_capacity(handles.len());
    for (i, naa) in handles.iter_mut().enumerate() {
        if !in_flight(naa) {
            continue;
        }
        let arming = arming::arm(naa);
        if arming == Arming::Ready {
            return false;
        }
        if let Some(t) = arming.until(now) {
            until = Some(until.map_or(t, |u| u.min(t)));
        }
        if matches!(arming, Arming::Fd(_)) {
            armed.push(i);
        }
    }
    let fds: Vec<BorrowedFd<'_>> = armed
        .iter()
        .filter_map(|&i| arming::ready_fd(handles[i]))
        .collect();
    arming::poll_fds(&fds, until);
    true
}
