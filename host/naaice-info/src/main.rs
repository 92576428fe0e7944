//! `naaice-info`: what this machine and job offer NAAICE, like `ibv_devinfo` and `ucx_info`
//! for the NAAICE stack: the build, RDMA devices, the effective configuration, the rank and
//! the NAAs of `NAA_SPEC`; with `--probe`, whether each NAA answers an RPC.

mod config;
mod metrics;
mod probe;
mod rdma;
mod report;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use clap::{CommandFactory, Parser};
use naaice_cli::{ManExtras, print_reference, values};

use crate::probe::{Outcome, Prober};
use crate::report::{Build, Probe, Report};

/// `--version`: the version and the transports of this build.
const LONG_VERSION: &str = if cfg!(feature = "verbs") {
    concat!(env!("CARGO_PKG_VERSION"), " (transports: soft, verbs)")
} else {
    concat!(env!("CARGO_PKG_VERSION"), " (transports: soft)")
};

/// What the program does (`--help` and the man page's DESCRIPTION).
const DESCRIPTION: &str = "Reports what this machine and job offer the NAAICE stack: the \
build (version, transports, target); RDMA (whether rdma-core's libraries load, each RDMA \
device with its ports, GIDs and their network devices' addresses, and whether the verbs \
transport can be used here, or why not); the effective configuration (every variable the \
library reads, its value and whether it came from the environment or is the default, with \
the library's own message for a value it does not accept); the rank and the variable it came \
from; the NAA_SPEC entries and, for each function code and parameter count, the entry this \
rank prefers and the failover order.\n\n\
With --probe it connects to each entry as the library would (the entry's transport, else \
NAAICE_TRANSPORT; under auto each transport is tried in turn and reported), runs the \
memory-region setup (MRSP) with param_count regions of 64 zeroed bytes and one RPC with the \
entry's function code, and reports per entry: ok, refused (nothing listens), overloaded (the \
NAA's connection slots are all taken), rejected, timeout, wrong-transport (the transport asked \
for cannot work on this machine, e.g. verbs without an RDMA device), unresolved or error, with \
the times of connect, MRSP and RPC and the NAA's return code. A local: entry starts the \
in-process NAA of local mode and probes it. The probe uses --timeout instead of \
NAAICE_CONNECT_TIMEOUT and NAAICE_RPC_TIMEOUT, so that a dead NAA costs at most that.\n\n\
--json prints the same facts as one JSON document.";

/// The exit statuses (`--help` and the man page's EXIT STATUS).
const EXIT_STATUS: &str = "0: the configuration is valid (and, with --probe, every probed \
entry is ok). 1: a variable or the spec is invalid (an unset NAA_SPEC counts, unless --spec \
is given; so does a variable named NAAICE_* or NAA_* that the library does not know), or a \
probed entry is not ok. 2: a command-line error (also an invalid --log).";

/// The man page's sections beyond the options.
const MAN: ManExtras<'static> = ManExtras {
    variables: &[],
    every_variable: true,
    exit_status: &[
        (
            "0",
            "The configuration is valid and, with --probe, every probed entry is ok.",
        ),
        (
            "1",
            "A variable or the spec is invalid (an unset NAA_SPEC counts, unless --spec is given), or a probed entry is not ok.",
        ),
        ("2", "A command-line error."),
    ],
    examples: &[
        (
            "naaice-info",
            "Show the build, the RDMA devices, the configuration, the rank and the NAAs of this shell's environment.",
        ),
        (
            "NAA_SPEC=10.0.0.5:12345:1:1,10.0.0.6:12345:1:1 naaice-info --probe",
            "Probe both NAAs: connect, memory-region setup and one RPC of function 1 each.",
        ),
        (
            "naaice-info --spec 127.0.0.1:12345:3:0 --probe --timeout 500ms",
            "Probe a software NAA on this machine (function 3 does nothing), whatever NAA_SPEC says, waiting at most half a second.",
        ),
        (
            "srun -n 4 sh -c 'naaice-info --json > info.$SLURM_PROCID.json'",
            "Record, for each rank of a Slurm job, the entry it prefers (spec.preferences in the JSON document).",
        ),
        (
            "naaice-info --probe > probe.txt || exit 1",
            "In a job script: stop before the application starts if the configuration is invalid or an NAA does not answer (probe.txt says why).",
        ),
    ],
    see_also: &[
        "naaice(7)",
        "naaice-swnaa(1)",
        "naaice-bench(1)",
        "ibv_devinfo(1)",
    ],
};

