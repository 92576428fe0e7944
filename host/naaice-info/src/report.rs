//! The report: what `naaice-info` found, as one structure that `--json` serialises and the
//! default output prints for people.

use std::fmt::Write;

use serde::Serialize;

use crate::config::{Configuration, RankReport, Source, SpecReport};
use crate::probe::{Outcome, ProbeResult};
use crate::rdma::Rdma;

/// Everything `naaice-info` reports.
#[derive(Debug, Serialize)]
pub(crate) struct Report {
    /// The program and its build.
    pub build: Build,
    /// RDMA on this machine.
    pub rdma: Rdma,
    /// The effective configuration.
    pub configuration: Configuration,
    /// The process's rank (`None` when a launcher variable is invalid).
    pub rank: Option<RankReport>,
    /// The NAAs.
    pub spec: SpecReport,
    /// The probe (`None` without `--probe`).
    pub probe: Option<Probe>,
    /// Every problem found, one line each (empty: all is well).
    pub problems: Vec<String>,
    /// The exit status: 0 when there are no problems, else 1.
    pub exit_status: u8,
}

/// The program and its build.
#[derive(Debug, Serialize)]
pub(crate) struct Build {
    /// `naaice-info`.
    pub program: &'static str,
    /// Its version (the naaice-rs version).
    pub version: &'static str,
    /// The target it was built for.
    pub target: &'static str,
    /// `debug` or `release`.
    pub profile: &'static str,
    /// The transports built in.
    pub transports: Vec<&'static str>,
    /// Whether the verbs transport is built in (cargo feature `verbs`).
    pub verbs: bool,
}

impl Build {
    /// This program's build.
    pub(crate) fn current() -> Self {
        let verbs = cfg!(feature = "verbs");
        Self {
            program: env!("CARGO_PKG_NAME"),
            version: env!("CARGO_PKG_VERSION"),
            target: env!("NAAICE_INFO_TARGET"),
            profile: if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            },
            transports: if verbs {
                vec!["soft", "verbs"]
            } else {
                vec!["soft"]
            },
            verbs,
        }
    }
}

/// The probe's settings and results.
#[derive(Debug, Serialize)]
pub(crate) struct Probe {
    /// Time allowed per entry, in seconds.
    pub timeout_s: f64,
    /// Why nothing was probed.
    pub skipped: Option<String>,
    /// One result per probed entry.
    pub entries: Vec<ProbeResult>,
}

/// A duration in milliseconds, for people.
fn ms(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.2} s", v / 1000.0)
    } else if v >= 10.0 {
        format!("{v:.1} ms")
    } else {
        format!("{v:.3} ms")
    }
}

/// Seconds, for people.
fn secs(v: f64) -> String {
    format!("{v} s")
}

impl Report {
    /// The report for people.
    pub(crate) fn human(&self) -> String {
        let mut o = String::new();
        self.write_human(&mut o).expect("writing to a String");
        o
    }

    fn write_human(&self, o: &mut String) -> std::fmt::Result {
        let b = &self.build;
        writeln!(
            o,
            "{} {} ({}, {} build; transports: {})",
            b.program,
            b.version,
            b.target,
            b.profile,
            b.transports.join(", ")
        )?;
        self.write_rdma(o)?;
        self.write_configuration(o)?;
        self.write_spec(o)?;
        if let Some(probe) = &self.probe {
            write_probe(o, probe)?;
        }
        writeln!(o)?;
        if self.problems.is_empty() {
            let what = if self.probe.is_some() {
                "configuration valid, every probed entry ok"
            } else {
                "configuration valid"
            };
            writeln!(o, "Result: {what} (exit status 0)")
        } else {
            writeln!(
                o,
                "Result: {} problem{} (exit status {})",
                self.problems.len(),
                if self.problems.len() == 1 { "" } else { "s" },
                self.exit_status
            )?;
            for p in &self.problems {
                writeln!(o, "  - {p}")?;
            }
            Ok(())
        }
    }

