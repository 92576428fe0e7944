//! The transport chosen at run time: [`AnyTransport`] is the software transport or (with the
//! cargo feature `verbs`) the verbs transport, behind the same traits, so code that picks its
//! transport from a command line or the environment is written once. Dispatch is one `match`
//! per call (no boxing, no allocation).

use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::str::FromStr;
use std::time::Instant;

use super::soft::{SoftEndpoint, SoftIncoming, SoftListener, SoftRegion, SoftTransport};
#[cfg(feature = "verbs")]
use super::verbs::{VerbsEndpoint, VerbsIncoming, VerbsListener, VerbsRegion, VerbsTransport};
use super::{
    Completion, ConnectionEvent, Endpoint, Incoming, Listener, MemoryRegion, Result, SendWr, Sge,
    Transport,
};
use crate::memory::Buffer;

/// Runs `$body` with `$x` bound to whichever transport's value `$value` holds, wrapping the
/// result with `$wrap` (the same variant of another enum) when given.
macro_rules! dispatch {
    ($ty:ident, $value:expr, $x:ident => $body:expr) => {
        match $value {
            $ty::Soft($x) => $body,
            #[cfg(feature = "verbs")]
            $ty::Verbs($x) => $body,
        }
    };
    ($ty:ident, $value:expr, $x:ident => $body:expr, $wrap:ident) => {
        match $value {
            $ty::Soft($x) => $body.map($wrap::Soft),
            #[cfg(feature = "verbs")]
            $ty::Verbs($x) => $body.map($wrap::Verbs),
        }
    };
}

/// A transport chosen at run time. Parse one from its name (`"soft"`, `"verbs"`) with
/// [`str::parse`], or wrap a configured one with `From`.
#[derive(Clone, Debug)]
pub enum AnyTransport {
    /// The software transport (RC semantics over TCP).
    Soft(SoftTransport),
    /// The verbs transport (RDMA through libibverbs and librdmacm).
    #[cfg(feature = "verbs")]
    Verbs(VerbsTransport),
}

/// An endpoint of an [`AnyTransport`] (also before it is accepted, inside an
/// [`AnyIncoming`]).
#[derive(Debug)]
pub struct AnyEndpoint(Ep);

#[derive(Debug)]
enum Ep {
    Soft(SoftEndpoint),
    SoftIncoming(SoftIncoming),
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
    /// Verbs transport.
    #[cfg(feature = "verbs")]
    Verbs(VerbsRegion),
}

/// A listener of an [`AnyTransport`].
#[derive(Debug)]
pub enum AnyListener {
    /// Software transport.
    Soft(SoftListener),
    /// Verbs transport.
    #[cfg(feature = "verbs")]
    Verbs(VerbsListener),
}

/// A connection request of an [`AnyListener`].
#[derive(Debug)]
pub struct AnyIncoming(AnyEndpoint);

/// Names accepted by [`AnyTransport::from_str`] for the software transport.
const SOFT_NAMES: [&str; 3] = ["soft", "software", "tcp"];
/// Names accepted for the verbs transport.
const VERBS_NAMES: [&str; 2] = ["verbs", "rdma"];

/// Why a transport name could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseTransportError {
    /// Not the name of a transport.
    #[error("{0:?} is not a transport (use \"soft\" or \"verbs\")")]
    Unknown(String),
    /// The verbs transport, in a build without it.
    #[error(
        "the verbs transport is not part of this build (build naaice with the cargo feature `verbs`)"
    )]
    VerbsNotBuilt,
}

impl FromStr for AnyTransport {
    type Err = ParseTransportError;

    /// `soft` (also `software`, `tcp`) or `verbs` (also `rdma`), any case, with the default
    /// configuration.
    fn from_str(s: &str) -> Result<Self, ParseTransportError> {
        let name = s.trim().to_ascii_lowercase();
        if SOFT_NAMES.contains(&name.as_str()) {
            return Ok(Self::Soft(SoftTransport::default()));
        }
        if VERBS_NAMES.contains(&name.as_str()) {
            #[cfg(feature = "verbs")]
            return Ok(Self::Verbs(VerbsTransport::default()));
            #[cfg(not(feature = "verbs"))]
            return Err(ParseTransportError::VerbsNotBuilt);
        }
        Err(ParseTransportError::Unknown(s.to_owned()))
    }
}

impl AnyTransport {
    /// The transport's name, as [`AnyTransport::from_str`] accepts it.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Soft(_) => "soft",
            #[cfg(feature = "verbs")]
            Self::Verbs(_) => "verbs",
        }
    }
}

impl From<SoftTransport> for AnyTransport {
    fn from(t: SoftTransport) -> Self {
        Self::Soft(t)
    }
}

#[cfg(feature = "verbs")]
impl From<VerbsTransport> for AnyTransport {
    fn from(t: VerbsTransport) -> Self {
        Self::Verbs(t)
    }
}

impl Transport for AnyTransport {
    type Endpoint = AnyEndpoint;
    type Listener = AnyListener;

