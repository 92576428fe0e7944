//! `naaice-bench`: benchmarks the RPCs of a NAAICE accelerator (NAA), the software NAA it
//! starts itself or any NAA given with `--naa HOST:PORT` (an FPGA, a `naaice-swnaa`), over the
//! software or the verbs transport. By default a sweep of sizes ([`sweep`]): the reference's
//! CSV formats (spec §8), a summary with p50/p90/p99 per size, and plots against the raw
//! transport's limit and a compared CSV. With `--clients` many clients at once ([`clients`]).
//! `naaice-bench --help` explains every option.

mod base;
mod busy;
mod cli;
mod clients;
mod idle;
mod local;
mod pipeline;
mod plot;
mod sweep;

use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use naaice_cli::print_reference;

use base::setup;
use cli::Args;

/// Errors of the tool: printed, then exit status 1.
pub(crate) type Error = Box<dyn std::error::Error>;

fn run(args: &Args) -> Result<(), Error> {
    if args.spin {
        busy::spin();
    }
    setup::init_logging(&args.log)?;
    if args.serve {
        idle::serve(args)
    } else if let Some(n) = args.busy {
        busy::run(args, n)
    } else if args.local {
        local::run(args)
    } else if let Some(size) = args.pipeline {
        pipeline::run(args, size)
    } else if let Some(n) = args.idle {
        idle::run(args, n)
    } else if let Some(kind) = args.worker {
        clients::worker::run(args, kind)
    } else if !args.clients.is_empty() {
        clients::run(args)
    } else {
        sweep::run(args)
    }
}

/// Gives `SIGPIPE` its default action back (Rust ignores it, so `println!` panics when the
/// reader of stdout has gone): `naaice-bench … | head -1` ends quietly, as C programs do.
/// The transports never raise it on their sockets (C programs keep the default action too).
fn default_sigpipe() {
    // SAFETY: sets a signal's disposition to its default at the start of `main`, before any
    // other thread runs; no handler of ours is involved.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

fn main() -> ExitCode {
    default_sigpipe();
    let mut args = Args::parse();
    if let Some(code) = print_reference(
        Args::command(),
        args.man_page,
        args.options_reference,
        &cli::MAN,
    ) {
        return code;
    }
    if let Err(e) = args.resolve() {
        Args::command()
            .error(clap::error::ErrorKind::ArgumentConflict, e)
            .exit();
    }
    setup::set_wait(args.wait_policy().unwrap_or_default());
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let who = if args.worker.is_some() {
                "naaice-bench (client process)"
            } else {
                "naaice-bench"
            };
            eprintln!("{who}: {e}");
            ExitCode::FAILURE
        }
    }
}
