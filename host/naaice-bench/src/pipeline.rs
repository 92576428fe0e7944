//! `--pipeline SIZE`: how much a [`Pipeline`] overlaps transfer and compute. Against a
//! software NAA in this process, in each round:
//!
//! 1. **transfer**: SIZE bytes through the pipeline (--chunk, --depth) with the empty kernel;
//! 2. **compute**: the compute kernel alone on SIZE bytes in this process, its rate set
//!    (once, from the first round's transfer) so that its time equals the transfer's;
//! 3. **overlapped**: SIZE bytes through the pipeline with that kernel (every byte checked);
//! 4. **sequential**: the same with one connection (no overlap), for reference.
//!
//! It prints each round and the medians, judges overlapped / (transfer + compute) against
//! 0.65, and writes overlap.csv.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use naaice::core::{FunctionCode, ReturnCode};
use naaice::swnaa::{KernelContext, KernelRegistry};
use naaice::{NaaOptions, Pipeline};

use crate::Error;
use crate::base::kind::Compute;
use crate::base::setup;
use crate::cli::Args;

/// Function code of the compute kernel on the NAA started here.
const COMPUTE_CODE: u8 = 100;
/// The built-in empty kernel.
const EMPTY_CODE: u32 = 3;
/// The target of overlapped / (transfer + compute).
const TARGET: f64 = 0.65;

/// The compute kernel: adds 1 to every byte of `data`, taking `data.len() / rate` seconds.
fn compute(data: &mut [u8], rate: u64, kind: Compute) {
    let started = Instant::now();
    for b in data.iter_mut() {
        *b = b.wrapping_add(1);
    }
    let secs = data.len() as f64 / rate.max(1) as f64;
    let until = started + Duration::from_secs_f64(secs);
    match kind {
        Compute::Paced => std::thread::sleep(until.saturating_duration_since(Instant::now())),
        Compute::Spin => {
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        }
    }
}

/// One round's times.
struct Round {
    transfer: Duration,
    compute: Duration,
    overlapped: Duration,
    sequential: Duration,
}

impl Round {
    fn ratio(&self) -> f64 {
        self.overlapped.as_secs_f64() / (self.transfer + self.compute).as_secs_f64()
    }
}

