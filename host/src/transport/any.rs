//! The transport chosen at run time: [`AnyTransport`] is the software transport or (with the
//! cargo feature `verbs`) the verbs transport, behind the same traits, so code that picks its
//! transport from a command line or the environment is written once. Dispatch is one `match`
//! per call (no boxing, no allocation).

use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::str::FromStr;
use std::time::Instant;

use super::auto::{AutoListener, AutoTransport, Served};
use super::soft::{SoftEndpoint, SoftIncoming, SoftListener, SoftRegion, SoftTransport};
#[cfg(feature = "verbs")]
use super::verbs::{VerbsEndpoint, VerbsIncoming, VerbsListener, VerbsRegion, VerbsTransport};
use super::{
    Completion, ConnectionEvent, Endpoint, Incoming, Listener, MemoryRegion, ParseTransportError,
    Result, SendWr, Sge, Transport, TransportChoice, TransportKind,
};
use crate::memory::Buffer;

/// Runs `$body` with `$x` bound to whichever transport's value `$value` holds.
macro_rules! dispatch {
    ($ty:ident, $value:expr, $x:ident => $body:expr) => {
        match $value {
            $ty::Soft($x) => $body,
            #[cfg(feature = "verbs")]
            $ty::Verbs($x) => $body,
        }
    };
}

/// A transport chosen at run time. Parse one from its name (`"auto"`, `"soft"`, `"verbs"`)
/// with [`str::parse`], read `NAAICE_TRANSPORT` with
/// [`transport_from_env`](crate::discovery::environment::transport_from_env), or wrap a configured one
/// with `From`. The default is `auto` ([`super::auto`]).
#[derive(Clone, Debug)]
pub enum AnyTransport {
    /// Verbs where it reaches the NAA, else the software transport; servers serve both.
    Auto(AutoTransport),
    /// The software transport (RC semantics over TCP).
    Soft(SoftTransport),
    /// The verbs transport (RDMA through libibverbs and librdmacm).
    #[cfg(feature = "verbs")]
    Verbs(VerbsTransport),
}

impl Default for AnyTransport {
    fn default() -> Self {
        Self::Auto(AutoTransport::default())
    }
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
    /// `auto`: the software transport, plus verbs where it can.
    Auto(AutoListener),
    /// Software transport.
    Soft(SoftListener),
    /// Verbs transport.
    #[cfg(feature = "verbs")]
    Verbs(VerbsListener),
}

/// A connection request of an [`AnyListener`].
#[derive(Debug)]
pub struct AnyIncoming(AnyEndpoint);

impl FromStr for AnyTransport {
    type Err = ParseTransportError;

    /// `auto`, `soft` (also `software`, `tcp`) or `verbs` (also `rdma`), any case, with the
    /// default configuration.
    fn from_str(s: &str) -> Result<Self, ParseTransportError> {
        s.parse().map(Self::from_choice)
    }
}

impl AnyTransport {
    /// The transport for `choice`, with the default configuration.
    pub fn from_choice(choice: TransportChoice) -> Self {
        match choice {
            TransportChoice::Auto => Self::default(),
            TransportChoice::Only(TransportKind::Soft) => Self::Soft(SoftTransport::default()),
            #[cfg(feature = "verbs")]
            TransportChoice::Only(TransportKind::Verbs) => Self::Verbs(VerbsTransport::default()),
            #[cfg(not(feature = "verbs"))]
            TransportChoice::Only(TransportKind::Verbs) => {
                unreachable!("TransportKind::Verbs does not parse without the verbs transport")
            }
        }
    }

    /// What was chosen.
    pub fn choice(&self) -> TransportChoice {
        match self {
            Self::Auto(_) => TransportChoice::Auto,
            Self::Soft(_) => TransportChoice::Only(TransportKind::Soft),
            #[cfg(feature = "verbs")]
            Self::Verbs(_) => TransportChoice::Only(TransportKind::Verbs),
        }
    }

    /// The transport's name, as [`AnyTransport::from_str`] accepts it.
    pub fn name(&self) -> &'static str {
        self.choice().name()
    }

    /// The software transport (this one's configuration where it has one).
    fn soft(&self) -> SoftTransport {
        match self {
            Self::Auto(a) => a.soft.clone(),
            Self::Soft(t) => t.clone(),
            #[cfg(feature = "verbs")]
            Self::Verbs(_) => SoftTransport::default(),
        }
    }

    /// The verbs transport (this one's configuration where it has one).
    #[cfg(feature = "verbs")]
    fn verbs(&self) -> VerbsTransport {
        match self {
            Self::Auto(a) => a.verbs.clone(),
            Self::Verbs(t) => t.clone(),
            Self::Soft(_) => VerbsTransport::default(),
        }
    }

    /// Each transport a listener of this transport serves (see [`AnyListener::served`]).
    pub fn kinds(&self) -> &'static [TransportKind] {
        match self {
            Self::Auto(_) => &[TransportKind::Soft, TransportKind::Verbs],
            Self::Soft(_) => &[TransportKind::Soft],
            #[cfg(feature = "verbs")]
            Self::Verbs(_) => &[TransportKind::Verbs],
        }
    }
}

