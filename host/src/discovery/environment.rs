//! The environment variables of the host library, parsed in one place for Rust ([`Naa::create`])
//! and the C ABI (`naa_create`), so that each means the same in both.
//!
//! | variable | meaning |
//! |---|---|
//! | `NAA_SPEC` | the NAAs ([`crate::discovery::spec`]; `local:fn_code:param_count` is the in-process NAA of [`crate::swnaa::local`]) |
//! | `NAA_LOCAL_IP` | local source address (optional) |
//! | `NAAICE_RPC_TIMEOUT` | per-RPC deadline, a duration (`30s`, `500ms`; a bare number is seconds) ([`DEFAULT_RPC_TIMEOUT`] when unset) |
//! | `NAAICE_CONNECT_TIMEOUT` | connect deadline (a duration), retries and failover included ([`crate::client::connection::CONNECT_TIMEOUT`] when unset) |
//! | `NAAICE_TRANSPORT` | `auto` (default: verbs where an RDMA device reaches the NAA, else the software transport), `soft` or `verbs` ([`transport_from_env`]) |
//! | `NAAICE_WAIT` | how connections wait for completions: `adaptive` (default), `adaptive:CAP_US`, `poll`, `sleep`, `spin:US` ([`crate::transport::waiting`]) |
//! | `NAAICE_STATS` | `1`: print the process's client statistics in one line on stderr at exit ([`crate::client::stats`]) |
//! | `NAAICE_RANK`, `NAAICE_NRANKS` | this process's rank and the number of ranks (win over the launcher's) |
//! | `SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID` | rank, size and node-local rank under `srun` |
//! | `OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE`, `OMPI_COMM_WORLD_LOCAL_RANK` | the same under Open MPI's `mpirun` |
//! | `PMI_RANK`, `PMI_SIZE` | the same under PMI launchers (MPICH, Intel MPI) |
//! | `PMIX_RANK` | rank under PMIx launchers (no size) |
//! | `NAAICE_LOG` | log filter of the C library's messages on stderr (`warn` when unset; read by `naaice-capi`; [`log_filter`]) |
//!
//! The ranks decide which `NAA_SPEC` entry a process prefers ([`crate::discovery::select`]). The same
//! list, with each default, is [`VARIABLES`] (for tools that show the configuration, such as
//! `naaice-info`).
//!
//! A variable named `NAAICE_*` or `NAA_*` that is neither in [`VARIABLES`] nor one of the
//! tools' [`TOOL_VARIABLES`] is most likely a typo (`NAAICE_RPC_TIMOUT`), which would
//! otherwise be ignored silently: the library warns about each once per process, naming the
//! nearest known variable ([`warn_unknown_variables`], [`unknown_variables`]), as UCX does for
//! `UCX_*`.
//!
//! [`Naa::create`]: crate::Naa::create

use std::time::Duration;

use crate::transport::waiting::WaitPolicy;
use crate::transport::{AnyTransport, TransportChoice};

/// A variable of the process's environment whose value is wrong: which one, its value and
/// what is wrong with it (`NAAICE_WAIT="fast": "fast" is not a wait policy (…)`). Within the
/// errors of a handle's creation it is [`SpecError::Variable`](crate::discovery::spec::SpecError::Variable).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name}={value:?}: {reason}")]
pub struct VariableError {
    /// The variable.
    pub name: &'static str,
    /// Its value.
    pub value: String,
    /// What is wrong.
    pub reason: String,
}

/// Selects the transport: `auto` (the default), `soft` or `verbs`.
pub const TRANSPORT_VAR: &str = "NAAICE_TRANSPORT";

/// Per-RPC deadline in seconds (may be fractional).
pub const RPC_TIMEOUT_VAR: &str = "NAAICE_RPC_TIMEOUT";
/// Connect deadline in seconds (may be fractional), retries and failover included.
pub const CONNECT_TIMEOUT_VAR: &str = "NAAICE_CONNECT_TIMEOUT";
/// How connections wait for completions ([`WaitPolicy`] text).
pub const WAIT_VAR: &str = "NAAICE_WAIT";
/// `1`: print the process's client statistics at exit ([`crate::client::stats`]).
pub const STATS_VAR: &str = "NAAICE_STATS";
/// Default per-RPC deadline: the C reference's receive timeout (one hour).
pub const DEFAULT_RPC_TIMEOUT: Duration = Duration::from_secs(3600);
/// Log filter of the library's messages on stderr ([`log_filter`]).
pub const LOG_VAR: &str = "NAAICE_LOG";
/// The library's log filter when `NAAICE_LOG` is unset, empty or invalid.
pub const DEFAULT_LOG_FILTER: &str = "warn";

