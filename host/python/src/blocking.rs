//! Blocking calls that Ctrl-C interrupts: `Naa.wait`/`run`, `wait_any`, `wait_all` and the
//! connect of `Naa(...)`.
//!
//! Each call blocks in slices of at most [`SLICE`] with the interpreter lock released, and
//! between two slices runs the process's pending signal handlers (`PyErr_CheckSignals`, with
//! the lock). A handler that raises (SIGINT's raises `KeyboardInterrupt`) ends the call: the
//! RPCs it waited for are cancelled ([`Naa::cancel`]: the next invoke reconnects) and the
//! exception propagates. `wait` and `run` wait with [`Naa::wait_until`] (each slice is the
//! library's own spin-then-sleep wait on this thread); `wait_any` and `wait_all` sleep on the
//! library's RPC futures ([`Naa::wait_async`]: the reactor thread wakes this thread when a
//! connection has news); a connect attempt runs on a thread of its own.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, mpsc};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

use naaice::client::rpc_future::RpcFuture;
use naaice::discovery::spec::{Attempts, SpecError};
use naaice::transport::AnyEndpoint;
use naaice::transport::TransportError;
use naaice::{Naa, NaaOptions};
use pyo3::prelude::*;

use crate::errors;
use crate::status::Status;

/// The longest stretch a blocking call goes without looking at signals.
pub(crate) const SLICE: Duration = Duration::from_millis(50);

/// First pause between two connect attempts that found nothing reachable; doubled after each
/// up to [`BACKOFF_MAX`] (the library's own failover does the same).
const BACKOFF_START: Duration = Duration::from_millis(50);
/// Longest pause between two connect attempts.
const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Wakes a parked thread (the one that waits).
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A waker for the calling thread.
fn waker() -> Waker {
    Waker::from(Arc::new(Unpark(std::thread::current())))
}

/// Runs `slice` (with the interpreter lock released) until it returns `Some`, running the
/// signal handlers between two runs; a handler's exception is returned as `Err`.
fn sliced<T: Send>(py: Python<'_>, mut slice: impl FnMut() -> Option<T> + Send) -> PyResult<T> {
    loop {
        if let Some(t) = py.detach(&mut slice) {
            return Ok(t);
        }
        py.check_signals()?;
    }
}

/// Parks the calling thread until it is woken or `end` passes; false once `end` passed.
fn park_until(end: Instant) -> bool {
    let now = Instant::now();
    if now >= end {
        return false;
    }
    std::thread::park_timeout(end - now);
    true
}

/// Waits for the RPC in flight on `naa`, like [`Naa::wait`], in slices of [`SLICE`]
/// ([`Naa::wait_until`]: each spins and sleeps as the library's own wait does, on this
/// thread). Interrupted, it cancels the RPC.
pub(crate) fn wait(py: Python<'_>, naa: &mut Naa) -> PyResult<Status> {
    let outcome = sliced(py, || match naa.wait_until(Instant::now() + SLICE) {
        Ok(None) => None,
        Ok(Some(status)) => Some(Ok(status)),
        Err(e) => Some(Err(e)),
    });
    match outcome {
        Ok(r) => r.map(Status::from).map_err(errors::to_py),
        Err(interrupted) => {
            py.detach(|| naa.cancel());
            Err(interrupted)
        }
    }
}

/// One handle's outcome in a wait over many: its index and how its RPC ended.
pub(crate) type Outcome = (usize, naaice::Result<naaice::Status>);

/// Polls a future for each handle with an RPC in flight once; the first that completes is
/// returned. The others stay registered with the reactor (waking `cx`'s thread) until the
/// returned futures are dropped.
fn arm<'a>(
    naas: &'a mut [&mut Naa],
    cx: &mut Context<'_>,
) -> Result<Vec<RpcFuture<'a, AnyEndpoint>>, Outcome> {
    let mut futures = Vec::with_capacity(naas.len());
    for (index, naa) in naas.iter_mut().enumerate() {
        if !naa.is_busy() {
            continue;
        }
        let mut future = naa.wait_async();
        if let Poll::Ready(r) = Pin::new(&mut future).poll(cx) {
            return Err((index, r));
        }
        futures.push(future);
    }
    Ok(futures)
}

