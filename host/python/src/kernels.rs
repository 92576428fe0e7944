//! Kernels written in Python, for local mode and for software NAAs started from Python.

use naaice::core::{FunctionCode, ReturnCode};
use naaice::swnaa::{
    KERNEL_FAILED, Kernel, KernelContext, KernelRegistry, KernelSwitch, SoftNaa, SoftNaaConfig,
    SoftNaaHandle,
};
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::errors;
use crate::region::Region;

/// What a Python kernel is called with besides its regions.
#[pyclass(module = "naaice._native", name = "KernelCall", frozen, get_all)]
#[derive(Debug, Clone)]
pub(crate) struct KernelCall {
    /// Function code of the RPC (1-127).
    fn_code: u8,
    /// The three user bytes of the client's immediate.
    user_bytes: [u8; 3],
    /// 1-based RPC number on this connection.
    rpc: u32,
}

#[pymethods]
impl KernelCall {
    fn __repr__(&self) -> String {
        format!(
            "KernelCall(fn_code={}, user_bytes={:?}, rpc={})",
            self.fn_code, self.user_bytes, self.rpc
        )
    }
}

/// A Python callable `f(regions: list[Region], call: KernelCall) -> int | None` as a kernel
/// (the `naaice` package wraps the user's function, which gets NumPy arrays).
struct PyKernel {
    func: Py<PyAny>,
    /// For messages.
    name: String,
}

impl PyKernel {
    fn new(func: Py<PyAny>, py: Python<'_>) -> Self {
        let name = func
            .bind(py)
            .getattr("__qualname__")
            .map_or_else(|_| "kernel".to_owned(), |n| n.to_string());
        Self { func, name }
    }
}

impl Kernel for PyKernel {
    fn run(&self, ctx: &mut KernelContext<'_, '_>) -> ReturnCode {
        let call = KernelCall {
            fn_code: ctx.fncode(),
            user_bytes: ctx.user_bytes(),
            rpc: ctx.rpc(),
        };
        let views: Vec<Region> = ctx
            .regions()
            .iter_mut()
            .filter(|r| !r.is_internal())
            .map(|r| Region::new(&mut r.data, r.flags.bits()))
            .collect();
        // The interpreter is exiting: nobody waits for this RPC's answer any more.
        let Some(_inside) = crate::thread_state::enter() else {
            return KERNEL_FAILED;
        };
        crate::thread_state::keep();
        Python::attach(|py| {
            let result = (|| -> PyResult<ReturnCode> {
                let regions = views
                    .into_iter()
                    .map(|v| Py::new(py, v))
                    .collect::<PyResult<Vec<_>>>()?;
                let list = PyList::new(py, &regions)?;
                let out = self.func.call1(py, (list, call));
                let left: usize = regions.iter().map(|r| r.get().close()).sum();
                let out = out?;
                if left > 0 {
                    return Err(pyo3::exceptions::PyRuntimeError::new_err(format!(
                        "the kernel kept {left} array(s) of its regions after returning; \
                         copy what it needs later (array.copy())"
                    )));
                }
                if out.is_none(py) {
                    return Ok(ReturnCode::SUCCESS);
                }
                let code: u32 = out.extract(py).map_err(|_| {
                    pyo3::exceptions::PyTypeError::new_err(
                        "a kernel returns None (success) or an int return code in 0..2**24",
                    )
                })?;
                Ok(ReturnCode::new(code).unwrap_or(KERNEL_FAILED))
            })();
            match result {
                Ok(code) => code,
                Err(e) => {
                    eprintln!(
                        "naaice: Python kernel {} failed (RPC answered KERNEL_FAILED):",
                        self.name
                    );
                    e.print(py);
                    KERNEL_FAILED
                }
            }
        })
    }
}

/// `code` as a function code (1-127).
fn function_code(code: u32) -> PyResult<FunctionCode> {
    u8::try_from(code)
        .ok()
        .and_then(FunctionCode::new)
        .ok_or_else(|| errors::invalid(format!("function code {code} is not in 1..=127")))
}

/// Registers (or replaces) the local-mode kernel for `fn_code` (handles created afterwards
/// use it). `func(regions, call)` as described at [`PyKernel`].
#[pyfunction]
pub(crate) fn register_local_kernel(py: Python<'_>, fn_code: u32, func: Py<PyAny>) -> PyResult<()> {
    let code = function_code(fn_code)?;
    naaice::swnaa::local::register_kernel(code, PyKernel::new(func, py));
    Ok(())
}

/// Removes the local-mode kernel for `fn_code` (built-ins too); true if there was one.
#[pyfunction]
pub(crate) fn remove_local_kernel(fn_code: u32) -> PyResult<bool> {
    Ok(naaice::swnaa::local::remove_kernel(function_code(fn_code)?).is_some())
}

/// A kernel as the Python side hands it over: function code, `func(regions, call)`, and
/// optionally its name and its own timeout in seconds.
type KernelEntry = (u32, Py<PyAny>, Option<String>, Option<f64>);

