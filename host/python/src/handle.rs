//! `naaice.Naa`: a handle of the middleware API (create / invoke / test / wait / finalize).

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::Duration;

use naaice::client::naa::Call;
use naaice::discovery::environment::Rank;
use naaice::{Naa, NaaOptions};
use pyo3::prelude::*;

use crate::blocking;
use crate::errors::{self, BusyError, ClosedError};
use crate::params::{self, Held};
use crate::status::Status;

/// What a handle holds: the connection and the parameter exports.
pub(crate) struct Slot {
    /// The handle; `None` while a blocking wait ([`Taken`]) or an await ([`crate::awaiting`])
    /// holds it, or after finalize.
    pub(crate) naa: Option<Naa>,
    /// True once finalized.
    pub(crate) finalized: bool,
}

/// A connection to an NAA prepared for one function (`naa_handle`).
#[pyclass(module = "naaice._native", name = "Naa", subclass, frozen)]
pub(crate) struct PyNaa {
    pub(crate) slot: Arc<Mutex<Slot>>,
    /// The parameter exports; released at finalize, after the connection is gone.
    held: Mutex<Option<Held>>,
    fn_code: u32,
    /// Address of each input's, then each output's first byte.
    addresses: Vec<usize>,
}

/// `obj` as a list of objects (a single buffer object is a list of one).
fn objects<'py>(obj: Option<&Bound<'py, PyAny>>) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let Some(obj) = obj else {
        return Ok(Vec::new());
    };
    if obj.is_instance_of::<pyo3::types::PyList>() || obj.is_instance_of::<pyo3::types::PyTuple>() {
        obj.try_iter()?.collect()
    } else {
        Ok(vec![obj.clone()])
    }
}

fn seconds(what: &str, s: Option<f64>) -> PyResult<Option<Duration>> {
    s.map(|s| {
        Duration::try_from_secs_f64(s).map_err(|_| {
            errors::invalid(format!(
                "{what} must be a non-negative number of seconds, got {s}"
            ))
        })
    })
    .transpose()
}

/// What a handle or a pipeline connects with: the options of the environment, the NAA at
/// `address` (`host:port`) or local mode's in-process one (`local`), and the transport of
/// `NAAICE_TRANSPORT`.
pub(crate) fn connect_options(
    py: Python<'_>,
    address: Option<&str>,
    local: bool,
) -> PyResult<(NaaOptions, naaice::transport::AnyTransport)> {
    if local && address.is_some() {
        return Err(errors::invalid("give address or local, not both"));
    }
    let mut options = NaaOptions::from_env().map_err(|e| errors::to_py(naaice::Error::Spec(e)))?;
    if let Some(a) = address {
        options.remote = Some(socket_addr(a)?);
    }
    if local {
        options.remote = Some(
            py.detach(naaice::swnaa::local::address)
                .map_err(errors::to_py)?,
        );
    }
    let transport = naaice::discovery::environment::transport_from_env()
        .map_err(|e| errors::to_py(naaice::Error::from(e)))?;
    Ok((options, transport))
}

fn socket_addr(address: &str) -> PyResult<SocketAddr> {
    address
        .to_socket_addrs()
        .map_err(|e| errors::invalid(format!("address {address:?}: {e} (expected HOST:PORT)")))?
        .next()
        .ok_or_else(|| errors::invalid(format!("address {address:?} resolves to nothing")))
}

/// The user bytes argument: `None`, 3 bytes, or an int below 2**24 (`user[0]` its high byte).
fn user_bytes(obj: Option<&Bound<'_, PyAny>>) -> PyResult<[u8; 3]> {
    let Some(obj) = obj else {
        return Ok([0; 3]);
    };
    if let Ok(n) = obj.extract::<u32>()
        && n <= 0xFF_FFFF
    {
        let [_, a, b, c] = n.to_be_bytes();
        return Ok([a, b, c]);
    }
    if let Ok(b) = obj.extract::<Vec<u8>>()
        && let Ok(bytes) = <[u8; 3]>::try_from(b.as_slice())
        && !obj.is_instance_of::<pyo3::types::PyString>()
    {
        return Ok(bytes);
    }
    Err(errors::invalid(format!(
        "user_bytes must be 3 bytes or an int in 0..2**24, got {}",
        obj.repr()
            .map_or_else(|_| "?".to_owned(), |r| r.to_string())
    )))
}

