//! The transport chosen at run time: [`AnyTransport`] is `auto` (verbs where it reaches the
//! NAA, else the software transport; servers serve both), the software transport or (with the
//! cargo feature `verbs`) the verbs transport, behind the same traits, so code that picks its
//! transport from a command line or the environment is written once. Its endpoints, requests
//! and regions are in `any_endpoint`; what `auto` does is in [`super::auto`].

use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Instant;

use super::any_endpoint::{AnyEndpoint, AnyIncoming};
use super::auto::{self, Served};
use super::soft::{SoftListener, SoftTransport};
#[cfg(feature = "verbs")]
use super::verbs::{VerbsListener, VerbsTransport};
use super::{Listener, ParseTransportError, Result, Transport, TransportChoice, TransportKind};

/// A transport chosen at run time: the choice (`auto`, the default, or one transport) and the
/// configuration of each transport it may use. Parse one from its name (`"auto"`, `"soft"`,
/// `"verbs"`) with [`str::parse`], read `NAAICE_TRANSPORT` with
/// [`transport_from_env`](crate::discovery::environment::transport_from_env), or wrap a
/// configured transport with `From`. A `NAA_SPEC` entry that names a transport uses it with
/// this one's configuration of it ([`Transport::connect_as`]).
#[derive(Clone, Debug, Default)]
pub struct AnyTransport {
    choice: TransportChoice,
    /// The software transport's configuration.
    pub soft: SoftTransport,
    /// The verbs transport's configuration.
    #[cfg(feature = "verbs")]
    pub verbs: VerbsTransport,
}

/// The `auto` transport, now [`AnyTransport`] (whose default is `auto`).
#[deprecated(
    since = "0.3.0",
    note = "use AnyTransport: AnyTransport::default() is auto, with the same `soft` and `verbs` fields"
)]
pub type AutoTransport = AnyTransport;

/// The `auto` transport's listener, now [`AnyListener`].
#[deprecated(since = "0.3.0", note = "use AnyListener")]
pub type AutoListener = AnyListener;

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
        Self {
            choice,
            ..Self::default()
        }
    }

    /// What was chosen.
    pub fn choice(&self) -> TransportChoice {
        self.choice
    }

    /// The transport's name, as [`AnyTransport::from_str`] accepts it.
    pub fn name(&self) -> &'static str {
        self.choice.name()
    }

    /// Each transport a listener of this transport serves (see [`AnyListener::served`]).
    pub fn kinds(&self) -> &'static [TransportKind] {
        match self.choice {
            TransportChoice::Auto => &[TransportKind::Soft, TransportKind::Verbs],
            TransportChoice::Only(TransportKind::Soft) => &[TransportKind::Soft],
            TransportChoice::Only(TransportKind::Verbs) => &[TransportKind::Verbs],
        }
    }

    /// Connects as `choice` says (this one's, or a `NAA_SPEC` entry's); an NAA of the
    /// in-process transport ([`super::local`]) through it, whatever the choice.
    fn connect_by(
        &self,
        choice: TransportChoice,
        remote: SocketAddr,
        local: Option<SocketAddr>,
        deadline: Instant,
    ) -> Result<AnyEndpoint> {
        if super::local::is_listening(remote) {
            return super::local::LocalTransport
                .connect(remote, local, deadline)
                .map(AnyEndpoint::from);
        }
        match choice {
            TransportChoice::Auto => auto::connect(
                &self.soft,
                #[cfg(feature = "verbs")]
                &self.verbs,
                remote,
                local,
                deadline,
            ),
            TransportChoice::Only(TransportKind::Soft) => self
                .soft
                .connect(remote, local, deadline)
                .map(AnyEndpoint::from),
            #[cfg(feature = "verbs")]
            TransportChoice::Only(TransportKind::Verbs) => self
                .verbs
                .connect(remote, local, deadline)
                .map(AnyEndpoint::from),
            #[cfg(not(feature = "verbs"))]
            TransportChoice::Only(TransportKind::Verbs) => Err(super::TransportError::Unavailable(
                ParseTransportError::VerbsNotBuilt.to_string(),
            )),
        }
    }
}

impl From<SoftTransport> for AnyTransport {
    // Without the verbs transport `soft` is the only other field.
    #[cfg_attr(not(feature = "verbs"), allow(clippy::needless_update))]
    fn from(soft: SoftTransport) -> Self {
        Self {
            choice: TransportChoice::Only(TransportKind::Soft),
            soft,
            ..Self::default()
        }
    }
}

#[cfg(feature = "verbs")]
impl From<VerbsTransport> for AnyTransport {
    fn from(verbs: VerbsTransport) -> Self {
        Self {
            choice: TransportChoice::Only(TransportKind::Verbs),
            verbs,
            ..Self::default()
        }
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
        self.connect_by(self.choice, remote, local, deadline)
    }

    /// A `NAA_SPEC` entry's transport wins over this one's choice (with this one's
    /// configuration of it).
    fn connect_as(
        &self,
        kind: Option<TransportKind>,
        remote: SocketAddr,
        local: Option<SocketAddr>,
        deadline: Instant,
    ) -> Result<AnyEndpoint> {
        let choice = kind.map_or(self.choice, TransportChoice::Only);
        self.connect_by(choice, remote, local, deadline)
    }

