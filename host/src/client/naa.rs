//! AP2, the middleware API (spec §6): create / invoke / test / wait / finalize.
//!
//! ```no_run
//! use naaice::{Naa, Param, transport::soft::SoftTransport};
//! # fn main() -> naaice::Result<()> {
//! let transport = SoftTransport::default();
//! // NAA_SPEC=127.0.0.1:12345:1:2 selects the NAA for function code 1 with 2 inputs.
//! let mut naa = Naa::create(&transport, 1, vec![Param::zeroed(1024), Param::zeroed(1024)],
//!                           vec![Param::zeroed(1024)])?;
//! naa.input(0)?.fill(7);
//! naa.invoke()?;
//! while naa.test()?.is_none() {
//!     // overlap: do other work while the NAA computes
//! }
//! let status = naa.wait()?; // returns at once: the RPC already finished
//! assert!(status.naa_error.is_success());
//! println!("first output byte: {}", naa.output(0)?[0]);
//! naa.finalize();
//! # Ok(()) }
//! ```
//!
//! Beyond the reference: [`Naa::invoke_with`] takes per-call arguments ([`Call`]: function
//! code, the immediate's user bytes, deadline), [`Naa::cancel`] abandons an RPC (the handle
//! reconnects on its next invoke), and [`NaaOptions::local`] / `NAA_SPEC=local:FN:N` run the
//! kernel in-process ([`crate::swnaa::local`]).
//!
//! **Buffer safety.** The handle owns its parameter buffers. While an RPC is in flight,
//! [`Naa::input`] and [`Naa::output`] return [`Error::Busy`], and a guard they returned
//! borrows the handle, so it cannot live across [`Naa::invoke`]: neither the NIC nor the NAA
//! can touch memory the program is looking at.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use naaice_core::machine::RpcResult;
use naaice_core::{ClientConfig, FunctionCode, Phase, RegionId, ReturnCode};

mod call;
mod cancel;
mod link;

pub use call::Call;
use link::Link;

use crate::client::connection::Connection;
use crate::client::stats::{HandleStats, Stats};
use crate::discovery::environment::{self, Rank};
use crate::discovery::select::{self, Pool, Reservation};
use crate::discovery::spec::{self, SpecError};
use crate::error::{Error, Result};
use crate::memory::{Buffer, BufferGuard};
use crate::transport::waiting::WaitPolicy;
use crate::transport::{AnyEndpoint, Endpoint, Transport, TransportKind};

/// A parameter of an NAA call: a buffer, optionally single-send.
#[derive(Debug, Clone)]
pub struct Param {
    buffer: Buffer,
    single_send: bool,
}

impl Param {
    /// A parameter over `buffer`. Passing the same buffer as input and output makes it an
    /// in-place parameter (one region, flags INPUT|OUTPUT).
    pub fn new(buffer: Buffer) -> Self {
        Self {
            buffer,
            single_send: false,
        }
    }

    /// A parameter owning `data`.
    pub fn from_vec(data: Vec<u8>) -> Self {
        Self::new(Buffer::from_vec(data))
    }

    /// A zero-filled parameter of `len` bytes.
    pub fn zeroed(len: usize) -> Self {
        Self::new(Buffer::zeroed(len))
    }

    /// Transfer this input only in the first RPC (spec §3.3). On an output it has no effect
    /// (the C reference turns such an output into an input, quirk Q-4; we do not).
    pub fn single_send(mut self) -> Self {
        self.single_send = true;
        self
    }

    /// The buffer.
    pub fn buffer(&self) -> &Buffer {
        &self.buffer
    }
}

/// Status of the last RPC (spec §6.1 `naa_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// Connection phase; [`Phase::Finished`] after a completed RPC.
    pub state: Phase,
    /// The NAA's return code (`naa_error` in C is its low byte).
    pub naa_error: ReturnCode,
    /// Length of the NAA's final write.
    pub bytes_received: u64,
}

/// Options for [`Naa::create_with`].
#[derive(Debug, Clone)]
pub struct NaaOptions {
    /// The NAA's address; `None` selects one from `NAA_SPEC`.
    pub remote: Option<SocketAddr>,
    /// Local source address; `None` reads `NAA_LOCAL_IP`.
    pub local: Option<SocketAddr>,
    /// Connection setup deadline.
    pub connect_timeout: Duration,
    /// MRSP deadline.
    pub mrsp_timeout: Duration,
    /// Default per-RPC deadline.
    pub rpc_timeout: Duration,
    /// The process's rank for choosing among `NAA_SPEC` entries; `None` reads the launcher's
    /// variables ([`crate::discovery::select`]).
    pub rank: Option<Rank>,
    /// The entries to choose from; `None` is the process's `NAA_SPEC`.
    pub pool: Option<Arc<Pool>>,
    /// How the handle's waits spin before they sleep (`NAAICE_WAIT`); default adaptive.
    pub wait: WaitPolicy,
}

