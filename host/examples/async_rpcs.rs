//! Many RPCs concurrently with async Rust and tokio (`naaice::client::rpc_future`): the RPC is a
//! `Future` that waits through the library's small reactor thread, so it works with any
//! executor and never blocks one.
//!
//! It starts N software NAAs in-process (kernels sleeping T ms) and spawns one tokio task
//! per NAA on a single-threaded runtime, each running K RPCs with `naa.call().await`; all
//! N·K RPCs overlap N at a time. It prints the elapsed time against the serial time N·K·T.
//!
//! Run: `cargo run --release --example async_rpcs -- [N [T_ms [K]]]` (default 16 20 10)

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use naaice::swnaa::{KernelContext, KernelRegistry, SoftNaa, SoftNaaConfig};
use naaice::transport::soft::SoftTransport;
use naaice::{Naa, NaaOptions, Param};
use naaice_core::{FunctionCode, ReturnCode};

const CODE: u8 = 40;

/// Many RPCs concurrently on one tokio thread.
#[derive(clap::Parser)]
struct Args {
    /// Software NAAs (one tokio task each).
    #[arg(default_value_t = 16)]
    n: usize,
    /// How long each kernel sleeps, in milliseconds.
    #[arg(default_value_t = 20)]
    t_ms: u64,
    /// RPCs per NAA.
    #[arg(default_value_t = 10)]
    k: u64,
}

fn main() -> anyhow::Result<()> {
    let Args { n, t_ms, k } = clap::Parser::parse();
    let kernel = Duration::from_millis(t_ms);

    let code = FunctionCode::new(CODE).context("function code")?;
    let mut servers = Vec::new();
    let mut naas = Vec::new();
    for _ in 0..n {
        let mut kernels = KernelRegistry::empty();
        kernels.register(code, move |ctx: &mut KernelContext<'_, '_>| {
            std::thread::sleep(kernel);
            if let Some(p) = ctx.param(0) {
                p.iter_mut().for_each(|b| *b = b.wrapping_add(1));
            }
            ReturnCode::SUCCESS
        });
        let server = SoftNaa::bind(
            SoftTransport::default(),
            "127.0.0.1:0".parse()?,
            SoftNaaConfig::default(),
            kernels,
        )?
        .spawn()?;
        let data = naaice::Buffer::zeroed(1024);
        naas.push(Naa::create_with(
            &SoftTransport::default(),
            u32::from(CODE),
            vec![Param::new(data.clone())],
            vec![Param::new(data)],
            &NaaOptions::at(server.local_addr()),
        )?);
        servers.push(server);
    }

    let rt = tokio::runtime::Builder::new_current_thread().build()?;
    let t = Instant::now();
    let results = rt.block_on(async {
        let tasks: Vec<_> = naas
            .into_iter()
            .map(|mut naa| {
                tokio::spawn(async move {
                    for _ in 0..k {
                        let status = naa.call().await?;
                        if !status.naa_error.is_success() {
                            return Err(naaice::Error::State("the NAA reported an error"));
                        }
                    }
                    let first = naa.output(0)?[0];
                    Ok::<u8, naaice::Error>(first)
                })
            })
            .collect();
        let mut results = Vec::new();
        for task in tasks {
            results.push(task.await);
        }
        results
    });
    let elapsed = t.elapsed();
    for (i, r) in results.into_iter().enumerate() {
        let first = r??;
        if u64::from(first) != k % 256 {
            bail!("NAA {i}: output {first} after {k} RPCs");
        }
    }
    let serial = kernel * (n as u32) * (k as u32);
    println!(
        "{} RPCs on {n} NAAs from one tokio thread: {:.1} ms (serial kernels alone: {:.1} ms, \
         overlap factor {:.2}, ideal {n})",
        n as u64 * k,
        elapsed.as_secs_f64() * 1e3,
        serial.as_secs_f64() * 1e3,
        serial.as_secs_f64() / elapsed.as_secs_f64()
    );
    for s in servers {
        s.shutdown();
    }
    Ok(())
}
