//! The firmware *image* end to end: `naaice-firmware-image` (built for
//! `riscv32imc-unknown-none-elf` with the `firmware` profile) runs in the instruction-set
//! simulator of `naaice_tests::soc`, its MMIO devices bridged to the software transport, and
//! the host's AP1/AP2 clients run MRSP, RPCs, the error codes and the kernel timeout
//! against it. The tests print what the simulator measured (instructions per MRSP and per
//! RPC, stack high-water mark); see the README's "Firmware image" section.
//!
//! The image serves one connection, 256 MiB of NAA memory from address 0, kernels 1
//! (add one), 2 (runs until aborted) and 3 (application error 0x42), and a kernel timeout of
//! 5 s (`firmware/src/bin/image.rs`).

use std::time::Duration;

use naaice_core::ReturnCode;
use naaice_core::wire::mrsp::MrspErrorCode;
use naaice_tests::fpga::ADD_ONE;
use naaice_tests::fpga_client::{
    add_one_round, assert_connect_rejected, create, mrsp_at, rejected_with, two_kernel_timeouts,
    unknown_code_and_application_error,
};
use naaice_tests::soc::{STACK_BUDGET, SimNaa, Stats};

/// NAA memory of the image.
const NAA_MEMORY: u64 = 256 << 20;
/// The stack estimate made before the image ran (6.2 KiB; deepest chain: MRSP parsing).
const STACK_ESTIMATE: u32 = 6348;

fn start() -> SimNaa {
    SimNaa::start().unwrap_or_else(|e| panic!("firmware image simulation: {e}"))
}

/// The measurements once the core has gone back to sleep after the last client action.
fn settled(naa: &SimNaa) -> Stats {
    std::thread::sleep(Duration::from_millis(50));
    naa.stats()
}

fn stop(naa: SimNaa) -> Stats {
    let stats = naa
        .stop()
        .unwrap_or_else(|fault| panic!("firmware fault: {fault}"));
    println!(
        "image: {} instructions ({} start-up), {} busy in {} wake-ups, {} idle in {} wake-ups \
         ({:.0} per idle poll), {} events, {} kernels, {} interrupts, {} defmt frames ({} B)",
        stats.instructions,
        stats.boot,
        stats.busy,
        stats.busy_wakeups,
        stats.idle,
        stats.idle_wakeups,
        stats.idle as f64 / stats.idle_wakeups.max(1) as f64,
        stats.events,
        stats.kernels,
        stats.interrupts,
        stats.uart_frames,
        stats.uart_bytes,
    );
    for line in &stats.log {
        println!("image log: {line}");
    }
    assert!(
        stats
            .log
            .first()
            .is_some_and(|l| l.contains("naaice firmware: 1 connections")),
        "start-up line: {:?}",
        stats.log
    );
    println!(
        "image: stack high-water {} B painted, {} B by stack pointer \
         (estimate {STACK_ESTIMATE} B, budget {STACK_BUDGET} B); statics {} B",
        stats.stack_painted, stats.stack_sp, stats.statics
    );
    assert!(stats.stack_sp <= STACK_BUDGET, "stack over budget");
    // Frames are written above the stack pointer only: painting sees at most its depth.
    assert!(
        stats.stack_painted > 0 && stats.stack_painted <= stats.stack_sp,
        "stack written below the stack pointer"
    );
    stats
}

#[test]
fn image_runs_mrsp_and_rpcs_and_reports_instructions_per_mrsp_and_rpc() {
    let naa = start();
    let boot = settled(&naa);
    assert!(
        boot.uart_frames >= 1,
        "the start-up log line went out: {boot:?}"
    );

    let mut handle = create(naa.addr(), u32::from(ADD_ONE), vec![7; 1024], 512);
    let mrsp = settled(&naa);
    const RPCS: u64 = 4;
    for round in 0..RPCS as u8 {
        add_one_round(&mut handle, round);
    }
    let rpcs = settled(&naa);
    handle.finalize();
    let closed = settled(&naa);

    let per_mrsp = mrsp.busy - boot.busy;
    let per_rpc = (rpcs.busy - mrsp.busy) / RPCS;
    println!(
        "image: control-plane work per MRSP (connect, 2 regions, advertisement): {per_mrsp} \
         instructions in {} wake-ups; per RPC: {per_rpc} instructions; disconnect: {} \
         instructions (cycles at CPI 1; a multi-cycle soft-core multiplies by its CPI)",
        mrsp.busy_wakeups - boot.busy_wakeups,
        closed.busy - rpcs.busy
    );
    assert_eq!(rpcs.kernels - mrsp.kernels, RPCS);
    assert!(per_mrsp > 0 && per_rpc > 0);
    let stats = stop(naa);
    let logged = |text: &str| stats.log.iter().any(|l| l.contains(text));
    assert!(logged("conn 1: request, slot 0") && logged("conn 1: MRSP done"));
    assert!(logged("conn 1: closed, slot 0 free"));
}

#[test]
fn image_answers_unknown_codes_application_errors_and_a_second_connection() {
    let naa = start();
    // The image serves one connection: a second one is rejected while the first is open.
    let handle = create(naa.addr(), u32::from(ADD_ONE), vec![1; 64], 64);
    assert_connect_rejected(naa.addr());
    handle.finalize();
    unknown_code_and_application_error(naa.addr());
    stop(naa);
}

#[test]
fn image_refuses_bad_mrsp_requests_and_serves_32_regions() {
    let naa = start();
    let (_, r) = mrsp_at(naa.addr(), NAA_MEMORY, &[4096]);
    assert_eq!(rejected_with(r), MrspErrorCode::InvalidAddress);
    let (_, r) = mrsp_at(naa.addr(), NAA_MEMORY - 4096, &[8192]);
    assert_eq!(rejected_with(r), MrspErrorCode::NotEnoughMemory);
    // The largest request (32 regions): the deepest stack of MRSP parsing.
    let before = settled(&naa);
    let (mut conn, r) = mrsp_at(naa.addr(), 0x4000, &[256; 32]);
    r.expect("32 regions");
    let after = settled(&naa);
    let result = conn.do_transfer().expect("rpc");
    assert_eq!(result.status, ReturnCode::SUCCESS);
    let buffer = conn.param(naaice_core::RegionId::new(31)).expect("param");
    assert!(
        buffer.to_vec().iter().all(|&x| x == 1),
        "kernel ran on region 31"
    );
    let rpc = settled(&naa);
    conn.disconnect();
    println!(
        "image: MRSP with 32 regions: {} instructions; its RPC (32 write-backs): {} instructions",
        after.busy - before.busy,
        rpc.busy - after.busy
    );
    stop(naa);
}

#[test]
fn image_times_out_a_kernel_and_keeps_the_connection() {
    let naa = start();
    two_kernel_timeouts(naa.addr());
    let stats = stop(naa);
    assert_eq!(stats.kernels, 2);
    let timeouts = stats.log.iter().filter(|l| l.contains("kernel timeout"));
    assert_eq!(timeouts.count(), 2, "{:?}", stats.log);
}
