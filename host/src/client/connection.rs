//! AP1, the low-level client API (spec §7): a connection you drive step by step.
//!
//! ```no_run
//! # use naaice::{Buffer, Connection, transport::soft::SoftTransport};
//! # use naaice_core::{ClientConfig, FunctionCode};
//! # fn main() -> naaice::Result<()> {
//! let transport = SoftTransport::default();
//! let config = ClientConfig::new(FunctionCode::new(1).unwrap());
//! let mut conn = Connection::connect(&transport, "127.0.0.1:12345".parse().unwrap(), None, config)?;
//! let data = Buffer::from_vec(vec![1, 2, 3, 4]);
//! let id = conn.add_param(&data)?;
//! conn.set_input(id)?;
//! conn.set_output(id)?;
//! conn.do_mrsp()?;
//! let result = conn.do_transfer()?;
//! println!("rc {} bytes {}", result.status, result.bytes_received);
//! conn.disconnect();
//! # Ok(()) }
//! ```

use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use naaice_core::machine::{self, Machine, RpcArgs, RpcResult};
use naaice_core::region::InternalId;
use naaice_core::{Client, ClientConfig, FunctionCode, Phase, RegionId};

use crate::clock;
use crate::driver::{Calling, ClientEvent, Driver};
use crate::error::{Error, Result};
use crate::memory::Buffer;
use crate::transport::waiting::WaitPolicy;
use crate::transport::{AnyEndpoint, Endpoint, Transport};

/// Default time allowed for connection setup.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A client connection to an NAA (AP1). Plain `Connection` is `Connection<AnyEndpoint>`
/// (transport chosen at run time, [`AnyTransport`](crate::transport::AnyTransport)).
///
/// Call order: [`Connection::connect`], declare regions ([`Connection::add_param`] +
/// `set_input`/`set_output`/`set_single_send`, [`Connection::add_internal`]), then
/// [`Connection::do_mrsp`] (or [`Connection::init_mrsp`] and [`Connection::poll`]), then per
/// RPC [`Connection::do_transfer`] (or [`Connection::init_transfer`] and
/// [`Connection::poll`] / [`Connection::wait`]), finally [`Connection::disconnect`].
pub struct Connection<E: Endpoint = AnyEndpoint> {
    driver: Driver<E, Client>,
    params: Vec<Buffer>,
    /// The user bytes of the RPCs started without their own ([`Connection::set_immediate`]).
    user: [u8; 3],
    /// The result of the RPC that finished, until [`Connection::poll`] or
    /// [`Connection::wait`] returns it.
    finished: Option<RpcResult>,
    /// The deadline of the last RPC started (its timeout error names it).
    rpc_timeout: Option<Duration>,
}

impl<E: Endpoint> std::fmt::Debug for Connection<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("phase", &self.client().phase())
            .field("params", &self.params.len())
            .field("rpcs", &self.client().rpc_count())
            .finish()
    }
}

impl<E: Endpoint> Connection<E> {
    /// Connects to the NAA at `remote` (optionally from the local address `local`), within
    /// [`CONNECT_TIMEOUT`].
    pub fn connect<T: Transport<Endpoint = E>>(
        transport: &T,
        remote: SocketAddr,
        local: Option<SocketAddr>,
        config: ClientConfig,
    ) -> Result<Self> {
        Self::connect_until(
            transport,
            remote,
            local,
            config,
            Instant::now() + CONNECT_TIMEOUT,
        )
    }

    /// Connects like [`Connection::connect`] with an explicit deadline.
    pub fn connect_until<T: Transport<Endpoint = E>>(
        transport: &T,
        remote: SocketAddr,
        local: Option<SocketAddr>,
        config: ClientConfig,
        deadline: Instant,
    ) -> Result<Self> {
        let ep = transport.connect(remote, local, deadline)?;
        tracing::debug!(%remote, "connected");
        Self::from_endpoint(ep, config)
    }

    /// A connection over an endpoint that is already connected (for example one from
    /// [`Transport::connect_as`], to know and time the transport before the MRSP). Its waits
    /// follow the default [`WaitPolicy`] until [`Connection::set_wait`].
    pub fn from_endpoint(ep: E, config: ClientConfig) -> Result<Self> {
        let driver = Driver::client(ep, config, WaitPolicy::default())?;
        Ok(Self {
            driver,
            params: Vec::new(),
            user: [0; 3],
            finished: None,
            rpc_timeout: None,
        })
    }

    fn client(&self) -> &Client {
        self.driver.machine()
    }

    fn client_mut(&mut self) -> &mut Client {
        self.driver.machine_mut()
    }

    /// Sets how this connection's waits spin before they sleep ([`WaitPolicy`]; default
    /// adaptive). What the waits learned under the previous policy is dropped.
    pub fn set_wait(&mut self, policy: WaitPolicy) {
        self.driver.set_wait(policy);
    }