    fn write_rdma(&self, o: &mut String) -> std::fmt::Result {
        let r = &self.rdma;
        writeln!(o, "\nRDMA")?;
        match (&r.rdma_core_error, r.rdma_core_loaded) {
            (_, true) => writeln!(o, "  rdma-core: loaded (libibverbs.so.1, librdmacm.so.1)")?,
            (Some(e), false) => writeln!(o, "  rdma-core: {e}")?,
            (None, false) => writeln!(o, "  rdma-core: not loaded")?,
        }
        if let Some(names) = &r.verbs_devices {
            let list = if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            };
            writeln!(o, "  libibverbs devices: {list}")?;
        }
        match &r.sysfs_error {
            Some(e) => writeln!(o, "  devices: none: {e}")?,
            None if r.devices.is_empty() => writeln!(
                o,
                "  devices: none in {} (no RDMA device: no ports to show)",
                r.sysfs
            )?,
            None => {}
        }
        let m = &r.memlock;
        let limit = |b: Option<u64>| {
            b.map_or_else(
                || "unlimited".to_owned(),
                |b| naaice::units::size(b).to_string(),
            )
        };
        match &m.error {
            Some(e) => writeln!(o, "  locked memory (ulimit -l): unknown ({e})")?,
            None => writeln!(
                o,
                "  locked memory (ulimit -l): {} (hard limit {})",
                limit(m.soft_bytes),
                limit(m.hard_bytes)
            )?,
        }
        if let Some(w) = &m.warning {
            writeln!(o, "    warning: {w}")?;
        }
        for d in &r.devices {
            let guid = d.node_guid.as_deref().unwrap_or("unknown");
            writeln!(o, "  device {} (node GUID {guid})", d.name)?;
            for p in &d.ports {
                let mtu = match (p.active_mtu, &p.mtu_source) {
                    (Some(m), Some(from)) if from != "active_mtu" => format!("{m} (from {from})"),
                    (Some(m), _) => m.to_string(),
                    (None, _) => "unknown".to_owned(),
                };
                writeln!(
                    o,
                    "    port {}: {}, link layer {}, active MTU {mtu}, rate {}",
                    p.number,
                    p.state.as_deref().unwrap_or("state unknown"),
                    p.link_layer.as_deref().unwrap_or("unknown"),
                    p.rate.as_deref().unwrap_or("unknown")
                )?;
                for g in &p.gids {
                    write!(o, "      GID {:<3} {}", g.index, g.gid)?;
                    if let Some(kind) = &g.kind {
                        write!(o, "  {kind}")?;
                    }
                    if let Some(netdev) = &g.netdev {
                        write!(o, "  {netdev}")?;
                    }
                    if let Some(v4) = &g.ipv4 {
                        write!(o, "  (IPv4 {v4})")?;
                    }
                    writeln!(o)?;
                }
            }
        }
        for n in &r.netdevs {
            match &n.error {
                Some(e) => writeln!(o, "  netdev {}: addresses unknown ({e})", n.name)?,
                None => writeln!(o, "  netdev {}: {}", n.name, n.addresses.join(", "))?,
            }
        }
        match &r.verbs_unusable {
            Some(why) => writeln!(o, "  verbs transport: unusable here: {why}"),
            None => writeln!(o, "  verbs transport: usable"),
        }
    }

    fn write_configuration(&self, o: &mut String) -> std::fmt::Result {
        let c = &self.configuration;
        writeln!(o, "\nConfiguration")?;
        let width = c.variables.iter().map(|v| v.name.len()).max().unwrap_or(0);
        for v in &c.variables {
            let (value, source) = match (&v.value, v.source) {
                (Some(value), Source::Environment) => (value.clone(), "environment"),
                _ => (v.default.to_owned(), "default"),
            };
            writeln!(o, "  {:<width$}  {value}  [{source}]", v.name)?;
            if let Some(note) = &v.note {
                writeln!(o, "  {:<width$}    note: {note}", "")?;
            }
            if let Some(e) = &v.error {
                writeln!(o, "  {:<width$}    error: {e}", "")?;
            }
        }
        for u in &c.unknown_variables {
            writeln!(o, "  {:<width$}  error: {}", u.name, u.message)?;
        }
        let unknown = || "unknown (invalid)".to_owned();
        writeln!(
            o,
            "  transport: {}{}",
            c.transport.clone().unwrap_or_else(unknown),
            c.transport_here
                .as_deref()
                .map(|h| format!(": {h}"))
                .unwrap_or_default()
        )?;
        writeln!(o, "  wait: {}", c.wait.clone().unwrap_or_else(unknown))?;
        writeln!(
            o,
            "  timeouts: RPC {}, connect {}",
            c.rpc_timeout_s.map_or_else(unknown, secs),
            c.connect_timeout_s.map_or_else(unknown, secs)
        )?;
        writeln!(
            o,
            "  local address: {}",
            c.local_ip.as_deref().unwrap_or("(the system chooses)")
        )?;
        match &self.rank {
            Some(r) => writeln!(
                o,
                "  rank: {} of {}, local rank {} ({})",
                r.rank,
                r.size.map_or_else(|| "?".to_owned(), |s| s.to_string()),
                r.local.map_or_else(|| "?".to_owned(), |l| l.to_string()),
                match r.source {
                    "none" => "no launcher variable: a lone process".to_owned(),
                    var => format!("from {var}"),
                }
            ),
            None => writeln!(o, "  rank: unknown (invalid launcher variable, see above)"),
        }
    }

    fn write_spec(&self, o: &mut String) -> std::fmt::Result {
        let s = &self.spec;
        writeln!(o, "\nNAAs (from {})", s.source)?;
        if let Some(e) = &s.error {
            writeln!(o, "  error: {e}")?;
        }
        for e in &s.entries {
            let addr = if e.local {
                "local (in-process NAA)".to_owned()
            } else if e.host.contains(':') {
                format!("[{}]:{}", e.host, e.port)
            } else {
                format!("{}:{}", e.host, e.port)
            };
            writeln!(
                o,
                "  #{:<2} {addr}  fn {}  params {}  transport {}",
                e.index,
                e.fncode,
                e.param_count,
                e.transport.unwrap_or("(the program's)")
            )?;
        }
        let rank = self
            .rank
            .as_ref()
            .map_or_else(|| "this rank".to_owned(), |r| format!("rank {}", r.rank));
        for p in &s.preferences {
            let rest: Vec<String> = p.order[1..].iter().map(|i| format!("#{i}")).collect();
            write!(
                o,
                "  fn {} with {} param{}: {rank} prefers #{}",
                p.fncode,
                p.param_count,
                if p.param_count == 1 { "" } else { "s" },
                p.preferred
            )?;
            if rest.is_empty() {
                writeln!(o, " (no failover)")?;
            } else {
                writeln!(o, ", then {}", rest.join(", "))?;
            }
        }
        if let Some(e) = &s.preferences_error {
            writeln!(o, "  preferences: {e}")?;
        }
        Ok(())
    }
}

