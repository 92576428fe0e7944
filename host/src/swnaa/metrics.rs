//! What a software NAA counts for its metrics endpoint ([`SoftNaaConfig::metrics`]), and the
//! Prometheus text exposition of it.
//!
//! **Cost.** Nothing is counted unless the endpoint is on: a worker then holds its
//! [`ConnectionMetrics`], which only it writes (relaxed loads and stores, no read-modify-write,
//! no lock), and the master counts admissions in shared atomics. A scrape sums the live
//! connections and the totals of those that ended; a connection adds its counts to those
//! totals when it ends (the one lock, taken per connection and per scrape, never per RPC).
//!
//! The metrics ([`METRIC_NAMES`] lists them; all carry the prefix `naaice_naa_`):
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `rpcs_total` | counter | `fncode` (`unknown`: a code without kernel, answered SOCKET_UNAVAIL), `rc` (the return code sent, decimal; `other` above 127) |
//! | `rpc_input_bytes_total`, `rpc_output_bytes_total` | counter | `fncode`: the input regions of each RPC (single-send ones with the first), the output regions written back |
//! | `kernel_seconds`, `rpc_seconds` | histogram | `fncode`: the kernel's run; the RPC from its call taken to its answer posted |
//! | `connections_open` | gauge | |
//! | `connections_accepted_total` | counter | |
//! | `connections_rejected_total` | counter | `reason`: `limit`, `allow`, `memory_budget` (its MRSP refused), `evicted_idle` (disconnected to free its slot) |
//! | `mrsp_total` | counter | `result`: `ok`, `failed` (refused, or the connection ended first) |
//! | `memory_budget_used_bytes`, `memory_budget_free_bytes` | gauge | |
//! | `region_cache_bytes` | gauge | ended connections' region memory kept for the next ones ([`SoftNaaConfig::region_cache`]) |
//! | `workers_busy`, `workers` | gauge | worker threads in an MRSP or an RPC; all worker threads |
//!
//! [`SoftNaaConfig::metrics`]: super::SoftNaaConfig::metrics
//! [`SoftNaaConfig::region_cache`]: super::SoftNaaConfig::region_cache

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use naaice_core::{RegionFlags, ReturnCode};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use super::budget::MemoryBudget;
use super::slots::Activity;
use super::switch::KernelSwitch;
use crate::memory::Buffer;

/// The names of the metrics a software NAA exposes (without the `_total`, `_bucket`, `_sum`
/// and `_count` suffixes of the samples).
pub const METRIC_NAMES: &[&str] = &[
    "naaice_naa_rpcs",
    "naaice_naa_rpc_input_bytes",
    "naaice_naa_rpc_output_bytes",
    "naaice_naa_kernel_seconds",
    "naaice_naa_rpc_seconds",
    "naaice_naa_connections_open",
    "naaice_naa_connections_accepted",
    "naaice_naa_connections_rejected",
    "naaice_naa_mrsp",
    "naaice_naa_memory_budget_used_bytes",
    "naaice_naa_memory_budget_free_bytes",
    "naaice_naa_region_cache_bytes",
    "naaice_naa_workers_busy",
    "naaice_naa_workers",
];

/// The upper bounds of the time histograms' buckets, in nanoseconds (1 µs to 10 s).
const BOUNDS_NS: [u64; 22] = [
    1_000,
    2_500,
    5_000,
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// Buckets: one per bound, plus the one above the last.
const BUCKETS: usize = BOUNDS_NS.len() + 1;

/// Return codes counted one by one (0..=127: the protocol's and the applications'); higher
/// ones share the last slot (`rc="other"`).
const RC_SLOTS: usize = 129;

/// Function codes (0..128): the counters are kept by code, so that kernels a reload adds
/// are counted too.
const CODES: usize = 128;

/// Adds `by` to a counter only one thread writes: a plain load and store (no locked
/// instruction), which readers on other threads see whole.
fn bump(counter: &AtomicU64, by: u64) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(by),
        Ordering::Relaxed,
    );
}

/// A histogram of durations that one thread writes.
#[derive(Debug)]
struct TimeHistogram {
    buckets: [AtomicU64; BUCKETS],
    sum_ns: AtomicU64,
}

impl Default for TimeHistogram {
    fn default() -> Self {
        Self {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_ns: AtomicU64::new(0),
        }
    }
}

