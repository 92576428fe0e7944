//! Control over single calls, in local (lookaside) mode so that it needs no NAA:
//!
//! * per-call arguments: one handle runs two function codes and passes the three immediate
//!   user bytes to its kernel, which answers with a 24-bit return code;
//! * a per-call deadline, and cancellation of an RPC whose kernel does not finish; the handle
//!   is reused afterwards.
//!
//! ```sh
//! cargo run --example call_control
//! ```
//!
//! The kernels are registered for local mode ([`naaice::swnaa::local`]); with `NaaOptions::from_env`
//! and `NAA_SPEC` naming an NAA that serves them, the same code runs against it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use naaice::core::{FunctionCode, ReturnCode};
use naaice::swnaa::KernelContext;
use naaice::transport::soft::SoftTransport;
use naaice::{Call, Naa, NaaOptions, Param};

/// Writes its function code and user bytes into the parameter; returns the user bytes as one
/// 24-bit number.
const ECHO: u8 = 41;
/// Runs until the program is about to end (a kernel that "never" finishes).
const STUCK: u8 = 42;

static STOP: AtomicBool = AtomicBool::new(false);

fn main() -> anyhow::Result<()> {
    let code = |c| FunctionCode::new(c).expect("1..=127");
    naaice::swnaa::local::register_kernel(code(ECHO), |ctx: &mut KernelContext<'_, '_>| {
        let (fncode, user) = (ctx.fncode(), ctx.user_bytes());
        if let Some(p) = ctx.param(0) {
            p[..4].copy_from_slice(&[fncode, user[0], user[1], user[2]]);
        }
        let rc = u32::from(user[0]) << 16 | u32::from(user[1]) << 8 | u32::from(user[2]);
        ReturnCode::new(rc).unwrap_or(ReturnCode::KERNEL_FAILED)
    });
    naaice::swnaa::local::register_kernel(code(STUCK), |_: &mut KernelContext<'_, '_>| {
        while !STOP.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(10));
        }
        ReturnCode::SUCCESS
    });
    let options = NaaOptions::local()?;

    // One in-place parameter of 16 bytes.
    let p = Param::zeroed(16);
    let mut naa: Naa<_> = Naa::create_with(
        &SoftTransport::default(),
        u32::from(ECHO),
        vec![p.clone()],
        vec![p],
        &options,
    )?;

    // Per-call arguments: user bytes in, a 24-bit return code out.
    naa.invoke_with(&Call::new().user_bytes([0xAB, 0xCD, 0xEF]))?;
    let status = naa.wait()?;
    println!(
        "echo: return code {:#08x} (C's naa_error byte {:#04x}), parameter {:?}",
        status.naa_error.get(),
        status.naa_error.naa_error(),
        &naa.output(0)?[..4]
    );
    // Another function code on the same handle: built-in 1 adds 1 to every byte.
    naa.invoke_with(&Call::new().function(1)?)?;
    naa.wait()?;
    println!("add one: parameter {:?}", &naa.output(0)?[..4]);

    // A per-call deadline on a kernel that does not finish.
    let stuck = Call::new().function(u32::from(STUCK))?;
    naa.invoke_with(&stuck.timeout(Duration::from_millis(100)))?;
    match naa.wait() {
        Err(e) => println!("stuck kernel with a 100 ms deadline: {e}"),
        Ok(s) => println!("unexpected: {s:?}"),
    }
    naa.cancel(); // recovers the failed handle: the next invoke reconnects

    // Cancellation without a deadline: give up after polling for a while.
    naa.invoke_with(&stuck)?;
    let started = Instant::now();
    while naa.test()?.is_none() && started.elapsed() < Duration::from_millis(100) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let t = Instant::now();
    let cancelled = naa.cancel();
    println!(
        "cancel: {cancelled} after {:?}; state {:?}",
        t.elapsed(),
        naa.state()
    );

    // The handle is reusable: this invoke reconnects and redoes the MRSP.
    let t = Instant::now();
    naa.invoke()?;
    let status = naa.wait()?;
    println!(
        "after cancel: {} in {:?}, parameter {:?}",
        status.naa_error,
        t.elapsed(),
        &naa.output(0)?[..4]
    );
    STOP.store(true, Ordering::Relaxed);
    Ok(())
}