/// One environment variable the library reads: its name, its default and what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variable {
    /// The variable's name.
    pub name: &'static str,
    /// What applies when it is unset or empty, as text.
    pub default: &'static str,
    /// What it means, in one line.
    pub meaning: &'static str,
}

/// Every environment variable the host library and its C ABI read, in the order of the
/// module documentation's table (a unit test keeps the two, the `*_VAR` constants, the
/// launcher variables of [`Rank::from_lookup`] and the defaults in step).
pub const VARIABLES: &[Variable] = &[
    Variable {
        name: "NAA_SPEC",
        default: "(none)",
        meaning: "the NAAs: address:port:fn_code:param_count[:transport] entries, comma-separated",
    },
    Variable {
        name: "NAA_LOCAL_IP",
        default: "(none: the system chooses)",
        meaning: "local source address of connections to NAAs",
    },
    Variable {
        name: RPC_TIMEOUT_VAR,
        default: "3600s",
        meaning: "per-RPC deadline: a duration (30s, 500ms, 1h; a bare number is seconds)",
    },
    Variable {
        name: CONNECT_TIMEOUT_VAR,
        default: "10s",
        meaning: "connect deadline, retries and failover included: a duration (a bare number is seconds)",
    },
    Variable {
        name: TRANSPORT_VAR,
        default: "auto",
        meaning: "auto (verbs where an RDMA device reaches the NAA, else soft), soft or verbs",
    },
    Variable {
        name: WAIT_VAR,
        default: "adaptive",
        meaning: "how connections wait for completions: adaptive[:CAP_US], poll, sleep, spin:US",
    },
    Variable {
        name: "NAAICE_RANK",
        default: "(none)",
        meaning: "this process's rank (wins over the launcher's)",
    },
    Variable {
        name: "NAAICE_NRANKS",
        default: "(none)",
        meaning: "the number of ranks, with NAAICE_RANK",
    },
    Variable {
        name: "SLURM_PROCID",
        default: "(none)",
        meaning: "rank under srun",
    },
    Variable {
        name: "SLURM_NTASKS",
        default: "(none)",
        meaning: "number of ranks under srun",
    },
    Variable {
        name: "SLURM_LOCALID",
        default: "(none)",
        meaning: "node-local rank under srun",
    },
    Variable {
        name: "OMPI_COMM_WORLD_RANK",
        default: "(none)",
        meaning: "rank under Open MPI's mpirun",
    },
    Variable {
        name: "OMPI_COMM_WORLD_SIZE",
        default: "(none)",
        meaning: "number of ranks under Open MPI's mpirun",
    },
    Variable {
        name: "OMPI_COMM_WORLD_LOCAL_RANK",
        default: "(none)",
        meaning: "node-local rank under Open MPI's mpirun",
    },
    Variable {
        name: "PMI_RANK",
        default: "(none)",
        meaning: "rank under PMI launchers (MPICH, Intel MPI)",
    },
    Variable {
        name: "PMI_SIZE",
        default: "(none)",
        meaning: "number of ranks under PMI launchers",
    },
    Variable {
        name: "PMIX_RANK",
        default: "(none)",
        meaning: "rank under PMIx launchers (no size)",
    },
    Variable {
        name: STATS_VAR,
        default: "0",
        meaning: "1: print the process's client statistics (RPCs, errors, bytes, latency percentiles) in one line on stderr at exit",
    },
    Variable {
        name: LOG_VAR,
        default: DEFAULT_LOG_FILTER,
        meaning: "log filter of the C library's messages on stderr (error, warn, info, debug, trace)",
    },
];

