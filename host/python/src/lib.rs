//! The native part of the `naaice` Python package (`naaice._native`), over the Rust API of
//! the `naaice` crate: handles, set waits, asyncio, Python kernels. The Python package
//! (`host/python/python/naaice`) adds the Python-side conveniences and the documentation.

#![deny(unsafe_code)]

mod awaiting;
mod blocking;
mod errors;
mod handle;
mod kernels;
mod logging;
#[allow(unsafe_code)]
mod params;
// A caller's buffer as the pipeline's array while the interpreter lock is released.
#[allow(unsafe_code)]
mod pipeline;
#[allow(unsafe_code)]
mod region;
mod set;
mod stats;
mod status;
// Python thread states kept by the worker threads that run Python kernels.
#[allow(unsafe_code)]
mod thread_state;

use pyo3::prelude::*;

/// Moves the handle's RPC in flight into an awaitable driver (`Naa.call`/`Naa.wait_async`).
#[pyfunction]
fn _wait_async(naa: &Bound<'_, handle::PyNaa>) -> PyResult<awaiting::Await> {
    awaiting::Await::start(naa)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    logging::init(m.py())?;
    thread_state::init(m)?;
    errors::register(m)?;
    m.add_class::<handle::PyNaa>()?;
    m.add_class::<status::Status>()?;
    m.add_class::<awaiting::Await>()?;
    m.add_class::<region::Region>()?;
    m.add_class::<kernels::KernelCall>()?;
    m.add_class::<kernels::Server>()?;
    m.add_class::<pipeline::PyPipeline>()?;
    m.add_function(wrap_pyfunction!(_wait_async, m)?)?;
    m.add_function(wrap_pyfunction!(stats::_process_stats, m)?)?;
    m.add_function(wrap_pyfunction!(set::wait_any, m)?)?;
    m.add_function(wrap_pyfunction!(set::test_any, m)?)?;
    m.add_function(wrap_pyfunction!(set::wait_all, m)?)?;
    m.add_function(wrap_pyfunction!(kernels::register_local_kernel, m)?)?;
    m.add_function(wrap_pyfunction!(kernels::remove_local_kernel, m)?)?;
    for (name, code) in status::RETURN_CODES {
        m.add(name, code)?;
    }
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