impl Default for NaaOptions {
    fn default() -> Self {
        Self {
            remote: None,
            local: None,
            connect_timeout: crate::client::connection::CONNECT_TIMEOUT,
            mrsp_timeout: Duration::from_secs(10),
            rpc_timeout: environment::DEFAULT_RPC_TIMEOUT,
            rank: None,
            pool: None,
            wait: WaitPolicy::default(),
        }
    }
}

impl NaaOptions {
    /// Options that connect to `remote` instead of consulting `NAA_SPEC`.
    pub fn at(remote: SocketAddr) -> Self {
        Self {
            remote: Some(remote),
            ..Self::default()
        }
    }

    /// Options that connect to the in-process NAA of local mode ([`crate::swnaa::local`]) instead
    /// of consulting `NAA_SPEC`; starts it if it is not running.
    pub fn local() -> Result<Self> {
        Ok(Self::at(crate::swnaa::local::address()?))
    }

    /// Options that connect to the in-process NAA of local mode over the software transport
    /// on the loopback interface (every byte through a TCP socket, for testing the
    /// transport; `NAA_SPEC=local:FN:N:soft`); starts it if it is not running.
    pub fn local_over_soft() -> Result<Self> {
        Ok(Self::at(crate::swnaa::local::loopback_address()?))
    }

    /// The options `naa_create` and [`crate::Naa::create`] use: the defaults with
    /// `NAAICE_RPC_TIMEOUT`, `NAAICE_CONNECT_TIMEOUT` and `NAAICE_WAIT` applied (NAA from `NAA_SPEC`, local
    /// address from `NAA_LOCAL_IP`, rank from the launcher).
    pub fn from_env() -> Result<Self, SpecError> {
        environment::warn_unknown_variables();
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`NaaOptions::from_env`] with variables looked up by `var`.
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Result<Self, SpecError> {
        let mut options = Self::default();
        if let Some(t) = environment::seconds(
            environment::RPC_TIMEOUT_VAR,
            var(environment::RPC_TIMEOUT_VAR).as_deref(),
        )? {
            options.rpc_timeout = t;
        }
        if let Some(t) = environment::seconds(
            environment::CONNECT_TIMEOUT_VAR,
            var(environment::CONNECT_TIMEOUT_VAR).as_deref(),
        )? {
            options.connect_timeout = t;
        }
        if let Some(w) = environment::wait_policy(var(environment::WAIT_VAR).as_deref())? {
            options.wait = w;
        }
        Ok(options)
    }
}

/// A connection to an NAA prepared for one function (AP2 `naa_handle`).
///
/// Plain `Naa` is `Naa<AnyEndpoint>`, what [`Naa::create`] returns for an
/// [`AnyTransport`](crate::transport::AnyTransport) chosen at run time; a concrete transport
/// (e.g. [`SoftTransport`](crate::transport::soft::SoftTransport)) gives `Naa<ItsEndpoint>`.
pub struct Naa<E: Endpoint = AnyEndpoint> {
    /// The connection; `None` after [`Naa::cancel`] until the next invoke reconnects.
    conn: Option<Connection<E>>,
    fncode: FunctionCode,
    /// How to connect again (after [`Naa::cancel`]) and the parameters to register then.
    link: Link<E>,
    _reservation: Option<Reservation>,
    stats: HandleStats,
}

impl<E: Endpoint> std::fmt::Debug for Naa<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Naa")
            .field("fncode", &self.fncode)
            .field("conn", &self.conn)
            .finish()
    }
}

