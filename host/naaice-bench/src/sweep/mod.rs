//! The default mode: a sweep of sizes, each measured on one connection (steady state), on new
//! connections (first RPC, middleware) and against the raw TCP limit.

use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use naaice_core::FunctionCode;

use crate::Error;
use crate::base::process_clock::ProcessClock;
use crate::base::setup::write_file;
use crate::base::{raw, setup, sizes};
use crate::cli::Args;
use crate::plot;
use compare::Reference;
use measure::{Measured, Target};

pub(crate) mod compare;
pub(crate) mod limits;
pub(crate) mod measure;
pub(crate) mod report;

/// Connections the in-process NAA of a sweep takes at once.
const SWEEP_CONNECTIONS: usize = 16;

/// What the "others" CPU time counts.
fn others_meaning(naa_cpu: Option<&ProcessClock>) -> String {
    naa_cpu.map_or_else(
        || "this process's other threads (the in-process NAA, transport threads)".to_owned(),
        |c| format!("the NAA's process {} (all its threads)", c.pid()),
    )
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

/// Runs the sweep of `--max-size` and writes its files.
pub(crate) fn run(args: &Args) -> Result<(), Error> {
    // --max-size and --stream-time are above zero (the command line checks them).
    let reference = args.compare.as_deref().map(Reference::read).transpose()?;
    let transport = setup::transport(args)?;
    let verbs = transport.name() == "verbs";
    let (naa, own) = setup::naa(args, &transport, SWEEP_CONNECTIONS)?;
    // The raw TCP limit is meaningful where the NAA is: on this machine, over TCP.
    let raw = (!verbs && naa.ip().is_loopback())
        .then(raw::RawPeer::start)
        .transpose()?;
    let fncode = FunctionCode::new(args.fncode).ok_or("--fncode must be in 1..=127")?;
    let naa_cpu = setup::naa_clock(args)?;
    let target = Target {
        transport: &transport,
        naa,
        fncode,
        raw: raw.as_ref(),
        stream_secs: args.stream_time.as_secs_f64() / 4.0,
        naa_cpu: naa_cpu.as_ref(),
    };
    let sizes = sizes::sweep_sizes(args.max_size);
    let what = setup::describe(naa, own.is_some(), naa_cpu.as_ref(), &transport);
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
    let rows = measure_all(args, &target, &sizes, verbs)?;
    if let Some(handle) = own {
        handle.shutdown();
    }
    drop(raw);
    let comment = comment(args, &what, started, naa_cpu.as_ref(), reference.as_ref());
    write_outputs(
        args,
        &rows,
        reference.as_ref(),
        &comment,
        &what,
        naa_cpu.as_ref(),
    )
}

/// Measures every size, printing a line per size.
fn measure_all(
    args: &Args,
    target: &Target<'_>,
    sizes: &[sizes::Size],
    verbs: bool,
) -> Result<Vec<Measured>, Error> {
    let bar = progress(sizes.len());
    let mut rows: Vec<Measured> = Vec::with_capacity(sizes.len());
    for &size in sizes {
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
    Ok(rows)
}

/// The `#` lines at the top of the summary CSV.
fn comment(
    args: &Args,
    what: &str,
    started: Instant,
    naa_cpu: Option<&ProcessClock>,
    reference: Option<&Reference>,
) -> String {
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    format!(
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
        others_meaning(naa_cpu),
        reference.map_or("(none)", |r| r.label.as_str())
    )
}

/// Writes the CSVs and plots and prints the table.
fn write_outputs(
    args: &Args,
    rows: &[Measured],
    reference: Option<&Reference>,
    comment: &str,
    what: &str,
    naa_cpu: Option<&ProcessClock>,
) -> Result<(), Error> {
    let lowlevel = args.lowlevel_csv();
    let middleware = args.out.join("middleware.csv");
    let summary = args.summary_csv();
    write_file(&lowlevel, &report::lowlevel_csv(rows))?;
    write_file(&middleware, &report::middleware_csv(rows))?;
    write_file(&summary, &report::summary_csv(rows, reference, comment))?;
    println!(
        "\n{}",
        report::table(rows, reference, &others_meaning(naa_cpu))
    );
    if let Some(limits) = limits::summary(rows) {
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
        for p in plot::write_plots(&args.out, rows, reference, what)? {
            println!("plot: {}", p.display());
        }
    }
    Ok(())
}