impl TimeHistogram {
    /// Counts one duration (writer only).
    fn record(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let i = BOUNDS_NS.partition_point(|&b| b < ns);
        bump(&self.buckets[i], 1);
        bump(&self.sum_ns, ns);
    }

    /// Adds what it holds to `into`.
    fn add_to(&self, into: &mut HistogramTotals) {
        for (t, b) in into.buckets.iter_mut().zip(&self.buckets) {
            *t += b.load(Ordering::Relaxed);
        }
        into.sum_ns += self.sum_ns.load(Ordering::Relaxed);
    }
}

/// A histogram's counts, summed.
#[derive(Debug, Clone, Default)]
struct HistogramTotals {
    buckets: [u64; BUCKETS],
    sum_ns: u64,
}

/// The counts of one kernel on one connection (one writer: its worker).
#[derive(Debug)]
struct KernelCounters {
    rcs: [AtomicU64; RC_SLOTS],
    input_bytes: AtomicU64,
    output_bytes: AtomicU64,
    kernel: TimeHistogram,
    rpc: TimeHistogram,
}

impl Default for KernelCounters {
    fn default() -> Self {
        Self {
            rcs: std::array::from_fn(|_| AtomicU64::new(0)),
            input_bytes: AtomicU64::new(0),
            output_bytes: AtomicU64::new(0),
            kernel: TimeHistogram::default(),
            rpc: TimeHistogram::default(),
        }
    }
}

/// One kernel's counts, summed over connections.
#[derive(Debug, Clone)]
struct KernelTotals {
    rcs: [u64; RC_SLOTS],
    input_bytes: u64,
    output_bytes: u64,
    kernel: HistogramTotals,
    rpc: HistogramTotals,
}

impl Default for KernelTotals {
    fn default() -> Self {
        Self {
            rcs: [0; RC_SLOTS],
            input_bytes: 0,
            output_bytes: 0,
            kernel: HistogramTotals::default(),
            rpc: HistogramTotals::default(),
        }
    }
}

impl KernelCounters {
    fn add_to(&self, into: &mut KernelTotals) {
        for (t, c) in into.rcs.iter_mut().zip(&self.rcs) {
            *t += c.load(Ordering::Relaxed);
        }
        into.input_bytes += self.input_bytes.load(Ordering::Relaxed);
        into.output_bytes += self.output_bytes.load(Ordering::Relaxed);
        self.kernel.add_to(&mut into.kernel);
        self.rpc.add_to(&mut into.rpc);
    }
}

/// The RPC counts of every kernel (and of the codes without one).
#[derive(Debug, Clone, Default)]
struct RpcTotals {
    /// By function code, for the codes that ran a kernel.
    kernels: std::collections::BTreeMap<u8, KernelTotals>,
    /// RPCs of function codes without a kernel (answered SOCKET_UNAVAIL).
    unknown: u64,
}

/// What one connection's worker counts; only that worker writes it.
#[derive(Debug)]
pub(crate) struct ConnectionMetrics {
    shared: Arc<NaaMetrics>,
    /// By function code, made when the code's kernel first runs on the connection.
    kernels: Box<[OnceLock<Box<KernelCounters>>]>,
    unknown: AtomicU64,
    activity: Arc<Activity>,
    /// Bytes of the input regions: with the single-send ones, without them.
    inputs: [AtomicU64; 2],
    /// Bytes of the output regions.
    outputs: AtomicU64,
    /// The MRSP completed.
    mrsp_done: AtomicBool,
}

impl ConnectionMetrics {
    /// Counts the connection's MRSP as done and notes its regions. A connection that ends
    /// without it counts as a failed MRSP.
    pub(crate) fn mrsp_complete(&self, regions: &[(RegionFlags, Buffer)]) {
        if !self.mrsp_done.swap(true, Ordering::Relaxed) {
            self.shared.mrsp_ok.fetch_add(1, Ordering::Relaxed);
        }
        let bytes = |f: &dyn Fn(RegionFlags) -> bool| -> u64 {
            regions
                .iter()
                .filter(|(flags, _)| !flags.contains(RegionFlags::INTERNAL) && f(*flags))
                .map(|(_, b)| b.len() as u64)
                .sum()
        };
        let every = bytes(&|f| f.intersects(RegionFlags::INPUT | RegionFlags::SINGLESEND));
        let steady = bytes(&|f| f.contains(RegionFlags::INPUT));
        self.inputs[0].store(every, Ordering::Relaxed);
        self.inputs[1].store(steady, Ordering::Relaxed);
        let outputs = bytes(&|f| f.contains(RegionFlags::OUTPUT));
        self.outputs.store(outputs, Ordering::Relaxed);
    }

