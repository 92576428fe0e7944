//! The exception hierarchy: one class per kind of [`naaice::Error`].
//!
//! ```text
//! NaaError
//! ├── TransportError ── TransportUnavailableError (no NAA reached within the connect timeout)
//! │                      └── SelectionError (NAA_SPEC and the other variables, rank selection:
//! │                                          names every entry tried)
//! ├── ProtocolError ─── MrspError (.code: the NAA's MRSP error code)
//! ├── NaaTimeoutError (also a builtins.TimeoutError)
//! ├── BusyError, StateError, ClosedError, CancelledError
//! ├── InvalidArgumentError (also a ValueError)
//! └── BufferError (also a builtins.BufferError): read-only, non-contiguous, or holding
//!     references (object dtypes) parameters
//! ```

use naaice::core::machine;
use naaice::transport::TransportError as Transport;
use pyo3::exceptions::{PyBufferError, PyException, PyTimeoutError, PyValueError};
use pyo3::prelude::*;
use pyo3::{PyErr, create_exception};

create_exception!(
    naaice,
    NaaError,
    PyException,
    "Base class of every naaice error."
);
create_exception!(
    naaice,
    TransportError,
    NaaError,
    "The transport failed (connect, register, post, wait)."
);
create_exception!(
    naaice,
    TransportUnavailableError,
    TransportError,
    "No NAA was reached within the connect timeout (nothing listens, no RDMA device), whether it was named by address or by NAA_SPEC."
);
create_exception!(
    naaice,
    ProtocolError,
    NaaError,
    "The NAAICE protocol failed: the peer misbehaved or a work request failed."
);
create_exception!(
    naaice,
    MrspError,
    ProtocolError,
    "The NAA refused the memory regions (MRSP); `code` holds its error code."
);
create_exception!(
    naaice,
    SelectionError,
    TransportUnavailableError,
    "NAA selection or configuration failed: NAA_SPEC or another variable missing or malformed, no entry matched, or none reached within the connect timeout (a TransportUnavailableError, as when an address= is not reached)."
);
create_exception!(
    naaice,
    BusyError,
    NaaError,
    "An RPC (or an await) is in flight on this handle."
);
create_exception!(
    naaice,
    StateError,
    NaaError,
    "The call is not valid in the handle's current state."
);
create_exception!(
    naaice,
    ClosedError,
    NaaError,
    "The connection is closed, or the handle was finalized."
);
create_exception!(
    naaice,
    CancelledError,
    NaaError,
    "The RPC was cancelled; the next invoke reconnects."
);

/// The classes that also derive from a built-in exception are made in Python (`create_exception!`
/// takes one base): `naaice/_errors.py`. These are set at module init.
pub(crate) struct Extra {
    /// `NaaTimeoutError(NaaError, TimeoutError)`.
    pub(crate) timeout: Py<PyAny>,
    /// `InvalidArgumentError(NaaError, ValueError)`.
    pub(crate) invalid: Py<PyAny>,
    /// `BufferError(NaaError, builtins.BufferError)`.
    pub(crate) buffer: Py<PyAny>,
}

static EXTRA: std::sync::OnceLock<Extra> = std::sync::OnceLock::new();

