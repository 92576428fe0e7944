//! What a handle keeps to connect again after [`Naa::cancel`](super::Naa::cancel): the
//! transport, the NAA's address and the parameters to register.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use naaice_core::ClientConfig;

use super::{NaaOptions, Param};
use crate::client::connection::Connection;
use crate::client::stats::HandleStats;
use crate::error::Result;
use crate::swnaa::local::{self, Reach};
use crate::transport::waiting::WaitPolicy;
use crate::transport::{Endpoint, Transport, TransportError, TransportKind};

/// One connection attempt to `remote` until `until`.
type Connect<E> = Box<dyn Fn(Instant) -> Result<Connection<E>> + Send + Sync>;

/// How a handle reaches its NAA again, and with which parameters.
pub(super) struct Link<E: Endpoint> {
    connect: Connect<E>,
    remote: SocketAddr,
    /// The transport the handle's `NAA_SPEC` entry names, if any.
    kind: Option<TransportKind>,
    config: ClientConfig,
    connect_timeout: Duration,
    inputs: Vec<Param>,
    outputs: Vec<Param>,
}

impl<E: Endpoint> Link<E> {
    /// The link of a handle connected to `remote` through `transport` (or the transport
    /// `kind` its `NAA_SPEC` entry names).
    pub(super) fn new<T: Transport<Endpoint = E> + Clone + 'static>(
        transport: &T,
        (remote, kind): (SocketAddr, Option<TransportKind>),
        local: Option<SocketAddr>,
        config: ClientConfig,
        options: &NaaOptions,
        inputs: Vec<Param>,
        outputs: Vec<Param>,
    ) -> Self {
        let transport = transport.clone();
        let wait = options.wait;
        Self {
            connect: Box::new(move |until| {
                connect(&transport, (remote, kind), local, config, wait, until)
            }),
            remote,
            kind,
            config,
            connect_timeout: options.connect_timeout,
            inputs,
            outputs,
        }
    }

    /// Where the handle connects: the NAA's address and the transport its `NAA_SPEC` entry
    /// names.
    pub(super) fn target(&self) -> (SocketAddr, Option<TransportKind>) {
        (self.remote, self.kind)
    }

    /// A new connection with the parameters registered and the MRSP done (a fresh
    /// connection: every input, single-send ones included, goes out with its first RPC).
    /// The handle's `stats` count the connection, or the error.
    pub(super) fn reconnect(&self, stats: &mut HandleStats) -> Result<Connection<E>> {
        let start = Instant::now();
        let connected = (self.connect)(start + self.connect_timeout).and_then(|mut conn| {
            let connect = start.elapsed();
            super::attach(&mut conn, &self.inputs, &self.outputs)?;
            Ok((conn, connect))
        });
        match connected {
            Ok((conn, connect)) => {
                stats.connected(connect, start.elapsed() - connect);
                tracing::debug!(remote = %self.remote, "handle reconnected");
                Ok(conn)
            }
            Err(e) => {
                stats.connect_failed(&e);
                Err(e)
            }
        }
    }

    /// The bytes an RPC writes to the NAA (the inputs; single-send ones only with the
    /// `first` RPC of a connection) and those the NAA writes back when its kernel runs.
    pub(super) fn bytes(&self, first: bool) -> (u64, u64) {
        let sent = self
            .inputs
            .iter()
            .filter(|p| first || !p.single_send)
            .map(|p| p.buffer.len() as u64)
            .sum();
        let received = self.outputs.iter().map(|p| p.buffer.len() as u64).sum();
        (sent, received)
    }

    /// The default per-RPC deadline.
    pub(super) fn rpc_timeout(&self) -> Duration {
        self.config.rpc_timeout
    }

    /// The input parameters, as passed to create.
    pub(super) fn inputs(&self) -> &[Param] {
        &self.inputs
    }

    /// The output parameters, as passed to create.
    pub(super) fn outputs(&self) -> &[Param] {
        &self.outputs
    }
}

/// Connects to `remote`: an in-process NAA of local mode ([`crate::swnaa::local`]) through
/// [`Transport::connect_local`] (over the in-process transport where the program's transport
/// can make one, else over the loopback), any other through [`Transport::connect_as`] with
/// the transport its `NAA_SPEC` entry names (`kind`). The connection's waits follow `wait`.
pub(super) fn connect<T: Transport>(
    transport: &T,
    (remote, kind): (SocketAddr, Option<TransportKind>),
    local: Option<SocketAddr>,
    config: ClientConfig,
    wait: WaitPolicy,
    until: Instant,
) -> Result<Connection<T::Endpoint>> {
    let ep = match local::reach(remote) {
        Some(Reach::InProcess) => match transport.connect_local(remote, until) {
            Err(TransportError::Unavailable(_)) => {
                transport.connect_local(local::loopback_address()?, until)?
            }
            ep => ep?,
        },
        Some(Reach::Loopback) => transport.connect_local(remote, until)?,
        None => transport.connect_as(kind, remote, local, until)?,
    };
    let mut conn = Connection::from_endpoint(ep, config)?;
    conn.set_wait(wait);
    Ok(conn)
}
