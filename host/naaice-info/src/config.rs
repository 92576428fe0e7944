//! The effective configuration, read with the library's own parsers so that every message
//! is the library's: each variable of [`naaice::discovery::environment::VARIABLES`] with its value and
//! source, the transport, waiting and timeouts that follow, the process's rank, and the
//! `NAA_SPEC` entries with the entry this rank prefers for each function.

use std::net::SocketAddr;
use std::time::Duration;

use naaice::discovery::environment::{self, Rank, VARIABLES, VariableError};
use naaice::discovery::select::Pool;
use naaice::discovery::spec::{self, NaaEntry, SpecError};
use naaice::transport::{AnyTransport, TransportChoice, TransportKind};
use serde::Serialize;

/// Where a variable's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Source {
    /// Set (and not empty) in the environment.
    Environment,
    /// Unset or empty: the default applies.
    Default,
}

/// One variable: its value, source and any parse error.
#[derive(Debug, Serialize)]
pub(crate) struct VariableReport {
    /// The variable's name.
    pub name: &'static str,
    /// Its value in the environment (`None`: unset).
    pub value: Option<String>,
    /// Where the effective value comes from.
    pub source: Source,
    /// The default, as text.
    pub default: &'static str,
    /// What the variable means.
    pub meaning: &'static str,
    /// Why the value is not accepted (the library's message).
    pub error: Option<String>,
    /// A remark (e.g. that `--spec` replaces it).
    pub note: Option<String>,
}

/// The settings that follow from the variables.
#[derive(Debug, Serialize)]
pub(crate) struct Configuration {
    /// Every variable of the library's table.
    pub variables: Vec<VariableReport>,
    /// The transport chosen (`auto`, `soft`, `verbs`); `None` when `NAAICE_TRANSPORT` is
    /// invalid.
    pub transport: Option<String>,
    /// What the transport choice means on this machine.
    pub transport_here: Option<String>,
    /// How connections wait for completions.
    pub wait: Option<String>,
    /// Per-RPC deadline in seconds.
    pub rpc_timeout_s: Option<f64>,
    /// Connect deadline in seconds.
    pub connect_timeout_s: Option<f64>,
    /// The local source address (`None`: the system chooses).
    pub local_ip: Option<String>,
    /// Variables named like the library's that it does not know (likely misspellings).
    pub unknown_variables: Vec<UnknownReport>,
}

/// A variable named `NAAICE_*` or `NAA_*` that the library does not read.
#[derive(Debug, Serialize)]
pub(crate) struct UnknownReport {
    /// Its name.
    pub name: String,
    /// The known variable nearest to it, if one is near.
    pub nearest: Option<&'static str>,
    /// What the library warns.
    pub message: String,
}

/// The process's rank, as the library reads it.
#[derive(Debug, Serialize)]
pub(crate) struct RankReport {
    /// The rank (0-based).
    pub rank: u32,
    /// The number of ranks, if the launcher tells.
    pub size: Option<u32>,
    /// The node-local rank, if the launcher tells.
    pub local: Option<u32>,
    /// The variable the rank came from (`none` for a lone process).
    pub source: &'static str,
}

/// One parsed `NAA_SPEC` entry.
#[derive(Debug, Serialize)]
pub(crate) struct EntryReport {
    /// Position in the spec, from 1.
    pub index: usize,
    /// Host name or address (`local` for the in-process NAA).
    pub host: String,
    /// Port (0 for a local entry).
    pub port: u16,
    /// Function code.
    pub fncode: u8,
    /// Number of input parameters.
    pub param_count: u32,
    /// True for the in-process NAA of local mode.
    pub local: bool,
    /// The transport the entry names (`None`: the program's).
    pub transport: Option<&'static str>,
}

/// Which entry this rank prefers for one function and parameter count.
#[derive(Debug, Serialize)]
pub(crate) struct Preference {
    /// Function code.
    pub fncode: u8,
    /// Number of input parameters.
    pub param_count: u32,
    /// The entry a new handle of this rank connects to first (index from 1).
    pub preferred: usize,
    /// Every matching entry in the order the handle tries them (indices from 1).
    pub order: Vec<usize>,
}

/// The NAAs: where the spec came from, its entries and the preferences.
#[derive(Debug, Serialize)]
pub(crate) struct SpecReport {
    /// `NAA_SPEC` or `--spec`.
    pub source: &'static str,
    /// The spec text (`None`: unset).
    pub text: Option<String>,
    /// Why it does not parse.
    pub error: Option<String>,
    /// The entries.
    pub entries: Vec<EntryReport>,
    /// For each distinct function code and parameter count, the entry this rank prefers.
    pub preferences: Vec<Preference>,
    /// Why there are no preferences although there are entries.
    pub preferences_error: Option<String>,
}

