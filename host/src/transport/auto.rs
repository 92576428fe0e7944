//! The `auto` transport, the default: a client uses verbs where an RDMA device can reach the
//! NAA and the NAA answers over verbs, else the software transport; a server serves both at
//! once where it can (the same port number in both port spaces).
//!
//! | side | rdma-core and an RDMA device | what `auto` does |
//! |---|---|---|
//! | client | yes | verbs first (half of the connect deadline); on any failure (no route through an RDMA device, no verbs listener at the NAA) the software transport |
//! | client | no | the software transport; if that fails too, the error says verbs was not tried and why |
//! | server | yes | listens on both transports |
//! | server | no | listens on the software transport and says why verbs is not served |

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::any_endpoint::{AnyEndpoint, AnyIncoming};
#[cfg(feature = "verbs")]
use super::soft::SoftListener;
use super::soft::SoftTransport;
#[cfg(feature = "verbs")]
use super::verbs::VerbsTransport;
use super::{Listener, Result, Transport, TransportError, TransportKind};

/// What a listener serves: a transport and its address, or why it is not served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    /// The transport.
    pub kind: TransportKind,
    /// The bound address, or why this transport is not served.
    pub addr: std::result::Result<SocketAddr, String>,
}

impl std::fmt::Display for Served {
    /// One line for a server's banner: what it serves and which client settings reach it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.kind {
            TransportKind::Soft => "soft (RC over TCP)",
            TransportKind::Verbs => "verbs (RDMA)",
        };
        match &self.addr {
            Ok(addr) => write!(
                f,
                "{what} on {addr}: reached by clients with NAAICE_TRANSPORT=auto (the \
                 default) or {}",
                self.kind
            ),
            Err(why) => write!(
                f,
                "{what} not served ({why}): clients with NAAICE_TRANSPORT={} cannot reach \
                 this NAA",
                self.kind
            ),
        }
    }
}

/// Why the verbs transport cannot be used on this machine (`None`: it can be tried).
pub fn verbs_unusable() -> Option<String> {
    #[cfg(feature = "verbs")]
    {
        if super::verbs::rdma_core_check().is_err() {
            return Some(
                "rdma-core is not installed: Debian/Ubuntu libibverbs1, librdmacm1 and \
                 ibverbs-providers; RHEL/Rocky/SUSE rdma-core"
                    .into(),
            );
        }
        match super::verbs::device_names() {
            Ok(devices) if !devices.is_empty() => None,
            Ok(_) => Some("no RDMA device on this machine".into()),
            Err(e) => Some(e.to_string()),
        }
    }
    #[cfg(not(feature = "verbs"))]
    Some("this build has no verbs transport (cargo feature `verbs`)".into())
}

/// Connects to `remote` as the module documentation describes: verbs (`verbs`, where this
/// machine can use it) with half of the time left, else `soft`.
pub(super) fn connect(
    soft: &SoftTransport,
    #[cfg(feature = "verbs")] verbs: &VerbsTransport,
    remote: SocketAddr,
    local: Option<SocketAddr>,
    deadline: Instant,
) -> Result<AnyEndpoint> {
    let verbs_failure = match verbs_unusable() {
        Some(why) => format!("verbs not tried ({why})"),
        None => {
            #[cfg(feature = "verbs")]
            let tried = {
                let now = Instant::now();
                let half = now + deadline.saturating_duration_since(now) / 2;
                verbs.connect(remote, local, half).map(AnyEndpoint::from)
            };
            #[cfg(not(feature = "verbs"))]
            let tried: Result<AnyEndpoint> = Err(TransportError::Unavailable(
                "this build has no verbs transport".into(),
            ));
            match tried {
                Ok(ep) => return Ok(ep),
                Err(e) => {
                    tracing::debug!(%remote, error = %e, "auto: verbs failed, trying the software transport");
                    format!("verbs: {e}")
                }
            }
        }
    };
    match soft.connect(remote, local, deadline) {
        Ok(ep) => Ok(AnyEndpoint::from(ep)),
        Err(TransportError::Rejected(why)) => Err(TransportError::Rejected(why)),
        Err(e) => Err(TransportError::NotReached(format!(
            "{verbs_failure}; soft: {e}. A software NAA (naaice-swnaa) serves the software \
             transport: is it running at {remote}? An FPGA NAA is reached only over verbs: \
             this machine needs rdma-core and an RDMA device with a route to it (run \
             `naaice-info --probe` to check)"
        ))),
    }
}

/// Two listeners, each on a thread of its own that forwards its requests to one channel: an
/// `auto` server's listener where it serves both transports.
#[derive(Debug)]
#[cfg_attr(not(feature = "verbs"), allow(dead_code))]
pub(super) struct Forward {
    requests: mpsc::Receiver<Result<AnyIncoming>>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

/// How often a forwarding thread looks at the stop flag.
const FORWARD_TICK: Duration = Duration::from_millis(100);

#[cfg_attr(not(feature = "verbs"), allow(dead_code))]
impl Forward {
    /// Forwards the requests of both listeners.
    #[cfg(feature = "verbs")]
    pub(super) fn start(soft: SoftListener, verbs: super::verbs::VerbsListener) -> Result<Self> {
        let (tx, requests) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let threads = vec![
            spawn_forward("naaice-listen-soft", soft, tx.clone(), Arc::clone(&stop))?,
            spawn_forward("naaice-listen-verbs", verbs, tx, Arc::clone(&stop))?,
        ];
        Ok(Self {
            requests,
            stop,
            threads,
        })
    }

    /// The next request from either listener, until `deadline`.
    pub(super) fn next_request(&mut self, deadline: Instant) -> Result<Option<AnyIncoming>> {
        let wait = deadline.saturating_duration_since(Instant::now());
        match self.requests.recv_timeout(wait) {
            Ok(request) => request.map(Some),
            Err(mpsc::RecvTimeoutError::Timeout) => Ok(None),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(TransportError::NotConnected),
        }
    }
}

impl Drop for Forward {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Starts a thread that forwards `listener`'s requests (and errors) into `tx` until `stop`.
#[cfg_attr(not(feature = "verbs"), allow(dead_code))]
fn spawn_forward<L>(
    name: &str,
    mut listener: L,
    tx: mpsc::Sender<Result<AnyIncoming>>,
    stop: Arc<AtomicBool>,
) -> Result<JoinHandle<()>>
where
    L: Listener + 'static,
    AnyIncoming: From<L::Incoming>,
{
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let sent = match listener.next_request(Instant::now() + FORWARD_TICK) {
                    Ok(None) => continue,
                    Ok(Some(request)) => tx.send(Ok(AnyIncoming::from(request))),
                    Err(e) => {
                        // The master throttles and logs it; do not spin on a broken listener.
                        std::thread::sleep(Duration::from_millis(10));
                        tx.send(Err(e))
                    }
                };
                if sent.is_err() {
                    break; // the listener was dropped
                }
            }
        })
        .map_err(|source| TransportError::Io {
            call: "spawn",
            source,
        })
}