    fn connect(
        &self,
        remote: SocketAddr,
        local: Option<SocketAddr>,
        deadline: Instant,
    ) -> Result<AnyEndpoint> {
        let ep = match self {
            Self::Soft(t) => Ep::Soft(t.connect(remote, local, deadline)?),
            #[cfg(feature = "verbs")]
            Self::Verbs(t) => Ep::Verbs(t.connect(remote, local, deadline)?),
        };
        Ok(AnyEndpoint(ep))
    }

    fn listen(&self, addr: SocketAddr) -> Result<AnyListener> {
        dispatch!(Self, self, t => t.listen(addr), AnyListener)
    }

    /// The in-process NAA is always reached with the software transport (verbs too has
    /// no loopback without an RDMA device), so local mode works whichever transport the
    /// program chose.
    fn connect_local(&self, remote: SocketAddr, deadline: Instant) -> Result<AnyEndpoint> {
        let soft = match self {
            Self::Soft(t) => t.clone(),
            #[cfg(feature = "verbs")]
            Self::Verbs(_) => SoftTransport::default(),
        };
        Ok(AnyEndpoint(Ep::Soft(soft.connect(remote, None, deadline)?)))
    }
}

impl Listener for AnyListener {
    type Incoming = AnyIncoming;

    fn next_request(&mut self, deadline: Instant) -> Result<Option<AnyIncoming>> {
        let ep = match self {
            Self::Soft(l) => l.next_request(deadline)?.map(Ep::SoftIncoming),
            #[cfg(feature = "verbs")]
            Self::Verbs(l) => l.next_request(deadline)?.map(Ep::VerbsIncoming),
        };
        Ok(ep.map(|ep| AnyIncoming(AnyEndpoint(ep))))
    }

    fn local_addr(&self) -> SocketAddr {
        dispatch!(Self, self, l => l.local_addr())
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
    fn wait(&mut self, deadline: Instant) -> Result<bool> {
        with_endpoint!(self, e => e.wait(deadline))
    }
    fn arm_ready(&mut self) -> Result<bool> {
        with_endpoint!(self, e => e.arm_ready())
    }
    fn ready_fd(&self) -> Option<BorrowedFd<'_>> {
        // Requests not accepted yet are the server's; nobody waits on many of them.
        match &self.0 {
            Ep::Soft(e) => e.ready_fd(),
            #[cfg(feature = "verbs")]
            Ep::Verbs(e) => e.ready_fd(),
            _ => None,
        }
    }
    fn disconnect(&mut self) {
        with_endpoint!(self, e => e.disconnect())
    }
    fn peer_addr(&self) -> Option<SocketAddr> {
        match &self.0 {
            Ep::Soft(e) => e.peer_addr(),
            Ep::SoftIncoming(i) => i.peer_addr(),
            #[cfg(feature = "verbs")]
            Ep::Verbs(e) => e.peer_addr(),
            #[cfg(feature = "verbs")]
            Ep::VerbsIncoming(i) => i.peer_addr(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_to_their_transport() {
        for name in ["soft", " Software ", "TCP"] {
            let t: AnyTransport = name.parse().unwrap();
            assert_eq!(t.name(), "soft");
        }
        assert_eq!(
            "pigeon".parse::<AnyTransport>().unwrap_err(),
            ParseTransportError::Unknown("pigeon".into())
        );
    }

    #[test]
    #[cfg(feature = "verbs")]
    fn verbs_parses_when_built() {
        for name in ["verbs", "RDMA"] {
            assert_eq!(name.parse::<AnyTransport>().unwrap().name(), "verbs");
        }
    }

    #[test]
    #[cfg(not(feature = "verbs"))]
    fn verbs_names_the_feature_when_not_built() {
        let e = "verbs".parse::<AnyTransport>().unwrap_err();
        assert_eq!(e, ParseTransportError::VerbsNotBuilt);
        assert!(e.to_string().contains("cargo feature `verbs`"), "{e}");
    }

    #[test]
    fn an_rpc_through_the_runtime_transport() {
        use crate::swnaa::{KernelRegistry, SoftNaa, SoftNaaConfig};
        use crate::{Naa, NaaOptions, Param};
        let transport: AnyTransport = "soft".parse().unwrap();
        let naa = SoftNaa::bind(
            transport.clone(),
            "127.0.0.1:0".parse().unwrap(),
            SoftNaaConfig::default(),
            KernelRegistry::builtin(),
        )
        .unwrap()
        .spawn()
        .unwrap();
        let p = Param::from_vec(vec![1, 2, 3]);
        let options = NaaOptions::at(naa.local_addr());
        let mut h: Naa =
            Naa::create_with(&transport, 1, vec![p.clone()], vec![p], &options).unwrap();
        h.invoke().unwrap();
        assert!(h.wait().unwrap().naa_error.is_success());
        assert_eq!(h.output(0).unwrap().to_vec(), [2, 3, 4]);
    }
}