/// Variables named like the library's that its tools, install script and tests read, not the
/// library: known, so [`unknown_variables`] does not report them.
pub const TOOL_VARIABLES: &[&str] = &[
    // naaice-swnaa's --allow, --metrics and --kernels.
    "NAAICE_ALLOW",
    "NAAICE_METRICS",
    "NAAICE_KERNELS",
    // host/capi/install.sh.
    "NAAICE_VERBS",
    "NAAICE_LIB_DIR",
    "NAAICE_BIN_DIR",
    // The Slurm helper slurm/naaice-spec and the cluster tests' job scripts.
    "NAAICE_INVENTORY",
    "NAAICE_SPEC_TOOL",
    "NAAICE_SWNAA",
    "NAAICE_APP",
    "NAAICE_JOB_DIR",
    "NAAICE_SUBNET",
    "NAAICE_SLURM_NAAS",
    "NAAICE_BENCH",
    // naaice-info's build script (cargo also sets it when it runs the binary).
    "NAAICE_INFO_TARGET",
    // Tests and CI.
    "NAAICE_BLESS",
    "NAAICE_CHILD",
    "NAAICE_REQUIRE_RDMA",
    "NAAICE_REQUIRE_NETNS",
    "NAAICE_RDMA_ADDR",
    "NAAICE_SPLICE_SIGPIPE_CHILD",
    "NAAICE_TEST_RDMA_CORE_HIDDEN",
];

/// A variable that looks like one of the library's but is not known ([`unknown_variables`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownVariable {
    /// Its name.
    pub name: String,
    /// The known variable nearest to it (a likely misspelling), if one is near.
    pub nearest: Option<&'static str>,
}

impl std::fmt::Display for UnknownVariable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} is not a variable naaice reads", self.name)?;
        match self.nearest {
            Some(near) => write!(f, " (did you mean {near}?)")?,
            None => f.write_str(" (naaice-info lists the variables)")?,
        }
        f.write_str("; it has no effect")
    }
}

/// The names among `names` that start with `NAAICE_` or `NAA_` but are neither in
/// [`VARIABLES`] nor in [`TOOL_VARIABLES`], sorted, each with the nearest known name.
pub fn unknown_variables<S: AsRef<str>>(
    names: impl IntoIterator<Item = S>,
) -> Vec<UnknownVariable> {
    let known: Vec<&'static str> = VARIABLES
        .iter()
        .map(|v| v.name)
        .chain(TOOL_VARIABLES.iter().copied())
        .collect();
    let mut unknown: Vec<UnknownVariable> = names
        .into_iter()
        .map(|n| n.as_ref().to_owned())
        .filter(|n| n.starts_with("NAAICE_") || n.starts_with("NAA_"))
        .filter(|n| !known.contains(&n.as_str()))
        .map(|name| UnknownVariable {
            nearest: super::log_filter::nearest(&name, &known),
            name,
        })
        .collect();
    unknown.sort_by(|a, b| a.name.cmp(&b.name));
    unknown.dedup();
    unknown
}

/// Warns (a `tracing` warning) about each [`unknown_variables`] of the process's environment,
/// once per process; later calls do nothing. `Naa::create` and the C ABI's first call call it.
pub fn warn_unknown_variables() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let names = std::env::vars_os().filter_map(|(k, _)| k.into_string().ok());
        for unknown in unknown_variables(names) {
            tracing::warn!("{unknown}");
        }
    });
}

/// Parses a `NAAICE_LOG` value with [`log_filter`](super::log_filter::log_filter): `None` when unset or empty,
/// the normalised filter, or an error naming the variable and the accepted forms.
pub fn log_filter(value: Option<&str>) -> Result<Option<String>, VariableError> {
    let Some(v) = value.filter(|v| !v.trim().is_empty()) else {
        return Ok(None);
    };
    super::log_filter::log_filter(v)
        .map(Some)
        .map_err(|e| VariableError {
            name: LOG_VAR,
            value: v.to_owned(),
            reason: format!(
                "not a log filter: {}; expected {}",
                e.reason,
                super::log_filter::LOG_FILTER_FORMS
            ),
        })
}

/// The library's log filter: `NAAICE_LOG` ([`log_filter`]), [`DEFAULT_LOG_FILTER`] when it is
/// unset or empty. An invalid value also gives [`DEFAULT_LOG_FILTER`], and the first call in
/// the process says so on stderr (the logger is not installed yet, so it cannot log it).
pub fn log_filter_from_env() -> String {
    let value = std::env::var(LOG_VAR).ok();
    log_filter_or_default(value.as_deref(), |message| {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| eprintln!("naaice: {message}"));
    })
}

