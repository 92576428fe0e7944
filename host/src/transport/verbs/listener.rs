//! Connection management: the active side ([`connect`]), the passive side
//! ([`VerbsListener`]) and connection requests ([`VerbsIncoming`]).

use std::net::SocketAddr;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Instant;

use super::sys::{
    rdma_accept, rdma_bind_addr, rdma_cm_event_type, rdma_conn_param, rdma_connect,
    rdma_get_local_addr, rdma_listen, rdma_reject, rdma_resolve_addr, rdma_resolve_route,
};

use super::cm::{CmEvent, CmId, EventChannel};
use super::endpoint::{State, VerbsEndpoint};
use super::sockaddr::{self, CSockAddr};
use super::{
    BACKLOG, MAX_REJECT_DATA, Result, TransportError, VerbsConfig, millis_until, os_error,
};
use crate::transport::{Incoming, Listener};

/// The connection parameters of connect and accept (spec §1.1): no private data,
/// `initiator_depth = responder_resources = 1`, `retry_count = 7`, `rnr_retry_count = 6`.
fn conn_param() -> rdma_conn_param {
    rdma_conn_param {
        private_data: std::ptr::null(),
        private_data_len: 0,
        responder_resources: 1,
        initiator_depth: 1,
        flow_control: 0,
        retry_count: 7,
        rnr_retry_count: 6,
        srq: 0,
        qp_num: 0,
    }
}

/// The error of an rdma_cm error event.
fn event_error(call: &'static str, event: &CmEvent) -> TransportError {
    let errno = event.status.unsigned_abs() as i32;
    let source = if errno != 0 {
        std::io::Error::from_raw_os_error(errno)
    } else {
        std::io::Error::other(format!("{} event", event.name()))
    };
    super::errno_error(call, source)
}

/// Waits for the event `want` on `channel`; other terminal events become errors.
fn expect_event(
    channel: &EventChannel,
    want: rdma_cm_event_type::Type,
    call: &'static str,
    deadline: Instant,
) -> Result<()> {
    use rdma_cm_event_type::*;
    loop {
        let Some(event) = channel.next(deadline)? else {
            return Err(TransportError::TimedOut);
        };
        tracing::debug!(
            event = event.name(),
            status = event.status,
            "verbs: connect"
        );
        match event.kind {
            k if k == want => return Ok(()),
            RDMA_CM_EVENT_REJECTED => {
                let reason = String::from_utf8_lossy(&event.private_data)
                    .trim_end_matches('\0')
                    .to_owned();
                return Err(TransportError::Rejected(if reason.is_empty() {
                    format!("no reason given (CM status {})", event.status)
                } else {
                    reason
                }));
            }
            RDMA_CM_EVENT_ADDR_ERROR
            | RDMA_CM_EVENT_ROUTE_ERROR
            | RDMA_CM_EVENT_CONNECT_ERROR
            | RDMA_CM_EVENT_UNREACHABLE
            | RDMA_CM_EVENT_DEVICE_REMOVAL
            | RDMA_CM_EVENT_DISCONNECTED => return Err(event_error(call, &event)),
            _ => {}
        }
    }
}

