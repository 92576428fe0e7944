//! `--local`: what local mode's in-process path costs, against what it stands in for, all
//! in this process and in the same run:
//!
//! 1. **steady 64 B RPCs** (one in-place parameter, the empty kernel 3) over the in-process
//!    transport (`local:`) and over the loopback software transport (`local:…:soft`):
//!    p50/p90/p99 and the CPU time per RPC of this process (both ends are in it);
//! 2. **1 MiB and 64 MiB in-place RPCs**: with the empty kernel against one `memcpy` of the
//!    same size (the one copy an in-place RPC makes: what the NAA keeps of the input, for a
//!    kernel timeout), and with kernel 1 (adds 1 to every byte) against that loop alone plus
//!    the copy.
//!
//! Prints a table and writes local.csv.

use std::fmt::Write as _;
use std::time::Instant;

use naaice::transport::AnyTransport;
use naaice::{Naa, NaaOptions, Param};

use crate::Error;
use crate::base::process_clock::ProcessClock;
use crate::base::setup::{self, write_file};
use crate::base::stats::Samples;
use crate::cli::Args;

/// The built-in kernel that adds 1 to every byte.
const ADD1: u32 = 1;
/// The built-in kernel that does nothing.
const EMPTY: u32 = 3;
/// The small RPC's size.
const SMALL: usize = 64;
/// Default steady RPCs of the small size.
const STEADY: usize = 20_000;
/// The large sizes, with their default repetitions.
const LARGE: [(usize, usize); 2] = [(1 << 20, 200), (64 << 20, 10)];

/// A path to the in-process NAA.
#[derive(Clone, Copy)]
enum Path {
    InProcess,
    Loopback,
}

impl Path {
    fn name(self) -> &'static str {
        match self {
            Self::InProcess => "in-process",
            Self::Loopback => "loopback (local:...:soft)",
        }
    }

    fn options(self) -> Result<NaaOptions, Error> {
        let options = match self {
            Self::InProcess => NaaOptions::local()?,
            Self::Loopback => NaaOptions::local_over_soft()?,
        };
        Ok(NaaOptions {
            wait: setup::wait(),
            ..options
        })
    }
}

/// A handle on the in-process NAA with one in-place parameter of `len` bytes.
fn handle(path: Path, fncode: u32, len: usize) -> Result<(Naa, Param), Error> {
    let p = Param::from_vec(vec![7; len]);
    let naa = Naa::create_with(
        &AnyTransport::default(),
        fncode,
        vec![p.clone()],
        vec![p.clone()],
        &path.options()?,
    )?;
    Ok((naa, p))
}

/// One RPC, timed (seconds).
fn rpc(naa: &mut Naa) -> Result<f64, Error> {
    let t = Instant::now();
    naa.invoke()?;
    naa.wait()?;
    Ok(t.elapsed().as_secs_f64())
}

/// The steady small RPCs of `path`: their latencies and this process's CPU time per RPC.
fn steady(path: Path, n: usize, clock: &ProcessClock) -> Result<(Samples, Option<f64>), Error> {
    let (mut naa, _p) = handle(path, EMPTY, SMALL)?;
    for _ in 0..n.min(1000) {
        rpc(&mut naa)?;
    }
    let mut samples = Samples::default();
    let cpu0 = clock.read();
    for _ in 0..n {
        samples.push(rpc(&mut naa)?);
    }
    let cpu = match (cpu0, clock.read()) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a).as_secs_f64() / n as f64),
        _ => None,
    };
    Ok((samples, cpu))
}

/// The median of `reps` runs of `f` (seconds), after one warm-up run.
fn median(reps: usize, mut f: impl FnMut() -> Result<f64, Error>) -> Result<f64, Error> {
    f()?;
    let mut samples = Samples::default();
    for _ in 0..reps {
        samples.push(f()?);
    }
    samples.p50().ok_or_else(|| "no samples".into())
}

/// One `memcpy` of `len` bytes, timed.
fn memcpy(src: &[u8], dst: &mut [u8]) -> f64 {
    let t = Instant::now();
    dst.copy_from_slice(std::hint::black_box(src));
    std::hint::black_box(&dst);
    t.elapsed().as_secs_f64()
}

/// Kernel 1's work on `data` without an RPC, timed.
fn add1(data: &mut [u8]) -> f64 {
    let t = Instant::now();
    for b in std::hint::black_box(&mut *data).iter_mut() {
        *b = b.wrapping_add(1);
    }
    std::hint::black_box(&data);
    t.elapsed().as_secs_f64()
}

fn us(s: f64) -> String {
    format!("{:.2} µs", s * 1e6)
}

/// Runs the mode.
pub(crate) fn run(args: &Args) -> Result<(), Error> {
    let clock = ProcessClock::of(std::process::id())?;
    let n = args.steady.unwrap_or(STEADY);
    let mut csv = String::from("measure,path,byte_length,p50_s,p90_s,p99_s,cpu_per_rpc_s\n");
    println!("local mode, steady {SMALL} B RPCs (in place, empty kernel), {n} each:");
    let mut p50s = Vec::new();
    for path in [Path::InProcess, Path::Loopback] {
        let (samples, cpu) = steady(path, n, &clock)?;
        let p = samples.percentiles().ok_or("no samples")?;
        let cpu_text = cpu.map_or_else(|| "-".to_owned(), us);
        println!(
            "  {:<26} p50 {:>10}  p90 {:>10}  p99 {:>10}  CPU per RPC {:>10}",
            path.name(),
            us(p.p50),
            us(p.p90),
            us(p.p99),
            cpu_text
        );
        let _ = writeln!(
            csv,
            "steady,{},{SMALL},{:e},{:e},{:e},{}",
            path.name(),
            p.p50,
            p.p90,
            p.p99,
            cpu.map_or_else(String::new, |c| format!("{c:e}"))
        );
        p50s.push(p.p50);
    }
    if let [local, soft] = p50s[..] {
        println!("  in-process / loopback p50: {:.3}", local / soft);
    }
    println!("in-place RPCs against the same work without an RPC (medians):");
    for (len, default_reps) in LARGE {
        let reps = args.reps.unwrap_or(default_reps);
        let src = vec![3u8; len];
        let mut dst = vec![0u8; len];
        let copy = median(reps, || Ok(memcpy(&src, &mut dst)))?;
        let alone = median(reps, || Ok(add1(&mut dst)))?;
        // One handle at a time: open handles count in the waiting decision's CPU demand.
        let empty_rpc = {
            let (mut naa, _p) = handle(Path::InProcess, EMPTY, len)?;
            median(reps, || rpc(&mut naa))?
        };
        let add_rpc = {
            let (mut naa, _p) = handle(Path::InProcess, ADD1, len)?;
            median(reps, || rpc(&mut naa))?
        };
        let size = naaice::units::size(len as u64);
        println!(
            "  {size:>8}: empty kernel {:>11} = {:.3} x memcpy ({});  kernel 1 {:>11} = {:.3} x \
             (its loop alone {} + memcpy)",
            us(empty_rpc),
            empty_rpc / copy,
            us(copy),
            us(add_rpc),
            add_rpc / (alone + copy),
            us(alone)
        );
        for (what, t) in [
            ("memcpy", copy),
            ("add1_alone", alone),
            ("rpc_empty", empty_rpc),
            ("rpc_add1", add_rpc),
        ] {
            let _ = writeln!(csv, "{what},in-process,{len},{t:e},,,");
        }
    }
    write_file(&args.out.join("local.csv"), &csv)?;
    Ok(())
}