/// Everything read from the environment: the reports and what the probe needs.
#[derive(Debug)]
pub(crate) struct Gathered {
    /// The configuration report.
    pub configuration: Configuration,
    /// The rank (`None` when a launcher variable is invalid).
    pub rank: Option<RankReport>,
    /// The spec report.
    pub spec: SpecReport,
    /// The parsed entries.
    pub entries: Vec<NaaEntry>,
    /// The transport from the environment (`None` when invalid).
    pub transport: Option<AnyTransport>,
    /// True when `NAAICE_TRANSPORT` was set (not the default).
    pub transport_set: bool,
    /// The local source address.
    pub local: Option<SocketAddr>,
    /// Every configuration error, one line each.
    pub problems: Vec<String>,
}

/// A variable's value: `None` when unset, an error when it is not UTF-8.
fn read(name: &str) -> Option<Result<String, String>> {
    std::env::var_os(name).map(|v| {
        v.into_string()
            .map_err(|v| format!("{name}={v:?}: not valid UTF-8"))
    })
}

/// Reads the configuration from the environment; `spec_arg` (from `--spec`) replaces
/// `NAA_SPEC`.
pub(crate) fn gather(spec_arg: Option<&str>) -> Gathered {
    let value = |name: &str| read(name).and_then(Result::ok);
    let mut errors: Vec<(&str, String)> = VARIABLES
        .iter()
        .filter_map(|v| match read(v.name) {
            Some(Err(e)) => Some((v.name, e)),
            _ => None,
        })
        .collect();
    let record = |errors: &mut Vec<(&'static str, String)>, e: VariableError| {
        errors.push((e.name, e.to_string()));
    };

    let choice = environment::transport_choice(value(environment::TRANSPORT_VAR).as_deref())
        .map_err(|e| record(&mut errors, e))
        .ok();
    let wait = environment::wait_policy(value(environment::WAIT_VAR).as_deref())
        .map_err(|e| record(&mut errors, e))
        .ok();
    // As the library does: no transport when a variable it reads is wrong.
    let transport = match (choice, wait) {
        (Some(choice), Some(_)) => Some(AnyTransport::from_choice(choice)),
        _ => None,
    };
    let mut timeout = |name: &'static str, default: Duration| {
        environment::seconds(name, value(name).as_deref())
            .map(|t| t.unwrap_or(default))
            .map_err(|e| record(&mut errors, e))
            .ok()
    };
    let rpc_timeout = timeout(
        environment::RPC_TIMEOUT_VAR,
        environment::DEFAULT_RPC_TIMEOUT,
    );
    let connect_timeout = timeout(
        environment::CONNECT_TIMEOUT_VAR,
        naaice::client::connection::CONNECT_TIMEOUT,
    );
    let local = spec::local_ip_from_env()
        .map_err(|e| errors.push(("NAA_LOCAL_IP", e.to_string())))
        .ok()
        .flatten();
    let rank = Rank::from_lookup(value)
        .map_err(|e| record(&mut errors, e))
        .ok();
    if let Some(e) = log_filter_error(value(environment::LOG_VAR).as_deref()) {
        errors.push((environment::LOG_VAR, e));
    }
    let unknown = unknown_variables();
    let (spec_source, spec_text) = match spec_arg {
        Some(s) => ("--spec", Some(s.to_owned())),
        None => ("NAA_SPEC", value("NAA_SPEC")),
    };
    let (entries, spec_error) = parse_spec(spec_text.as_deref(), spec_arg.is_some());
    if let (Some(e), None) = (&spec_error, spec_arg) {
        errors.push(("NAA_SPEC", e.clone()));
    }
    let variables = variable_reports(&errors, spec_arg.is_some(), value);
    let mut problems: Vec<String> = errors.iter().map(|(_, e)| e.clone()).collect();
    problems.extend(unknown.iter().map(|u| u.message.clone()));
    if spec_arg.is_some() {
        problems.extend(spec_error.clone());
    }

    let configuration = Configuration {
        variables,
        transport: choice.map(|c| c.name().to_owned()),
        transport_here: choice.map(transport_here),
        wait: wait.map(|w| w.unwrap_or_default().to_string()),
        rpc_timeout_s: rpc_timeout.map(|t| t.as_secs_f64()),
        connect_timeout_s: connect_timeout.map(|t| t.as_secs_f64()),
        local_ip: local.map(|l| l.ip().to_string()),
        unknown_variables: unknown,
    };
    let (preferences, preferences_error) = match rank {
        _ if entries.is_empty() => (Vec::new(), None),
        Some(rank) => preferences(&entries, &rank),
        None => (
            Vec::new(),
            Some("the rank is unknown (a launcher variable is invalid)".to_owned()),
        ),
    };
    let spec = SpecReport {
        source: spec_source,
        text: spec_text,
        error: spec_error,
        entries: entries
            .iter()
            .enumerate()
            .map(|(i, e)| EntryReport {
                index: i + 1,
                host: e.host.clone(),
                port: e.port,
                fncode: e.fncode,
                param_count: e.param_count,
                local: e.local,
                transport: e.transport.map(|k| k.name()),
            })
            .collect(),
        preferences,
        preferences_error,
    };
    Gathered {
        configuration,
        rank: rank.map(|r| RankReport {
            rank: r.rank,
            size: r.size,
            local: r.local,
            source: r.source,
        }),
        spec,
        entries,
        transport_set: value(environment::TRANSPORT_VAR).is_some_and(|v| !v.trim().is_empty()),
        transport,
        local,
        problems,
    }
}

