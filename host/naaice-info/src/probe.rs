//! `--probe`: connects to each `NAA_SPEC` entry, runs the MRSP and one RPC, and says how it
//! went (ok, refused, overloaded, rejected, timeout, wrong transport, unresolved, error) with
//! the time each step took.
//!
//! Each entry is probed as the library would use it: its address resolved like
//! [`naaice::discovery::select::address`] (for a `local:` entry, the in-process NAA it starts), then [`Transport::connect_as`] with the transport the entry names
//! (else the one `NAAICE_TRANSPORT` chooses), from `NAA_LOCAL_IP` if set. Under `auto` the
//! probe makes the same two attempts `auto` (`naaice::transport::AnyTransport`)
//! makes (verbs with half of the time where verbs is usable, then the software transport),
//! one at a time, so that each transport's own error is seen: the library's combined error
//! would hide whether the NAA refused the connection or did not answer. A `local:` entry is
//! the in-process NAA of local mode: the probe starts it and runs the RPC on it, as a program
//! would. The MRSP declares `param_count` regions of 64 zeroed bytes, all inputs, the last
//! also the output (one output-only region when `param_count` is 0); the RPC uses the
//! entry's function code. Connect, MRSP and RPC share one deadline (`--timeout`).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use naaice::core::machine;
use naaice::core::{ClientConfig, FunctionCode};
use naaice::discovery::spec::{NaaEntry, SpecError};
use naaice::transport::{
    AnyEndpoint, AnyTransport, Transport, TransportChoice, TransportError, TransportKind,
};
use naaice::{Buffer, Connection, Error};
use serde::Serialize;

/// Bytes of each region the probe declares.
const REGION_BYTES: usize = 64;

/// How a probe of one entry ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Outcome {
    /// Connected, MRSP done, the RPC answered NAA_SUCCESS.
    Ok,
    /// Nothing listens at the address (connection refused).
    Refused,
    /// The NAA rejected the connection: all its connection slots are taken.
    Overloaded,
    /// The NAA rejected the connection for another reason.
    Rejected,
    /// No answer before the deadline.
    Timeout,
    /// The transport the entry or `NAAICE_TRANSPORT` asks for cannot work on this machine.
    WrongTransport,
    /// The address does not resolve.
    Unresolved,
    /// Anything else (the message says what).
    Error,
}

impl std::fmt::Display for Outcome {
    /// The name, as `--json` writes it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Ok => "ok",
            Self::Refused => "refused",
            Self::Overloaded => "overloaded",
            Self::Rejected => "rejected",
            Self::Timeout => "timeout",
            Self::WrongTransport => "wrong-transport",
            Self::Unresolved => "unresolved",
            Self::Error => "error",
        })
    }
}

/// The step a probe failed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Stage {
    /// Resolving the address.
    Resolve,
    /// Connecting.
    Connect,
    /// The memory-region setup.
    Mrsp,
    /// The RPC.
    Rpc,
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Resolve => "resolve",
            Self::Connect => "connect",
            Self::Mrsp => "MRSP",
            Self::Rpc => "RPC",
        })
    }
}

/// One connection attempt over one transport (under `auto`, each transport tried).
#[derive(Debug, Serialize)]
pub(crate) struct Attempt {
    /// The transport.
    pub transport: &'static str,
    /// How long it took (`None`: not tried).
    pub ms: Option<f64>,
    /// Why it failed or was not tried (`None`: it connected).
    pub error: Option<String>,
}

/// The probe of one entry.
#[derive(Debug, Serialize)]
pub(crate) struct ProbeResult {
    /// The entry's position in the spec, from 1.
    pub index: usize,
    /// The entry as `host:port` (`local` for the in-process NAA).
    pub entry: String,
    /// Function code.
    pub fncode: u8,
    /// Number of input parameters.
    pub param_count: u32,
    /// How it ended.
    pub outcome: Outcome,
    /// The step it failed in (`None` when ok).
    pub stage: Option<Stage>,
    /// The error message (`None` when ok).
    pub error: Option<String>,
    /// The resolved address.
    pub address: Option<String>,
    /// The transport asked for: `auto`, `soft` or `verbs`.
    pub transport_asked: &'static str,
    /// Who asked for it: `NAA_SPEC entry`, `NAAICE_TRANSPORT`, `default` or `local mode`.
    pub asked_by: &'static str,
    /// The transport the connection used.
    pub transport: Option<&'static str>,
    /// The connection attempts.
    pub attempts: Vec<Attempt>,
    /// Time to connect (all attempts), in milliseconds.
    pub connect_ms: Option<f64>,
    /// Time of the MRSP, in milliseconds.
    pub mrsp_ms: Option<f64>,
    /// Time of the RPC, in milliseconds.
    pub rpc_ms: Option<f64>,
    /// The NAA's return code.
    pub return_code: Option<u32>,
    /// What the return code means.
    pub return_meaning: Option<String>,
    /// Bytes of the NAA's final write.
    pub bytes_received: Option<u32>,
    /// A remark (local mode).
    pub note: Option<String>,
    /// The function codes the NAA serves with their kernels' names, as a naaice-rs software
    /// NAA lists them (`None`: not listed; `kernels_note` says why).
    pub kernels: Option<Vec<ServedKernel>>,
    /// Why the kernels are not listed.
    pub kernels_note: Option<String>,
}