/// [`log_filter_from_env`] for the value `value`, telling `complain` why an invalid one is
/// replaced.
fn log_filter_or_default(value: Option<&str>, complain: impl FnOnce(String)) -> String {
    match log_filter(value) {
        Ok(Some(filter)) => filter,
        Ok(None) => DEFAULT_LOG_FILTER.to_owned(),
        Err(e) => {
            complain(format!("{e}; logging at {DEFAULT_LOG_FILTER} instead"));
            DEFAULT_LOG_FILTER.to_owned()
        }
    }
}

/// The launcher families [`Rank::from_lookup`] reads, in precedence order: the rank, size and
/// node-local rank variable of each.
const LAUNCHER_FAMILIES: [(&str, Option<&str>, Option<&str>); 5] = [
    ("NAAICE_RANK", Some("NAAICE_NRANKS"), None),
    ("SLURM_PROCID", Some("SLURM_NTASKS"), Some("SLURM_LOCALID")),
    (
        "OMPI_COMM_WORLD_RANK",
        Some("OMPI_COMM_WORLD_SIZE"),
        Some("OMPI_COMM_WORLD_LOCAL_RANK"),
    ),
    ("PMI_RANK", Some("PMI_SIZE"), None),
    ("PMIX_RANK", None, None),
];

/// Where a process stands in its parallel job: its rank among `size` ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rank {
    /// The process's rank (0-based).
    pub rank: u32,
    /// Number of ranks, if the launcher tells.
    pub size: Option<u32>,
    /// Rank among the job's processes on this node, if the launcher tells.
    pub local: Option<u32>,
    /// Variable the rank was read from (`"none"` for a lone process).
    pub source: &'static str,
}

impl Rank {
    /// A process outside any parallel job: rank 0 of 1.
    pub const SINGLE: Self = Self {
        rank: 0,
        size: Some(1),
        local: Some(0),
        source: "none",
    };

    /// The rank from the environment, read once per process (see [`Rank::from_lookup`]).
    pub fn from_env() -> Result<Self, VariableError> {
        static RANK: std::sync::OnceLock<Result<Rank, VariableError>> = std::sync::OnceLock::new();
        RANK.get_or_init(|| Self::from_lookup(|name| std::env::var(name).ok()))
            .clone()
    }

    /// The rank from variables looked up by `var`: the first launcher family (in the order
    /// `NAAICE_`, Slurm, Open MPI, PMI, PMIx) whose rank variable is set decides rank, size and
    /// local rank; without any, the process is [`Rank::SINGLE`]. A set but malformed
    /// variable, or a rank not below the size, is an error.
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Result<Self, VariableError> {
        let number = |name: &'static str| -> Result<Option<u32>, VariableError> {
            match var(name) {
                None => Ok(None),
                Some(v) if v.trim().is_empty() => Ok(None),
                Some(v) => v.trim().parse().map(Some).map_err(|_| VariableError {
                    name,
                    value: v.clone(),
                    reason: "not a non-negative integer".into(),
                }),
            }
        };
        for (rank_var, size_var, local_var) in LAUNCHER_FAMILIES {
            let Some(rank) = number(rank_var)? else {
                continue;
            };
            let size = size_var.map(number).transpose()?.flatten();
            if let (Some(size_var), Some(size)) = (size_var, size)
                && rank >= size
            {
                return Err(VariableError {
                    name: rank_var,
                    value: rank.to_string(),
                    reason: format!("rank is not below {size_var}={size}"),
                });
            }
            let local = local_var.map(number).transpose()?.flatten();
            return Ok(Self {
                rank,
                size: size.filter(|&s| s > 0),
                local,
                source: rank_var,
            });
        }
        Ok(Self::SINGLE)
    }
}

/// Parses a variable holding a duration (`30s`, `500ms`; a bare number is seconds): `None`
/// when unset or empty.
pub fn seconds(name: &'static str, value: Option<&str>) -> Result<Option<Duration>, VariableError> {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    crate::units::parse_duration(v, Duration::from_secs(1))
        .and_then(|d| {
            if d.is_zero() || d > Duration::from_secs(1_000_000_000) {
                Err("not a duration above zero and at most 10^9 seconds".into())
            } else {
                Ok(Some(d))
            }
        })
        .map_err(|reason| VariableError {
            name,
            value: v.to_owned(),
            reason,
        })
}

