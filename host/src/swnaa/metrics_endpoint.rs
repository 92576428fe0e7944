//! The HTTP endpoint of a software NAA's metrics: `GET /metrics` answers the Prometheus text
//! exposition format ([`super::metrics`]); served by `tiny_http` on a thread of its own
//! (`naaice-metrics`), off unless [`SoftNaaConfig::metrics`](super::SoftNaaConfig::metrics)
//! names an address. The NAA's allow list does not apply to it: bind it to an address only
//! the monitoring network reaches.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use tiny_http::{Header, Method, Response, Server};

use super::metrics::NaaMetrics;
use crate::error::{Error, Result};

/// The path Prometheus scrapes.
pub const METRICS_PATH: &str = "/metrics";

/// A running metrics endpoint; stopped and joined on drop.
pub(crate) struct MetricsEndpoint {
    server: Arc<Server>,
    addr: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for MetricsEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsEndpoint")
            .field("addr", &self.addr)
            .finish()
    }
}

impl MetricsEndpoint {
    /// Listens on `addr` (port 0: a free port) and serves `metrics` there.
    pub(crate) fn start(addr: SocketAddr, metrics: Arc<NaaMetrics>) -> Result<Self> {
        let server = Server::http(addr)
            .map_err(|e| Error::InvalidArgument(format!("cannot serve metrics on {addr}: {e}")))?;
        let bound = server.server_addr().to_ip().unwrap_or(addr);
        let server = Arc::new(server);
        let serving = Arc::clone(&server);
        let thread = std::thread::Builder::new()
            .name("naaice-metrics".into())
            .spawn(move || serve(&serving, &metrics))
            .map_err(|e| {
                Error::Transport(crate::transport::TransportError::Io {
                    call: "spawn",
                    source: e,
                })
            })?;
        tracing::info!(addr = %bound, path = METRICS_PATH, "metrics endpoint listening");
        Ok(Self {
            server,
            addr: bound,
            thread: Some(thread),
        })
    }

    /// The bound address.
    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsEndpoint {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Answers requests until the server is unblocked.
fn serve(server: &Server, metrics: &Arc<NaaMetrics>) {
    for request in server.incoming_requests() {
        let path = request.url().split('?').next().unwrap_or_default();
        let response = match (request.method(), path) {
            (Method::Get | Method::Head, METRICS_PATH) => typed(
                Response::from_string(metrics.render()),
                prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
            ),
            (Method::Get | Method::Head, _) => typed(
                Response::from_string(format!("the metrics are at {METRICS_PATH}\n"))
                    .with_status_code(404),
                TEXT,
            ),
            _ => typed(
                Response::from_string("only GET and HEAD\n").with_status_code(405),
                TEXT,
            ),
        };
        if let Err(e) = request.respond(response) {
            tracing::debug!(error = %e, "metrics: answer not sent");
        }
    }
}

/// The content type of the error answers.
const TEXT: &str = "text/plain; charset=utf-8";

/// `response` with a `Content-Type` header (our types are ASCII, which a header always takes).
fn typed<R: std::io::Read>(response: Response<R>, content_type: &str) -> Response<R> {
    match Header::from_bytes("Content-Type", content_type) {
        Ok(h) => response.with_header(h),
        Err(()) => response,
    }
}
