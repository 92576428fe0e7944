//! `naaice-bench`: benchmarks the RPCs of a NAAICE accelerator (NAA), the software NAA it
//! starts itself or any NAA given with `--naa HOST:PORT` (an FPGA, a `naaice-swnaa`), over the
//! software or the verbs transport. Writes the reference's CSV formats (spec §8), a summary
//! with p50/p90/p99 per size, and plots against the raw transport's limit and a compared CSV.
//! `naaice-bench --help` explains every option.

mod cli;
mod compare;
mod cpu;
mod limits;
mod measure;
mod plot;
mod process_clock;
mod raw;
mod report;
mod sizes;
mod stats;

use std::io::IsTerminal;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use clap::{CommandFactory, Parser};
use indicatif::{ProgressBar, ProgressStyle};
use naaice::cli::print_reference;
use naaice::swnaa::{KernelRegistry, SoftNaa, SoftNaaConfig, SoftNaaHandle};
use naaice::transport::AnyTransport;
use naaice::transport::soft::{SoftConfig, SoftTransport};
use naaice_core::FunctionCode;

use cli::Args;
use compare::Reference;
use measure::{Measured, Target};
use process_clock::ProcessClock;

/// Errors of the tool: printed, then exit status 1.
pub(crate) type Error = Box<dyn std::error::Error>;

/// The transport named by `--transport`, with the tuning options applied.
fn transport(args: &Args) -> Result<AnyTransport, Error> {
    match &args.transport {
        AnyTransport::Auto(_) => Err("--transport auto: a benchmark measures one transport; \
             name it (soft or verbs)"
            .into()),
        AnyTransport::Soft(_) => {
            if args.wait_policy().is_some() {
                return Err("--wait and --busy-poll apply to the verbs transport only".into());
            }
            let mut config = SoftConfig::default();
            if let Some(delay) = args.ack_delay {
                config.ack_delay = delay;
            }
            Ok(AnyTransport::from(SoftTransport::new(config)))
        }
        #[cfg(feature = "verbs")]
        AnyTransport::Verbs(_) => {
            use naaice::transport::verbs::{VerbsConfig, VerbsTransport};
            if args.ack_delay.is_some() {
                return Err("--ack-delay applies to the software transport only".into());
            }
            let mut config = VerbsConfig::default();
            if let Some(policy) = args.wait_policy() {
                config.wait = policy;
            }
            Ok(AnyTransport::Verbs(VerbsTransport::new(config)))
        }
    }
}

/// The NAA under test: `--naa`, or a software NAA started here.
fn naa(
    args: &Args,
    transport: &AnyTransport,
) -> Result<(SocketAddr, Option<SoftNaaHandle>), Error> {
    if let Some(spec) = &args.naa {
        if args.address.is_some() {
            return Err(
                "--address is where the in-process NAA listens: leave it out with --naa".into(),
            );
        }
        let addr = spec
            .to_socket_addrs()
            .map_err(|e| format!("--naa {spec}: {e}"))?
            .next()
            .ok_or_else(|| format!("--naa {spec}: no address"))?;
        return Ok((addr, None));
    }
    let listen = match (transport, args.address) {
        (AnyTransport::Soft(_) | AnyTransport::Auto(_), None) => {
            SocketAddr::from(([127, 0, 0, 1], 0))
        }
        (_, Some(ip)) => SocketAddr::new(ip, 0),
        #[cfg(feature = "verbs")]
        (AnyTransport::Verbs(_), None) => {
            return Err(
                "--transport verbs without --naa needs --address IP (an address of an RDMA \
                        device) for the in-process NAA"
                    .into(),
            );
        }
    };
    let config = SoftNaaConfig {
        max_connections: 16,
        ..SoftNaaConfig::default()
    };
    let handle =
        SoftNaa::bind(transport.clone(), listen, config, KernelRegistry::builtin())?.spawn()?;
    Ok((handle.local_addr(), Some(handle)))
}

/// What the "others" CPU time counts.
fn others_meaning(naa_cpu: Option<&ProcessClock>) -> String {
    naa_cpu.map_or_else(
        || "this process's other threads (the in-process NAA, transport threads)".to_owned(),
        |c| format!("the NAA's process {} (all its threads)", c.pid()),
    )
}

/// Logs to stderr, coloured only on a terminal (Slurm output files stay plain).
fn init_logging(filter: &str) -> Result<(), Error> {
    let filter =
        tracing_subscriber::EnvFilter::try_new(filter).map_err(|e| format!("--log: {e}"))?;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    Ok(())
}

/// Writes `contents` to `path`, creating its folder.
fn write_file(path: &Path, contents: &str) -> Result<(), Error> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, contents).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(())
}

fn progress(len: usize) -> ProgressBar {
    // Drawn only on a terminal (indicatif hides it otherwise).
    let bar = ProgressBar::new(len as u64);
    if let Ok(style) =
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} sizes {msg}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