/// A registry of the built-ins (unless `builtins` is false) and `kernels`.
fn registry(py: Python<'_>, kernels: Vec<KernelEntry>, builtins: bool) -> PyResult<KernelRegistry> {
    let mut registry = if builtins {
        KernelRegistry::builtin()
    } else {
        KernelRegistry::empty()
    };
    for (code, func, name, timeout) in kernels {
        let code = function_code(code)?;
        let kernel = PyKernel::new(func, py);
        let name = name.unwrap_or_else(|| kernel.name.clone());
        registry.register_named(code, &name, kernel);
        let timeout = timeout
            .map(|t| match std::time::Duration::try_from_secs_f64(t) {
                Ok(d) if !d.is_zero() => Ok(d),
                _ => Err(errors::invalid(format!(
                    "the timeout of kernel {} must be more than 0 seconds, got {t}",
                    code.get()
                ))),
            })
            .transpose()?;
        registry.set_timeout(code, timeout);
    }
    Ok(registry)
}

/// A software NAA serving on background threads, with kernels written in Python.
#[pyclass(module = "naaice._native", name = "_Server", frozen)]
pub(crate) struct Server {
    handle: std::sync::Mutex<Option<SoftNaaHandle>>,
    kernels: KernelSwitch,
    address: String,
    port: u16,
    metrics_address: Option<String>,
}

#[pymethods]
impl Server {
    /// Starts serving on `host:port` (port 0: a free one) with `kernels` (function code to
    /// `func(regions, call)`), plus the built-ins (1 adds 1, 2 adds 2, 3 does nothing) unless
    /// `builtins` is false. `max_bytes_per_connection` bounds the memory one client may
    /// register (more is refused in the MRSP). `metrics` (`host:port`) serves the NAA's
    /// Prometheus metrics there. The transport is chosen by NAAICE_TRANSPORT.
    #[new]
    #[pyo3(signature = (host, port, kernels, builtins, kernel_timeout=None, max_connections=None,
        max_bytes_per_connection=None, metrics=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        host: &str,
        port: u16,
        kernels: Vec<KernelEntry>,
        builtins: bool,
        kernel_timeout: Option<f64>,
        max_connections: Option<usize>,
        max_bytes_per_connection: Option<u64>,
        metrics: Option<&str>,
    ) -> PyResult<Self> {
        let registry = registry(py, kernels, builtins)?;
        let mut config = SoftNaaConfig::default();
        if let Some(t) = kernel_timeout {
            config.kernel_timeout = std::time::Duration::try_from_secs_f64(t)
                .map_err(|_| errors::invalid(format!("kernel_timeout must be >= 0, got {t}")))?;
        }
        if let Some(n) = max_connections {
            config.max_connections = n;
        }
        if let Some(n) = max_bytes_per_connection {
            config.max_bytes_per_connection = n;
        }
        if let Some(m) = metrics {
            let addr = std::net::ToSocketAddrs::to_socket_addrs(m)
                .map_err(|e| errors::invalid(format!("metrics {m:?}: {e}")))?
                .next()
                .ok_or_else(|| errors::invalid(format!("metrics {m:?} resolves to nothing")))?;
            config.metrics = Some(addr);
        }
        let addr = std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
            .map_err(|e| errors::invalid(format!("host {host:?}: {e}")))?
            .next()
            .ok_or_else(|| errors::invalid(format!("host {host:?} resolves to nothing")))?;
        let (handle, switch) = py
            .detach(|| -> naaice::Result<(SoftNaaHandle, KernelSwitch)> {
                let transport = naaice::discovery::environment::transport_from_env()?;
                config.wait = naaice::discovery::environment::wait_policy_from_env()?;
                let naa = SoftNaa::bind(transport, addr, config, registry)?;
                let switch = naa.kernel_switch();
                Ok((naa.spawn()?, switch))
            })
            .map_err(errors::to_py)?;
        let local = handle.local_addr();
        let metrics_address = handle.metrics_addr().map(|a| a.to_string());
        Ok(Self {
            handle: std::sync::Mutex::new(Some(handle)),
            kernels: switch,
            address: local.to_string(),
            port: local.port(),
            metrics_address,
        })
    }

    /// `host:port` the server listens on.
    #[getter]
    fn address(&self) -> &str {
        &self.address
    }

    /// The port it listens on.
    #[getter]
    fn port(&self) -> u16 {
        self.port
    }

    /// `host:port` of the metrics endpoint, or None without one.
    #[getter]
    fn metrics_address(&self) -> Option<&str> {
        self.metrics_address.as_deref()
    }

    /// Serves `kernels` (and the built-ins unless `builtins` is false) instead of the
    /// kernels served now, from each connection's next call (an RPC running finishes on its
    /// kernel).
    fn set_kernels(
        &self,
        py: Python<'_>,
        kernels: Vec<KernelEntry>,
        builtins: bool,
    ) -> PyResult<()> {
        let registry = registry(py, kernels, builtins)?;
        let old = self.kernels.replace(registry);
        // Dropping Python kernels takes the interpreter lock, which this thread holds.
        drop(old);
        Ok(())
    }

    /// The function codes served with their kernels' names.
    #[getter]
    fn kernels(&self) -> Vec<(u8, String)> {
        self.kernels
            .current()
            .served()
            .map(|(code, name)| (code, name.to_owned()))
            .collect()
    }

    /// True until `stop`.
    #[getter]
    fn running(&self) -> bool {
        self.handle.lock().is_ok_and(|h| h.is_some())
    }

    /// Stops serving: disconnects the clients and joins the threads (a kernel still running
    /// is waited for). Calling it again does nothing.
    fn stop(&self, py: Python<'_>) {
        let h = self.handle.lock().ok().and_then(|mut h| h.take());
        if let Some(h) = h {
            py.detach(move || h.shutdown());
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(h) = self.handle.get_mut().ok().and_then(Option::take) {
            Python::attach(|py| py.detach(move || h.shutdown()));
        }
    }
}
