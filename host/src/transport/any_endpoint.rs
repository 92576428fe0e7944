//! The endpoints, connection requests and memory regions of the transport chosen at run time
//! ([`AnyTransport`](super::AnyTransport)): one enum each over the transports' own, behind the
//! same traits. Dispatch is one `match` per call (no boxing, no allocation).

use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::time::Instant;

use super::local::{LocalEndpoint, LocalRegion};
use super::soft::{SoftEndpoint, SoftIncoming, SoftRegion};
#[cfg(feature = "verbs")]
use super::verbs::{VerbsEndpoint, VerbsIncoming, VerbsRegion};
use super::{
    Completion, ConnectionEvent, Endpoint, Incoming, MemoryRegion, Result, SendWr, Sge,
    TransportKind,
};
use crate::memory::Buffer;

/// Runs `$body` with `$x` bound to whichever transport's value `$value` holds.
macro_rules! dispatch {
    ($ty:ident, $value:expr, $x:ident => $body:expr) => {
        match $value {
            $ty::Soft($x) => $body,
            $ty::Local($x) => $body,
            #[cfg(feature = "verbs")]
            $ty::Verbs($x) => $body,
        }
    };
}

/// An endpoint of an [`AnyTransport`](super::AnyTransport) (also before it is accepted,
/// inside an [`AnyIncoming`]).
#[derive(Debug)]
pub struct AnyEndpoint(Ep);

#[derive(Debug)]
enum Ep {
    Soft(SoftEndpoint),
    SoftIncoming(SoftIncoming),
    Local(LocalEndpoint),
    #[cfg(feature = "verbs")]
    Verbs(VerbsEndpoint),
    #[cfg(feature = "verbs")]
    VerbsIncoming(VerbsIncoming),
}

/// Runs `$body` with `$e` bound to the transport endpoint inside an [`AnyEndpoint`].
macro_rules! with_endpoint {
    ($value:expr, $e:ident => $body:expr) => {
        match &mut $value.0 {
            Ep::Soft($e) => $body,
            Ep::Local($e) => $body,
            Ep::SoftIncoming(i) => {
                let $e = i.endpoint();
                $body
            }
            #[cfg(feature = "verbs")]
            Ep::Verbs($e) => $body,
            #[cfg(feature = "verbs")]
            Ep::VerbsIncoming(i) => {
                let $e = i.endpoint();
                $body
            }
        }
    };
}

/// A memory region of an [`AnyEndpoint`].
#[derive(Debug)]
pub enum AnyRegion {
    /// Software transport.
    Soft(SoftRegion),
    /// In-process transport (local mode).
    Local(LocalRegion),
    /// Verbs transport.
    #[cfg(feature = "verbs")]
    Verbs(VerbsRegion),
}

/// A connection request of an [`AnyListener`](super::AnyListener).
#[derive(Debug)]
pub struct AnyIncoming(AnyEndpoint);

impl AnyEndpoint {
    /// The transport this endpoint uses (for `auto`, the one it chose). An in-process
    /// endpoint of local mode ([`AnyEndpoint::is_in_process`]) says
    /// [`TransportKind::Soft`]: it stands in for the software NAA that local mode emulates.
    pub fn kind(&self) -> TransportKind {
        match &self.0 {
            Ep::Soft(_) | Ep::SoftIncoming(_) | Ep::Local(_) => TransportKind::Soft,
            #[cfg(feature = "verbs")]
            Ep::Verbs(_) | Ep::VerbsIncoming(_) => TransportKind::Verbs,
        }
    }
}

impl AnyEndpoint {
    /// True for an endpoint of the in-process transport ([`super::local`]): local mode
    /// without sockets.
    pub fn is_in_process(&self) -> bool {
        matches!(self.0, Ep::Local(_))
    }
}

impl From<LocalEndpoint> for AnyEndpoint {
    fn from(e: LocalEndpoint) -> Self {
        Self(Ep::Local(e))
    }
}

impl From<SoftEndpoint> for AnyEndpoint {
    fn from(e: SoftEndpoint) -> Self {
        Self(Ep::Soft(e))
    }
}

#[cfg(feature = "verbs")]
impl From<VerbsEndpoint> for AnyEndpoint {
    fn from(e: VerbsEndpoint) -> Self {
        Self(Ep::Verbs(e))
    }
}

impl From<SoftIncoming> for AnyIncoming {
    fn from(i: SoftIncoming) -> Self {
        Self(AnyEndpoint(Ep::SoftIncoming(i)))
    }
}

#[cfg(feature = "verbs")]
impl From<VerbsIncoming> for AnyIncoming {
    fn from(i: VerbsIncoming) -> Self {
        Self(AnyEndpoint(Ep::VerbsIncoming(i)))
    }
}

impl Incoming for AnyIncoming {
    type Endpoint = AnyEndpoint;

    fn endpoint(&mut self) -> &mut AnyEndpoint {
        &mut self.0
    }