/// Creates the classes with two bases and adds every class to `m`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let naa = py.get_type::<NaaError>();
    let two_bases =
        |name: &str, other: Bound<'_, pyo3::types::PyType>, doc: &str| -> PyResult<Py<PyAny>> {
            let builtins = py.import("builtins")?;
            let bases = (naa.clone(), other);
            let dict = pyo3::types::PyDict::new(py);
            dict.set_item("__doc__", doc)?;
            dict.set_item("__module__", "naaice")?;
            Ok(builtins
                .getattr("type")?
                .call1((name, bases, dict))?
                .unbind())
        };
    let extra = Extra {
        timeout: two_bases(
            "NaaTimeoutError",
            py.get_type::<PyTimeoutError>(),
            "A deadline passed (connect, MRSP or RPC).",
        )?,
        invalid: two_bases(
            "InvalidArgumentError",
            py.get_type::<PyValueError>(),
            "An argument is invalid (function code, user bytes, parameter index).",
        )?,
        buffer: two_bases(
            "BufferError",
            py.get_type::<PyBufferError>(),
            "A parameter is not a writable, contiguous buffer of plain data (no object references), or cannot be held.",
        )?,
    };
    m.add("NaaTimeoutError", extra.timeout.bind(py))?;
    m.add("InvalidArgumentError", extra.invalid.bind(py))?;
    m.add("BufferError", extra.buffer.bind(py))?;
    let _ = EXTRA.set(extra);
    m.add("NaaError", naa)?;
    m.add("TransportError", py.get_type::<TransportError>())?;
    m.add(
        "TransportUnavailableError",
        py.get_type::<TransportUnavailableError>(),
    )?;
    m.add("ProtocolError", py.get_type::<ProtocolError>())?;
    m.add("MrspError", py.get_type::<MrspError>())?;
    m.add("SelectionError", py.get_type::<SelectionError>())?;
    m.add("BusyError", py.get_type::<BusyError>())?;
    m.add("StateError", py.get_type::<StateError>())?;
    m.add("ClosedError", py.get_type::<ClosedError>())?;
    m.add("CancelledError", py.get_type::<CancelledError>())?;
    Ok(())
}

/// An instance of one of the two-base classes with `message`.
fn extra(pick: impl FnOnce(&Extra) -> &Py<PyAny>, message: String) -> PyErr {
    Python::attach(|py| match EXTRA.get() {
        Some(e) => match pick(e).bind(py).call1((message.clone(),)) {
            Ok(v) => PyErr::from_value(v),
            Err(err) => err,
        },
        None => NaaError::new_err(message),
    })
}

/// `InvalidArgumentError(message)`.
pub(crate) fn invalid(message: impl Into<String>) -> PyErr {
    extra(|e| &e.invalid, message.into())
}

/// `naaice.BufferError(message)`.
pub(crate) fn buffer(message: impl Into<String>) -> PyErr {
    extra(|e| &e.buffer, message.into())
}

/// `TransportUnavailableError(message)`.
pub(crate) fn unavailable(message: impl Into<String>) -> PyErr {
    TransportUnavailableError::new_err(message.into())
}

/// `NaaTimeoutError(message)`.
pub(crate) fn timeout(message: impl Into<String>) -> PyErr {
    extra(|e| &e.timeout, message.into())
}

/// The Python exception for a library error.
pub(crate) fn to_py(e: naaice::Error) -> PyErr {
    let message = e.to_string();
    match e {
        naaice::Error::Transport(Transport::Unavailable(_) | Transport::NotReached(_)) => {
            TransportUnavailableError::new_err(message)
        }
        naaice::Error::Transport(Transport::TimedOut) | naaice::Error::Timeout(_) => {
            timeout(message)
        }
        naaice::Error::Protocol(machine::Error::Timeout { .. })
        | naaice::Error::RpcTimeout { .. } => timeout(message),
        naaice::Error::Transport(_) => TransportError::new_err(message),
        naaice::Error::Protocol(machine::Error::MrspRejected(code)) => {
            let err = MrspError::new_err(message);
            Python::attach(|py| {
                // The code as an attribute; setting it on a fresh exception cannot fail.
                let _ = err.value(py).setattr("code", code as u8);
            });
            err
        }
        naaice::Error::Protocol(_) => ProtocolError::new_err(message),
        naaice::Error::Spec(_) => SelectionError::new_err(message),
        naaice::Error::Busy => BusyError::new_err(message),
        naaice::Error::State(_) => StateError::new_err(message),
        naaice::Error::InvalidArgument(_) => invalid(message),
        naaice::Error::Closed => ClosedError::new_err(message),
        naaice::Error::Cancelled => CancelledError::new_err(message),
        _ => NaaError::new_err(message),
    }
}
