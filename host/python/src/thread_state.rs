//! A Python thread state kept by each library thread that runs Python kernels.
//!
//! `Python::attach` on a thread that Python does not know creates a thread state for the call
//! and destroys it when the call returns. A kernel runs on the connection's worker thread for
//! every RPC, so each RPC paid for a fresh state, whose frame stack is mapped and unmapped
//! (an unmap flushes the TLB of every CPU): about 40 µs of a 48 µs local RPC with a tiny
//! kernel. Instead, the first kernel call on a worker thread registers the thread with Python
//! and releases the interpreter lock at once, keeping the state; later calls only take and
//! give back the lock. The thread gives its state back when it ends, unless the interpreter is
//! shutting down by then (the interpreter then disposes of it).
//!
//! Library threads (kernels, the RPC futures' reactor) enter Python only through [`enter`]:
//! a thread that takes the interpreter lock while the interpreter finalizes is ended inside
//! Python (`pthread_exit`, whose unwinding through the library's frames crashed the process
//! at exit). The `atexit` hook closes the way in and waits, the lock released, for the calls
//! already inside to return, as the interpreter waits for its own threads.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use pyo3::ffi;
use pyo3::prelude::*;

/// Set by an `atexit` hook: the interpreter is shutting down, a thread that ends now leaves
/// its state alone (taking the lock could then end the thread inside Python).
static SHUTTING_DOWN: AtomicBool = AtomicBool::new(false);

/// Library threads inside Python now (see [`enter`]).
static INSIDE: AtomicUsize = AtomicUsize::new(0);

/// A library thread's permission to use Python, held while it does.
pub(crate) struct Entry(());

impl Drop for Entry {
    fn drop(&mut self) {
        INSIDE.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Lets a library thread (not holding the interpreter lock) use Python until the [`Entry`] is
/// dropped; `None` once the interpreter is shutting down: the thread must not touch Python.
pub(crate) fn enter() -> Option<Entry> {
    // Counted first, then the flag: the hook sets the flag first, then waits for the count
    // (both sequentially consistent), so no thread is inside once the hook returns.
    INSIDE.fetch_add(1, Ordering::SeqCst);
    let entry = Entry(());
    (!SHUTTING_DOWN.load(Ordering::SeqCst)).then_some(entry)
}

/// A thread state this thread registered and keeps, the lock released.
struct Kept {
    state: *mut ffi::PyThreadState,
    gil: ffi::PyGILState_STATE,
}

impl Drop for Kept {
    fn drop(&mut self) {
        // SAFETY: reads a flag of the runtime; callable at any time.
        let initialized = unsafe { ffi::Py_IsInitialized() } != 0;
        if SHUTTING_DOWN.load(Ordering::SeqCst) || !initialized {
            return;
        }
        // SAFETY: `state` is this thread's state, saved by `PyEval_SaveThread` in `keep` on
        // this thread, and the lock is not held by this thread (every `Python::attach` on it
        // has returned: this runs as the thread ends). Restoring it and releasing the state
        // taken by `PyGILState_Ensure` in `keep` is the documented pairing; the release
        // deletes the state (its counter drops to zero) and gives the lock back.
        unsafe {
            ffi::PyEval_RestoreThread(self.state);
            ffi::PyGILState_Release(self.gil);
        }
    }
}

thread_local! {
    static KEPT: RefCell<Option<Kept>> = const { RefCell::new(None) };
}

/// Makes this thread keep a Python thread state between kernel calls (once per thread; a
/// thread Python already knows, such as the main thread, is left as it is). Call it without
/// holding the interpreter lock.
pub(crate) fn keep() {
    KEPT.with(|kept| {
        if kept.borrow().is_some() {
            return;
        }
        // SAFETY: reads this thread's registration; callable without the lock.
        if !unsafe { ffi::PyGILState_GetThisThreadState() }.is_null() {
            return;
        }
        // SAFETY: this thread has no Python state and does not hold the lock (the caller's
        // contract): `PyGILState_Ensure` creates its state and takes the lock;
        // `PyEval_SaveThread` releases the lock at once, keeping the state (returned, to be
        // restored in `Kept::drop`).
        let kept_state = unsafe {
            let gil = ffi::PyGILState_Ensure();
            let state = ffi::PyEval_SaveThread();
            Kept { state, gil }
        };
        *kept.borrow_mut() = Some(kept_state);
    });
}

/// The `atexit` hook: from now on library threads stay out of Python, and ending threads
/// leave their states to the interpreter; returns once the calls inside Python have returned
/// (a Python kernel that is still running delays the exit, like a thread of `threading`).
#[pyfunction]
fn _shutting_down(py: Python<'_>) {
    SHUTTING_DOWN.store(true, Ordering::SeqCst);
    py.detach(|| {
        while INSIDE.load(Ordering::SeqCst) > 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
}

/// Registers the `atexit` hook.
pub(crate) fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let hook = wrap_pyfunction!(_shutting_down, m)?;
    m.py().import("atexit")?.call_method1("register", (hook,))?;
    Ok(())
}