impl PyNaa {
    /// Locks the slot without waiting: another thread (or an await) using the handle is a
    /// [`BusyError`], never a deadlock with the interpreter lock.
    pub(crate) fn lock(&self) -> PyResult<MutexGuard<'_, Slot>> {
        lock(&self.slot)
    }
}

/// Locks a slot without waiting (see [`PyNaa::lock`]).
pub(crate) fn lock(slot: &Mutex<Slot>) -> PyResult<MutexGuard<'_, Slot>> {
    match slot.try_lock() {
        Ok(g) => Ok(g),
        Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
        Err(TryLockError::WouldBlock) => Err(BusyError::new_err(
            "the handle is in use by another thread (waiting on it)",
        )),
    }
}

impl Slot {
    /// The handle, or why there is none.
    pub(crate) fn naa(&mut self) -> PyResult<&mut Naa> {
        match &mut self.naa {
            Some(n) => Ok(n),
            None if self.finalized => Err(ClosedError::new_err("the handle was finalized")),
            None => Err(BusyError::new_err(
                "the handle is in use: a wait (in another thread) or an await of its RPC is in \
                 progress",
            )),
        }
    }
}

/// A handle's `Naa` taken out of its slot for a blocking call that releases the interpreter
/// lock between slices ([`crate::blocking`]): other threads get [`BusyError`] meanwhile. It
/// goes back into the slot when this is dropped, whatever happened.
pub(crate) struct Taken<'a> {
    slot: &'a Mutex<Slot>,
    naa: Option<Naa>,
}

impl<'a> Taken<'a> {
    /// Takes the handle out of `slot` (without waiting for the slot's lock).
    pub(crate) fn take(slot: &'a Mutex<Slot>) -> PyResult<Self> {
        let mut g = lock(slot)?;
        g.naa()?;
        let naa = g.naa.take();
        Ok(Self { slot, naa })
    }

    /// The handle.
    pub(crate) fn naa(&mut self) -> &mut Naa {
        self.naa
            .as_mut()
            .expect("a Taken holds its handle until dropped")
    }
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        // Nobody else holds the slot's lock for long (try_lock users only), so this waits
        // briefly at most.
        let mut g = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        g.naa = self.naa.take();
    }
}