/// Cancels every RPC in flight (after an interrupt).
fn cancel_all(naas: &mut [&mut Naa]) {
    for naa in naas {
        naa.cancel();
    }
}

/// `wait_any` ([`naaice::client::naa_set::wait_any`]): the first RPC that ends; `None` if none is in
/// flight. Interrupted, it cancels every RPC in flight.
pub(crate) fn wait_any(py: Python<'_>, naas: &mut [&mut Naa]) -> PyResult<Option<Outcome>> {
    let waker = waker();
    let outcome = sliced(py, || {
        let end = Instant::now() + SLICE;
        let mut cx = Context::from_waker(&waker);
        loop {
            if let Poll::Ready(done) =
                naaice::client::naa_set::test_any(naas.iter_mut().map(|n| &mut **n))
            {
                return Some(done.map(|f| (f.index, f.result)));
            }
            match arm(naas, &mut cx) {
                Err(done) => return Some(Some(done)),
                Ok(_registered) => {
                    if !park_until(end) {
                        return None;
                    }
                }
            }
        }
    });
    outcome.inspect_err(|_| py.detach(|| cancel_all(naas)))
}

/// `wait_all` ([`naaice::client::naa_set::wait_all`]): one entry per handle once no RPC is in
/// flight. Interrupted, it cancels every RPC in flight.
pub(crate) fn wait_all(
    py: Python<'_>,
    naas: &mut [&mut Naa],
) -> PyResult<Vec<Option<naaice::Result<naaice::Status>>>> {
    let waker = waker();
    // Outcomes the futures took from their handles (which are no longer in flight then).
    let mut taken: Vec<Option<naaice::Result<naaice::Status>>> =
        (0..naas.len()).map(|_| None).collect();
    let outcome = sliced(py, || {
        let end = Instant::now() + SLICE;
        let mut cx = Context::from_waker(&waker);
        loop {
            if let Poll::Ready(all) =
                naaice::client::naa_set::test_all(naas.iter_mut().map(|n| &mut **n))
            {
                let merged = all
                    .into_iter()
                    .zip(&mut taken)
                    .map(|(now, before)| before.take().or(now))
                    .collect::<Vec<_>>();
                return Some(merged);
            }
            match arm(naas, &mut cx) {
                Err((index, r)) => taken[index] = Some(r),
                Ok(_registered) => {
                    if !park_until(end) {
                        return None;
                    }
                }
            }
        }
    });
    outcome.inspect_err(|_| py.detach(|| cancel_all(naas)))
}

/// True for a failure to reach the NAA that a later attempt may not have: refused, timed out,
/// rejected (overloaded), or every `NAA_SPEC` entry unreachable this time.
fn unreachable(e: &naaice::Error) -> bool {
    matches!(
        e,
        naaice::Error::Transport(
            TransportError::NotReached(_)
                | TransportError::TimedOut
                | TransportError::Io { .. }
                | TransportError::Rejected(_)
                | TransportError::NotConnected
        ) | naaice::Error::Timeout(_)
            | naaice::Error::Spec(SpecError::Unreachable { .. })
    )
}