    /// Counts an RPC whose kernel ran for `kernel` and was answered with `rc` (`rpc`: the
    /// connection's RPC number, 1 for the first).
    pub(crate) fn kernel_rpc(&self, fncode: u8, rc: ReturnCode, rpc: u32, kernel: Duration) {
        let Some(k) = self.counters(fncode) else {
            return;
        };
        let rc_slot = usize::try_from(rc.get()).map_or(RC_SLOTS - 1, |c| c.min(RC_SLOTS - 1));
        bump(&k.rcs[rc_slot], 1);
        let inputs = &self.inputs[usize::from(rpc > 1)];
        bump(&k.input_bytes, inputs.load(Ordering::Relaxed));
        // KERNEL_TIMEOUT is answered without the outputs.
        if rc != ReturnCode::KERNEL_TIMEOUT {
            bump(&k.output_bytes, self.outputs.load(Ordering::Relaxed));
        }
        k.kernel.record(kernel);
    }

    /// Counts the time of an RPC of `fncode`, from its call taken to its answer posted.
    pub(crate) fn rpc_time(&self, fncode: u8, time: Duration) {
        if let Some(k) = self.counters(fncode) {
            k.rpc.record(time);
        }
    }

    /// Counts `n` RPCs of function codes without a kernel.
    pub(crate) fn unknown_rpcs(&self, n: u64) {
        bump(&self.unknown, n);
    }

    fn counters(&self, fncode: u8) -> Option<&KernelCounters> {
        self.kernels
            .get(usize::from(fncode))
            .map(|c| &**c.get_or_init(Box::default))
    }

    /// The shared part (MRSP and rejection counts).
    pub(crate) fn naa(&self) -> &NaaMetrics {
        &self.shared
    }

    fn add_to(&self, into: &mut RpcTotals) {
        for (code, k) in self.kernels.iter().enumerate() {
            if let (Some(k), Ok(code)) = (k.get(), u8::try_from(code)) {
                k.add_to(into.kernels.entry(code).or_default());
            }
        }
        into.unknown += self.unknown.load(Ordering::Relaxed);
    }
}

/// Gives the worker's counts to the NAA's totals when the connection ends.
#[derive(Debug)]
pub(crate) struct Registration(Arc<ConnectionMetrics>);

impl Registration {
    /// The connection's counters.
    pub(crate) fn metrics(&self) -> &ConnectionMetrics {
        &self.0
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let naa = &self.0.shared;
        if !self.0.mrsp_done.load(Ordering::Relaxed) {
            naa.mrsp_failed.fetch_add(1, Ordering::Relaxed);
        }
        let mut live = naa.live.lock().unwrap_or_else(PoisonError::into_inner);
        self.0.add_to(&mut live.retired);
        live.connections.retain(|c| !Arc::ptr_eq(c, &self.0));
    }
}

/// Connections being served, and the counts of those that ended.
#[derive(Debug, Default)]
struct Live {
    connections: Vec<Arc<ConnectionMetrics>>,
    retired: RpcTotals,
}

/// Everything one software NAA counts (shared by its master, its workers and its endpoint).
#[derive(Debug)]
pub(crate) struct NaaMetrics {
    /// The kernels served (the metrics list each served code, counted or not).
    kernels: KernelSwitch,
    budget: Arc<MemoryBudget>,
    live: Mutex<Live>,
    accepted: AtomicU64,
    rejected_limit: AtomicU64,
    rejected_allow: AtomicU64,
    rejected_memory: AtomicU64,
    evicted: AtomicU64,
    mrsp_ok: AtomicU64,
    mrsp_failed: AtomicU64,
}

impl NaaMetrics {
    /// The counters of an NAA serving `kernels`, with `budget`.
    pub(crate) fn new(kernels: KernelSwitch, budget: Arc<MemoryBudget>) -> Arc<Self> {
        Arc::new(Self {
            live: Mutex::new(Live::default()),
            kernels,
            budget,
            accepted: AtomicU64::new(0),
            rejected_limit: AtomicU64::new(0),
            rejected_allow: AtomicU64::new(0),
            rejected_memory: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            mrsp_ok: AtomicU64::new(0),
            mrsp_failed: AtomicU64::new(0),
        })
    }