impl AnyListener {
    /// Each transport this listener serves, with its address, or why it is not served.
    pub fn served(&self) -> Vec<Served> {
        match self {
            Self::Auto(l) => l.served(),
            Self::Soft(l) => vec![Served {
                kind: TransportKind::Soft,
                addr: Ok(l.local_addr()),
            }],
            #[cfg(feature = "verbs")]
            Self::Verbs(l) => vec![Served {
                kind: TransportKind::Verbs,
                addr: Ok(l.local_addr()),
            }],
        }
    }
}

impl AnyEndpoint {
    /// The transport this endpoint uses (for `auto`, the one it chose).
    pub fn kind(&self) -> TransportKind {
        match &self.0 {
            Ep::Soft(_) | Ep::SoftIncoming(_) => TransportKind::Soft,
            #[cfg(feature = "verbs")]
            Ep::Verbs(_) | Ep::VerbsIncoming(_) => TransportKind::Verbs,
        }
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
        match self {
            Self::Auto(t) => t.connect(remote, local, deadline),
            Self::Soft(t) => Ok(AnyEndpoint(Ep::Soft(t.connect(remote, local, deadline)?))),
            #[cfg(feature = "verbs")]
            Self::Verbs(t) => t.connect(remote, local, deadline).map(AnyEndpoint::from),
        }
    }

    /// A `NAA_SPEC` entry's transport wins over this one's choice (the configuration of
    /// the named transport is this one's where it has one).
    fn connect_as(
        &self,
        kind: Option<TransportKind>,
        remote: SocketAddr,
        local: Option<SocketAddr>,
        deadline: Instant,
    ) -> Result<AnyEndpoint> {
        match kind {
            None => self.connect(remote, local, deadline),
            Some(TransportKind::Soft) => Ok(AnyEndpoint(Ep::Soft(
                self.soft().connect(remote, local, deadline)?,
            ))),
            #[cfg(feature = "verbs")]
            Some(TransportKind::Verbs) => self
                .verbs()
                .connect(remote, local, deadline)
                .map(AnyEndpoint::from),
            #[cfg(not(feature = "verbs"))]
            Some(TransportKind::Verbs) => Err(super::TransportError::Unavailable(
                ParseTransportError::VerbsNotBuilt.to_string(),
            )),
        }
    }

    fn kind(&self) -> Option<TransportKind> {
        match self.choice() {
            TransportChoice::Auto => None,
            TransportChoice::Only(k) => Some(k),
        }
    }

    fn listen(&self, addr: SocketAddr) -> Result<AnyListener> {
        match self {
            Self::Auto(t) => t.listen(addr).map(AnyListener::Auto),
            Self::Soft(t) => t.listen(addr).map(AnyListener::Soft),
            #[cfg(feature = "verbs")]
            Self::Verbs(t) => t.listen(addr).map(AnyListener::Verbs),
        }
    }

    /// The in-process NAA is always reached with the software transport (verbs too has
    /// no loopback without an RDMA device), so local mode works whichever transport the
    /// program chose.
    fn connect_local(&self, remote: SocketAddr, deadline: Instant) -> Result<AnyEndpoint> {
        Ok(AnyEndpoint(Ep::Soft(
            self.soft().connect(remote, None, deadline)?,
        )))
    }
}

impl Listener for AnyListener {
    type Incoming = AnyIncoming;

    fn next_request(&mut self, deadline: Instant) -> Result<Option<AnyIncoming>> {
        match self {
            Self::Auto(l) => l.next_request(deadline),
            Self::Soft(l) => Ok(l.next_request(deadline)?.map(AnyIncoming::from)),
            #[cfg(feature = "verbs")]
            Self::Verbs(l) => Ok(l.next_request(deadline)?.map(AnyIncoming::from)),
        }
    }

