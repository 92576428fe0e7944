//! `await naa.call()`: the library's RPC future ([`naaice::client::rpc_future`]) driven by asyncio.
//!
//! The handle is moved into a future that owns it; the future is polled on the event loop's
//! thread, and its waker (called by the library's reactor thread when the connection has news
//! or the deadline passes) schedules the next poll with `loop.call_soon_threadsafe`. No thread
//! blocks per RPC. When the future completes, or the await is abandoned, the handle goes back.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use naaice::Naa;
use pyo3::prelude::*;

use crate::errors::{self, StateError};
use crate::handle::{PyNaa, Slot};
use crate::status::Status;

type Outcome = (Naa, Option<naaice::Result<naaice::Status>>);
type Boxed = Pin<Box<dyn Future<Output = Outcome> + Send>>;

/// One await of an RPC; made by `Naa._wait_async()`.
#[pyclass(module = "naaice._native", name = "_Await", frozen)]
pub(crate) struct Await {
    /// The handle the RPC's `Naa` goes back to; holding it keeps the parameters exported.
    owner: Py<PyNaa>,
    slot: Arc<Mutex<Slot>>,
    future: Mutex<Option<Boxed>>,
    abort: Arc<AtomicBool>,
}

/// Calls a Python callable (the event loop's `call_soon_threadsafe(step)`) when woken.
struct PyWaker(Py<PyAny>);

impl Wake for PyWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // The interpreter exiting: no event loop runs any more.
        let Some(_inside) = crate::thread_state::enter() else {
            return;
        };
        Python::attach(|py| {
            // A closed event loop raises: the await is gone, nothing to wake.
            let _ = self.0.call0(py);
        });
    }
}

impl Await {
    /// Moves the handle's `Naa` into a future that completes its RPC in flight.
    pub(crate) fn start(owner: &Bound<'_, PyNaa>) -> PyResult<Self> {
        let this = owner.get();
        let mut naa = {
            let mut g = this.lock()?;
            g.naa()?;
            g.naa
                .take()
                .ok_or_else(|| StateError::new_err("no handle"))?
        };
        if !naa.is_busy() {
            // Nothing in flight: put it back and say so.
            let mut g = this.lock()?;
            let status = naa.wait();
            g.naa = Some(naa);
            return Err(match status {
                Ok(_) => StateError::new_err("no RPC in flight: invoke first (or use call())"),
                Err(e) => errors::to_py(e),
            });
        }
        let abort = Arc::new(AtomicBool::new(false));
        let stop = abort.clone();
        let future: Boxed = Box::pin(async move {
            let r = {
                let mut inner = std::pin::pin!(naa.wait_async());
                std::future::poll_fn(|cx| {
                    if stop.load(Ordering::Acquire) {
                        return Poll::Ready(None);
                    }
                    inner.as_mut().poll(cx).map(Some)
                })
                .await
            };
            (naa, r)
        });
        Ok(Self {
            owner: owner.clone().unbind(),
            slot: this.slot.clone(),
            future: Mutex::new(Some(future)),
            abort,
        })
    }

    fn finish(&self, naa: Naa) {
        if let Ok(mut g) = self.slot.lock() {
            g.naa = Some(naa);
        }
    }
}

#[pymethods]
impl Await {
    /// Polls once; `wake` is called (from another thread) when polling again may make
    /// progress. Returns the `Status` once the RPC finished, `None` while it runs; raises if
    /// it failed.
    fn poll(&self, wake: Py<PyAny>) -> PyResult<Option<Status>> {
        let mut f = self.future.lock().unwrap_or_else(|p| p.into_inner());
        let Some(fut) = f.as_mut() else {
            return Err(StateError::new_err("this await already completed"));
        };
        let waker = Waker::from(Arc::new(PyWaker(wake)));
        match fut.as_mut().poll(&mut Context::from_waker(&waker)) {
            Poll::Pending => Ok(None),
            Poll::Ready((naa, r)) => {
                *f = None;
                self.finish(naa);
                match r {
                    Some(r) => r.map(|s| Some(Status::from(s))).map_err(errors::to_py),
                    None => Err(errors::CancelledError::new_err("the await was abandoned")),
                }
            }
        }
    }

    /// Gives the handle back without waiting for the RPC (which stays in flight); for an
    /// abandoned await (the task was cancelled). Does nothing once completed.
    fn abandon(&self) {
        self.abort.store(true, Ordering::Release);
        let mut f = self.future.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(mut fut) = f.take() {
            let waker = Waker::noop();
            if let Poll::Ready((naa, _)) = fut.as_mut().poll(&mut Context::from_waker(waker)) {
                self.finish(naa);
            }
        }
    }

    /// The handle this await belongs to.
    #[getter]
    fn owner(&self, py: Python<'_>) -> Py<PyNaa> {
        self.owner.clone_ref(py)
    }
}