impl<E: Endpoint> Naa<E> {
    /// `naa_create`: selects an NAA for `fncode` from `NAA_SPEC` (by the process's rank,
    /// failing over to further entries: [`crate::discovery::select`]), connects, registers the
    /// parameters and runs the MRSP. Options from the environment
    /// ([`NaaOptions::from_env`]), as in the C ABI.
    pub fn create<T: Transport<Endpoint = E> + Clone + 'static>(
        transport: &T,
        fncode: u32,
        inputs: Vec<Param>,
        outputs: Vec<Param>,
    ) -> Result<Self> {
        let options = NaaOptions::from_env()?;
        Self::create_with(transport, fncode, inputs, outputs, &options)
    }

    /// `naa_create` with explicit options (e.g. the NAA's address).
    pub fn create_with<T: Transport<Endpoint = E> + Clone + 'static>(
        transport: &T,
        fncode: u32,
        inputs: Vec<Param>,
        outputs: Vec<Param>,
        options: &NaaOptions,
    ) -> Result<Self> {
        Self::create_to(transport, fncode, inputs, outputs, options, None)
    }

    /// Where the handle connects: the NAA's address and the transport its `NAA_SPEC` entry
    /// names (for more handles on the same NAA: [`Naa::create_to`]).
    pub(crate) fn target(&self) -> (SocketAddr, Option<TransportKind>) {
        self.link.target()
    }

    /// [`Naa::create_with`], connecting to `target` (another handle's [`Naa::target`])
    /// when given, not to `options.remote` or an `NAA_SPEC` entry.
    pub(crate) fn create_to<T: Transport<Endpoint = E> + Clone + 'static>(
        transport: &T,
        fncode: u32,
        inputs: Vec<Param>,
        outputs: Vec<Param>,
        options: &NaaOptions,
        target: Option<(SocketAddr, Option<TransportKind>)>,
    ) -> Result<Self> {
        let code = call::function_code(fncode)?;
        let local = match options.local {
            Some(l) => Some(l),
            None => spec::local_ip_from_env()?,
        };
        let mut config = ClientConfig::new(code);
        config.mrsp_timeout = options.mrsp_timeout;
        config.rpc_timeout = options.rpc_timeout;
        let wait = options.wait;
        let connect = |remote, kind, until| {
            link::connect(transport, (remote, kind), local, config, wait, until)
        };
        let mut stats = HandleStats::new();
        let connecting = std::time::Instant::now();
        let connected = (|| {
            let target = target.or(options.remote.map(|addr| (addr, None)));
            let (mut conn, chosen, reservation) = match target {
                Some((addr, kind)) => {
                    let until = std::time::Instant::now() + options.connect_timeout;
                    (connect(addr, kind, until)?, (addr, kind), None)
                }
                None => {
                    let pool = options.pool.clone().map_or_else(Pool::global, Ok)?;
                    let rank = options.rank.map_or_else(Rank::from_env, Ok)?;
                    let chosen = select::connect(
                        &pool,
                        fncode,
                        inputs.len(),
                        &rank,
                        options.connect_timeout,
                        connect,
                    )?;
                    let to = (chosen.address, chosen.transport);
                    (chosen.connection, to, Some(chosen.reservation))
                }
            };
            let connected = connecting.elapsed();
            attach(&mut conn, &inputs, &outputs)?;
            Ok((conn, chosen, reservation, connected))
        })();
        let (conn, chosen, reservation, connected) = match connected {
            Ok(c) => c,
            Err(e) => {
                stats.connect_failed(&e);
                return Err(e);
            }
        };
        stats.created(connected, connecting.elapsed() - connected);
        let link = Link::new(transport, chosen, local, config, options, inputs, outputs);
        Ok(Self {
            conn: Some(conn),
            fncode: code,
            link,
            _reservation: reservation,
            stats,
        })
    }

    /// The `NAA_SPEC` entry this handle uses (`None` when created with an explicit address).
    pub fn entry(&self) -> Option<&spec::NaaEntry> {
        self._reservation.as_ref().map(Reservation::entry)
    }

    /// The function code.
    pub fn function_code(&self) -> FunctionCode {
        self.fncode
    }

    /// `naa_invoke`: starts one RPC and returns at once (the handle's RPC deadline).
    pub fn invoke(&mut self) -> Result<()> {
        self.invoke_with(&Call::new())
    }

    /// Starts one RPC with its own deadline (the handle's function code, user bytes 0).
    pub fn invoke_with_timeout(&mut self, timeout: Duration) -> Result<()> {
        self.invoke_with(&Call::new().timeout(timeout))
    }

    fn rpc_timeout(&self) -> Duration {
        self.link.rpc_timeout()
    }

    /// `naa_test`: makes progress without blocking; `Some(status)` once the RPC finished.
    /// After that it keeps returning the last status.
    pub fn test(&mut self) -> Result<Option<Status>> {
        if !self.is_busy() {
            return self.last().map(Some);
        }
        let r = self.live()?.poll();
        self.stats.observe(&r, |r| r.status);
        Ok(r?.map(|r| self.status_of(r)))
    }

    /// `naa_wait`: blocks until the RPC finishes (or fails, or its deadline passes).
    pub fn wait(&mut self) -> Result<Status> {
        if !self.is_busy() {
            return self.last();
        }
        let r = self.live()?.wait().map(Some);
        self.stats.observe(&r, |r| r.status);
        let r = r?.ok_or(Error::State("no RPC in flight"))?;
        Ok(self.status_of(r))
    }

    /// Like [`Naa::wait`], but returns `Ok(None)` at `deadline` if the RPC is still in
    /// flight (it goes on; wait again, test, or cancel it). For callers that wait in slices
    /// to look at something else in between, such as the Python binding's signal checks.
    pub fn wait_until(&mut self, deadline: std::time::Instant) -> Result<Option<Status>> {
        if !self.is_busy() {
            return self.last().map(Some);
        }
        let r = self.live()?.wait_until(deadline);
        self.stats.observe(&r, |r| r.status);
        Ok(r?.map(|r| self.status_of(r)))
    }

    fn last(&self) -> Result<Status> {
        let r = self
            .conn
            .as_ref()
            .ok_or(Error::Cancelled)?
            .last_result()
            .ok_or(Error::State("no RPC was invoked"))?;
        Ok(self.status_of(r))
    }

    fn status_of(&self, r: RpcResult) -> Status {
        Status {
            state: self.state(),
            naa_error: r.status,
            bytes_received: u64::from(r.bytes_received),
        }
    }

    /// The connection's current phase (`naa_status.state`): MRSP_DONE after create,
    /// DATA_SENDING / DATA_RECEIVING while an RPC is in flight, FINISHED after one, ERROR
    /// after a failure, DISCONNECTED after [`Naa::cancel`] until the next invoke.
    pub fn state(&self) -> Phase {
        self.conn
            .as_ref()
            .map_or(Phase::Disconnected, Connection::phase)
    }

    /// True while an RPC is in flight.
    pub fn is_busy(&self) -> bool {
        self.conn.as_ref().is_some_and(Connection::rpc_in_flight)
    }

    /// The connection, or [`Error::Cancelled`] after [`Naa::cancel`].
    fn live(&mut self) -> Result<&mut Connection<E>> {
        self.conn.as_mut().ok_or(Error::Cancelled)
    }

    /// Read/write access to input `index` (as passed to create); [`Error::Busy`] while an
    /// RPC is in flight.
    pub fn input(&self, index: usize) -> Result<BufferGuard<'_>> {
        self.access(
            self.link
                .inputs()
                .get(index)
                .ok_or_else(|| bad_index("input", index))?,
        )
    }

    /// Read/write access to output `index`; [`Error::Busy`] while an RPC is in flight.
    pub fn output(&self, index: usize) -> Result<BufferGuard<'_>> {
        let outputs = self.link.outputs();
        self.access(
            outputs
                .get(index)
                .ok_or_else(|| bad_index("output", index))?,
        )
    }

    fn access<'a>(&'a self, p: &'a Param) -> Result<BufferGuard<'a>> {
        if self.is_busy() {
            return Err(Error::Busy);
        }
        Ok(p.buffer.lock())
    }

    /// The connection, for waiting on many handles ([`crate::client::naa_set`]) and futures
    /// ([`crate::client::rpc_future`]); `None` after [`Naa::cancel`].
    pub(crate) fn connection_mut(&mut self) -> Option<&mut Connection<E>> {
        self.conn.as_mut()
    }

    /// The connection (read-only).
    pub(crate) fn connection(&self) -> Option<&Connection<E>> {
        self.conn.as_ref()
    }

    /// This handle's statistics: RPCs, errors by kind, bytes, connect and MRSP time, latency
    /// percentiles ([`Stats`]). When the handle ends they are added to the process's
    /// ([`crate::client::stats::process`]).
    pub fn stats(&self) -> Stats {
        self.stats.snapshot()
    }

    /// `naa_finalize`: disconnects and releases everything (also done on drop).
    pub fn finalize(self) {
        drop(self);
    }
}