    fn local_addr(&self) -> SocketAddr {
        match self {
            Self::Auto(l) => l.local_addr(),
            Self::Soft(l) => l.local_addr(),
            #[cfg(feature = "verbs")]
            Self::Verbs(l) => l.local_addr(),
        }
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
            #[cfg(feature = "verbs")]
            Ep::Verbs(e) => e.ready_fd(),
            _ => None,
        }
    }
    fn waker(&self) -> Option<super::Waker> {
        match &self.0 {
            Ep::Soft(e) => e.waker(),
            #[cfg(feature = "verbs")]
            Ep::Verbs(e) => e.waker(),
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
        for name in ["auto", "", " AUTO "] {
            assert_eq!(name.parse::<AnyTransport>().unwrap().name(), "auto");
        }
        assert_eq!(AnyTransport::default().name(), "auto");
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

    /// A software NAA on a free loopback port over `transport`, with the built-in kernels.
    fn bound(transport: AnyTransport) -> crate::swnaa::SoftNaa<AnyTransport> {
        use crate::swnaa::{KernelRegistry, SoftNaa, SoftNaaConfig};
        let addr = "127.0.0.1:0".parse().unwrap();
        SoftNaa::bind(
            transport,
            addr,
            SoftNaaConfig::default(),
            KernelRegistry::builtin(),
        )
        .unwrap()
    }

    /// One RPC of built-in kernel `fncode` (adds `fncode` to every byte) on `data` in place.
    fn rpc(
        transport: &AnyTransport,
        options: &crate::NaaOptions,
        fncode: u32,
        data: &[u8],
    ) -> Vec<u8> {
        use crate::{Naa, Param};
        let p = Param::from_vec(data.to_vec());
        let mut h: Naa =
            Naa::create_with(transport, fncode, vec![p.clone()], vec![p], options).unwrap();
        h.invoke().unwrap();
        assert!(h.wait().unwrap().naa_error.is_success());
        let out = h.output(0).unwrap().to_vec();
        h.finalize();
        out
    }

    #[test]
    fn an_rpc_through_the_runtime_transport() {
        let transport: AnyTransport = "soft".parse().unwrap();
        let naa = bound(transport.clone()).spawn().unwrap();
        let options = crate::NaaOptions::at(naa.local_addr());
        assert_eq!(rpc(&transport, &options, 1, &[1, 2, 3]), [2, 3, 4]);
    }

    #[test]
    fn auto_clients_meet_an_auto_software_naa() {
        let transport = AnyTransport::default();
        let naa = bound(transport.clone());
        let served = naa.served();
        assert_eq!(served[0].kind, TransportKind::Soft);
        assert_eq!(served[0].addr, Ok(naa.local_addr()));
        assert_eq!(served[1].kind, TransportKind::Verbs);
        // Verbs is served exactly where this machine can use it.
        assert_eq!(
            served[1].addr.is_err(),
            super::super::auto::verbs_unusable().is_some()
        );
        let banner: Vec<String> = served.iter().map(ToString::to_string).collect();
        assert!(banner[0].contains("NAAICE_TRANSPORT=auto"), "{banner:?}");
        let naa = naa.spawn().unwrap();
        let options = crate::NaaOptions::at(naa.local_addr());
        assert_eq!(rpc(&transport, &options, 2, &[1, 2, 3]), [3, 4, 5]);
    }

    #[test]
    fn auto_names_both_transports_when_nothing_answers() {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = free.local_addr().unwrap();
        drop(free);
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        let err = AnyTransport::default()
            .connect(addr, None, deadline)
            .unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, super::super::TransportError::NotReached(_)),
            "{text}"
        );
        assert!(text.contains("verbs") && text.contains("soft:"), "{text}");
        assert!(text.contains("naaice-info"), "{text}");
    }

    #[test]
    fn an_entry_names_its_transport() {
        use crate::discovery::select::Pool;
        use crate::discovery::spec::parse;
        use crate::{Error, Naa, NaaOptions, Param};
        let naa = bound("soft".parse().unwrap()).spawn().unwrap();
        let port = naa.local_addr().port();
        let options = |spec: &str| NaaOptions {
            pool: Some(Pool::new(parse(spec).unwrap())),
            rank: Some(crate::discovery::environment::Rank::SINGLE),
            connect_timeout: std::time::Duration::from_secs(2),
            ..NaaOptions::default()
        };
        // `soft` in the entry wins over a verbs-only program transport.
        #[cfg(feature = "verbs")]
        let program = AnyTransport::Verbs(VerbsTransport::default());
        #[cfg(not(feature = "verbs"))]
        let program = AnyTransport::default();
        let spec = format!("127.0.0.1:{port}:1:1:soft");
        assert_eq!(rpc(&program, &options(&spec), 1, &[7]), [8]);
        // A concrete transport cannot make another kind of connection: a clear error.
        if cfg!(feature = "verbs") {
            let spec = format!("127.0.0.1:{port}:1:1:verbs");
            let p = Param::from_vec(vec![7]);
            let err = Naa::create_with(
                &SoftTransport::default(),
                1,
                vec![p.clone()],
                vec![p],
                &options(&spec),
            )
            .unwrap_err();
            assert!(
                matches!(
                    err,
                    Error::Transport(super::super::TransportError::Unavailable(_))
                ),
                "{err}"
            );
            assert!(
                err.to_string().contains("names the verbs transport"),
                "{err}"
            );
        }
    }
}
