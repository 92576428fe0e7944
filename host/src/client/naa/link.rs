//! What a handle keeps to connect again after [`Naa::cancel`](super::Naa::cancel): the
//! transport, the NAA's address and the parameters to register.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use naaice_core::ClientConfig;

use super::{NaaOptions, Param};
use crate::client::connection::Connection;
use crate::error::Result;
use crate::swnaa::local;
use crate::transport::{Endpoint, Transport, TransportKind};

/// One connection attempt to `remote` until `until`.
type Connect<E> = Box<dyn Fn(Instant) -> Result<Connection<E>> + Send + Sync>;

/// How a handle reaches its NAA again, and with which parameters.
pub(super) struct Link<E: Endpoint> {
    connect: Connect<E>,
    remote: SocketAddr,
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
        Self {
            connect: Box::new(move |until| connect(&transport, remote, kind, local, config, until)),
            remote,
            config,
            connect_timeout: options.connect_timeout,
            inputs,
            outputs,
        }
    }

    /// A new connection with the parameters registered and the MRSP done (a fresh
    /// connection: every input, single-send ones included, goes out with its first RPC).
    pub(super) fn reconnect(&self) -> Result<Connection<E>> {
        let mut conn = (self.connect)(Instant::now() + self.connect_timeout)?;
        super::attach(&mut conn, &self.inputs, &self.outputs)?;
        tracing::debug!(remote = %self.remote, "handle reconnected");
        Ok(conn)
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

/// Connects to `remote`: the in-process NAA of local mode ([`crate::swnaa::local`]) through
/// [`Transport::connect_local`], any other through [`Transport::connect_as`] with the
/// transport its `NAA_SPEC` entry names (`kind`).
pub(super) fn connect<T: Transport>(
    transport: &T,
    remote: SocketAddr,
    kind: Option<TransportKind>,
    local: Option<SocketAddr>,
    config: ClientConfig,
    until: Instant,
) -> Result<Connection<T::Endpoint>> {
    let ep = if local::is_local(remote) {
        transport.connect_local(remote, until)?
    } else {
        transport.connect_as(kind, remote, local, until)?
    };
    Connection::from_endpoint(ep, config)
}