/// Parses the `NAAICE_WAIT` value: `None` when unset or empty.
pub fn wait_policy(value: Option<&str>) -> Result<Option<WaitPolicy>, VariableError> {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    v.parse().map(Some).map_err(|e| VariableError {
        name: WAIT_VAR,
        value: v.to_owned(),
        reason: format!("{e}"),
    })
}

/// Parses the `NAAICE_TRANSPORT` value (`auto` when unset or empty).
pub fn transport_choice(value: Option<&str>) -> Result<TransportChoice, VariableError> {
    let v = value.unwrap_or("").trim();
    v.parse().map_err(|e| VariableError {
        name: TRANSPORT_VAR,
        value: v.to_owned(),
        reason: format!("{e}"),
    })
}

/// The transport of clients and software NAAs, the same for Rust, C and the binaries:
/// `NAAICE_TRANSPORT` (`auto` when unset). How connections wait (`NAAICE_WAIT`) is theirs:
/// [`NaaOptions::from_env`](crate::NaaOptions::from_env), [`wait_policy_from_env`].
pub fn transport_from_env() -> Result<AnyTransport, VariableError> {
    transport_from_lookup(|name| std::env::var(name).ok())
}

/// [`transport_from_env`] with variables looked up by `var`.
pub fn transport_from_lookup(
    var: impl Fn(&str) -> Option<String>,
) -> Result<AnyTransport, VariableError> {
    Ok(AnyTransport::from_choice(transport_choice(
        var(TRANSPORT_VAR).as_deref(),
    )?))
}

