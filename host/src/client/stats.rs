//! Client statistics: what the RPCs of a handle ([`Naa::stats`](crate::Naa::stats)) and of
//! the whole process ([`process`]) did: RPCs, errors by kind, bytes, connect and MRSP time, and
//! the RPC latency as an HDR histogram (percentiles within 1 %).
//!
//! A handle counts its RPCs itself (no lock, no shared counter on the RPC path: two clock
//! reads and a histogram increment per RPC). The process's statistics are the sum of the
//! handles that have ended (finalized or dropped); with `NAAICE_STATS=1` the process prints
//! them in one line on stderr when it exits ([`summary`] formats it), like `UCX_STATS`.

#[allow(unsafe_code)]
mod at_exit;

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use naaice_core::ReturnCode;

use crate::error::Error;

pub use crate::discovery::environment::STATS_VAR;

/// Latencies are recorded in nanoseconds up to this (longer ones count as this).
const LATENCY_MAX_NS: u64 = 3_600_000_000_000;

/// Errors of RPCs and connections, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ErrorCounts {
    /// RPCs the NAA answered with a return code other than NAA_SUCCESS (a kernel's error,
    /// SOCKET_UNAVAIL, KERNEL_TIMEOUT).
    pub naa: u64,
    /// RPCs that got no answer within their deadline ([`Error::RpcTimeout`], [`Error::Timeout`]).
    pub timeout: u64,
    /// The connection failed or closed under an RPC, or a connect failed
    /// ([`Error::Transport`], [`Error::Closed`]).
    pub transport: u64,
    /// The peer broke the protocol, or a work request failed ([`Error::Protocol`]).
    pub protocol: u64,
    /// RPCs cancelled ([`Error::Cancelled`]) and every other error.
    pub other: u64,
}

impl ErrorCounts {
    /// All errors together.
    pub fn total(&self) -> u64 {
        self.naa + self.timeout + self.transport + self.protocol + self.other
    }

    /// Counts `e`.
    fn count(&mut self, e: &Error) {
        let slot = match e {
            Error::RpcTimeout { .. } | Error::Timeout(_) => &mut self.timeout,
            Error::Transport(_) | Error::Closed => &mut self.transport,
            Error::Protocol(_) => &mut self.protocol,
            _ => &mut self.other,
        };
        *slot += 1;
    }

    fn add(&mut self, o: &Self) {
        self.naa += o.naa;
        self.timeout += o.timeout;
        self.transport += o.transport;
        self.protocol += o.protocol;
        self.other += o.other;
    }
}

/// What a handle's (or the process's) RPCs did.
#[derive(Debug, Clone)]
pub struct Stats {
    /// Handles these statistics sum up (1 for a handle's own).
    pub handles: u64,
    /// Connections made, the MRSP done (a handle reconnects after a cancel).
    pub connections: u64,
    /// RPCs answered by the NAA, whatever their return code.
    pub rpcs: u64,
    /// Errors by kind.
    pub errors: ErrorCounts,
    /// Bytes the RPCs wrote to the NAA (the input parameters; single-send ones once per
    /// connection).
    pub bytes_sent: u64,
    /// Bytes the NAA wrote back (the output parameters of RPCs whose kernel ran).
    pub bytes_received: u64,
    /// Time spent connecting (the transport's connect, NAA selection and failover included),
    /// over all connections.
    pub connect_time: Duration,
    /// Time spent in the memory-region setup (MRSP), over all connections.
    pub mrsp_time: Duration,
    /// RPC latencies (invoke to completion seen), nanoseconds.
    latency: Histogram<u64>,
}

impl Default for Stats {
    fn default() -> Self {
        Self {
            handles: 0,
            connections: 0,
            rpcs: 0,
            errors: ErrorCounts::default(),
            bytes_sent: 0,
            bytes_received: 0,
            connect_time: Duration::ZERO,
            mrsp_time: Duration::ZERO,
            latency: new_histogram(),
        }
    }
}

/// An empty latency histogram: 1 ns to an hour, 2 significant digits.
fn new_histogram() -> Histogram<u64> {
    // Constant bounds that hdrhistogram accepts (low >= 1, high >= 2 * low, sigfig <= 5).
    Histogram::new_with_bounds(1, LATENCY_MAX_NS, 2).unwrap_or_else(|_| {
        Histogram::new(2).unwrap_or_else(|_| unreachable!("2 significant digits are valid"))
    })
}

