//! `--busy N`: the waiting policies side by side on a busy machine. Starts N busy loops
//! (processes of this program that spin, as other jobs' ranks do), then measures steady RPCs
//! of every size up to `--max-size` (at most 4 MiB) against a software NAA in this process,
//! with the default policy (`--wait`, else adaptive) and with `sleep`, in alternated blocks,
//! one connection open at a time. Prints a table and writes busy.csv.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use naaice::swnaa::{KernelRegistry, SoftNaa, SoftNaaConfig, SoftNaaHandle};
use naaice::transport::AnyTransport;
use naaice::transport::waiting::{WaitPolicy, cpu_demand};
use naaice::{Naa, NaaOptions, Param};

use crate::Error;
use crate::base::setup::write_file;
use crate::base::sizes::sweep_sizes;
use crate::base::stats::Samples;
use crate::cli::Args;

/// Largest size of this mode.
const MAX_SIZE: u64 = 4 << 20;
/// RPCs before each block's measured ones (the waiting learns the situation).
const WARM_UP: usize = 100;
/// Blocks per size and policy, alternated.
const ROUNDS: usize = 2;

/// The busy loops; killed when dropped.
struct BusyLoops(Vec<Child>);

impl BusyLoops {
    fn start(n: u32) -> Result<Self, Error> {
        let exe = std::env::current_exe()?;
        let mut loops = Self(Vec::new());
        for _ in 0..n {
            let child = Command::new(&exe)
                .arg("--spin")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .map_err(|e| format!("starting a busy loop ({}): {e}", exe.display()))?;
            loops.0.push(child);
        }
        Ok(loops)
    }
}

impl Drop for BusyLoops {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `--spin`: a busy loop, until killed.
pub(crate) fn spin() -> ! {
    let mut x = 0u64;
    loop {
        x = std::hint::black_box(x.wrapping_add(1));
    }
}

/// One policy's NAA and transport.
struct Side {
    policy: WaitPolicy,
    transport: AnyTransport,
    naa: SoftNaaHandle,
}

impl Side {
    fn start(base: &AnyTransport, policy: WaitPolicy) -> Result<Self, Error> {
        let transport = base.clone();
        let naa = SoftNaa::bind(
            transport.clone(),
            SocketAddr::from(([127, 0, 0, 1], 0)),
            SoftNaaConfig {
                wait: policy,
                ..SoftNaaConfig::default()
            },
            KernelRegistry::builtin(),
        )?
        .spawn()?;
        Ok(Self {
            policy,
            transport,
            naa,
        })
    }

    /// One block: a new connection, [`WARM_UP`] RPCs, then `n` timed ones (seconds each).
    fn block(&self, fncode: u32, size: u64, n: usize) -> Result<Samples, Error> {
        let param = Param::zeroed(usize::try_from(size)?);
        let mut naa: Naa = Naa::create_with(
            &self.transport,
            fncode,
            vec![param.clone()],
            vec![param],
            &NaaOptions {
                wait: self.policy,
                ..NaaOptions::at(self.naa.local_addr())
            },
        )?;
        let mut samples = Samples::default();
        for i in 0..WARM_UP + n {
            let t = Instant::now();
            naa.invoke()?;
            let status = naa.wait()?;
            if !status.naa_error.is_success() {
                return Err(format!("RPC failed: {}", status.naa_error).into());
            }
            if i >= WARM_UP {
                samples.push(t.elapsed().as_secs_f64());
            }
        }
        naa.finalize();
        Ok(samples)
    }
}

/// Waits (at most 2 s) until the closed connection's NAA end no longer counts.
fn settle(demand: usize) {
    let until = Instant::now() + Duration::from_secs(2);
    while cpu_demand() > demand && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn micros(s: f64) -> f64 {
    s * 1e6
}

/// Runs `--busy N`.
pub(crate) fn run(args: &Args, loops: u32) -> Result<(), Error> {
    let base = crate::base::setup::transport(args)?;
    if base.name() != "soft" {
        return Err("--busy measures the software transport on loopback".into());
    }
    let default = args.wait_policy().unwrap_or_default();
    let sides = [
        Side::start(&base, default)?,
        Side::start(&base, WaitPolicy::Sleep)?,
    ];
    let steady = args.steady.unwrap_or(600);
    let sizes = sweep_sizes(args.max_size.min(MAX_SIZE));
    let demand = cpu_demand();
    let _loops = BusyLoops::start(loops)?;
    println!(
        "naaice-bench --busy {loops}: {} CPUs, {loops} busy loops; steady RPCs ({steady} per \
         block, {ROUNDS} blocks per policy, alternated), software transport on loopback",
        naaice::transport::waiting::cpus()
    );
    println!(
        "{:>10}  {:>22}  {:>22}  {:>7}",
        "size",
        format!("{} p50 / mean µs", sides[0].policy),
        "sleep p50 / mean µs",
        "ratio"
    );
    let mut csv = String::from("byte_length,busy_loops,policy,p50_s,mean_s\n");
    let mut ratios = Vec::new();
    for size in sizes {
        let mut all = [Samples::default(), Samples::default()];
        for _ in 0..ROUNDS {
            for (side, samples) in sides.iter().zip(&mut all) {
                for s in side
                    .block(args.fncode.into(), size.bytes, steady)?
                    .as_slice()
                {
                    samples.push(*s);
                }
                settle(demand);
            }
        }
        let [a, s] = all.map(|x| (x.p50().unwrap_or(0.0), mean(x.as_slice())));
        let ratio = if s.0 > 0.0 { a.0 / s.0 } else { 0.0 };
        ratios.push(ratio);
        println!(
            "{:>10}  {:>22}  {:>22}  {:>7.2}",
            size.bytes,
            format!("{:.1} / {:.1}", micros(a.0), micros(a.1)),
            format!("{:.1} / {:.1}", micros(s.0), micros(s.1)),
            ratio
        );
        for (side, (p50, mean)) in sides.iter().zip([a, s]) {
            writeln!(
                csv,
                "{},{loops},{},{p50:.9},{mean:.9}",
                size.bytes, side.policy
            )?;
        }
    }
    let worst = ratios.iter().copied().fold(0.0, f64::max);
    println!(
        "worst ratio {} / sleep (p50): {worst:.2} over {} sizes",
        sides[0].policy,
        ratios.len()
    );
    std::fs::create_dir_all(&args.out)?;
    write_file(&args.out.join("busy.csv"), &csv)?;
    Ok(())
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}
