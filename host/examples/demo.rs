//! The main demo: offload a vector addition to a software NAA over the software transport.
//!
//! It starts a software NAA in-process on loopback with a vector-add kernel, creates an AP2
//! handle (two input vectors, one output vector), invokes the RPC, overlaps other work while
//! polling with `test`, then `wait`s, verifies the result and prints the timing of each step.
//!
//! Run: `cargo run --release --example demo`

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use naaice::swnaa::{KernelContext, KernelRegistry, SoftNaa, SoftNaaConfig};
use naaice::transport::soft::SoftTransport;
use naaice::{Naa, NaaOptions, Param};
use naaice_core::{FunctionCode, ReturnCode};

/// Elements per vector (f32).
const N: usize = 1 << 20;
/// Function code of the vector-add kernel.
const VADD: u8 = 16;

/// The kernel: out[i] = a[i] + b[i] over little-endian f32 vectors (params 0, 1 -> 2).
fn vector_add(ctx: &mut KernelContext<'_, '_>) -> ReturnCode {
    let regions = ctx.regions();
    let [a, b, out, ..] = regions else {
        return ReturnCode::application(0x10).unwrap_or(ReturnCode::SUCCESS);
    };
    for ((o, x), y) in out
        .data
        .chunks_exact_mut(4)
        .zip(a.data.chunks_exact(4))
        .zip(b.data.chunks_exact(4))
    {
        let sum = f32::from_le_bytes(x.try_into().unwrap_or_default())
            + f32::from_le_bytes(y.try_into().unwrap_or_default());
        o.copy_from_slice(&sum.to_le_bytes());
    }
    ReturnCode::SUCCESS
}

fn ms(d: Duration) -> String {
    format!("{:8.3} ms", d.as_secs_f64() * 1e3)
}

fn main() -> anyhow::Result<()> {
    let code = FunctionCode::new(VADD).context("bad function code")?;
    let mut kernels = KernelRegistry::builtin();
    kernels.register(code, vector_add);

    let t = Instant::now();
    let transport = SoftTransport::default();
    let naa = SoftNaa::bind(
        transport.clone(),
        "127.0.0.1:0".parse()?,
        SoftNaaConfig::default(),
        kernels,
    )?;
    let server = naa.spawn()?;
    println!(
        "software NAA listening on {}           {}",
        server.local_addr(),
        ms(t.elapsed())
    );

    let a: Vec<u8> = (0..N).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let b: Vec<u8> = (0..N)
        .flat_map(|i| (2.0 * i as f32).to_le_bytes())
        .collect();
    let t = Instant::now();
    let mut handle = Naa::create_with(
        &transport,
        u32::from(VADD),
        vec![Param::from_vec(a), Param::from_vec(b)],
        vec![Param::zeroed(4 * N)],
        &NaaOptions::at(server.local_addr()),
    )?;
    println!(
        "naa_create: connect + register + MRSP         {}",
        ms(t.elapsed())
    );

    let t = Instant::now();
    handle.invoke()?;
    let invoked = t.elapsed();
    println!(
        "naa_invoke: {} MiB out, returns at once      {}",
        (8 * N) >> 20,
        ms(invoked)
    );

    // Overlap: compute something useful locally while the NAA works.
    let mut polls = 0u64;
    let mut local = 0u64;
    let status = loop {
        if let Some(status) = handle.test()? {
            break status;
        }
        polls += 1;
        local = (0..10_000u64).fold(local, |acc, x| acc.wrapping_mul(31).wrapping_add(x));
    };
    let tested = t.elapsed();
    println!(
        "naa_test:   {polls} polls, local work overlapped  {}  (checksum {local:#x})",
        ms(tested - invoked)
    );
    let t2 = Instant::now();
    let waited = handle.wait()?;
    assert_eq!(waited, status, "wait returns the status test saw");
    println!(
        "naa_wait:   returns the finished status       {}",
        ms(t2.elapsed())
    );
    println!(
        "status: state {} ({}), naa_error {}, bytes_received {}",
        status.state,
        status.state.value(),
        status.naa_error,
        status.bytes_received
    );

    let t = Instant::now();
    let out = handle.output(0)?;
    let wrong = out
        .chunks_exact(4)
        .enumerate()
        .filter(|(i, c)| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) != 3.0 * *i as f32)
        .count();
    drop(out);
    println!(
        "verify: {N} sums, {wrong} wrong                {}",
        ms(t.elapsed())
    );
    println!("round trip (invoke .. result): {}", ms(tested));
    let t = Instant::now();
    handle.finalize();
    server.shutdown();
    println!(
        "naa_finalize + server shutdown                {}",
        ms(t.elapsed())
    );
    if wrong != 0 || !status.naa_error.is_success() {
        bail!("vector addition result is wrong");
    }
    println!("OK: vector addition offloaded and verified");
    Ok(())
}