fn run(args: &Args) -> Result<(), Error> {
    init_logging(&args.log)?;
    if args.max_size == 0 {
        return Err("--max-size must be at least 1".into());
    }
    if args.stream_time.is_zero() {
        return Err("--stream-time must be longer than zero".into());
    }
    let reference = args.compare.as_deref().map(Reference::read).transpose()?;
    let transport = transport(args)?;
    let verbs = transport.name() == "verbs";
    let (naa, own) = naa(args, &transport)?;
    // The raw TCP limit is meaningful where the NAA is: on this machine, over TCP.
    let raw = (!verbs && naa.ip().is_loopback())
        .then(raw::RawPeer::start)
        .transpose()?;
    let fncode = FunctionCode::new(args.fncode).ok_or("--fncode must be in 1..=127")?;
    let naa_cpu = args.naa_pid.map(ProcessClock::of).transpose()?;
    let target = Target {
        transport: &transport,
        naa,
        fncode,
        raw: raw.as_ref(),
        stream_secs: args.stream_time.as_secs_f64() / 4.0,
        naa_cpu: naa_cpu.as_ref(),
    };
    let sizes = sizes::sweep_sizes(args.max_size);
    let what = format!(
        "{} NAA at {naa}{} over {}",
        if own.is_some() {
            "in-process software"
        } else {
            "the"
        },
        naa_cpu
            .as_ref()
            .map_or_else(String::new, |c| format!(" (process {})", c.pid())),
        transport.name()
    );
    println!(
        "naaice-bench: {what}, kernel {}; {} sizes up to {} bytes{}",
        args.fncode,
        sizes.len(),
        args.max_size,
        if raw.is_some() {
            "; raw TCP limit on loopback"
        } else {
            ""
        }
    );

    let started = Instant::now();
    let bar = progress(sizes.len());
    let mut rows: Vec<Measured> = Vec::with_capacity(sizes.len());
    for &size in &sizes {
        bar.set_message(format!("({} bytes)", size.bytes));
        let t = Instant::now();
        let m = target.measure(
            size,
            sizes::steady_count(args.steady, verbs, size.bytes),
            sizes::fresh_reps(args.reps, size.bytes),
        )?;
        let us = |v: Option<f64>| v.map_or(f64::NAN, |v| v * 1e6);
        bar.suspend(|| {
            let (cpu_client, cpu_others) = m.cpu.per_rpc();
            eprintln!(
                "{:>10} B: steady {:>10.1} µs (cpu: client {:.1} µs, others {:.1} µs), \
                 raw {:>10.1} µs, first RPC {:>10.1} µs, middleware {:>10.1} µs  [{:.1} s]",
                size.bytes,
                us(m.steady.p50()),
                us(cpu_client),
                us(cpu_others),
                us(m.raw.p50()),
                us(m.first.p50()),
                us(m.middleware.p50()),
                t.elapsed().as_secs_f64()
            );
        });
        rows.push(m);
        bar.inc(1);
    }
    bar.finish_and_clear();
    if let Some(handle) = own {
        handle.shutdown();
    }
    drop(raw);

    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let comment = format!(
        "naaice-bench {}: {what}, kernel {}, {cpus} CPUs here, {:.1} s\n\
         steady = RPCs on one connection; fresh = new connections: setup = register + mrsp, \
         transfer = the first RPC; middleware = naa_invoke + naa_wait after naa_create\n\
         times in µs (p50 unless named), MB/s = 2 * size / time; raw = TCP on loopback\n\
         cpu = CPU time per steady RPC (while it ran): client = the calling thread, others = \
         {}\n\
         compare = median transfer_time of {} per size",
        env!("CARGO_PKG_VERSION"),
        args.fncode,
        started.elapsed().as_secs_f64(),
        others_meaning(naa_cpu.as_ref()),
        reference.as_ref().map_or("(none)", |r| r.label.as_str())
    );
    let lowlevel = args.lowlevel_csv();
    let middleware = args.out.join("middleware.csv");
    let summary = args.summary_csv();
    write_file(&lowlevel, &report::lowlevel_csv(&rows))?;
    write_file(&middleware, &report::middleware_csv(&rows))?;
    write_file(
        &summary,
        &report::summary_csv(&rows, reference.as_ref(), &comment),
    )?;
    println!(
        "\n{}",
        report::table(&rows, reference.as_ref(), &others_meaning(naa_cpu.as_ref()))
    );
    if let Some(limits) = limits::summary(&rows) {
        println!("{limits}");
    }
    println!(
        "low-level CSV: {}\nmiddleware CSV: {}\nsummary: {}",
        lowlevel.display(),
        middleware.display(),
        summary.display()
    );
    if !args.no_plots {
        std::fs::create_dir_all(&args.out)?;
        for p in plot::write_plots(&args.out, &rows, reference.as_ref(), &what)? {
            println!("plot: {}", p.display());
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(code) = print_reference(
        Args::command(),
        args.man_page,
        args.options_reference,
        &cli::MAN,
    ) {
        return code;
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("naaice-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