impl Stats {
    /// The latency below which the fraction `q` (0.0..=1.0) of the RPCs completed
    /// (`latency(0.99)`: p99); `None` before the first RPC.
    pub fn latency(&self, q: f64) -> Option<Duration> {
        (!self.latency.is_empty())
            .then(|| Duration::from_nanos(self.latency.value_at_quantile(q.clamp(0.0, 1.0))))
    }

    /// The mean latency; `None` before the first RPC.
    pub fn latency_mean(&self) -> Option<Duration> {
        (!self.latency.is_empty()).then(|| Duration::from_nanos(self.latency.mean() as u64))
    }

    /// The longest latency; `None` before the first RPC.
    pub fn latency_max(&self) -> Option<Duration> {
        (!self.latency.is_empty()).then(|| Duration::from_nanos(self.latency.max()))
    }

    /// Adds `other`'s counts (handles, connections, RPCs, errors, bytes, times, latencies).
    pub fn merge(&mut self, other: &Self) {
        self.handles += other.handles;
        self.connections += other.connections;
        self.rpcs += other.rpcs;
        self.errors.add(&other.errors);
        self.bytes_sent += other.bytes_sent;
        self.bytes_received += other.bytes_received;
        self.connect_time += other.connect_time;
        self.mrsp_time += other.mrsp_time;
        // Same bounds on both sides: adding cannot fail.
        let _ = self.latency.add(&other.latency);
    }
}

impl std::fmt::Display for Stats {
    /// One line: `3 handles, 1000 RPCs, 1 error (naa 1), 62.5 KiB sent, 62.5 KiB received,
    /// connect 1.2 ms, MRSP 0.3 ms, latency p50 11 µs p90 13 µs p99 20 µs max 45 µs`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plural = |n: u64, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        let e = &self.errors;
        write!(
            f,
            "{}, {}, {}",
            plural(self.handles, "handle"),
            plural(self.rpcs, "RPC"),
            plural(e.total(), "error")
        )?;
        let kinds: Vec<String> = [
            ("naa", e.naa),
            ("timeout", e.timeout),
            ("transport", e.transport),
            ("protocol", e.protocol),
            ("other", e.other),
        ]
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
        if !kinds.is_empty() {
            write!(f, " ({})", kinds.join(", "))?;
        }
        write!(
            f,
            ", {} sent, {} received, connect {}, MRSP {}",
            crate::units::size(self.bytes_sent),
            crate::units::size(self.bytes_received),
            micros(self.connect_time),
            micros(self.mrsp_time)
        )?;
        if let (Some(p50), Some(p90), Some(p99), Some(max)) = (
            self.latency(0.5),
            self.latency(0.9),
            self.latency(0.99),
            self.latency_max(),
        ) {
            write!(
                f,
                ", latency p50 {} p90 {} p99 {} max {}",
                micros(p50),
                micros(p90),
                micros(p99),
                micros(max)
            )?;
        }
        Ok(())
    }
}

/// A duration for people: `11.2 µs`, `1.25 ms`, `2.0 s`.
fn micros(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{us:.1} µs")
    } else if us < 1e6 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

/// The statistics of one handle, kept by the handle.
#[derive(Debug)]
pub(crate) struct HandleStats {
    stats: Stats,
    /// When the RPC in flight was invoked.
    started: Option<Instant>,
    /// Bytes the RPC in flight's kernel writes back when it runs.
    outputs: u64,
}

impl HandleStats {
    /// A new handle's.
    pub(crate) fn new() -> Self {
        at_exit::arm_from_env();
        Self {
            stats: Stats::default(),
            started: None,
            outputs: 0,
        }
    }

    /// The handle was created: its first connection was made in `connect` and its MRSP done
    /// in `mrsp`. (Statistics of a creation that failed count its error, no handle.)
    pub(crate) fn created(&mut self, connect: Duration, mrsp: Duration) {
        self.stats.handles = 1;
        self.connected(connect, mrsp);
    }

    /// A connection was made in `connect` and its MRSP done in `mrsp`.
    pub(crate) fn connected(&mut self, connect: Duration, mrsp: Duration) {
        self.stats.connections += 1;
        self.stats.connect_time += connect;
        self.stats.mrsp_time += mrsp;
    }

    /// A connect (or its MRSP) failed with `e`.
    pub(crate) fn connect_failed(&mut self, e: &Error) {
        self.stats.errors.count(e);
    }

