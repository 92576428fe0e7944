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

    /// The return code in words, e.g. "NAA_SUCCESS", "KERNEL_TIMEOUT", "application error
    /// 0x10".
    #[getter]
    fn return_text(&self) -> String {
        naaice::core::ReturnCode::new(self.return_code)
            .map_or_else(|| format!("{:#x}", self.return_code), |c| c.to_string())
    }

    fn __repr__(&self) -> String {
        format!(
            "Status(return_code={:#x}, state={:?}, bytes_received={})",
            self.return_code, self.state, self.bytes_received
        )
    }
}
