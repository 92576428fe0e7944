//! Many clients at once (`--clients N,...`): for every size and N, N clients (threads of one
//! client process, or a process each) run RPCs against the NAA for `--duration`, then, over
//! the software transport on this machine, N raw TCP echo connections of the same size (a
//! thread per connection on each side); optionally one thread driving N handles with
//! `wait_any` or `naa_waitany` (`--overlap`) and the isolation test (`--isolation`). The clients run in child
//! processes (this binary again, see [`worker`]), so that the client side's CPU time and
//! context switches are those of whole processes, apart from the NAA's.

pub(crate) mod capi;
pub(crate) mod client;
mod isolation;
pub(crate) mod output;
mod overlap;
mod point;
mod process;
mod result;
pub(crate) mod worker;

use std::net::SocketAddr;

use crate::Error;
use crate::base::kind::{Api, WorkerKind};
use crate::base::raw::RawPeer;
use crate::base::setup::{self, write_file};
use crate::base::usage::Process;
use crate::cli::Args;
use isolation::Isolation;
use output::Row;
use point::Point;
use process::{groups, run_point};

/// `threads` or `processes`.
pub(crate) fn mode_name(processes: bool) -> &'static str {
    if processes { "processes" } else { "threads" }
}

/// `rust` or `c`.
pub(crate) fn api_name(api: Api) -> &'static str {
    match api {
        Api::Rust => "rust",
        Api::C => "c",
    }
}

/// Where the clients go and who serves them.
struct Setting {
    /// The NAA.
    naa: SocketAddr,
    /// The NAA's process (this one when it runs here, `--naa-pid`), if known.
    naa_process: Option<Process>,
    /// The raw echo peer (software transport, NAA on this machine).
    raw: Option<RawPeer>,
    /// This process: the raw echo peer's.
    this: Process,
}

fn check(args: &Args) -> Result<(), Error> {
    if args.clients.is_empty() {
        return Err("--clients needs at least one number".into());
    }
    // Sizes and --duration are above zero, --big-size differs from the first --size (the
    // command line checks them: Args::resolve).
    Ok(())
}

/// Runs the `--clients` measurements and writes their files.
pub(crate) fn run(args: &Args) -> Result<(), Error> {
    check(args)?;
    let transport = setup::transport(args)?;
    let most = args.clients.iter().copied().max().unwrap_or(1) as usize;
    let (naa, own) = setup::naa(args, &transport, most + 4)?;
    let this = Process::this()?;
    let naa_process = match (&own, args.naa_pid) {
        (Some(_), _) => Some(Process::this()?),
        (None, Some(pid)) => Some(Process::of(pid)?),
        (None, None) => None,
    };
    let raw = (transport.name() == "soft" && naa.ip().is_loopback())
        .then(RawPeer::start)
        .transpose()?;
    let what = setup::describe(naa, own.is_some(), None, &transport);
    println!(
        "naaice-bench --clients: {what}, kernel {}, clients as {} calling the {} API, {:.1} s \
         per point{}",
        args.fncode,
        mode_name(args.client_processes),
        api_name(args.api),
        args.duration.as_secs_f64(),
        if raw.is_some() {
            "; raw TCP echo beside each"
        } else {
            ""
        }
    );
    let setting = Setting {
        naa,
        naa_process,
        raw,
        this,
    };
    let rows = measure_rows(args, &setting)?;
    let isolation = measure_isolation(args, &setting)?;
    if let Some(handle) = own {
        handle.shutdown();
    }
    write_outputs(args, &what, &rows, &isolation)
}