/// Runs the mode.
pub(crate) fn run(args: &Args, size: u64) -> Result<(), Error> {
    let size = usize::try_from(size).map_err(|_| "--pipeline: too large for this machine")?;
    let chunk = usize::try_from(args.chunk).map_err(|_| "--chunk: too large")?;
    let depth = args.depth as usize;
    let rounds = args.reps.unwrap_or(3);
    let transport = setup::transport(args)?;
    let rate = Arc::new(AtomicU64::new(u64::MAX));
    let kind = args.compute;
    let mut kernels = KernelRegistry::builtin();
    let kernel_rate = Arc::clone(&rate);
    let code = FunctionCode::new(COMPUTE_CODE).ok_or("compute code")?;
    kernels.register_named(
        code,
        "bench compute",
        move |ctx: &mut KernelContext<'_, '_>| {
            let rate = kernel_rate.load(Ordering::Relaxed);
            for r in ctx.regions().iter_mut().filter(|r| !r.is_internal()) {
                compute(&mut r.data, rate, kind);
            }
            ReturnCode::SUCCESS
        },
    );
    let (addr, _naa) = setup::naa_serving(args, &transport, 2 * depth + 1, kernels)?;
    println!(
        "pipeline, overlap of transfer and compute: {} through {} B chunks over {depth} connection(s), \
         {} transport, {kind:?} compute, {rounds} round(s)",
        naaice::units::size(size as u64),
        chunk,
        transport.name(),
    );
    let pipeline = |code: u32, depth: usize| -> Result<Pipeline, Error> {
        let p = Pipeline::create_with(&transport, code, chunk, depth, &NaaOptions::at(addr))?;
        if p.depth() < depth {
            return Err(format!("the NAA took {} of {depth} connections", p.depth()).into());
        }
        Ok(p)
    };
    let mut empty = pipeline(EMPTY_CODE, depth)?;
    let mut overlapped = pipeline(u32::from(COMPUTE_CODE), depth)?;
    let mut sequential = pipeline(u32::from(COMPUTE_CODE), 1)?;
    let input: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    let expected: Vec<u8> = input.iter().map(|b| b.wrapping_add(1)).collect();
    let mut work = input.clone();
    // Warm-up: every region of every pipeline touched once, on both sides (the compute
    // kernel at full speed: its rate is not set yet).
    for p in [&mut empty, &mut overlapped, &mut sequential] {
        timed(p, &mut work, &input, addr)?;
    }
    let mut results = Vec::with_capacity(rounds);
    println!(
        "round  transfer     compute      overlapped   sequential   overlapped/(transfer+compute)"
    );
    for round in 1..=rounds {
        let transfer = timed(&mut empty, &mut work, &input, addr)?;
        if round == 1 {
            let per_second = (size as f64 / transfer.as_secs_f64()) as u64;
            rate.store(per_second.max(1), Ordering::Relaxed);
        }
        work.copy_from_slice(&input);
        let started = Instant::now();
        compute(&mut work, rate.load(Ordering::Relaxed), kind);
        let compute_time = started.elapsed();
        let over = timed(&mut overlapped, &mut work, &input, addr)?;
        check(&work, &expected, "overlapped")?;
        let seq = timed(&mut sequential, &mut work, &input, addr)?;
        check(&work, &expected, "sequential")?;
        let r = Round {
            transfer,
            compute: compute_time,
            overlapped: over,
            sequential: seq,
        };
        println!(
            "{round:>5}  {:>9.1} ms {:>9.1} ms {:>9.1} ms {:>9.1} ms {:>8.3}",
            ms(r.transfer),
            ms(r.compute),
            ms(r.overlapped),
            ms(r.sequential),
            r.ratio()
        );
        results.push(r);
    }
    let median = |f: &dyn Fn(&Round) -> f64| {
        let mut v: Vec<f64> = results.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let ratio = median(&Round::ratio);
    println!(
        "median: transfer {:.1} ms, compute {:.1} ms, overlapped {:.1} ms, sequential {:.1} ms",
        median(&|r| ms(r.transfer)),
        median(&|r| ms(r.compute)),
        median(&|r| ms(r.overlapped)),
        median(&|r| ms(r.sequential)),
    );
    let spread = results
        .iter()
        .map(Round::ratio)
        .fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(x), hi.max(x)));
    // Perfect overlap takes the longer of the two: the floor of the ratio.
    let ideal = median(&|r| {
        r.transfer.max(r.compute).as_secs_f64() / (r.transfer + r.compute).as_secs_f64()
    });
    println!(
        "overlapped / (transfer + compute): {ratio:.3} (rounds {:.3}–{:.3}; perfect overlap \
         {ideal:.3}; target ≤ {TARGET}): {}",
        spread.0,
        spread.1,
        if ratio <= TARGET { "met" } else { "not met" }
    );
    let mut csv = String::from(
        "round,size,chunk,depth,compute_kind,transfer_s,compute_s,overlapped_s,sequential_s,ratio\n",
    );
    for (i, r) in results.iter().enumerate() {
        csv += &format!(
            "{},{size},{chunk},{depth},{kind:?},{:.6},{:.6},{:.6},{:.6},{:.4}\n",
            i + 1,
            r.transfer.as_secs_f64(),
            r.compute.as_secs_f64(),
            r.overlapped.as_secs_f64(),
            r.sequential.as_secs_f64(),
            r.ratio()
        );
    }
    setup::write_file(&args.out.join("overlap.csv"), &csv)?;
    for p in [empty, overlapped, sequential] {
        p.finalize();
    }
    Ok(())
}

/// Puts `input` into `work` and times one run of `pipeline` over it.
fn timed(
    pipeline: &mut Pipeline,
    work: &mut [u8],
    input: &[u8],
    addr: SocketAddr,
) -> Result<Duration, Error> {
    work.copy_from_slice(input);
    let started = Instant::now();
    let report = pipeline.run(work)?;
    let took = started.elapsed();
    if let Some((chunk, rc)) = report.failed {
        return Err(format!("chunk {chunk} failed with {rc} at {addr}").into());
    }
    Ok(took)
}

/// Every byte as the kernel should have left it.
fn check(got: &[u8], expected: &[u8], what: &str) -> Result<(), Error> {
    match got.iter().zip(expected).position(|(g, e)| g != e) {
        None => Ok(()),
        Some(at) => Err(format!("{what}: wrong byte at offset {at}").into()),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