    /// A new connection's counters, counted as accepted and live until the registration is
    /// dropped.
    pub(crate) fn register(self: &Arc<Self>, activity: Arc<Activity>) -> Registration {
        self.accepted.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(ConnectionMetrics {
            shared: Arc::clone(self),
            kernels: (0..CODES).map(|_| OnceLock::new()).collect(),
            unknown: AtomicU64::new(0),
            activity,
            inputs: [AtomicU64::new(0), AtomicU64::new(0)],
            outputs: AtomicU64::new(0),
            mrsp_done: AtomicBool::new(false),
        });
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .connections
            .push(Arc::clone(&conn));
        Registration(conn)
    }

    /// A client rejected because every slot was taken.
    pub(crate) fn rejected_limit(&self) {
        self.rejected_limit.fetch_add(1, Ordering::Relaxed);
    }

    /// A client rejected because the allow list does not contain its address.
    pub(crate) fn rejected_allow(&self) {
        self.rejected_allow.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection whose MRSP request did not fit the memory budget.
    pub(crate) fn rejected_memory(&self) {
        self.rejected_memory.fetch_add(1, Ordering::Relaxed);
    }

    /// An idle connection evicted for a newcomer.
    pub(crate) fn evicted(&self) {
        self.evicted.fetch_add(1, Ordering::Relaxed);
    }

    /// A registry that exposes these metrics.
    pub(crate) fn registry(self: &Arc<Self>) -> Registry {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Arc::clone(self)));
        registry
    }

    /// The metrics in the Prometheus text exposition format (version 0.0.4).
    pub(crate) fn render(self: &Arc<Self>) -> String {
        let mut text = String::new();
        // Writing into a String does not fail; the collector's own errors are fmt::Error too.
        if let Err(e) =
            prometheus_client::encoding::prometheus_text::encode(&mut text, &self.registry())
        {
            tracing::warn!(error = %e, "metrics could not be encoded");
        }
        text
    }
}

/// What a scrape reads, summed.
struct Snapshot {
    rpcs: RpcTotals,
    open: u64,
    busy: u64,
}

impl NaaMetrics {
    fn snapshot(&self) -> Snapshot {
        let live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        let mut rpcs = live.retired.clone();
        let mut busy = 0;
        for c in &live.connections {
            c.add_to(&mut rpcs);
            busy += u64::from(c.activity.idle_since().is_none());
        }
        Snapshot {
            rpcs,
            open: live.connections.len() as u64,
            busy,
        }
    }
}