    /// An RPC started: it writes `sent` bytes, and the NAA writes back `outputs` if its
    /// kernel runs.
    pub(crate) fn started(&mut self, sent: u64, outputs: u64) {
        self.started = Some(Instant::now());
        self.stats.bytes_sent += sent;
        self.outputs = outputs;
    }

    /// Counts what a look at the RPC in flight found (`Ok(None)`: still running).
    pub(crate) fn observe<T>(
        &mut self,
        found: &Result<Option<T>, Error>,
        status: impl FnOnce(&T) -> ReturnCode,
    ) {
        match found {
            Ok(None) => {}
            Ok(Some(r)) => {
                if let Some(t) = self.started.take() {
                    let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
                    self.stats
                        .latency
                        .saturating_record(ns.clamp(1, LATENCY_MAX_NS));
                    self.stats.rpcs += 1;
                    let rc = status(r);
                    if !rc.is_success() {
                        self.stats.errors.naa += 1;
                    }
                    if rc != ReturnCode::SOCKET_UNAVAIL && rc != ReturnCode::KERNEL_TIMEOUT {
                        self.stats.bytes_received += self.outputs;
                    }
                }
            }
            Err(e) => {
                if self.started.take().is_some() {
                    self.stats.errors.count(e);
                }
            }
        }
    }

    /// A copy of the statistics now.
    pub(crate) fn snapshot(&self) -> Stats {
        self.stats.clone()
    }
}

impl Drop for HandleStats {
    /// Adds the handle's statistics to the process's.
    fn drop(&mut self) {
        PROCESS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(Stats::default)
            .merge(&self.stats);
    }
}

/// The sum of the statistics of the handles that have ended.
static PROCESS: Mutex<Option<Stats>> = Mutex::new(None);

/// The statistics of this process: the sum of every handle that has ended (finalized or
/// dropped); a handle still open is in its own [`Naa::stats`](crate::Naa::stats) only.
pub fn process() -> Stats {
    PROCESS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
        .unwrap_or_default()
}

/// The line `NAAICE_STATS=1` prints at exit: `naaice stats: pid 1234: ` and [`process`]'s
/// [`Display`](std::fmt::Display).
pub fn summary() -> String {
    format!("naaice stats: pid {}: {}", std::process::id(), process())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rpcs_errors_bytes_and_percentiles_add_up() {
        let mut h = HandleStats::new();
        h.created(Duration::from_millis(2), Duration::from_millis(1));
        for i in 1..=100u64 {
            h.started(64, 32);
            std::thread::sleep(Duration::from_micros(i));
            h.observe(&Ok(Some(ReturnCode::SUCCESS)), |r| *r);
        }
        h.started(64, 32);
        h.observe::<ReturnCode>(&Ok(None), |r| *r);
        h.observe(&Ok(Some(ReturnCode::SOCKET_UNAVAIL)), |r| *r);
        h.started(64, 32);
        h.observe::<ReturnCode>(&Err(Error::Closed), |r| *r);
        // A look with no RPC started counts nothing.
        h.observe::<ReturnCode>(&Err(Error::Closed), |r| *r);
        let s = h.snapshot();
        assert_eq!(s.rpcs, 101);
        assert_eq!(s.errors.naa, 1);
        assert_eq!(s.errors.transport, 1);
        assert_eq!(s.errors.total(), 2);
        assert_eq!(s.bytes_sent, 102 * 64);
        assert_eq!(s.bytes_received, 100 * 32);
        assert_eq!(s.connections, 1);
        assert_eq!(s.connect_time, Duration::from_millis(2));
        let (p50, p99) = (s.latency(0.5).unwrap(), s.latency(0.99).unwrap());
        assert!(
            p50 >= Duration::from_micros(50) && p50 <= p99,
            "{p50:?} {p99:?}"
        );
        assert!(s.latency_max().unwrap() >= p99);
        let line = s.to_string();
        assert!(
            line.starts_with("1 handle, 101 RPCs, 2 errors (naa 1, transport 1)"),
            "{line}"
        );
        assert!(line.contains("latency p50"), "{line}");
        assert_eq!(Stats::default().latency(0.5), None);
        let before = process();
        drop(h);
        let after = process();
        assert!(after.rpcs >= before.rpcs + 101);
        assert!(summary().starts_with("naaice stats: pid "));
    }
}