fn write_probe(o: &mut String, probe: &Probe) -> std::fmt::Result {
    writeln!(o, "\nProbe (at most {} per entry)", secs(probe.timeout_s))?;
    if let Some(why) = &probe.skipped {
        writeln!(o, "  skipped: {why}")?;
    }
    for r in &probe.entries {
        write!(o, "  #{:<2} {}  {}", r.index, r.entry, r.outcome)?;
        if let Some(t) = r.transport {
            write!(o, "  over {t}")?;
        }
        let by = match r.asked_by {
            "default" => "the default",
            by => by,
        };
        writeln!(o, "  [asked: {} ({by})]", r.transport_asked)?;
        let mut times = Vec::new();
        if let Some(a) = &r.address {
            times.push(format!("address {a}"));
        }
        for (what, v) in [
            ("connect", r.connect_ms),
            ("MRSP", r.mrsp_ms),
            ("RPC", r.rpc_ms),
        ] {
            if let Some(v) = v {
                times.push(format!("{what} {}", ms(v)));
            }
        }
        if !times.is_empty() {
            writeln!(o, "      {}", times.join(", "))?;
        }
        if let (Some(code), Some(meaning)) = (r.return_code, &r.return_meaning) {
            writeln!(
                o,
                "      NAA returned {code:#04x}: {meaning}; {} bytes written back",
                r.bytes_received.unwrap_or(0)
            )?;
        }
        // Under auto, each transport tried (one attempt says no more than the error below).
        for a in r.attempts.iter().filter(|_| r.attempts.len() > 1) {
            let took = a.ms.map(|t| format!(" ({})", ms(t))).unwrap_or_default();
            let what = a.error.as_deref().unwrap_or("connected");
            writeln!(o, "      {}: {what}{took}", a.transport)?;
        }
        if let (Some(stage), Some(e)) = (r.stage, &r.error) {
            writeln!(o, "      failed at {stage}: {e}")?;
        }
        if let Some(note) = &r.note {
            writeln!(o, "      note: {note}")?;
        }
        if let Some(kernels) = &r.kernels {
            let list: Vec<String> = kernels
                .iter()
                .map(|k| format!("{} {}", k.code, k.name))
                .collect();
            let served = kernels.iter().any(|k| k.code == r.fncode);
            writeln!(
                o,
                "      kernels served: {}{}",
                if list.is_empty() {
                    "none".to_owned()
                } else {
                    list.join(", ")
                },
                if served {
                    String::new()
                } else {
                    format!(" (not function code {})", r.fncode)
                }
            )?;
        } else if let Some(why) = &r.kernels_note {
            writeln!(o, "      kernels: {why}")?;
        }
    }
    let ok = probe
        .entries
        .iter()
        .filter(|r| r.outcome == Outcome::Ok)
        .count();
    if probe.skipped.is_none() {
        writeln!(o, "  {ok} of {} entries ok", probe.entries.len())?;
    }
    Ok(())
}