/// The active side (spec §1.2): resolve address and route, create the connection's verbs
/// objects, connect; everything bounded by `deadline` (an unanswered connect is abandoned by
/// destroying its id).
pub(super) fn connect(
    config: &VerbsConfig,
    remote: SocketAddr,
    local: Option<SocketAddr>,
    deadline: Instant,
) -> Result<VerbsEndpoint> {
    use rdma_cm_event_type::*;
    let mut steps = Steps::start();
    let channel = EventChannel::new()?;
    let id = CmId::new(&channel)?;
    steps.done("cm id");
    let mut dst = CSockAddr::new(remote);
    let mut src = local.map(CSockAddr::new);
    let src_ptr = src
        .as_mut()
        .map_or(std::ptr::null_mut(), CSockAddr::as_mut_ptr);
    let timeout = millis_until(deadline, config.resolve_timeout);
    // SAFETY: the id is live; both addresses are valid `sockaddr_storage`s (or null) that
    // librdmacm copies.
    if unsafe { rdma_resolve_addr(id.as_ptr(), src_ptr, dst.as_mut_ptr(), timeout) } != 0 {
        return Err(os_error("rdma_resolve_addr"));
    }
    expect_event(
        &channel,
        RDMA_CM_EVENT_ADDR_RESOLVED,
        "rdma_resolve_addr",
        deadline,
    )?;
    steps.done("address");
    let timeout = millis_until(deadline, config.resolve_timeout);
    // SAFETY: the id is live and its address resolved.
    if unsafe { rdma_resolve_route(id.as_ptr(), timeout) } != 0 {
        return Err(os_error("rdma_resolve_route"));
    }
    expect_event(
        &channel,
        RDMA_CM_EVENT_ROUTE_RESOLVED,
        "rdma_resolve_route",
        deadline,
    )?;
    steps.done("route");
    let mut ep = VerbsEndpoint::new(Arc::new(id), State::Pending)?;
    steps.done("pd/cq/qp");
    let mut param = conn_param();
    // SAFETY: the id is live with its QP created; `param` is valid for the call.
    if unsafe { rdma_connect(ep.id().as_ptr(), &mut param) } != 0 {
        return Err(os_error("rdma_connect"));
    }
    expect_event(
        ep.id().channel(),
        RDMA_CM_EVENT_ESTABLISHED,
        "rdma_connect",
        deadline,
    )?;
    ep.set_connected(true);
    steps.done("connect");
    tracing::debug!(%remote, steps = %steps, "verbs: connected");
    Ok(ep)
}

/// How long each step of a connection set-up took, for the debug log (where set-up time
/// goes: rdma_cm id, address and route resolution, verbs objects, the connect handshake).
struct Steps {
    start: Instant,
    last: Instant,
    taken: Vec<(&'static str, std::time::Duration)>,
}

impl Steps {
    fn start() -> Self {
        let now = Instant::now();
        Self {
            start: now,
            last: now,
            taken: Vec::with_capacity(5),
        }
    }

    /// The step `name` ended now.
    fn done(&mut self, name: &'static str) {
        let now = Instant::now();
        self.taken.push((name, now - self.last));
        self.last = now;
    }
}

impl std::fmt::Display for Steps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} in all:", self.last - self.start)?;
        for (name, took) in &self.taken {
            write!(f, " {name} {took:?}")?;
        }
        Ok(())
    }
}

/// A listening rdma_cm id (spec §1.3). Each connection request gets its own event channel.
#[derive(Debug)]
pub struct VerbsListener {
    id: CmId,
    channel: Arc<EventChannel>,
    local: SocketAddr,
}

impl VerbsListener {
    /// Binds to `addr` (`0.0.0.0` or `::` for every address; port 0 picks one) and listens.
    pub(super) fn bind(addr: SocketAddr) -> Result<Self> {
        let channel = EventChannel::new()?;
        let id = CmId::new(&channel)?;
        let mut c = CSockAddr::new(addr);
        // SAFETY: live id; valid address that librdmacm copies.
        if unsafe { rdma_bind_addr(id.as_ptr(), c.as_mut_ptr()) } != 0 {
            return Err(os_error("rdma_bind_addr"));
        }
        // SAFETY: live, bound id.
        if unsafe { rdma_listen(id.as_ptr(), BACKLOG) } != 0 {
            return Err(os_error("rdma_listen"));
        }
        // SAFETY: the id is live; rdma_cm keeps its addresses in `sockaddr_storage` fields.
        let local = unsafe { sockaddr::from_c(rdma_get_local_addr(&*id.as_ptr())) }.unwrap_or(addr);
        tracing::debug!(%local, "verbs: listening");
        Ok(Self { id, channel, local })
    }

