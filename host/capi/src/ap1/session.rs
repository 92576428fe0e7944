//! What an AP1 context holds: the settings a C program makes step by step (regions, flags,
//! internal regions, immediate bytes, bytes to send) and, once connected, the
//! [`naaice::Connection`] they are applied to.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use naaice::core::machine::RpcResult;
use naaice::core::{ClientConfig, FunctionCode, Phase, RegionId};
use naaice::transport::waiting::WaitPolicy;
use naaice::transport::{Endpoint, Transport};
use naaice::{Buffer, Connection};

use crate::error::{Failure, naa_error_kind};

/// How a parameter region is used (spec section 2.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Flags {
    /// Written to the NAA with every RPC.
    pub(super) input: bool,
    /// Written back by the NAA.
    pub(super) output: bool,
    /// Written with the first RPC only (implies input).
    pub(super) single_send: bool,
}

/// Everything the program configured, before and after connecting.
pub(super) struct Setup {
    /// The NAA.
    pub(super) remote: SocketAddr,
    /// Local source address.
    pub(super) local: Option<SocketAddr>,
    /// Function code of every RPC.
    pub(super) fncode: FunctionCode,
    /// First requested NAA address (spec section 2.5).
    pub(super) addr_offset: u64,
    /// The program's parameter memory, in parameter order.
    pub(super) params: Vec<Buffer>,
    /// Per parameter.
    pub(super) flags: Vec<Flags>,
    /// Per parameter: bytes per RPC (`None`: all).
    pub(super) bytes_to_send: Vec<Option<u32>>,
    /// Sizes of the internal regions.
    pub(super) internal: Vec<u64>,
    /// The immediate's user bytes.
    pub(super) user: [u8; 3],
    /// Per-RPC deadline.
    pub(super) rpc_timeout: Duration,
    /// MRSP deadline.
    pub(super) mrsp_timeout: Duration,
    /// How the connection waits (`NAAICE_WAIT`).
    pub(super) wait: WaitPolicy,
}

/// A connected context on transport endpoint `E`.
pub(super) struct Session<E: Endpoint> {
    conn: Connection<E>,
    /// Region ids of the parameters once registered (empty before `register`).
    ids: Vec<RegionId>,
    mrsp_started: bool,
    mrsp_timeout: Duration,
    rpc_timeout: Duration,
    rpc_in_flight: bool,
    /// The last finished RPC.
    last: Option<RpcResult>,
}

/// A state error.
fn state(message: &str) -> Failure {
    Failure::state(message)
}

impl<E: Endpoint> Session<E> {
    /// Connects to `setup.remote` (connection setup, blocking).
    pub(super) fn connect<T: Transport<Endpoint = E>>(
        transport: &T,
        setup: &Setup,
    ) -> Result<Self, Failure> {
        let mut config = ClientConfig::new(setup.fncode);
        config.rpc_timeout = setup.rpc_timeout;
        config.mrsp_timeout = setup.mrsp_timeout;
        let mut conn = Connection::connect(transport, setup.remote, setup.local, config)?;
        conn.set_immediate(setup.user)?;
        conn.set_wait(setup.wait);
        Ok(Self {
            conn,
            ids: Vec::new(),
            mrsp_started: false,
            mrsp_timeout: setup.mrsp_timeout,
            rpc_timeout: setup.rpc_timeout,
            rpc_in_flight: false,
            last: None,
        })
    }

    /// The protocol phase.
    pub(super) fn phase(&self) -> Phase {
        self.conn.phase()
    }

    /// The last finished RPC.
    pub(super) fn last(&self) -> Option<RpcResult> {
        self.last
    }

    /// True once the parameters are registered.
    pub(super) fn registered(&self) -> bool {
        !self.ids.is_empty()
    }

    /// True once the MRSP has started.
    pub(super) fn mrsp_started(&self) -> bool {
        self.mrsp_started
    }

    /// Registers every parameter region (idempotent).
    pub(super) fn register(&mut self, setup: &Setup) -> Result<(), Failure> {
        if self.registered() {
            return Ok(());
        }
        self.conn.set_addr_offset(setup.addr_offset)?;
        let mut ids = Vec::with_capacity(setup.params.len());
        for p in &setup.params {
            ids.push(self.conn.add_param(p)?);
        }
        self.ids = ids;
        Ok(())
    }

    /// Applies the bytes to send of parameter `idx` now (after registration).
    pub(super) fn apply_bytes_to_send(
        &mut self,
        idx: usize,
        len: Option<u32>,
    ) -> Result<(), Failure> {
        match self.ids.get(idx) {
            Some(&id) => Ok(self.conn.set_bytes_to_send(id, len)?),
            None => Ok(()),
        }
    }

