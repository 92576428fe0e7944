//! Parameters: Python buffer-protocol objects used in place, without copies.
//!
//! Each object's buffer is exported once, when the handle is created, and held until the
//! handle is finalized: the memory cannot move or be freed while the NAA may write it, and
//! Python refuses to resize the object meanwhile (`BufferError: Existing exports...`). The
//! transport reads and writes the object's own bytes ([`Buffer::from_raw_parts`]).

use naaice::{Buffer, Param};
use pyo3::buffer::PyUntypedBuffer;
use pyo3::prelude::*;

use crate::errors;

/// The held exports of a handle's parameter objects, one per distinct memory block.
pub(crate) struct Held {
    /// The exports (released when dropped, after the handle's connection is gone).
    exports: Vec<PyUntypedBuffer>,
}

impl Held {
    /// Releases the exports now (with the interpreter attached).
    pub(crate) fn release(self, py: Python<'_>) {
        for e in self.exports {
            e.release(py);
        }
    }
}

/// Turns the input and output objects into parameters. An object given as input and output
/// (the same memory) is one in-place parameter.
pub(crate) fn params(
    inputs: &[Bound<'_, PyAny>],
    outputs: &[Bound<'_, PyAny>],
) -> PyResult<(Vec<Param>, Vec<Param>, Held)> {
    let mut held = Held {
        exports: Vec::new(),
    };
    let mut known: Vec<(usize, usize, Param)> = Vec::new();
    let mut convert = |what: &str, i: usize, obj: &Bound<'_, PyAny>| -> PyResult<Param> {
        let export = PyUntypedBuffer::get(obj).map_err(|e| {
            errors::buffer(format!(
                "{what} {i} ({}) does not export a buffer: {e}",
                type_name(obj)
            ))
        })?;
        if export.readonly() {
            return Err(errors::buffer(format!(
                "{what} {i} ({}) is read-only: the NAA writes results into parameters in \
                 place; pass a writable object (bytearray, a writable NumPy array)",
                type_name(obj)
            )));
        }
        if !(export.is_c_contiguous() || export.is_fortran_contiguous()) {
            return Err(errors::buffer(format!(
                "{what} {i} ({}) is not contiguous (a strided view): the NAA reads and writes \
                 one block of memory; pass a contiguous array (numpy.ascontiguousarray makes a \
                 copy you then use as the parameter)",
                type_name(obj)
            )));
        }
        let len = export.len_bytes();
        let addr = export.buf_ptr() as usize;
        let Some(ptr) = std::ptr::NonNull::new(export.buf_ptr().cast::<u8>()) else {
            return Err(errors::buffer(format!(
                "{what} {i} has no memory (NULL buffer)"
            )));
        };
        if len == 0 {
            return Err(errors::invalid(format!(
                "{what} {i} is empty: parameters need at least one byte"
            )));
        }
        if let Some((_, l, p)) = known.iter().find(|(a, _, _)| *a == addr) {
            if *l != len {
                return Err(errors::invalid(format!(
                    "{what} {i} starts where another parameter starts but has another length ({len} and {l} bytes)"
                )));
            }
            return Ok(p.clone());
        }
        if known
            .iter()
            .any(|(a, l, _)| addr < a + l && *a < addr + len)
        {
            return Err(errors::invalid(format!(
                "{what} {i} overlaps another parameter: parameters must be distinct memory \
                 (or the same object, for an in-place parameter)"
            )));
        }
        // SAFETY: `ptr` is the start of the exported buffer, writable and contiguous (checked
        // above) for `len` bytes. The export is kept in `held` until the handle is finalized,
        // after its connection (and with it every registration of this memory) is gone, so the
        // memory stays valid and in place for as long as the buffer may be accessed. Python
        // code may still touch the object during an RPC, as C code may touch its arrays; the
        // documentation (docs/python.md) says not to, as the C API does.
        let buffer = unsafe { Buffer::from_raw_parts(ptr, len) };
        let p = Param::new(buffer);
        known.push((addr, len, p.clone()));
        held.exports.push(export);
        Ok(p)
    };
    let ins = inputs
        .iter()
        .enumerate()
        .map(|(i, o)| convert("input", i, o))
        .collect::<PyResult<Vec<_>>>()?;
    let outs = outputs
        .iter()
        .enumerate()
        .map(|(i, o)| convert("output", i, o))
        .collect::<PyResult<Vec<_>>>()?;
    Ok((ins, outs, held))
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string())
}