/// Reports the NAAICE setup: build, RDMA devices, configuration, rank, NAAs; --probe checks
/// each NAA.
#[derive(Parser, Debug)]
#[command(
    version,
    long_version = LONG_VERSION,
    about,
    long_about = format!("{DESCRIPTION}\n\nExit status: {EXIT_STATUS}"),
)]
struct Args {
    /// Connect to each NAA_SPEC entry, run the MRSP and one RPC, and report how each went.
    #[arg(long)]
    probe: bool,
    /// Time allowed per probed entry, connect, MRSP and RPC together (e.g. 3s, 500ms, 1.5).
    #[arg(long, value_name = "DURATION", default_value = "3s", value_parser = values::positive_seconds)]
    timeout: Duration,
    /// Probe only entry N (counted from 1, as printed); implies --probe.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    entry: Option<u32>,
    /// Use SPEC (NAA_SPEC syntax) instead of the NAA_SPEC variable.
    #[arg(long, value_name = "SPEC")]
    spec: Option<String>,
    /// Read the metrics endpoint of a running naaice-swnaa (its `--metrics ADDR:PORT`) and
    /// print a short summary: RPCs served, errors, RPC time p50/p99, connections, memory;
    /// nothing else is looked at (--timeout bounds the request).
    #[arg(long, value_name = "ADDR:PORT")]
    metrics: Option<std::net::SocketAddr>,
    /// Print one JSON document (the same facts) instead of text.
    #[arg(long)]
    json: bool,
    /// Log filter of naaice-info's own messages on stderr (`error`, `warn`, `info`, `debug`,
    /// `trace`, `off`, or a `tracing` filter whose targets are naaice crates, such as
    /// `naaice=debug,warn`). Default: NAAICE_LOG where valid (an invalid NAAICE_LOG is
    /// reported as a problem), else warn.
    #[arg(long, value_name = "FILTER", value_parser = naaice_cli::log_filter_arg)]
    log: Option<String>,
    /// Print the man page (roff) to standard output and exit.
    #[arg(long, hide = true)]
    man_page: bool,
    /// Print the Markdown table of the options (docs/configuration.md) and exit.
    #[arg(long, hide = true)]
    options_reference: bool,
}

/// Logs to stderr, filtered by `--log`, else by `NAAICE_LOG` as in the C library (`warn`
/// when unset or invalid: the report names an invalid one as a problem).
fn init_logging(log: Option<&str>) {
    let env = std::env::var(naaice::discovery::environment::LOG_VAR).ok();
    let filter = log
        .map(str::to_owned)
        .or_else(|| {
            naaice::discovery::environment::log_filter(env.as_deref())
                .ok()
                .flatten()
        })
        .and_then(|f| tracing_subscriber::EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| {
            tracing_subscriber::EnvFilter::new(naaice::discovery::environment::DEFAULT_LOG_FILTER)
        });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .init();
}

/// Looks at everything and probes what `args` ask for.
fn gather(args: &Args) -> Report {
    let g = config::gather(args.spec.as_deref());
    let mut problems = g.problems;
    let probe = (args.probe || args.entry.is_some()).then(|| {
        let mut probe = Probe {
            timeout_s: args.timeout.as_secs_f64(),
            skipped: None,
            entries: Vec::new(),
        };
        match &g.transport {
            None => {
                probe.skipped = Some("the transport configuration is invalid (see above)".into());
            }
            Some(_) if g.entries.is_empty() => {
                probe.skipped = Some("no NAA_SPEC entries to probe".into());
            }
            Some(transport) => {
                let prober = Prober {
                    transport,
                    transport_set: g.transport_set,
                    local: g.local,
                    timeout: args.timeout,
                };
                for (i, entry) in g.entries.iter().enumerate() {
                    if args.entry.is_none_or(|n| n as usize == i + 1) {
                        probe.entries.push(prober.probe(i + 1, entry));
                    }
                }
            }
        }
        for r in probe.entries.iter().filter(|r| r.outcome != Outcome::Ok) {
            problems.push(format!(
                "entry #{} ({}): {}: {}",
                r.index,
                r.entry,
                r.outcome,
                r.error.as_deref().unwrap_or("")
            ));
        }
        probe
    });
    let exit_status = u8::from(!problems.is_empty());
    Report {
        build: Build::current(),
        rdma: rdma::Rdma::current(),
        configuration: g.configuration,
        rank: g.rank,
        spec: g.spec,
        probe,
        problems,
        exit_status,
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(code) = print_reference(
        Args::command().long_about(DESCRIPTION),
        args.man_page,
        args.options_reference,
        &MAN,
    ) {
        return code;
    }
    init_logging(args.log.as_deref());
    if let Some(addr) = args.metrics {
        return match metrics::summary(addr, args.timeout) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("naaice-info: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let report = gather(&args);
    if let (Some(n), true) = (args.entry, report.spec.error.is_none()) {
        let count = report.spec.entries.len();
        if n as usize > count {
            Args::command()
                .error(
                    clap::error::ErrorKind::InvalidValue,
                    format!("--entry {n}: the spec has {count} entries"),
                )
                .exit();
        }
    }
    if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(json) => println!("{json}"),
            Err(e) => {
                eprintln!("naaice-info: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        print!("{}", report.human());
    }
    ExitCode::from(report.exit_status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Args::command().debug_assert();
    }
}
