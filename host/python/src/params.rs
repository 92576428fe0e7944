//! Parameters: Python buffer-protocol objects used in place, without copies.
//!
//! Each object's buffer is exported once, when the handle is created, and held until the
//! handle is finalized: the memory cannot move or be freed while the NAA may write it, and
//! Python refuses to resize the object meanwhile (`BufferError: Existing exports...`). The
//! transport reads and writes the object's own bytes ([`Buffer::from_raw_parts`]).
//!
//! Only plain data is accepted: a buffer whose format (PEP 3118, the `struct` module's syntax)
//! holds object references (NumPy's `object` dtype, `O`, also inside a structured dtype) or
//! pointers (`&`), or a code this check does not know, is refused ([`plain_data`]): the NAA
//! would overwrite the references and crash the interpreter.

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
        let format = export.format().to_string_lossy();
        if let Err(why) = plain_data(&format) {
            return Err(errors::buffer(format!(
                "{what} {i} ({}) is not plain data: its buffer format {format:?} {why}; the NAA \
                 overwrites parameters with raw bytes, which only plain numbers, booleans, \
                 characters and padding survive (use a numeric, bool, complex, bytes or \
                 structured dtype without objects)",
                type_name(obj)
            )));
        }
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

/// Checks that a buffer format string (PEP 3118, the `struct` module's syntax with its
/// extensions: `T{...}` structures, `:name:` field names, `(2,3)` sub-arrays, `Zd` complex
/// numbers, `w` UCS-4 characters) describes plain data only: numbers, booleans, characters,
/// bytes and padding. Object references (`O`), pointers (`&`) and any code not listed here
/// are refused, with what was found.
pub(crate) fn plain_data(format: &str) -> Result<(), String> {
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            // Byte order, repeat counts, spaces, sub-array shapes, structure braces.
            '@' | '=' | '<' | '>' | '!' | '^' | ' ' | '(' | ')' | ',' | '}' => {}
            '0'..='9' => {}
            'T' => {
                if chars.next() != Some('{') {
                    return Err("has a T not followed by {".to_owned());
                }
            }
            // A field name: `:name:`.
            ':' => {
                if !chars.by_ref().any(|n| n == ':') {
                    return Err("has an unterminated field name".to_owned());
                }
            }
            'Z' => match chars.next() {
                Some('e' | 'f' | 'd' | 'g') => {}
                other => {
                    return Err(format!(
                        "has an unknown complex code Z{}",
                        other.map_or_else(String::new, String::from)
                    ));
                }
            },
            // Padding, characters and bytes, bool, integers, floats, UCS-2/UCS-4, void*.
            'x' | 'c' | 's' | 'p' | '?' | 'b' | 'B' | 'h' | 'H' | 'i' | 'I' | 'l' | 'L' | 'q'
            | 'Q' | 'n' | 'N' | 'e' | 'f' | 'd' | 'g' | 'u' | 'w' | 'P' => {}
            'O' => return Err("holds Python object references (O)".to_owned()),
            '&' => return Err("holds pointers (&)".to_owned()),
            other => {
                return Err(format!(
                    "has the code {other:?}, which is not known plain data"
                ));
            }
        }
    }
    Ok(())
}
