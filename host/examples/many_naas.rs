//! One thread keeps many NAAs busy (`naaice::client::naa_set`), and how much that overlaps.
//!
//! It starts N software NAAs in-process (NAA i serves function code 40 + i with a kernel
//! that sleeps T ms), then runs R rounds of one RPC per NAA twice: serially (invoke, wait,
//! next NAA) and as a set (invoke all, `wait_all`). It prints both times, the **overlap
//! factor** (serial time / set time; N is ideal) and the CPU time the waiting thread used (a
//! thread that sleeps in poll(2) uses almost none; one that spun would use all of it).
//!
//! Run: `cargo run --release --example many_naas -- [N [T_ms [R]]]` (default 16 20 5)

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use naaice::client::naa_set;
use naaice::swnaa::{KernelContext, KernelRegistry, SoftNaa, SoftNaaConfig, SoftNaaHandle};
use naaice::transport::soft::{SoftEndpoint, SoftTransport};
use naaice::{Naa, NaaOptions, Param};
use naaice_core::{FunctionCode, ReturnCode};

const FIRST_CODE: u8 = 40;

/// CPU time (user + system) of the calling thread, from /proc (Linux).
fn thread_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start at ") ".
    let rest = &stat[stat.rfind(") ")? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // USER_HZ is 100 on every Linux configuration that matters here.
    Some(Duration::from_millis(ticks * 10))
}

fn start(n: usize, kernel: Duration) -> anyhow::Result<Vec<SoftNaaHandle>> {
    (0..n)
        .map(|i| {
            let code = FunctionCode::new(FIRST_CODE + i as u8).context("function code")?;
            let mut kernels = KernelRegistry::empty();
            kernels.register(code, move |_: &mut KernelContext<'_, '_>| {
                std::thread::sleep(kernel);
                ReturnCode::SUCCESS
            });
            let naa = SoftNaa::bind(
                SoftTransport::default(),
                "127.0.0.1:0".parse()?,
                SoftNaaConfig::default(),
                kernels,
            )?;
            Ok(naa.spawn()?)
        })
        .collect()
}

/// One thread keeps many NAAs busy: serial RPCs against a set.
#[derive(clap::Parser)]
struct Args {
    /// Software NAAs.
    #[arg(default_value_t = 16, value_parser = clap::value_parser!(u8).range(1..=64))]
    n: u8,
    /// How long each kernel sleeps, in milliseconds.
    #[arg(default_value_t = 20)]
    t_ms: u64,
    /// Rounds of one RPC per NAA.
    #[arg(default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    r: u64,
}

fn main() -> anyhow::Result<()> {
    let Args { n, t_ms, r: rounds } = clap::Parser::parse();
    let (n, kernel) = (usize::from(n), Duration::from_millis(t_ms));
    let servers = start(n, kernel)?;
    let mut naas: Vec<Naa<SoftEndpoint>> = servers
        .iter()
        .enumerate()
        .map(|(i, s)| {
            Naa::create_with(
                &SoftTransport::default(),
                u32::from(FIRST_CODE) + i as u32,
                vec![Param::zeroed(4096)],
                vec![Param::zeroed(4096)],
                &NaaOptions::at(s.local_addr()),
            )
        })
        .collect::<naaice::Result<_>>()?;
    println!(
        "{n} software NAAs, kernels of {} ms, {rounds} rounds",
        kernel.as_millis()
    );

    let t = Instant::now();
    for _ in 0..rounds {
        for naa in &mut naas {
            naa.invoke()?;
            naa.wait()?;
        }
    }
    let serial = t.elapsed() / rounds as u32;

    let cpu = thread_cpu();
    let t = Instant::now();
    for _ in 0..rounds {
        for naa in &mut naas {
            naa.invoke()?;
        }
        for (i, outcome) in naa_set::wait_all(&mut naas).into_iter().enumerate() {
            let status = outcome.context("an RPC was not in flight")??;
            if !status.naa_error.is_success() {
                bail!("NAA {i}: return code {}", status.naa_error);
            }
        }
    }
    let set = t.elapsed() / rounds as u32;
    let cpu = thread_cpu().zip(cpu).map(|(b, a)| b.saturating_sub(a));

    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "serial (invoke + wait per NAA): {:9.2} ms per round",
        ms(serial)
    );
    println!(
        "set (invoke all + wait_all):    {:9.2} ms per round",
        ms(set)
    );
    println!(
        "overlap factor: {:.2} (ideal {n})",
        serial.as_secs_f64() / set.as_secs_f64()
    );
    if let Some(cpu) = cpu {
        println!(
            "waiting thread CPU time during the set rounds: {:.1} ms of {:.1} ms",
            ms(cpu),
            ms(set * rounds as u32)
        );
    }
    drop(naas);
    for s in servers {
        s.shutdown();
    }
    Ok(())
}