/// How connections wait, from `NAAICE_WAIT` (the default, adaptive, when unset): for C and
/// Python software NAAs ([`SoftNaaConfig::wait`](crate::swnaa::SoftNaaConfig)) and AP1
/// connections ([`Connection::set_wait`](crate::Connection::set_wait)).
pub fn wait_policy_from_env() -> Result<WaitPolicy, VariableError> {
    Ok(wait_policy(std::env::var(WAIT_VAR).ok().as_deref())?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::naa::NaaOptions;

    fn lookup<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn launcher_precedence() {
        let all = [
            ("NAAICE_RANK", "5"),
            ("NAAICE_NRANKS", "8"),
            ("SLURM_PROCID", "3"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_LOCALID", "1"),
            ("OMPI_COMM_WORLD_RANK", "2"),
            ("OMPI_COMM_WORLD_SIZE", "3"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "0"),
            ("PMI_RANK", "1"),
            ("PMI_SIZE", "2"),
            ("PMIX_RANK", "7"),
        ];
        let expect = [
            (5, Some(8), None, "NAAICE_RANK"),
            (3, Some(4), Some(1), "SLURM_PROCID"),
            (2, Some(3), Some(0), "OMPI_COMM_WORLD_RANK"),
            (1, Some(2), None, "PMI_RANK"),
            (7, None, None, "PMIX_RANK"),
        ];
        // Dropping the winning family's variables each time reveals the next one.
        let skip = [2, 5, 8, 10, 11];
        for (i, (rank, size, local, source)) in expect.into_iter().enumerate() {
            let from = if i == 0 { 0 } else { skip[i - 1] };
            let r = Rank::from_lookup(lookup(&all[from..])).unwrap();
            assert_eq!(
                r,
                Rank {
                    rank,
                    size,
                    local,
                    source
                }
            );
        }
        assert_eq!(Rank::from_lookup(lookup(&[])).unwrap(), Rank::SINGLE);
    }

    #[test]
    fn bad_rank_variables_are_errors() {
        let err = Rank::from_lookup(lookup(&[("SLURM_PROCID", "x")]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("SLURM_PROCID") && err.contains("\"x\""),
            "{err}"
        );
        let err = Rank::from_lookup(lookup(&[("NAAICE_RANK", "4"), ("NAAICE_NRANKS", "4")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("NAAICE_NRANKS=4"), "{err}");
    }

    #[test]
    fn wait_policy_from_its_variable() {
        assert_eq!(wait_policy(None).unwrap(), None);
        assert_eq!(wait_policy(Some("  ")).unwrap(), None);
        assert_eq!(wait_policy(Some("poll")).unwrap(), Some(WaitPolicy::Poll));
        assert_eq!(
            wait_policy(Some(" adaptive ")).unwrap(),
            Some(WaitPolicy::default())
        );
        let err = wait_policy(Some("spinny")).unwrap_err().to_string();
        assert!(err.contains(WAIT_VAR) && err.contains("spinny"), "{err}");
    }

    #[test]
    fn transport_from_its_variables() {
        let name = |vars: &[(&str, &str)]| transport_from_lookup(lookup(vars)).map(|t| t.name());
        assert_eq!(name(&[]), Ok("auto"));
        assert_eq!(name(&[(TRANSPORT_VAR, " ")]), Ok("auto"));
        assert_eq!(name(&[(TRANSPORT_VAR, "Soft")]), Ok("soft"));
        assert_eq!(
            name(&[(TRANSPORT_VAR, "soft"), (WAIT_VAR, "poll")]),
            Ok("soft")
        );
        let err = name(&[(TRANSPORT_VAR, "pigeon")]).unwrap_err().to_string();
        assert!(
            err.contains(TRANSPORT_VAR) && err.contains("\"auto\""),
            "{err}"
        );
        // The waiting policy is the connection's: read with the handle's options.
        let err = NaaOptions::from_lookup(lookup(&[(WAIT_VAR, "hurry")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains(WAIT_VAR) && err.contains("hurry"), "{err}");
        let options = NaaOptions::from_lookup(lookup(&[(WAIT_VAR, "sleep")])).unwrap();
        assert_eq!(options.wait, WaitPolicy::Sleep);
        let verbs = name(&[(TRANSPORT_VAR, "verbs")]);
        if cfg!(feature = "verbs") {
            assert_eq!(verbs, Ok("verbs"));
        } else {
            let err = verbs.unwrap_err().to_string();
            assert!(err.contains("cargo feature `verbs`"), "{err}");
        }
    }

    #[test]
    fn timeouts_from_variables() {
        let o = NaaOptions::from_lookup(lookup(&[])).unwrap();
        assert_eq!(o.rpc_timeout, DEFAULT_RPC_TIMEOUT);
        assert_eq!(
            o.connect_timeout,
            crate::client::connection::CONNECT_TIMEOUT
        );
        let o = NaaOptions::from_lookup(lookup(&[
            (RPC_TIMEOUT_VAR, " 2.5 "),
            (CONNECT_TIMEOUT_VAR, "30"),
        ]))
        .unwrap();
        assert_eq!(o.rpc_timeout, Duration::from_millis(2500));
        assert_eq!(o.connect_timeout, Duration::from_secs(30));
        let o = NaaOptions::from_lookup(lookup(&[(RPC_TIMEOUT_VAR, "1m 30s")])).unwrap();
        assert_eq!(o.rpc_timeout, Duration::from_secs(90));
        for bad in ["0", "-1", "abc", "inf", "1e10", "0ms"] {
            let err = NaaOptions::from_lookup(lookup(&[(RPC_TIMEOUT_VAR, bad)]))
                .unwrap_err()
                .to_string();
            assert!(err.contains(RPC_TIMEOUT_VAR), "{bad}: {err}");
        }
    }

    #[test]
    fn log_filter_from_its_variable() {
        assert_eq!(log_filter(None).unwrap(), None);
        assert_eq!(log_filter(Some(" ")).unwrap(), None);
        assert_eq!(
            log_filter(Some("naaice=DEBUG, warn")).unwrap().as_deref(),
            Some("naaice=debug,warn")
        );
        let err = log_filter(Some("degub")).unwrap_err().to_string();
        assert!(
            err.starts_with("NAAICE_LOG=\"degub\": not a log filter")
                && err.contains("did you mean debug?")
                && err.contains(crate::discovery::log_filter::LOG_FILTER_FORMS),
            "{err}"
        );
    }

    /// An invalid `NAAICE_LOG` gives `warn` and one complaint naming the variable; a valid
    /// or missing one none.
    #[test]
    fn an_invalid_log_filter_falls_back_to_warn() {
        let mut said = Vec::new();
        assert_eq!(
            log_filter_or_default(Some("verbose"), |m| said.push(m)),
            "warn"
        );
        assert_eq!(said.len(), 1);
        assert!(
            said[0].contains("NAAICE_LOG=\"verbose\"")
                && said[0].ends_with("logging at warn instead"),
            "{said:?}"
        );
        said.clear();
        assert_eq!(log_filter_or_default(None, |m| said.push(m)), "warn");
        assert_eq!(
            log_filter_or_default(Some("info"), |m| said.push(m)),
            "info"
        );
        assert!(said.is_empty(), "{said:?}");
    }

    #[test]
    fn unknown_variables_are_named_with_the_nearest_known_one() {
        let found = unknown_variables([
            "NAAICE_RPC_TIMOUT",
            "NAA_SPECS",
            "NAAICE_TRANSPORT",
            "NAAICE_BLESS",
            "NAAICE_FROBNICATE",
            "PATH",
            "NAAICEX",
            "NAAICE_RPC_TIMOUT",
        ]);
        assert_eq!(
            found,
            [
                UnknownVariable {
                    name: "NAAICE_FROBNICATE".into(),
                    nearest: None
                },
                UnknownVariable {
                    name: "NAAICE_RPC_TIMOUT".into(),
                    nearest: Some(RPC_TIMEOUT_VAR)
                },
                UnknownVariable {
                    name: "NAA_SPECS".into(),
                    nearest: Some("NAA_SPEC")
                },
            ]
        );
        assert_eq!(
            found[1].to_string(),
            "NAAICE_RPC_TIMOUT is not a variable naaice reads (did you mean \
             NAAICE_RPC_TIMEOUT?); it has no effect"
        );
        assert!(
            found[0].to_string().contains("naaice-info lists"),
            "{}",
            found[0]
        );
        let known: Vec<&str> = VARIABLES.iter().map(|v| v.name).collect();
        assert!(unknown_variables(known.iter().chain(TOOL_VARIABLES)).is_empty());
    }

    /// Every variable the library reads is in [`VARIABLES`], once: the `*_VAR` constants, the
    /// module documentation's table, the launcher variables and the names read directly
    /// (`std::env::var("...")` here and in `spec.rs`); the table names nothing else, and its
    /// defaults are the code's.
    #[test]
    fn the_variable_table_lists_every_variable() {
        let table: Vec<&str> = VARIABLES.iter().map(|v| v.name).collect();
        let mut unique = table.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), table.len(), "a variable is listed twice");
        // The source text is searched, so that a new constant or row cannot be forgotten.
        let source = include_str!("environment.rs");
        let source = source.split("#[cfg(test)]").next().unwrap_or(source);
        let constants: Vec<&str> = source
            .lines()
            .filter_map(|l| l.strip_prefix("pub const "))
            .filter_map(|l| l.split_once("_VAR: &str = \""))
            .filter_map(|(_, rest)| rest.split('"').next())
            .collect();
        assert!(constants.len() >= 4, "{constants:?}");
        let documented: Vec<&str> = source
            .lines()
            .filter_map(|l| l.strip_prefix("//! | `"))
            .filter_map(|row| row.split(" | ").next())
            .flat_map(|cell| cell.split(['`', ',', ' ']))
            .filter(|name| !name.is_empty())
            .collect();
        let read_directly: Vec<&str> = [source, include_str!("spec.rs"), include_str!("select.rs")]
            .into_iter()
            .flat_map(|s| s.split("std::env::var(\"").skip(1))
            .filter_map(|rest| rest.split('"').next())
            .collect();
        assert!(
            read_directly.contains(&"NAA_SPEC") && read_directly.contains(&"NAA_LOCAL_IP"),
            "{read_directly:?}"
        );
        let launcher = LAUNCHER_FAMILIES
            .iter()
            .flat_map(|&(rank, size, local)| [Some(rank), size, local])
            .flatten();
        let named: Vec<&str> = constants
            .into_iter()
            .chain(documented.iter().copied())
            .chain(read_directly)
            .chain(launcher)
            .collect();
        for name in &named {
            assert!(table.contains(name), "{name} is not in VARIABLES");
        }
        for name in &table {
            assert!(
                documented.contains(name),
                "{name} is not in the module's table"
            );
        }
        let default = |name: &str| VARIABLES.iter().find(|v| v.name == name).unwrap().default;
        assert_eq!(
            default(RPC_TIMEOUT_VAR),
            format!("{}s", DEFAULT_RPC_TIMEOUT.as_secs())
        );
        assert_eq!(
            default(CONNECT_TIMEOUT_VAR),
            format!("{}s", crate::client::connection::CONNECT_TIMEOUT.as_secs())
        );
        assert_eq!(default(TRANSPORT_VAR), TransportChoice::default().name());
        assert_eq!(default(WAIT_VAR), WaitPolicy::default().to_string());
    }
}
