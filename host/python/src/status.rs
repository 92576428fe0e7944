//! `naaice.Status`: the outcome of an RPC.

use pyo3::prelude::*;

/// The outcome of an RPC (`naa_status`).
#[pyclass(module = "naaice._native", name = "Status", frozen, eq)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Status {
    /// The NAA's 24-bit return code: 0 success, 1 no kernel for the function code
    /// (SOCKET_UNAVAIL), 2 kernel timeout, 3 kernel failed, 0x10 and up the kernel's own.
    #[pyo3(get)]
    return_code: u32,
    /// The connection's phase after the RPC, e.g. "FINISHED".
    #[pyo3(get)]
    state: String,
    /// Length of the NAA's final write.
    #[pyo3(get)]
    bytes_received: u64,
}

impl From<naaice::Status> for Status {
    fn from(s: naaice::Status) -> Self {
        Self {
            return_code: s.naa_error.get(),
            state: s.state.to_string(),
            bytes_received: s.bytes_received,
        }
    }
}

#[pymethods]
impl Status {
    /// True if the return code is 0 (success).
    #[getter]
    fn ok(&self) -> bool {
        self.return_code == 0
    }

    /// The return code in words, e.g. "NAA_SUCCESS", "KERNEL_TIMEOUT", "KERNEL_FAILED",
    /// "application error 0x10".
    #[getter]
    fn return_text(&self) -> String {
        return_text(self.return_code)
    }

    fn __repr__(&self) -> String {
        format!(
            "Status(return_code={:#x}, state={:?}, bytes_received={})",
            self.return_code, self.state, self.bytes_received
        )
    }
}

/// A return code in words: the names the C, Fortran and Rust APIs give the NAA's codes
/// (`KERNEL_FAILED`, 3, is a naaice-rs assignment in the reserved range).
pub(crate) fn return_text(code: u32) -> String {
    match naaice::core::ReturnCode::new(code) {
        Some(c) if c == naaice::core::ReturnCode::KERNEL_FAILED => {
            "KERNEL_FAILED (the kernel failed)".to_owned()
        }
        Some(c) => c.to_string(),
        None => format!("{code:#x}"),
    }
}

/// The named return codes, as module constants (`naaice.KERNEL_FAILED` ...), the values of
/// `naa_error` in C and Fortran.
pub(crate) const RETURN_CODES: [(&str, u32); 4] = [
    ("NAA_SUCCESS", 0),
    ("SOCKET_UNAVAIL", 1),
    ("KERNEL_TIMEOUT", 2),
    ("KERNEL_FAILED", 3),
];
