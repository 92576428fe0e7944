//! One rank of the multi-host cluster stage (`tests/cluster/multinode.sh`): runs `--rounds`
//! checked RPCs (kernel 1, add 1, on one in-place region) on the NAA that `Naa::create` picks
//! from `NAA_SPEC` by rank (`SLURM_PROCID`, `NAAICE_RANK`, ...). When an RPC fails (the NAA
//! died or its link is cut) the rank prints how long the error took, drops the handle and
//! repeats that RPC on a new handle, which fails over to another NAA; it restores the
//! region from its own count first, so every RPC is applied exactly once: after `k` verified
//! RPCs every byte is its initial value plus `k`, never more, never less.
//!
//! ```sh
//! cargo build -p naaice-tests --example cluster_rank
//! NAA_SPEC=10.0.0.21:12345:1:1,10.0.0.22:12345:1:1 NAAICE_TRANSPORT=soft \
//!     srun -N 3 -n 6 target/debug/examples/cluster_rank --rounds 40 --pause-ms 100
//! ```
//!
//! Lines for the stage script: `CREATE`, `ERROR`, `FAILOVER` and `DONE`, with the rank, the
//! NAA's address and times in milliseconds. Exit status 0 when every RPC was verified.

use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use naaice::discovery::environment::{Rank, transport_from_env};
use naaice::transport::AnyTransport;
use naaice::{Naa, Param};

#[derive(Parser, Debug)]
#[command(about = "A cluster rank: checked RPCs with failover, timings printed")]
struct Args {
    /// RPCs to complete (each verified).
    #[arg(long, default_value_t = 40)]
    rounds: u32,
    /// Bytes of the in-place region.
    #[arg(long, default_value_t = 65536)]
    bytes: usize,
    /// Pause between RPCs (local work), in milliseconds.
    #[arg(long, default_value_t = 100)]
    pause_ms: u64,
    /// Finalize the handle and create a new one every this many RPCs (0: keep one handle).
    #[arg(long, default_value_t = 0)]
    recreate_every: u32,
}

/// Seconds since the epoch, for lining up events of different hosts (one clock here).
fn epoch() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn ms(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1e3)
}

/// The region after `k` RPCs: byte `i` starts at `(i * 7 + rank) mod 251` and grows by 1 per RPC.
fn state(rank: u32, len: usize, k: u32) -> Vec<u8> {
    (0..len)
        .map(|i| ((i * 7 + rank as usize) % 251) as u8)
        .map(|b| b.wrapping_add(k as u8))
        .collect()
}

fn address(naa: &Naa) -> String {
    naa.entry()
        .map_or_else(|| "?".to_owned(), |e| format!("{}:{}", e.host, e.port))
}

fn run(args: &Args, transport: &AnyTransport, rank: u32, host: &str) -> Result<(), String> {
    let mut done = 0u32;
    let mut failed = 0u32;
    let mut naa: Option<Naa> = None;
    let mut since_create = 0u32;
    let mut error_at: Option<Instant> = None;
    let mut used: Vec<String> = Vec::new();
    while done < args.rounds {
        if naa.is_none() {
            let p = Param::from_vec(vec![0; args.bytes]);
            let started = Instant::now();
            let h = Naa::create(transport, 1, vec![p.clone()], vec![p])
                .map_err(|e| format!("rank {rank} on {host}: create failed: {e}"))?;
            let at = address(&h);
            println!(
                "CREATE rank={rank} host={host} naa={at} ms={} epoch={:.3}",
                ms(started.elapsed()),
                epoch()
            );
            if let Some(error) = error_at.take() {
                println!(
                    "FAILOVER rank={rank} host={host} naa={at} ms_since_error={}",
                    ms(error.elapsed())
                );
            }
            if !used.contains(&at) {
                used.push(at);
            }
            naa = Some(h);
            since_create = 0;
        }
        let Some(h) = naa.as_mut() else { continue };
        let at = address(h);
        let started = Instant::now();
        let result = h
            .input(0)
            .map(|mut buf| buf.copy_from_slice(&state(rank, args.bytes, done)))
            .and_then(|()| h.invoke())
            .and_then(|()| h.wait());
        match result {
            Ok(status) if status.naa_error.is_success() => {
                let got = h
                    .output(0)
                    .map_err(|e| format!("rank {rank}: output: {e}"))?;
                if *got != *state(rank, args.bytes, done + 1) {
                    return Err(format!(
                        "rank {rank} on {host}: RPC {} on {at} returned a wrong result",
                        done + 1
                    ));
                }
                done += 1;
                since_create += 1;
            }
            Ok(status) => {
                return Err(format!(
                    "rank {rank} on {host}: RPC {} on {at}: NAA error {}",
                    done + 1,
                    status.naa_error
                ));
            }
            Err(e) => {
                failed += 1;
                println!(
                    "ERROR rank={rank} host={host} naa={at} rpc={} ms={} epoch={:.3} error={e}",
                    done + 1,
                    ms(started.elapsed()),
                    epoch()
                );
                error_at = Some(Instant::now());
                if let Some(h) = naa.take() {
                    h.finalize();
                }
                continue;
            }
        }
        if args.recreate_every > 0
            && since_create >= args.recreate_every
            && let Some(h) = naa.take()
        {
            h.finalize();
        }
        std::thread::sleep(Duration::from_millis(args.pause_ms));
    }
    if let Some(h) = naa.take() {
        h.finalize();
    }
    println!(
        "DONE rank={rank} host={host} verified={done} failed_attempts={failed} naas={}",
        used.join(",")
    );
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "?".to_owned());
    let setup = Rank::from_env()
        .map_err(|e| e.to_string())
        .and_then(|r| Ok((r.rank, transport_from_env().map_err(|e| e.to_string())?)));
    let (rank, transport) = match setup {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cluster_rank: {e}");
            return ExitCode::FAILURE;
        }
    };
    match run(&args, &transport, rank, &host) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cluster_rank: {e}");
            ExitCode::FAILURE
        }
    }
}