/// Every size × N (× overlap) with its raw echo.
fn measure_rows(args: &Args, s: &Setting) -> Result<Vec<Row>, Error> {
    println!("{}", output::TABLE_HEADER);
    let kind = WorkerKind::of(args.api);
    let processes = args.client_processes;
    let mut rows = Vec::new();
    for &size in &args.size {
        for &n in &args.clients {
            let sizes = vec![size; n as usize];
            let raw = |s: &Setting| -> Result<Option<Point>, Error> {
                let Some(peer) = &s.raw else { return Ok(None) };
                let g = groups(processes, WorkerKind::Echo, peer.addr(), &sizes);
                let outcome = run_point(args, &g, Some(&s.this))?;
                Ok(Some(Point::of(&outcome, size)?))
            };
            let raw = raw(s)?;
            let g = groups(processes, kind, s.naa, &sizes);
            let outcome = run_point(args, &g, s.naa_process.as_ref())?;
            let mut todo = vec![Row {
                mode: mode_name(processes),
                api: api_name(args.api),
                size,
                rpc: Point::of(&outcome, size)?,
                raw,
            }];
            if args.overlap {
                let g = groups(false, WorkerKind::overlap(args.api), s.naa, &sizes);
                let outcome = run_point(args, &g, s.naa_process.as_ref())?;
                todo.push(Row {
                    mode: "overlap",
                    api: api_name(args.api),
                    size,
                    rpc: Point::of(&outcome, size)?,
                    raw,
                });
            }
            for row in todo {
                println!("{}", output::table_line(&row));
                rows.push(row);
            }
        }
    }
    println!("{}", output::TABLE_LEGEND);
    Ok(rows)
}

/// The isolation test at every N from 2 (`--isolation`).
fn measure_isolation(args: &Args, s: &Setting) -> Result<Vec<Isolation>, Error> {
    let mut rows = Vec::new();
    if !args.isolation {
        return Ok(rows);
    }
    for &n in args.clients.iter().filter(|&&n| n >= 2) {
        let i = isolation::measure(args, n as usize, s.naa, s.naa_process.as_ref())?;
        println!("{}", i.line());
        rows.push(i);
    }
    if rows.is_empty() {
        println!("isolation: needs N >= 2 in --clients");
    }
    Ok(rows)
}

/// What the files' header says.
fn about(args: &Args, what: &str) -> Vec<(&'static str, String)> {
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    vec![
        ("naaice_bench", env!("CARGO_PKG_VERSION").to_owned()),
        ("what", what.to_owned()),
        ("kernel", args.fncode.to_string()),
        ("cpus", cpus.to_string()),
        ("duration_s", format!("{}", args.duration.as_secs_f64())),
        (
            "columns",
            "rate = sum of the clients' RPC/s; GBps = 2 * bytes * rate; p50/p99 over every RPC \
             of every client; slowest_vs_mean = the slowest client's rate / the mean rate; \
             cpu_us_per_rpc, vcsw (voluntary context switches: wake-ups) and ivcsw \
             (involuntary) per RPC: client = the client processes, naa = the NAA's process \
             (this one when it runs here, --naa-pid; empty otherwise), raw_ = the raw TCP \
             echo of the same N and size (server = its threads in this process); rpc_vs_raw = \
             rate / raw rate"
                .to_owned(),
        ),
    ]
}

fn write_outputs(
    args: &Args,
    what: &str,
    rows: &[Row],
    isolation: &[Isolation],
) -> Result<(), Error> {
    let about = about(args, what);
    let comment: String = about.iter().map(|(k, v)| format!("{k}: {v}\n")).collect();
    let csv = args.out.join("clients.csv");
    write_file(&csv, &output::clients_csv(rows, &comment))?;
    println!("clients CSV: {}", csv.display());
    let json = args.out.join("clients.json");
    write_file(&json, &output::json(&about, rows, isolation))?;
    println!("clients JSON: {}", json.display());
    if !isolation.is_empty() {
        let path = args.out.join("isolation.csv");
        write_file(&path, &output::isolation_csv(isolation, &comment))?;
        println!("isolation CSV: {}", path.display());
    }
    if !args.no_plots {
        for p in crate::plot::clients::write(&args.out, rows, what)? {
            println!("plot: {}", p.display());
        }
    }
    Ok(())
}