    /// The protocol phase (spec §4.1 values through [`Phase::value`]).
    pub fn phase(&self) -> Phase {
        self.client().phase()
    }

    /// The default per-RPC deadline of this connection.
    pub fn rpc_timeout(&self) -> Duration {
        self.client().config().rpc_timeout
    }

    /// True while the connection is up (established and not broken since).
    pub fn is_connected(&self) -> bool {
        self.driver.is_connected()
    }

    /// RPCs started on this connection.
    pub fn rpc_count(&self) -> u32 {
        self.client().rpc_count()
    }

    /// Registers `buffer` and adds it as the next parameter region (no flags yet).
    pub fn add_param(&mut self, buffer: &Buffer) -> Result<RegionId> {
        let id = self.driver.add_param(buffer)?;
        self.params.push(buffer.clone());
        Ok(id)
    }

    /// Adds an internal region: `size` bytes of NAA-only memory.
    pub fn add_internal(&mut self, size: u64) -> Result<InternalId> {
        Ok(self.client_mut().regions_mut()?.add_internal(size)?)
    }

    /// Marks a parameter as input (written to the NAA every RPC).
    pub fn set_input(&mut self, id: RegionId) -> Result<()> {
        Ok(self.client_mut().regions_mut()?.set_input(id)?)
    }

    /// Marks a parameter as output (written back by the NAA every RPC).
    pub fn set_output(&mut self, id: RegionId) -> Result<()> {
        Ok(self.client_mut().regions_mut()?.set_output(id)?)
    }

    /// Marks a parameter as single-send input (written in the first RPC only).
    pub fn set_single_send(&mut self, id: RegionId) -> Result<()> {
        Ok(self.client_mut().regions_mut()?.set_single_send(id)?)
    }

    /// First requested NAA address of the layout (spec §2.5; default 0).
    pub fn set_addr_offset(&mut self, offset: u64) -> Result<()> {
        self.client_mut().regions_mut()?.set_addr_offset(offset);
        Ok(())
    }

    /// The three user bytes of the RPC immediate (spec §3.2) of the RPCs started from now on
    /// without their own ([`Connection::init_transfer`], [`Connection::do_transfer`]); not
    /// while an RPC is in flight.
    pub fn set_immediate(&mut self, user: [u8; 3]) -> Result<()> {
        self.check_failed()?;
        if self.client().is_busy() {
            return Err(machine::Error::WrongPhase {
                phase: self.phase(),
            }
            .into());
        }
        self.user = user;
        Ok(())
    }

    /// Bytes a parameter sends per RPC (`None` = its full size, `Some(0)` = a zero-length
    /// write; spec §3.4).
    pub fn set_bytes_to_send(&mut self, id: RegionId, len: Option<u32>) -> Result<()> {
        Ok(self.client_mut().set_bytes_to_send(id, len)?)
    }

    /// The buffer of parameter `id`.
    pub fn param(&self, id: RegionId) -> Option<&Buffer> {
        self.params.get(id.index())
    }

    /// Starts the MRSP without waiting; progress with [`Connection::poll`].
    pub fn init_mrsp(&mut self) -> Result<()> {
        self.check_failed()?;
        self.client_mut().start_mrsp(clock::now())?;
        self.progress(false)
    }

    /// Runs the MRSP to completion (bounded by the MRSP timeout of the [`ClientConfig`]).
    pub fn do_mrsp(&mut self) -> Result<()> {
        self.init_mrsp()?;
        while !self.client().mrsp_done() {
            self.driver.wait(None)?;
            self.progress(true)?;
        }
        Ok(())
    }

    /// True once the MRSP has finished.
    pub fn mrsp_done(&self) -> bool {
        self.client().mrsp_done()
    }

    /// Starts an RPC without waiting (the configured function code and deadline, the user
    /// bytes of [`Connection::set_immediate`]).
    pub fn init_transfer(&mut self) -> Result<()> {
        let timeout = self.client().config().rpc_timeout;
        self.init_transfer_with_timeout(timeout)
    }

    /// Starts an RPC with its own deadline.
    pub fn init_transfer_with_timeout(&mut self, timeout: Duration) -> Result<()> {
        let fncode = self.client().config().fncode;
        self.init_transfer_with(fncode, self.user, timeout)
    }

    /// Starts an RPC with its own function code, user bytes (spec §3.2) and deadline, for
    /// this RPC only.
    pub fn init_transfer_with(
        &mut self,
        fncode: FunctionCode,
        user: [u8; 3],
        timeout: Duration,
    ) -> Result<()> {
        self.check_failed()?;
        let args = RpcArgs {
            fncode,
            user,
            timeout,
        };
        self.driver.start_rpc(args)?;
        self.finished = None;
        self.rpc_timeout = Some(timeout);
        self.progress(false)
    }

