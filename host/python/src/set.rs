//! `naaice.wait_any` / `naaice.wait_all`: many handles progressed together in one thread
//! ([`naaice::client::naa_set`]), with the interpreter lock released while waiting; Ctrl-C
//! interrupts the waits ([`crate::blocking`]).

use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::prelude::*;

use crate::blocking;
use crate::errors;
use crate::handle::{PyNaa, Slot, Taken, lock};
use crate::status::Status;

/// Locks every handle's slot (without waiting) and runs `f` over their `Naa`s.
fn with_handles<R>(
    slots: &[Arc<Mutex<Slot>>],
    f: impl FnOnce(Vec<&mut naaice::Naa>) -> R,
) -> PyResult<R> {
    let mut guards: Vec<MutexGuard<'_, Slot>> = Vec::with_capacity(slots.len());
    for s in slots {
        guards.push(lock(s)?);
    }
    let mut naas = Vec::with_capacity(guards.len());
    for g in &mut guards {
        naas.push(g.naa()?);
    }
    Ok(f(naas))
}

fn slots(handles: &[Bound<'_, PyNaa>]) -> PyResult<Vec<Arc<Mutex<Slot>>>> {
    let slots: Vec<_> = handles.iter().map(|h| h.get().slot.clone()).collect();
    for (i, s) in slots.iter().enumerate() {
        if slots[..i].iter().any(|t| Arc::ptr_eq(s, t)) {
            return Err(errors::invalid(format!("handle {i} is given twice")));
        }
    }
    Ok(slots)
}

/// An error for handle `index`, with the index as its `index` attribute.
fn indexed(py: Python<'_>, index: usize, e: naaice::Error) -> PyErr {
    let err = errors::to_py(e);
    // Setting an attribute on a fresh exception instance cannot fail.
    let _ = err.value(py).setattr("index", index);
    err
}

/// Blocks until one in-flight handle's RPC finishes: `(index, Status)`; `None` if no handle
/// has an RPC in flight. A failed RPC raises its error with `.index` set.
#[pyfunction]
pub(crate) fn wait_any(
    py: Python<'_>,
    handles: Vec<Bound<'_, PyNaa>>,
) -> PyResult<Option<(usize, Status)>> {
    let slots = slots(&handles)?;
    let mut taken = take_all(&slots)?;
    let mut naas: Vec<&mut naaice::Naa> = taken.iter_mut().map(Taken::naa).collect();
    let done = blocking::wait_any(py, &mut naas)?;
    finished(
        py,
        done.map(|(index, result)| naaice::client::naa_set::Finished { index, result }),
    )
}

/// Takes every handle out of its slot (see [`Taken`]); they go back when the result is
/// dropped.
fn take_all(slots: &[Arc<Mutex<Slot>>]) -> PyResult<Vec<Taken<'_>>> {
    slots.iter().map(|s| Taken::take(s)).collect()
}

/// The `(index, Status)` of a finished handle, or its error with `.index` set.
fn finished(
    py: Python<'_>,
    done: Option<naaice::client::naa_set::Finished>,
) -> PyResult<Option<(usize, Status)>> {
    match done {
        None => Ok(None),
        Some(f) => match f.result {
            Ok(s) => Ok(Some((f.index, Status::from(s)))),
            Err(e) => Err(indexed(py, f.index, e)),
        },
    }
}

/// Progresses every in-flight handle without blocking: `(index, Status)` of the first that
/// finished, `None` if none did (or none is in flight). A failed RPC raises with `.index`.
#[pyfunction]
pub(crate) fn test_any(
    py: Python<'_>,
    handles: Vec<Bound<'_, PyNaa>>,
) -> PyResult<Option<(usize, Status)>> {
    let slots = slots(&handles)?;
    let done = with_handles(&slots, |n| naaice::client::naa_set::test_any(n))?;
    match done {
        std::task::Poll::Pending => Ok(None),
        std::task::Poll::Ready(f) => finished(py, f),
    }
}

/// Blocks until no handle has an RPC in flight: one entry per handle, a `Status`, the
/// exception of a failed RPC (returned, not raised), or `None` for a handle that had none.
#[pyfunction]
pub(crate) fn wait_all(py: Python<'_>, handles: Vec<Bound<'_, PyNaa>>) -> PyResult<Vec<Py<PyAny>>> {
    let slots = slots(&handles)?;
    let mut taken = take_all(&slots)?;
    let mut naas: Vec<&mut naaice::Naa> = taken.iter_mut().map(Taken::naa).collect();
    let all = blocking::wait_all(py, &mut naas)?;
    drop(naas);
    drop(taken);
    all.into_iter()
        .enumerate()
        .map(|(i, r)| -> PyResult<Py<PyAny>> {
            Ok(match r {
                None => py.None(),
                Some(Ok(s)) => Py::new(py, Status::from(s))?.into_any(),
                Some(Err(e)) => indexed(py, i, e).into_value(py).into_any(),
            })
        })
        .collect()
}