/// A kernel an NAA lists.
#[derive(Debug, Serialize)]
pub(crate) struct ServedKernel {
    /// Function code.
    pub code: u8,
    /// The kernel's name.
    pub name: String,
}

/// Longest wait for an NAA's list of kernels.
const CATALOG_TIMEOUT: Duration = Duration::from_secs(2);

/// How to probe: the transport, the local address and the deadline per entry.
#[derive(Debug)]
pub(crate) struct Prober<'a> {
    /// The transport from the environment.
    pub transport: &'a AnyTransport,
    /// True when `NAAICE_TRANSPORT` is set (else the choice is the default).
    pub transport_set: bool,
    /// The local source address (`NAA_LOCAL_IP`).
    pub local: Option<SocketAddr>,
    /// Time allowed for each entry (connect, MRSP and RPC together).
    pub timeout: Duration,
}

/// Milliseconds, to the microsecond.
fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

impl Prober<'_> {
    /// Probes `entry` (position `index`, from 1).
    pub(crate) fn probe(&self, index: usize, entry: &NaaEntry) -> ProbeResult {
        let (asked, asked_by) = match (entry.local, entry.transport, self.transport.choice()) {
            (true, Some(TransportKind::Soft), _) => ("soft", "local mode"),
            (true, _, _) => ("in-process", "local mode"),
            (false, Some(k), _) => (k.name(), "NAA_SPEC entry"),
            (false, None, choice) if self.transport_set => (choice.name(), "NAAICE_TRANSPORT"),
            (false, None, choice) => (choice.name(), "default"),
        };
        let mut r = ProbeResult {
            index,
            entry: if entry.local {
                entry.host.clone()
            } else {
                format!("{}:{}", bracketed(&entry.host), entry.port)
            },
            fncode: entry.fncode,
            param_count: entry.param_count,
            outcome: Outcome::Ok,
            stage: None,
            error: None,
            address: None,
            transport_asked: asked,
            asked_by,
            transport: None,
            attempts: Vec::new(),
            connect_ms: None,
            mrsp_ms: None,
            rpc_ms: None,
            return_code: None,
            return_meaning: None,
            bytes_received: None,
            note: entry.local.then(|| {
                let how = if entry.transport == Some(TransportKind::Soft) {
                    "over the software transport on loopback"
                } else {
                    "in process, without sockets"
                };
                format!("the in-process NAA of local mode (started by this probe, reached {how})")
            }),
            kernels: None,
            kernels_note: None,
        };
        let deadline = Instant::now() + self.timeout;
        if let Err(Failure(stage, outcome, error)) = self.run(entry, deadline, &mut r) {
            r.outcome = outcome;
            r.stage = Some(stage);
            r.error = Some(error);
        }
        self.list_kernels(&mut r);
        r
    }

    /// Asks the NAA which kernels it serves (a catalog request over the software
    /// transport, which a naaice-rs software NAA answers on its port); only an NAA that
    /// answered something, and only one reached over the software transport or on `auto`.
    fn list_kernels(&self, r: &mut ProbeResult) {
        let why = match (r.outcome, &r.address) {
            (Outcome::Ok | Outcome::Error | Outcome::Overloaded | Outcome::Rejected, Some(a)) => {
                a.parse::<SocketAddr>().ok()
            }
            _ => None,
        };
        let Some(addr) = why else {
            return;
        };
        if r.transport_asked == "verbs" {
            r.kernels_note = Some(
                "not asked: the entry is reached over verbs, and only a software NAA serving \
                 the software transport lists its kernels"
                    .to_owned(),
            );
            return;
        }
        let deadline = Instant::now() + self.timeout.min(CATALOG_TIMEOUT);
        let listed = if r.transport_asked == "in-process" {
            Ok(Some(naaice::swnaa::local::catalog()))
        } else {
            naaice::transport::soft::catalog(addr, deadline)
        };
        match listed {
            Ok(Some(text)) => {
                r.kernels = Some(
                    naaice::swnaa::parse_catalog(&text)
                        .into_iter()
                        .map(|(code, name)| ServedKernel { code, name })
                        .collect(),
                );
            }
            Ok(None) => {
                r.kernels_note = Some(
                    "not listed: the NAA does not answer catalog requests (an FPGA, the C \
                     reference, or an older naaice-swnaa)"
                        .to_owned(),
                );
            }
            Err(e) => r.kernels_note = Some(format!("not listed: {e}")),
        }
    }

    /// Resolves, connects, runs the MRSP and one RPC, filling in `r` as it goes.
    fn run(&self, entry: &NaaEntry, deadline: Instant, r: &mut ProbeResult) -> Result<(), Failure> {
        // A local entry's address is the in-process NAA's, which this starts.
        let addr = naaice::discovery::select::address(entry)
            .map_err(|e| Failure::of(Stage::Resolve, e.into()))?;
        r.address = Some(addr.to_string());
        let start = Instant::now();
        let ep = self.connect(entry, addr, deadline, &mut r.attempts);
        r.connect_ms = Some(ms(start.elapsed()));
        let ep = ep.map_err(|e| Failure::of(Stage::Connect, e.into()))?;
        r.transport = Some(if ep.is_in_process() {
            "in-process"
        } else {
            ep.kind().name()
        });

        let mrsp = |e: Error| Failure::of(Stage::Mrsp, e);
        let fncode = FunctionCode::new(entry.fncode).ok_or_else(|| {
            mrsp(Error::InvalidArgument(format!(
                "function code {}",
                entry.fncode
            )))
        })?;
        let mut config = ClientConfig::new(fncode);
        config.mrsp_timeout = left(deadline);
        config.rpc_timeout = left(deadline);
        let mut conn = Connection::from_endpoint(ep, config).map_err(mrsp)?;
        let max = naaice::core::config::MAX_REGIONS;
        if entry.param_count as usize > max {
            return Err(mrsp(Error::InvalidArgument(format!(
                "param_count {} is more than the {max} regions of the protocol",
                entry.param_count
            ))));
        }
        let regions = entry.param_count.max(1) as usize;
        let buffers: Vec<Buffer> = (0..regions)
            .map(|_| Buffer::from_vec(vec![0; REGION_BYTES]))
            .collect();
        for (i, buffer) in buffers.iter().enumerate() {
            let id = conn.add_param(buffer).map_err(mrsp)?;
            if entry.param_count > 0 {
                conn.set_input(id).map_err(mrsp)?;
            }
            if i + 1 == regions {
                conn.set_output(id).map_err(mrsp)?;
            }
        }
        let start = Instant::now();
        let done = conn.do_mrsp();
        r.mrsp_ms = Some(ms(start.elapsed()));
        done.map_err(mrsp)?;

        let rpc = |e: Error| Failure::of(Stage::Rpc, e);
        let start = Instant::now();
        let result = conn
            .init_transfer_with_timeout(left(deadline))
            .and_then(|()| conn.wait());
        r.rpc_ms = Some(ms(start.elapsed()));
        let result = result.map_err(rpc)?;
        conn.disconnect();
        r.return_code = Some(result.status.get());
        r.return_meaning = Some(result.status.to_string());
        r.bytes_received = Some(result.bytes_received);
        if !result.status.is_success() {
            let why = format!(
                "the NAA ran the RPC and answered {:#04x}: {}",
                result.status.get(),
                result.status
            );
            return Err(Failure(Stage::Rpc, Outcome::Error, why));
        }
        Ok(())
    }

    /// Connects as the library would, recording each attempt.
    fn connect(
        &self,
        entry: &NaaEntry,
        addr: SocketAddr,
        deadline: Instant,
        attempts: &mut Vec<Attempt>,
    ) -> Result<AnyEndpoint, TransportError> {
        let t = self.transport;
        if entry.local {
            return attempt(attempts, TransportKind::Soft, || {
                t.connect_local(addr, deadline)
            });
        }
        let kind = match (entry.transport, t.choice()) {
            (Some(k), _) | (None, TransportChoice::Only(k)) => k,
            (None, TransportChoice::Auto) => return self.connect_auto(addr, deadline, attempts),
        };
        attempt(attempts, kind, || {
            t.connect_as(Some(kind), addr, self.local, deadline)
        })
    }

    /// The attempts of `auto`, one at a time (see the module documentation).
    fn connect_auto(
        &self,
        addr: SocketAddr,
        deadline: Instant,
        attempts: &mut Vec<Attempt>,
    ) -> Result<AnyEndpoint, TransportError> {
        let t = self.transport;
        match naaice::transport::auto::verbs_unusable() {
            Some(why) => attempts.push(Attempt {
                transport: TransportKind::Verbs.name(),
                ms: None,
                error: Some(format!("not tried: {why}")),
            }),
            None => {
                let half = Instant::now() + left(deadline) / 2;
                let verbs = attempt(attempts, TransportKind::Verbs, || {
                    t.connect_as(Some(TransportKind::Verbs), addr, self.local, half)
                });
                if verbs.is_ok() {
                    return verbs;
                }
            }
        }
        attempt(attempts, TransportKind::Soft, || {
            t.connect_as(Some(TransportKind::Soft), addr, self.local, deadline)
        })
    }
}