    /// True from [`Connection::init_transfer`] until [`Connection::poll`] or
    /// [`Connection::wait`] returned the RPC's result (or an error).
    pub fn rpc_in_flight(&self) -> bool {
        self.client().error().is_none() && (self.client().is_busy() || self.finished.is_some())
    }

    /// The result of the last finished RPC.
    pub fn last_result(&self) -> Option<RpcResult> {
        self.client().last_result()
    }

    /// Makes progress without blocking. Returns the RPC result once the RPC in flight is done.
    pub fn poll(&mut self) -> Result<Option<RpcResult>> {
        self.progress(true)?;
        Ok(self.finished.take())
    }

    /// Blocks until the RPC in flight finishes (or fails, or its deadline passes).
    pub fn wait(&mut self) -> Result<RpcResult> {
        loop {
            self.progress(true)?;
            if let Some(r) = self.finished.take() {
                return Ok(r);
            }
            if !self.client().is_busy() {
                return Err(Error::State("no RPC in flight"));
            }
            self.driver.wait(None)?;
        }
    }

    /// Like [`Connection::wait`], but gives up at `deadline` with the RPC still in flight
    /// (`Ok(None)`: wait again, or [`Connection::poll`]). A caller that must look at something
    /// else now and then (a language runtime's signals) waits in such slices: each slice
    /// spins and sleeps as a whole wait does.
    pub fn wait_until(&mut self, deadline: Instant) -> Result<Option<RpcResult>> {
        loop {
            self.progress(true)?;
            if let Some(r) = self.finished.take() {
                return Ok(Some(r));
            }
            if !self.client().is_busy() {
                return Err(Error::State("no RPC in flight"));
            }
            if !self.driver.wait(Some(deadline))? && Instant::now() >= deadline {
                return Ok(None);
            }
        }
    }

    /// Runs one RPC to completion.
    pub fn do_transfer(&mut self) -> Result<RpcResult> {
        self.init_transfer()?;
        self.wait()
    }

    /// Disconnects (DREQ) and releases the connection.
    pub fn disconnect(mut self) {
        self.driver.disconnect();
    }

    /// Executes pending work, after feeding what the transport has ready if `feed`, and
    /// handles the machine's events (the one place they are handled).
    fn progress(&mut self, feed: bool) -> Result<()> {
        self.check_failed()?;
        if feed {
            let finished = &mut self.finished;
            self.driver.pump(&mut Calling { finished })?;
        }
        while let Some(event) = self.driver.next_event() {
            // The machine keeps the MRSP state and the error.
            match event {
                ClientEvent::MrspComplete => {}
                ClientEvent::RpcComplete(result) => self.finished = Some(result),
                ClientEvent::Failed(e) => {
                    tracing::warn!(error = %e, "connection failed");
                    self.driver.disconnect();
                }
            }
        }
        self.check_failed()
    }

    /// Makes progress like [`Connection::poll`] without taking the result: `Ok(true)` once
    /// the RPC in flight has finished (a later `poll` or `wait` returns its result).
    pub(crate) fn advance(&mut self) -> Result<bool> {
        self.progress(true)?;
        Ok(!self.client().is_busy())
    }

    /// The error the connection failed with, if it failed.
    pub(crate) fn failure(&self) -> Option<Error> {
        self.check_failed().err()
    }

    /// Arms the readiness descriptor for a wait outside [`Connection::wait`]; `Ok(true)` if
    /// the caller must poll instead of sleeping.
    pub(crate) fn arm_ready(&mut self) -> Result<bool> {
        Ok(self.driver.arm_ready()?)
    }

    /// The readiness descriptor (`None`: the transport has none; sleep briefly instead).
    pub(crate) fn ready_fd(&self) -> Option<BorrowedFd<'_>> {
        self.driver.ready_fd()
    }

    /// The connection's waiter: a wait over many connections plans with it.
    pub(crate) fn waiter(&mut self) -> &mut crate::transport::waiting::Waiter {
        self.driver.waiter()
    }

    /// When the connection must be polled even without readiness (the RPC's deadline).
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.driver.next_deadline()
    }

    fn check_failed(&self) -> Result<()> {
        match self.client().error() {
            Some(machine::Error::Timeout { phase })
                if matches!(
                    phase,
                    Phase::DataSending | Phase::Calculating | Phase::DataReceiving
                ) && self.rpc_timeout.is_some() =>
            {
                Err(Error::RpcTimeout {
                    phase,
                    deadline: self.rpc_timeout.unwrap_or_default(),
                })
            }
            Some(e) => Err(Error::Protocol(e)),
            None => Ok(()),
        }
    }
}

impl<E: Endpoint> Drop for Connection<E> {
    fn drop(&mut self) {
        self.driver.disconnect();
    }
}