    fn kind(&self) -> Option<TransportKind> {
        match self.choice {
            TransportChoice::Auto => None,
            TransportChoice::Only(k) => Some(k),
        }
    }

    fn listen(&self, addr: SocketAddr) -> Result<AnyListener> {
        match self.choice {
            TransportChoice::Auto => AnyListener::auto(self, addr),
            TransportChoice::Only(TransportKind::Soft) => {
                self.soft.listen(addr).map(AnyListener::soft)
            }
            #[cfg(feature = "verbs")]
            TransportChoice::Only(TransportKind::Verbs) => {
                let l = self.verbs.listen(addr)?;
                Ok(AnyListener {
                    addr: l.local_addr(),
                    served: vec![Served {
                        kind: TransportKind::Verbs,
                        addr: Ok(l.local_addr()),
                    }],
                    inner: Inner::Verbs(l),
                })
            }
            #[cfg(not(feature = "verbs"))]
            TransportChoice::Only(TransportKind::Verbs) => Err(super::TransportError::Unavailable(
                ParseTransportError::VerbsNotBuilt.to_string(),
            )),
        }
    }

    /// The in-process NAA of local mode is reached through the in-process transport, the
    /// loopback one through the software transport (verbs has no loopback without an RDMA
    /// device), so local mode works whichever transport the program chose.
    fn connect_local(&self, remote: SocketAddr, deadline: Instant) -> Result<AnyEndpoint> {
        if super::local::is_listening(remote) {
            return self.connect(remote, None, deadline);
        }
        self.soft
            .connect(remote, None, deadline)
            .map(AnyEndpoint::from)
    }
}

/// A listener of an [`AnyTransport`]: one transport's, or for `auto` the software transport's
/// plus verbs' where this machine can serve it (the same port number in both port spaces).
#[derive(Debug)]
pub struct AnyListener {
    /// The bound address (the software transport's for `auto`).
    addr: SocketAddr,
    served: Vec<Served>,
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    Soft(Box<SoftListener>),
    #[cfg(feature = "verbs")]
    Verbs(VerbsListener),
    /// `auto` serving both: each listener on a thread that forwards its requests.
    #[cfg(feature = "verbs")]
    Both(auto::Forward),
}

impl AnyListener {
    /// Each transport this listener serves, with its address, or why it is not served.
    pub fn served(&self) -> Vec<Served> {
        self.served.clone()
    }

    /// The software transport's listener alone.
    fn soft(l: SoftListener) -> Self {
        let addr = l.local_addr();
        Self {
            addr,
            served: vec![Served {
                kind: TransportKind::Soft,
                addr: Ok(addr),
            }],
            inner: Inner::Soft(Box::new(l)),
        }
    }

    /// `auto`: listens on `addr` with the software transport and, where it can, verbs on the
    /// same port number.
    fn auto(transport: &AnyTransport, addr: SocketAddr) -> Result<Self> {
        let soft = transport.soft.listen(addr)?;
        let bound = soft.local_addr();
        #[cfg(feature = "verbs")]
        let verbs = match auto::verbs_unusable() {
            Some(why) => Err(why),
            None => transport
                .verbs
                .listen(bound)
                .map_err(|e| format!("cannot listen on {bound}: {e}")),
        };
        #[cfg(not(feature = "verbs"))]
        let verbs: std::result::Result<std::convert::Infallible, String> =
            Err(auto::verbs_unusable().unwrap_or_default());
        let (verbs_addr, inner) = match verbs {
            #[cfg(feature = "verbs")]
            Ok(verbs) => (
                Ok(verbs.local_addr()),
                Inner::Both(auto::Forward::start(soft, verbs)?),
            ),
            Err(why) => {
                tracing::debug!(reason = %why, "auto: serving the software transport only");
                (Err(why), Inner::Soft(Box::new(soft)))
            }
        };
        Ok(Self {
            addr: bound,
            served: vec![
                Served {
                    kind: TransportKind::Soft,
                    addr: Ok(bound),
                },
                Served {
                    kind: TransportKind::Verbs,
                    addr: verbs_addr,
                },
            ],
            inner,
        })
    }
}

impl Listener for AnyListener {
    type Incoming = AnyIncoming;

    fn next_request(&mut self, deadline: Instant) -> Result<Option<AnyIncoming>> {
        match &mut self.inner {
            Inner::Soft(l) => Ok(l.next_request(deadline)?.map(AnyIncoming::from)),
            #[cfg(feature = "verbs")]
            Inner::Verbs(l) => Ok(l.next_request(deadline)?.map(AnyIncoming::from)),
            #[cfg(feature = "verbs")]
            Inner::Both(f) => f.next_request(deadline),
        }
    }

    fn local_addr(&self) -> SocketAddr {
        self.addr
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
        assert_eq!(served[1].addr.is_err(), auto::verbs_unusable().is_some());
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
        let program = AnyTransport::from(VerbsTransport::default());
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