/// Writes one metric of `kind` with help text `help`; `samples` writes its samples.
fn family(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    kind: MetricType,
    samples: impl FnOnce(MetricEncoder<'_>) -> std::fmt::Result,
) -> std::fmt::Result {
    samples(encoder.encode_descriptor(name, help, None, kind)?)
}

/// One sample of a counter family, with `labels`.
fn counter(m: &mut MetricEncoder<'_>, labels: &[(&str, &str)], v: u64) -> std::fmt::Result {
    ConstCounter::new(v).encode(m.encode_family(&labels)?)
}

/// The one sample of a gauge without labels.
fn gauge(m: MetricEncoder<'_>, v: u64) -> std::fmt::Result {
    ConstGauge::new(i64::try_from(v).unwrap_or(i64::MAX)).encode(m)
}

/// One histogram of a family labelled by function code.
fn histogram(m: &mut MetricEncoder<'_>, fncode: &str, h: &HistogramTotals) -> std::fmt::Result {
    let buckets: Vec<(f64, u64)> = BOUNDS_NS
        .iter()
        .map(|&b| b as f64 / 1e9)
        .chain([f64::INFINITY])
        .zip(h.buckets)
        .collect();
    let count = h.buckets.iter().sum();
    m.encode_family(&[("fncode", fncode)])?
        .encode_histogram::<NoLabelSet>(h.sum_ns as f64 / 1e9, count, &buckets, None)
}

impl Collector for NaaMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        let mut s = self.snapshot();
        // Every code served now, and every code counted (a kernel a reload removed).
        for (code, _) in self.kernels.current().served() {
            s.rpcs.kernels.entry(code).or_default();
        }
        let codes: Vec<(String, &KernelTotals)> = s
            .rpcs
            .kernels
            .iter()
            .map(|(code, k)| (code.to_string(), k))
            .collect();
        let kernels = || codes.iter().map(|(code, k)| (code.as_str(), *k));
        family(
            &mut encoder,
            "naaice_naa_rpcs",
            "RPCs answered, by function code and return code",
            MetricType::Counter,
            |mut m| {
                let m = &mut m;
                for (code, k) in kernels() {
                    for (rc, &n) in k.rcs.iter().enumerate().filter(|(_, n)| **n > 0) {
                        let rc = if rc == RC_SLOTS - 1 {
                            "other".to_owned()
                        } else {
                            rc.to_string()
                        };
                        counter(m, &[("fncode", code), ("rc", &rc)], n)?;
                    }
                }
                let unavail = ReturnCode::SOCKET_UNAVAIL.get().to_string();
                counter(
                    m,
                    &[("fncode", "unknown"), ("rc", &unavail)],
                    s.rpcs.unknown,
                )
            },
        )?;
        for (name, help, pick) in [
            (
                "naaice_naa_rpc_input_bytes",
                "Bytes of the input regions of the RPCs (single-send ones with the first RPC)",
                (|k: &KernelTotals| k.input_bytes) as fn(&KernelTotals) -> u64,
            ),
            (
                "naaice_naa_rpc_output_bytes",
                "Bytes of the output regions written back",
                |k: &KernelTotals| k.output_bytes,
            ),
        ] {
            family(&mut encoder, name, help, MetricType::Counter, |mut m| {
                let m = &mut m;
                for (code, k) in kernels() {
                    counter(m, &[("fncode", code)], pick(k))?;
                }
                Ok(())
            })?;
        }
        for (name, help, pick) in [
            (
                "naaice_naa_kernel_seconds",
                "How long the kernels ran",
                (|k: &KernelTotals| &k.kernel) as fn(&KernelTotals) -> &HistogramTotals,
            ),
            (
                "naaice_naa_rpc_seconds",
                "RPCs from their call taken to their answer posted",
                |k: &KernelTotals| &k.rpc,
            ),
        ] {
            family(&mut encoder, name, help, MetricType::Histogram, |mut m| {
                let m = &mut m;
                for (code, k) in kernels() {
                    histogram(m, code, pick(k))?;
                }
                Ok(())
            })?;
        }
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        family(
            &mut encoder,
            "naaice_naa_connections_open",
            "Connections being served",
            MetricType::Gauge,
            |m| gauge(m, s.open),
        )?;
        family(
            &mut encoder,
            "naaice_naa_connections_accepted",
            "Connections admitted to a slot",
            MetricType::Counter,
            |m| ConstCounter::new(load(&self.accepted)).encode(m),
        )?;
        family(
            &mut encoder,
            "naaice_naa_connections_rejected",
            "Connections refused or ended by the NAA's limits, by reason: limit (every slot \
             taken), allow (address not allowed), memory_budget (MRSP refused: the budget is \
             spent), evicted_idle (idle, disconnected to free its slot)",
            MetricType::Counter,
            |mut m| {
                let m = &mut m;
                for (reason, c) in [
                    ("limit", &self.rejected_limit),
                    ("allow", &self.rejected_allow),
                    ("memory_budget", &self.rejected_memory),
                    ("evicted_idle", &self.evicted),
                ] {
                    counter(m, &[("reason", reason)], load(c))?;
                }
                Ok(())
            },
        )?;
        family(
            &mut encoder,
            "naaice_naa_mrsp",
            "Memory-region setups, by result: ok, failed (refused, or the connection ended first)",
            MetricType::Counter,
            |mut m| {
                let m = &mut m;
                counter(m, &[("result", "ok")], load(&self.mrsp_ok))?;
                counter(m, &[("result", "failed")], load(&self.mrsp_failed))
            },
        )?;
        let used = self.budget.used();
        for (name, help, v) in [
            (
                "naaice_naa_memory_budget_used_bytes",
                "Region memory reserved by the connections",
                used,
            ),
            (
                "naaice_naa_memory_budget_free_bytes",
                "Region memory left in the budget",
                self.budget.limit().saturating_sub(used),
            ),
            (
                "naaice_naa_region_cache_bytes",
                "Region memory of ended connections kept for the next ones",
                self.budget.cached(),
            ),
            (
                "naaice_naa_workers_busy",
                "Worker threads in an MRSP or an RPC (not idle between RPCs)",
                s.busy,
            ),
            (
                "naaice_naa_workers",
                "Worker threads (one per connection)",
                s.open,
            ),
        ] {
            family(&mut encoder, name, help, MetricType::Gauge, |m| gauge(m, v))?;
        }
        Ok(())
    }
}
