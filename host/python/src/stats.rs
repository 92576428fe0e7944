//! A handle's (or the process's) client statistics as a dict, which the Python package turns
//! into its `naaice.Stats` dataclass.

use std::time::Duration;

use naaice::client::stats::Stats;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The fields of `naaice.Stats`: counts as ints, times in seconds (floats; `None` for the
/// latencies before the first RPC), errors as a dict by kind.
pub(crate) fn to_dict<'py>(py: Python<'py>, s: &Stats) -> PyResult<Bound<'py, PyDict>> {
    let secs = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
    let d = PyDict::new(py);
    d.set_item("handles", s.handles)?;
    d.set_item("connections", s.connections)?;
    d.set_item("rpcs", s.rpcs)?;
    let errors = PyDict::new(py);
    errors.set_item("naa", s.errors.naa)?;
    errors.set_item("timeout", s.errors.timeout)?;
    errors.set_item("transport", s.errors.transport)?;
    errors.set_item("protocol", s.errors.protocol)?;
    errors.set_item("other", s.errors.other)?;
    d.set_item("errors", errors)?;
    d.set_item("bytes_sent", s.bytes_sent)?;
    d.set_item("bytes_received", s.bytes_received)?;
    d.set_item("connect_time", s.connect_time.as_secs_f64())?;
    d.set_item("mrsp_time", s.mrsp_time.as_secs_f64())?;
    d.set_item("latency_p50", secs(s.latency(0.5)))?;
    d.set_item("latency_p90", secs(s.latency(0.9)))?;
    d.set_item("latency_p99", secs(s.latency(0.99)))?;
    d.set_item("latency_max", secs(s.latency_max()))?;
    d.set_item("latency_mean", secs(s.latency_mean()))?;
    Ok(d)
}

/// `naaice.process_stats()`'s data: the process's handles that ended (finalized or dropped).
#[pyfunction]
pub(crate) fn _process_stats(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    to_dict(py, &naaice::client::stats::process())
}