/// Why `NAAICE_LOG`'s filter is refused, if it is: the library's check (a typo such as
/// `degub` is refused), then `tracing`'s own.
fn log_filter_error(filter: Option<&str>) -> Option<String> {
    match environment::log_filter(filter) {
        Ok(Some(filter)) => tracing_subscriber::EnvFilter::try_new(&filter)
            .err()
            .map(|e| {
                format!(
                    "NAAICE_LOG={filter:?}: not a log filter ({e}); the library logs at warn \
                     instead"
                )
            }),
        Ok(None) => None,
        Err(e) => Some(format!("{e}; the library logs at warn instead")),
    }
}

/// The variables of this process named like the library's that it does not know.
fn unknown_variables() -> Vec<UnknownReport> {
    environment::unknown_variables(std::env::vars_os().filter_map(|(k, _)| k.into_string().ok()))
        .into_iter()
        .map(|u| UnknownReport {
            message: u.to_string(),
            name: u.name,
            nearest: u.nearest,
        })
        .collect()
}

/// The entries of the spec `text` (from `--spec` when `from_arg`), or why there are none.
fn parse_spec(text: Option<&str>, from_arg: bool) -> (Vec<NaaEntry>, Option<String>) {
    match text.map_or(Err(SpecError::Missing), spec::parse) {
        Ok(entries) => (entries, None),
        Err(e) if from_arg => (Vec::new(), Some(format!("--spec: {e}"))),
        Err(e) => (Vec::new(), Some(e.to_string())),
    }
}

/// Each variable of the library's table: its value and source, its errors (from `errors`),
/// and a note when `--spec` replaces `NAA_SPEC`.
fn variable_reports(
    errors: &[(&str, String)],
    spec_arg: bool,
    value: impl Fn(&str) -> Option<String>,
) -> Vec<VariableReport> {
    VARIABLES
        .iter()
        .map(|v| {
            let set = value(v.name);
            let source = match &set {
                Some(s) if !s.trim().is_empty() => Source::Environment,
                _ => Source::Default,
            };
            let error = errors
                .iter()
                .filter(|(name, _)| *name == v.name)
                .map(|(_, e)| e.clone())
                .reduce(|a, b| format!("{a}; {b}"));
            let note = (v.name == "NAA_SPEC" && spec_arg)
                .then(|| "not used: --spec replaces it".to_owned());
            VariableReport {
                name: v.name,
                value: set,
                source,
                default: v.default,
                meaning: v.meaning,
                error,
                note,
            }
        })
        .collect()
}

/// What a transport choice means on this machine.
fn transport_here(choice: TransportChoice) -> String {
    let unusable = naaice::transport::auto::verbs_unusable();
    match (choice, unusable) {
        (TransportChoice::Auto, None) => {
            "verbs first (RDMA devices exist), the software transport where verbs does not reach the NAA".into()
        }
        (TransportChoice::Auto, Some(why)) => {
            format!("the software transport only (verbs is unusable here: {why})")
        }
        (TransportChoice::Only(TransportKind::Soft), _) => {
            "the software transport (RC semantics over TCP); reaches software NAAs only".into()
        }
        (TransportChoice::Only(_), None) => "verbs (RDMA) only".into(),
        (TransportChoice::Only(_), Some(why)) => {
            format!("verbs (RDMA) only, which cannot work here: {why}")
        }
    }
}

/// For each distinct (function code, parameter count), in the order of first appearance,
/// the entries a new handle of `rank` tries: [`Pool::candidates`] on a pool of its own.
fn preferences(entries: &[NaaEntry], rank: &Rank) -> (Vec<Preference>, Option<String>) {
    let pool = Pool::new(entries.to_vec());
    let mut seen: Vec<(u8, u32)> = Vec::new();
    let mut out = Vec::new();
    for e in entries {
        let key = (e.fncode, e.param_count);
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        match pool.candidates(u32::from(e.fncode), e.param_count as usize, rank) {
            Ok(order) if !order.is_empty() => out.push(Preference {
                fncode: e.fncode,
                param_count: e.param_count,
                preferred: order[0] + 1,
                order: order.into_iter().map(|i| i + 1).collect(),
            }),
            Ok(_) => {}
            Err(err) => return (out, Some(err.to_string())),
        }
    }
    (out, None)
}