/// Connects as `create(options)` does ([`Naa::create_with`]), trying again until
/// `options.connect_timeout` passes while nothing is reachable, whether the NAA was named by
/// address or by `NAA_SPEC`. Each attempt (connect and memory-region exchange) runs on a
/// thread of its own while this one looks at signals every [`SLICE`] ([`attempt`]); so do the
/// pauses between attempts.
pub(crate) fn connect<F>(py: Python<'_>, options: &NaaOptions, create: F) -> PyResult<Naa>
where
    F: Fn(&NaaOptions) -> naaice::Result<Naa> + Send + Sync + 'static,
{
    let create = Arc::new(create);
    let start = Instant::now();
    let deadline = start + options.connect_timeout;
    let mut backoff = BACKOFF_START;
    let mut attempts = 0u32;
    // Every NAA_SPEC entry tried, over all attempts.
    let mut tried: Vec<Attempts> = Vec::new();
    // What the final error reports: the last failure, unless it only says "timed out" (an
    // attempt cut short by the deadline) and an earlier one said more.
    let mut failure: Option<naaice::Error> = None;
    loop {
        let mut attempt = options.clone();
        attempt.connect_timeout = deadline.saturating_duration_since(Instant::now());
        attempts += 1;
        let mut e = match self::attempt(py, &create, attempt)? {
            Ok(naa) => return Ok(naa),
            Err(e) => e,
        };
        if !unreachable(&e) {
            return Err(errors::to_py(e));
        }
        if let naaice::Error::Spec(SpecError::Unreachable { tried: now, .. }) = &mut e {
            merge(&mut tried, now);
        }
        tracing::debug!(attempts, error = %e, "NAA not reached yet");
        let timed_out = matches!(
            e,
            naaice::Error::Transport(TransportError::TimedOut) | naaice::Error::Timeout(_)
        );
        if !timed_out || failure.is_none() {
            failure = Some(e);
        }
        py.check_signals()?;
        // Pause, then try again; at the deadline, give up.
        let pause_end = (Instant::now() + backoff).min(deadline);
        sliced(py, || {
            let now = Instant::now();
            if now >= pause_end {
                return Some(());
            }
            std::thread::sleep((pause_end - now).min(SLICE));
            None
        })?;
        if Instant::now() >= deadline {
            let e = failure.expect("set after each failed attempt");
            return Err(gave_up(e, options, start.elapsed(), attempts, tried));
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// Runs one connect attempt on a thread of its own, looking at signals every [`SLICE`]
/// meanwhile (the connect and the memory-region exchange cannot be cut into slices). Ctrl-C
/// returns at once and leaves the attempt to end on its thread, which then drops what it
/// made (disconnecting from the NAA). Meanwhile the parameters' Python buffers may be
/// released: creating a handle only registers their memory and exchanges region metadata,
/// it never reads or writes their bytes.
fn attempt<F>(py: Python<'_>, create: &Arc<F>, options: NaaOptions) -> PyResult<naaice::Result<Naa>>
where
    F: Fn(&NaaOptions) -> naaice::Result<Naa> + Send + Sync + 'static,
{
    let (tx, rx) = mpsc::channel();
    let create = Arc::clone(create);
    std::thread::Builder::new()
        .name("naaice-connect".into())
        .spawn(move || {
            // The receiver is gone after an interrupt: the handle is dropped here.
            let _ = tx.send(create(&options));
        })
        .map_err(|source| {
            errors::to_py(naaice::Error::Transport(TransportError::Io {
                call: "spawn",
                source,
            }))
        })?;
    sliced(py, move || match rx.recv_timeout(SLICE) {
        Ok(made) => Some(made),
        Err(mpsc::RecvTimeoutError::Timeout) => None,
        Err(mpsc::RecvTimeoutError::Disconnected) => Some(Err(naaice::Error::State(
            "the connect attempt's thread ended without a result",
        ))),
    })
}

/// Adds the entries tried in one attempt (`now`) to those of the attempts before.
fn merge(all: &mut Vec<Attempts>, now: &[Attempts]) {
    for a in now {
        match all.iter_mut().find(|b| b.entry == a.entry) {
            Some(b) => {
                b.count += a.count;
                b.last_error.clone_from(&a.last_error);
            }
            None => all.push(a.clone()),
        }
    }
}

/// The error once the connect timeout passed: `TransportUnavailableError` (its subclass
/// `SelectionError` for `NAA_SPEC`, listing every entry tried).
fn gave_up(
    mut e: naaice::Error,
    options: &NaaOptions,
    spent: Duration,
    attempts: u32,
    all: Vec<Attempts>,
) -> PyErr {
    if let naaice::Error::Spec(SpecError::Unreachable {
        waited,
        timeout,
        tried,
        ..
    }) = &mut e
    {
        // Whole milliseconds, as the library reports them.
        *waited = Duration::from_millis(spent.as_millis() as u64);
        *timeout = options.connect_timeout;
        *tried = all;
        return errors::to_py(e);
    }
    match (e, options.remote) {
        (e, Some(addr)) => errors::unavailable(format!(
            "NAA at {addr} not reached within the connect timeout ({:?}, {attempts} attempts): {e}",
            options.connect_timeout
        )),
        (e, None) => errors::unavailable(format!(
            "NAA not reached within the connect timeout ({:?}, {attempts} attempts): {e}",
            options.connect_timeout
        )),
    }
}