/// Why a probe failed: the step, the outcome and the message.
#[derive(Debug)]
struct Failure(Stage, Outcome, String);

impl Failure {
    /// The failure of `stage` with the library's error `e`.
    fn of(stage: Stage, e: Error) -> Self {
        Self(stage, classify(&e), e.to_string())
    }
}

/// Runs one connection attempt over `kind` and records it.
fn attempt(
    attempts: &mut Vec<Attempt>,
    kind: TransportKind,
    connect: impl FnOnce() -> Result<AnyEndpoint, TransportError>,
) -> Result<AnyEndpoint, TransportError> {
    let start = Instant::now();
    let result = connect();
    let in_process = result.as_ref().is_ok_and(AnyEndpoint::is_in_process);
    attempts.push(Attempt {
        transport: if in_process {
            "in-process"
        } else {
            kind.name()
        },
        ms: Some(ms(start.elapsed())),
        error: result.as_ref().err().map(ToString::to_string),
    });
    result
}

/// The time left until `deadline` (at least a millisecond: a zero timeout means none).
fn left(deadline: Instant) -> Duration {
    deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1))
}

/// An IPv6 literal in brackets, as `NAA_SPEC` writes it.
fn bracketed(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

/// The outcome an error stands for.
pub(crate) fn classify(e: &Error) -> Outcome {
    match e {
        Error::Transport(TransportError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::ConnectionRefused =>
        {
            Outcome::Refused
        }
        Error::Transport(TransportError::Rejected(reason)) if reason.contains("overloaded") => {
            Outcome::Overloaded
        }
        Error::Transport(TransportError::Rejected(_)) => Outcome::Rejected,
        Error::Transport(TransportError::TimedOut)
        | Error::Timeout(_)
        | Error::Protocol(machine::Error::Timeout { .. })
        | Error::RpcTimeout { .. } => Outcome::Timeout,
        Error::Transport(TransportError::Unavailable(_)) => Outcome::WrongTransport,
        Error::Spec(SpecError::Resolve { .. }) => Outcome::Unresolved,
        _ => Outcome::Error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_outcomes() {
        let io = |kind| {
            Error::Transport(TransportError::Io {
                call: "connect",
                source: std::io::Error::from(kind),
            })
        };
        let cases = [
            (io(std::io::ErrorKind::ConnectionRefused), Outcome::Refused),
            (io(std::io::ErrorKind::PermissionDenied), Outcome::Error),
            (
                Error::Transport(TransportError::Rejected(
                    naaice::swnaa::OVERLOAD_REASON.into(),
                )),
                Outcome::Overloaded,
            ),
            (
                Error::Transport(TransportError::Rejected("go away".into())),
                Outcome::Rejected,
            ),
            (Error::Transport(TransportError::TimedOut), Outcome::Timeout),
            (Error::Timeout(Duration::from_secs(1)), Outcome::Timeout),
            (
                Error::Transport(TransportError::Unavailable("no device".into())),
                Outcome::WrongTransport,
            ),
            (
                Error::Spec(SpecError::Resolve {
                    what: "NAA address",
                    addr: "x".into(),
                    reason: "unknown".into(),
                }),
                Outcome::Unresolved,
            ),
            (Error::Closed, Outcome::Error),
        ];
        for (e, outcome) in cases {
            assert_eq!(classify(&e), outcome, "{e}");
        }
    }
}