    /// Takes over the new id of a CONNECT_REQUEST: own event channel, verbs objects.
    fn take_request(&self, event: &CmEvent) -> Result<VerbsIncoming> {
        let raw = NonNull::new(event.id)
            .ok_or(TransportError::Protocol("connect request without an id"))?;
        // SAFETY: a CONNECT_REQUEST's id is new, owned by the application, and its event was
        // acknowledged when read.
        let mut steps = Steps::start();
        let mut id = unsafe { CmId::from_request(raw, &self.channel) };
        id.migrate(&EventChannel::new()?)?;
        steps.done("cm id");
        let ep = VerbsEndpoint::new(Arc::new(id), State::Pending)?;
        steps.done("pd/cq/qp");
        tracing::debug!(steps = %steps, "verbs: connection request taken");
        Ok(VerbsIncoming { ep: Some(ep) })
    }
}

impl Listener for VerbsListener {
    type Incoming = VerbsIncoming;

    fn next_request(&mut self, deadline: Instant) -> Result<Option<VerbsIncoming>> {
        loop {
            let Some(event) = self.channel.next(deadline)? else {
                return Ok(None);
            };
            if event.kind != rdma_cm_event_type::RDMA_CM_EVENT_CONNECT_REQUEST {
                tracing::debug!(event = event.name(), "verbs: listener event ignored");
                continue;
            }
            debug_assert!(event.listen_id.is_null() || event.listen_id == self.id.as_ptr());
            match self.take_request(&event) {
                Ok(incoming) => return Ok(Some(incoming)),
                // The id was destroyed, which rejects the request; keep listening.
                Err(e) => tracing::warn!(error = %e, "verbs: cannot set up a connection request"),
            }
        }
    }

    fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

/// A connection request with its verbs objects ready; dropping it rejects the request.
#[derive(Debug)]
pub struct VerbsIncoming {
    ep: Option<VerbsEndpoint>,
}

impl VerbsIncoming {
    fn reject_with(ep: &VerbsEndpoint, reason: &str) {
        let len = reason.len().min(MAX_REJECT_DATA);
        // SAFETY: live id of an unaccepted request; the private data is valid for `len` bytes
        // and copied by librdmacm.
        let rc = unsafe { rdma_reject(ep.id().as_ptr(), reason.as_ptr().cast(), len as u8) };
        if rc != 0 {
            tracing::debug!(error = %std::io::Error::last_os_error(), "verbs: rdma_reject");
        }
    }
}

impl Incoming for VerbsIncoming {
    type Endpoint = VerbsEndpoint;

    fn endpoint(&mut self) -> &mut VerbsEndpoint {
        self.ep
            .as_mut()
            .expect("endpoint present until accept or reject")
    }

    fn accept(mut self) -> Result<VerbsEndpoint> {
        let mut ep = self
            .ep
            .take()
            .ok_or(TransportError::Protocol("request already handled"))?;
        let mut param = conn_param();
        // SAFETY: live id of a connection request with its QP; `param` valid for the call.
        if unsafe { rdma_accept(ep.id().as_ptr(), &mut param) } != 0 {
            return Err(os_error("rdma_accept"));
        }
        // rdma_accept moved the QP to RTS; ESTABLISHED follows when the RTU arrives.
        if ep.state() == State::Pending {
            ep.set_connected(false);
        }
        Ok(ep)
    }

    fn reject(mut self, reason: &str) {
        if let Some(ep) = self.ep.take() {
            Self::reject_with(&ep, reason);
        }
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        self.ep
            .as_ref()
            .and_then(crate::transport::Endpoint::peer_addr)
    }
}

impl Drop for VerbsIncoming {
    fn drop(&mut self) {
        if let Some(ep) = self.ep.take() {
            Self::reject_with(&ep, "connection request dropped");
        }
    }
}