    fn accept(self) -> Result<AnyEndpoint> {
        let ep = match self.0.0 {
            Ep::SoftIncoming(i) => Ep::Soft(i.accept()?),
            #[cfg(feature = "verbs")]
            Ep::VerbsIncoming(i) => Ep::Verbs(i.accept()?),
            accepted => accepted,
        };
        Ok(AnyEndpoint(ep))
    }

    fn reject(self, reason: &str) {
        match self.0.0 {
            Ep::SoftIncoming(i) => i.reject(reason),
            #[cfg(feature = "verbs")]
            Ep::VerbsIncoming(i) => i.reject(reason),
            accepted => with_endpoint!(AnyEndpoint(accepted), e => e.disconnect()),
        }
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        self.0.peer_addr()
    }

    fn wants_catalog(&self) -> bool {
        matches!(&self.0.0, Ep::SoftIncoming(i) if i.wants_catalog())
    }

    fn answer_catalog(self, text: &str) {
        match self.0.0 {
            Ep::SoftIncoming(i) => i.answer_catalog(text),
            other => Self(AnyEndpoint(other)).reject(text),
        }
    }
}

impl MemoryRegion for AnyRegion {
    fn addr(&self) -> u64 {
        dispatch!(Self, self, r => r.addr())
    }
    fn len(&self) -> usize {
        dispatch!(Self, self, r => r.len())
    }
    fn lkey(&self) -> u32 {
        dispatch!(Self, self, r => r.lkey())
    }
    fn rkey(&self) -> u32 {
        dispatch!(Self, self, r => r.rkey())
    }
    fn buffer(&self) -> &Buffer {
        dispatch!(Self, self, r => r.buffer())
    }
}

impl Endpoint for AnyEndpoint {
    type Region = AnyRegion;

    fn register(&mut self, buffer: &Buffer) -> Result<AnyRegion> {
        match &mut self.0 {
            Ep::Soft(e) => e.register(buffer).map(AnyRegion::Soft),
            Ep::SoftIncoming(i) => i.endpoint().register(buffer).map(AnyRegion::Soft),
            Ep::Local(e) => e.register(buffer).map(AnyRegion::Local),
            #[cfg(feature = "verbs")]
            Ep::Verbs(e) => e.register(buffer).map(AnyRegion::Verbs),
            #[cfg(feature = "verbs")]
            Ep::VerbsIncoming(i) => i.endpoint().register(buffer).map(AnyRegion::Verbs),
        }
    }
    fn post_recv(&mut self, wr_id: u64, buf: Option<Sge>) -> Result<()> {
        with_endpoint!(self, e => e.post_recv(wr_id, buf))
    }
    fn post_send(&mut self, wrs: &[SendWr]) -> Result<()> {
        with_endpoint!(self, e => e.post_send(wrs))
    }
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize> {
        with_endpoint!(self, e => e.poll(out))
    }
    fn poll_event(&mut self) -> Option<ConnectionEvent> {
        with_endpoint!(self, e => e.poll_event())
    }
    fn wait(&mut self, spin_until: Instant, deadline: Instant) -> Result<super::waiting::Woken> {
        with_endpoint!(self, e => e.wait(spin_until, deadline))
    }
    fn arm_ready(&mut self) -> Result<bool> {
        with_endpoint!(self, e => e.arm_ready())
    }
    fn ready_fd(&self) -> Option<BorrowedFd<'_>> {
        // Requests not accepted yet are the server's; nobody waits on many of them.
        match &self.0 {
            Ep::Soft(e) => e.ready_fd(),
            Ep::Local(e) => e.ready_fd(),
            #[cfg(feature = "verbs")]
            Ep::Verbs(e) => e.ready_fd(),
            _ => None,
        }
    }
    fn waker(&self) -> Option<super::Waker> {
        match &self.0 {
            Ep::Soft(e) => e.waker(),
            Ep::Local(e) => e.waker(),
            #[cfg(feature = "verbs")]
            Ep::Verbs(e) => e.waker(),
            _ => None,
        }
    }
    fn shared_memory(&self, peer_addr: u64, len: usize) -> Option<Buffer> {
        match &self.0 {
            Ep::Local(e) => e.shared_memory(peer_addr, len),
            _ => None,
        }
    }
    fn liveness(&self) -> Option<super::Liveness> {
        match &self.0 {
            Ep::Soft(e) => e.liveness(),
            Ep::Local(e) => e.liveness(),
            #[cfg(feature = "verbs")]
            Ep::Verbs(e) => e.liveness(),
            _ => None,
        }
    }
    fn disconnect(&mut self) {
        with_endpoint!(self, e => e.disconnect())
    }
    fn peer_addr(&self) -> Option<SocketAddr> {
        match &self.0 {
            Ep::Soft(e) => e.peer_addr(),
            Ep::Local(e) => e.peer_addr(),
            Ep::SoftIncoming(i) => i.peer_addr(),
            #[cfg(feature = "verbs")]
            Ep::Verbs(e) => e.peer_addr(),
            #[cfg(feature = "verbs")]
            Ep::VerbsIncoming(i) => i.peer_addr(),
        }
    }
}
