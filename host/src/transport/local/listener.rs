//! [`LocalTransport`], [`LocalListener`] and [`LocalIncoming`]: connection set-up between
//! the threads of one process.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use super::endpoint::LocalEndpoint;
use super::side::{CLIENT, Pair, SERVER, Setup};
use super::{address, in_block};
use crate::transport::{Incoming, Listener, Result, Transport, TransportError};

/// Connection requests a listener holds before its owner takes them.
const BACKLOG: usize = 128;

/// The next in-process address number.
static NEXT: AtomicU64 = AtomicU64::new(1);

/// A listening address, where its requests go, and the process it listens in.
type Entry = (SocketAddr, SyncSender<LocalIncoming>, u32);

/// The listening addresses of this process and where their requests go.
static LISTENING: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

/// The listeners, without those a child of `fork` inherited (their threads are the
/// parent's: nobody would take their requests here).
fn listening() -> std::sync::MutexGuard<'static, Vec<Entry>> {
    let mut all = LISTENING.lock().unwrap_or_else(PoisonError::into_inner);
    let pid = std::process::id();
    if all.iter().any(|e| e.2 != pid) {
        all.retain(|e| e.2 == pid);
    }
    all
}

/// True if `addr` is listened on in this process.
pub(super) fn is_listening(addr: SocketAddr) -> bool {
    listening().iter().any(|(a, ..)| *a == addr)
}

/// A fresh in-process address.
fn fresh() -> SocketAddr {
    address(NEXT.fetch_add(1, Ordering::Relaxed))
}

/// The in-process transport: connections between the threads of this process, without
/// sockets (see the [module](super) documentation).
#[derive(Clone, Copy, Debug, Default)]
pub struct LocalTransport;

impl LocalTransport {
    /// The address that has [`Transport::listen`] pick a fresh in-process address
    /// (`[100::]:0`).
    pub fn any() -> SocketAddr {
        address(0)
    }
}

impl Transport for LocalTransport {
    type Endpoint = LocalEndpoint;
    type Listener = LocalListener;

    fn connect(
        &self,
        remote: SocketAddr,
        _local: Option<SocketAddr>,
        deadline: Instant,
    ) -> Result<LocalEndpoint> {
        let refused = || TransportError::Io {
            call: "connect",
            source: io::Error::new(
                io::ErrorKind::ConnectionRefused,
                format!("no in-process NAA listens on {remote}"),
            ),
        };
        let queue = listening()
            .iter()
            .find(|(a, ..)| *a == remote)
            .map(|(_, tx, _)| tx.clone())
            .ok_or_else(refused)?;
        let pair = Arc::new(Pair::new(fresh(), remote)?);
        let client = LocalEndpoint::new(Arc::clone(&pair), CLIENT);
        let request = LocalIncoming {
            ep: LocalEndpoint::new(Arc::clone(&pair), SERVER),
        };
        match queue.try_send(request) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                return Err(TransportError::Rejected(
                    "the in-process NAA's backlog of connection requests is full".into(),
                ));
            }
            Err(TrySendError::Disconnected(_)) => return Err(refused()),
        }
        match pair.await_setup(deadline) {
            Setup::Accepted => Ok(client),
            Setup::Rejected(reason) => Err(TransportError::Rejected(reason)),
            Setup::Abandoned | Setup::Requested => Err(TransportError::TimedOut),
        }
    }

    /// Listens on `addr` if it is an in-process address (port 0 of the block `100::/64`),
    /// else (`[100::]:0`, or any other address) on a fresh one.
    fn listen(&self, addr: SocketAddr) -> Result<LocalListener> {
        let mut all = listening();
        let addr = if in_block(addr) && addr != address(0) {
            if all.iter().any(|(a, ..)| *a == addr) {
                return Err(TransportError::Io {
                    call: "listen",
                    source: io::Error::from(io::ErrorKind::AddrInUse),
                });
            }
            addr
        } else {
            fresh()
        };
        let (tx, rx) = sync_channel(BACKLOG);
        all.push((addr, tx, std::process::id()));
        Ok(LocalListener { addr, requests: rx })
    }
}

/// A listening in-process endpoint; stops listening when dropped.
#[derive(Debug)]
pub struct LocalListener {
    addr: SocketAddr,
    requests: Receiver<LocalIncoming>,
}

impl Listener for LocalListener {
    type Incoming = LocalIncoming;

    fn next_request(&mut self, deadline: Instant) -> Result<Option<LocalIncoming>> {
        let wait = deadline.saturating_duration_since(Instant::now());
        match self.requests.recv_timeout(wait) {
            Ok(request) => Ok(Some(request)),
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => Ok(None),
        }
    }

    fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for LocalListener {
    fn drop(&mut self) {
        listening().retain(|(a, ..)| *a != self.addr);
        // Requests not taken are refused as they drop.
        while self.requests.try_recv().is_ok() {}
    }
}

/// An in-process connection request, not accepted yet.
#[derive(Debug)]
pub struct LocalIncoming {
    ep: LocalEndpoint,
}

impl Incoming for LocalIncoming {
    type Endpoint = LocalEndpoint;

    fn endpoint(&mut self) -> &mut LocalEndpoint {
        &mut self.ep
    }

    fn accept(self) -> Result<LocalEndpoint> {
        match self.ep.pair().settle(Setup::Accepted) {
            Setup::Accepted => Ok(self.ep),
            _ => Err(TransportError::NotConnected),
        }
    }

    fn reject(self, reason: &str) {
        self.ep.pair().settle(Setup::Rejected(reason.to_owned()));
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        Some(self.ep.pair().addrs[CLIENT])
    }
}