/// Registers the parameters on a new connection (an in-place parameter, the same buffer as
/// input and output, is one region) and runs the MRSP; returns the region ids of the inputs
/// and outputs.
fn attach<E: Endpoint>(
    conn: &mut Connection<E>,
    inputs: &[Param],
    outputs: &[Param],
) -> Result<()> {
    let mut known: Vec<(Buffer, RegionId)> = Vec::new();
    let mut region_of = |conn: &mut Connection<E>, p: &Param| -> Result<RegionId> {
        if let Some((_, id)) = known.iter().find(|(b, _)| same_memory(b, &p.buffer)) {
            return Ok(*id);
        }
        let id = conn.add_param(&p.buffer)?;
        known.push((p.buffer.clone(), id));
        Ok(id)
    };
    for p in inputs {
        let id = region_of(conn, p)?;
        if p.single_send {
            conn.set_single_send(id)?;
        } else {
            conn.set_input(id)?;
        }
    }
    for p in outputs {
        let id = region_of(conn, p)?;
        conn.set_output(id)?;
    }
    conn.do_mrsp()
}

fn bad_index(what: &str, index: usize) -> Error {
    Error::InvalidArgument(format!("no {what} parameter {index}"))
}

/// True if both parameters are the same memory (an in-place parameter).
fn same_memory(a: &Buffer, b: &Buffer) -> bool {
    !a.is_empty() && a.addr() == b.addr()
}