    /// Applies the immediate's user bytes now.
    pub(super) fn apply_immediate(&mut self, user: [u8; 3]) -> Result<(), Failure> {
        Ok(self.conn.set_immediate(user)?)
    }

    /// Registers (if the program did not), declares the flags and internal regions, and
    /// sends the MRSP request.
    pub(super) fn init_mrsp(&mut self, setup: &Setup) -> Result<(), Failure> {
        if self.mrsp_started {
            return Err(state("the MRSP was already started on this connection"));
        }
        self.register(setup)?;
        for (i, (&id, f)) in self.ids.iter().zip(&setup.flags).enumerate() {
            if f.single_send {
                self.conn.set_single_send(id)?;
            } else if f.input {
                self.conn.set_input(id)?;
            }
            if f.output {
                self.conn.set_output(id)?;
            }
            if let Some(len) = setup.bytes_to_send[i] {
                self.conn.set_bytes_to_send(id, Some(len))?;
            }
        }
        for &size in &setup.internal {
            self.conn.add_internal(size)?;
        }
        self.mrsp_started = true;
        self.conn.init_mrsp()?;
        Ok(())
    }

    /// Runs the MRSP to its end (starting it if needed).
    pub(super) fn do_mrsp(&mut self, setup: &Setup) -> Result<(), Failure> {
        if !self.mrsp_started {
            self.init_mrsp(setup)?;
        }
        self.finish_mrsp()
    }

    /// Waits for the MRSP in progress (bounded by its deadline).
    fn finish_mrsp(&mut self) -> Result<(), Failure> {
        // The machine enforces the MRSP deadline; this bound only guards against a stall.
        let timeout = self.mrsp_timeout;
        let give_up = Instant::now() + timeout + Duration::from_secs(1);
        while !self.conn.mrsp_done() {
            self.poll()?;
            if self.conn.mrsp_done() {
                break;
            }
            if Instant::now() > give_up {
                return Err(Failure::new(
                    naa_error_kind::NAA_ERRKIND_TIMEOUT,
                    format!("the MRSP did not finish within {timeout:?}"),
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }

    /// Starts an RPC.
    pub(super) fn init_transfer(&mut self) -> Result<(), Failure> {
        if !self.conn.mrsp_done() {
            return Err(state(
                "the MRSP has not finished (naaice_do_mrsp, or naaice_init_mrsp and polling)",
            ));
        }
        if self.rpc_in_flight {
            return Err(state(
                "an RPC is in flight; complete it with naaice_poll_cq_nonblocking or \
                 naaice_poll_cq_blocking first",
            ));
        }
        self.conn.init_transfer()?;
        self.rpc_in_flight = true;
        Ok(())
    }

    /// Runs one RPC to its end.
    pub(super) fn do_transfer(&mut self) -> Result<(), Failure> {
        self.init_transfer()?;
        self.wait()
    }

    /// Makes progress without blocking.
    pub(super) fn poll(&mut self) -> Result<(), Failure> {
        let result = self.conn.poll();
        self.settle(result)
    }

    /// Blocks until the operation in progress (MRSP or RPC) finishes; returns at once if
    /// none is.
    pub(super) fn wait(&mut self) -> Result<(), Failure> {
        if self.rpc_in_flight {
            let result = self.conn.wait();
            self.settle(result.map(Some))
        } else if self.mrsp_started && !self.conn.mrsp_done() {
            self.finish_mrsp()
        } else {
            Ok(())
        }
    }

    /// Like [`Session::wait`], but polls in a loop instead of sleeping (busy waiting).
    pub(super) fn spin(&mut self) -> Result<(), Failure> {
        let (what, timeout) = if self.rpc_in_flight {
            ("the RPC", self.rpc_timeout)
        } else if self.mrsp_started && !self.conn.mrsp_done() {
            ("the MRSP", self.mrsp_timeout)
        } else {
            return Ok(());
        };
        // The machine enforces the deadlines; this bound only guards against a stall.
        let give_up = Instant::now() + timeout + Duration::from_secs(1);
        while self.rpc_in_flight || (self.mrsp_started && !self.conn.mrsp_done()) {
            self.poll()?;
            if Instant::now() > give_up {
                return Err(Failure::new(
                    naa_error_kind::NAA_ERRKIND_TIMEOUT,
                    format!("{what} did not finish within {timeout:?}"),
                ));
            }
            std::hint::spin_loop();
        }
        Ok(())
    }

    /// Records the outcome of a poll or wait.
    fn settle(&mut self, result: naaice::Result<Option<RpcResult>>) -> Result<(), Failure> {
        match result {
            Ok(Some(r)) => {
                self.rpc_in_flight = false;
                if !r.status.is_success() {
                    tracing::warn!(code = r.status.get(), "the NAA returned an error code");
                }
                self.last = Some(r);
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => {
                self.rpc_in_flight = false;
                Err(e.into())
            }
        }
    }
}