#[pymethods]
impl PyNaa {
    /// Connects to an NAA for `fn_code` and registers the parameters (`naa_create`).
    #[new]
    #[pyo3(signature = (fn_code, inputs, outputs=None, *, address=None, local=false, rank=None,
        connect_timeout=None, rpc_timeout=None, mrsp_timeout=None, single_send=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        fn_code: u32,
        inputs: Option<&Bound<'_, PyAny>>,
        outputs: Option<&Bound<'_, PyAny>>,
        address: Option<&str>,
        local: bool,
        rank: Option<u32>,
        connect_timeout: Option<f64>,
        rpc_timeout: Option<f64>,
        mrsp_timeout: Option<f64>,
        single_send: Option<Vec<usize>>,
    ) -> PyResult<Self> {
        let ins = objects(inputs)?;
        let outs = objects(outputs)?;
        let (mut ins, outs, held) = params::params(&ins, &outs)?;
        let addresses = ins
            .iter()
            .chain(&outs)
            .map(|p| p.buffer().addr() as usize)
            .collect();
        for i in single_send.unwrap_or_default() {
            let p = ins
                .get_mut(i)
                .ok_or_else(|| errors::invalid(format!("single_send: no input {i}")))?;
            *p = p.clone().single_send();
        }
        naaice::discovery::environment::warn_unknown_variables();
        let (mut options, transport) = connect_options(py, address, local)?;
        if let Some(r) = rank {
            options.rank = Some(Rank {
                rank: r,
                size: None,
                local: None,
                source: "the rank argument",
            });
        }
        if let Some(t) = seconds("connect_timeout", connect_timeout)? {
            options.connect_timeout = t;
        }
        if let Some(t) = seconds("rpc_timeout", rpc_timeout)? {
            options.rpc_timeout = t;
        }
        if let Some(t) = seconds("mrsp_timeout", mrsp_timeout)? {
            options.mrsp_timeout = t;
        }
        // On failure (or Ctrl-C), dropping `held` releases the exports.
        let naa = blocking::connect(py, &options, move |o| {
            Naa::create_with(&transport, fn_code, ins.clone(), outs.clone(), o)
        })?;
        Ok(Self {
            slot: Arc::new(Mutex::new(Slot {
                naa: Some(naa),
                finalized: false,
            })),
            held: Mutex::new(Some(held)),
            fn_code,
            addresses,
        })
    }

    /// Starts one RPC and returns at once (`naa_invoke`). Per-call arguments: another function
    /// code, the three user bytes of the immediate, a deadline in seconds.
    #[pyo3(signature = (*, fn_code=None, user_bytes=None, timeout=None))]
    fn invoke(
        &self,
        py: Python<'_>,
        fn_code: Option<u32>,
        user_bytes: Option<&Bound<'_, PyAny>>,
        timeout: Option<f64>,
    ) -> PyResult<()> {
        let call = call(fn_code, user_bytes, timeout)?;
        let slot = &*self.slot;
        py.detach(|| {
            let mut g = lock(slot)?;
            g.naa()?.invoke_with(&call).map_err(errors::to_py)
        })
    }

    /// Progresses the RPC without blocking (`naa_test`): its `Status` once it finished, else
    /// `None`.
    fn test(&self) -> PyResult<Option<Status>> {
        let mut g = self.lock()?;
        let r = g.naa()?.test().map_err(errors::to_py)?;
        Ok(r.map(Status::from))
    }

    /// Blocks until the RPC finishes (`naa_wait`), with the interpreter lock released. Ctrl-C
    /// (a signal handler that raises) cancels the RPC and raises ([`crate::blocking`]).
    fn wait(&self, py: Python<'_>) -> PyResult<Status> {
        let mut taken = Taken::take(&self.slot)?;
        blocking::wait(py, taken.naa())
    }

    /// Invokes and waits: one whole RPC.
    #[pyo3(signature = (*, fn_code=None, user_bytes=None, timeout=None))]
    fn run(
        &self,
        py: Python<'_>,
        fn_code: Option<u32>,
        user_bytes: Option<&Bound<'_, PyAny>>,
        timeout: Option<f64>,
    ) -> PyResult<Status> {
        let call = call(fn_code, user_bytes, timeout)?;
        let mut taken = Taken::take(&self.slot)?;
        let naa = taken.naa();
        py.detach(|| naa.invoke_with(&call))
            .map_err(errors::to_py)?;
        blocking::wait(py, naa)
    }

    /// Runs `n` RPCs (invoke + wait, as `run()`) in a Rust loop without returning to Python:
    /// the Rust API's cost on this very handle, to measure what the binding adds per call
    /// (`bench_overhead.py`). Returns the last status.
    fn _run_many(&self, py: Python<'_>, n: u64) -> PyResult<Option<Status>> {
        let slot = &*self.slot;
        py.detach(|| {
            let mut g = lock(slot)?;
            let naa = g.naa()?;
            let mut last = None;
            for _ in 0..n {
                naa.invoke().map_err(errors::to_py)?;
                last = Some(naa.wait().map_err(errors::to_py)?);
            }
            Ok(last.map(Status::from))
        })
    }

    /// Abandons the RPC in flight: drops the connection at once; the next invoke reconnects.
    /// True if something was cancelled.
    fn cancel(&self, py: Python<'_>) -> PyResult<bool> {
        let slot = &*self.slot;
        py.detach(|| Ok(lock(slot)?.naa()?.cancel()))
    }

    /// Disconnects and releases the parameters (`naa_finalize`); also done by `with` and when
    /// the handle is garbage-collected. Calling it again does nothing.
    fn finalize(&self, py: Python<'_>) -> PyResult<()> {
        let slot = &*self.slot;
        py.detach(|| -> PyResult<()> {
            let mut g = lock(slot)?;
            if g.naa.is_none() && !g.finalized {
                return Err(BusyError::new_err(
                    "an await of this handle's RPC is in progress",
                ));
            }
            g.finalized = true;
            drop(g.naa.take());
            Ok(())
        })?;
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = held {
            h.release(py);
        }
        Ok(())
    }

    /// The handle's client statistics as a dict (`Naa.stats` makes the dataclass).
    fn _stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        let stats = self.lock()?.naa()?.stats();
        crate::stats::to_dict(py, &stats)
    }

    /// The function code given at creation.
    #[getter]
    fn fn_code(&self) -> u32 {
        self.fn_code
    }

    /// The address of each parameter's memory (inputs, then outputs) as registered: the
    /// objects' own memory (`array.ctypes.data`), never a copy.
    #[getter]
    fn addresses(&self) -> Vec<usize> {
        self.addresses.clone()
    }

    /// True while an RPC is in flight.
    #[getter]
    fn busy(&self) -> PyResult<bool> {
        let mut g = self.lock()?;
        Ok(g.naa()?.is_busy())
    }

    /// The connection's phase, e.g. "MRSP_DONE", "FINISHED", "DISCONNECTED".
    #[getter]
    fn state(&self) -> PyResult<String> {
        let mut g = self.lock()?;
        Ok(g.naa()?.state().to_string())
    }

    /// The `NAA_SPEC` entry in use as `host:port:fn_code:param_count` (`local:…` in local
    /// mode), or `None` when created with an address.
    #[getter]
    fn entry(&self) -> PyResult<Option<String>> {
        let mut g = self.lock()?;
        Ok(g.naa()?.entry().map(|e| {
            if e.local {
                format!("local:{}:{}", e.fncode, e.param_count)
            } else {
                format!("{}:{}:{}:{}", e.host, e.port, e.fncode, e.param_count)
            }
        }))
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.finalize(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let state = match self.slot.try_lock() {
            Ok(g) if g.finalized => "finalized".to_owned(),
            Ok(g) => g
                .naa
                .as_ref()
                .map_or("in use".to_owned(), |n| n.state().to_string()),
            Err(_) => "in use".to_owned(),
        };
        format!("<naaice.Naa fn_code={} {state}>", self.fn_code)
    }
}

/// The per-call arguments.
pub(crate) fn call(
    fn_code: Option<u32>,
    user: Option<&Bound<'_, PyAny>>,
    timeout: Option<f64>,
) -> PyResult<Call> {
    let mut call = Call::new().user_bytes(user_bytes(user)?);
    if let Some(code) = fn_code {
        call = call.function(code).map_err(errors::to_py)?;
    }
    if let Some(t) = seconds("timeout", timeout)? {
        call = call.timeout(t);
    }
    Ok(call)
}

impl Drop for PyNaa {
    fn drop(&mut self) {
        // The connection goes first (with the interpreter lock released: a Python kernel of
        // local mode may need it to finish), then the exports.
        let slot = self.slot.clone();
        Python::attach(|py| {
            py.detach(move || {
                if let Ok(mut g) = slot.lock() {
                    drop(g.naa.take());
                }
            });
            if let Some(h) = self
                .held
                .get_mut()
                .unwrap_or_else(|p| p.into_inner())
                .take()
            {
                h.release(py);
            }
        });
    }
}
