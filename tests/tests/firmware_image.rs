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

use naaice::Error;
use naaice::connection::Connection;
use naaice::memory::Buffer;
use naaice::naa::{Naa, NaaOptions, Param};
use naaice::transport::TransportError;
use naaice::transport::soft::{SoftEndpoint, SoftTransport};
use naaice_core::machine::Error as MachineError;
use naaice_core::wire::mrsp::MrspErrorCode;
use naaice_core::{ClientConfig, ReturnCode};
use naaice_tests::code;
use naaice_tests::fpga::{ADD_ONE, APP_ERROR, SLOW};
use naaice_tests::soc::{STACK_BUDGET, SimNaa, Stats};

/// NAA memory of the image.
const NAA_MEMORY: u64 = 256 << 20;
/// The stack estimate of `firmware/memory.x` (deepest chain: MRSP parsing).
const STACK_ESTIMATE: u32 = 6348;

fn start() -> SimNaa {
    SimNaa::start().unwrap_or_else(|e| panic!("firmware image simulation: {e}"))
}

/// The measurements once the core has gone back to sleep after the last client action.
fn settled(naa: &SimNaa) -> Stats {
    std::thread::sleep(Duration::from_millis(50));
    naa.stats()
}

fn create(naa: &SimNaa, fncode: u8, input: Vec<u8>, out_len: usize) -> Naa<SoftEndpoint> {
    Naa::create_with(
        &SoftTransport::default(),
        u32::from(fncode),
        vec![Param::from_vec(input)],
        vec![Param::zeroed(out_len)],
        &NaaOptions::at(naa.addr()),
    )
    .expect("naa_create against the firmware image")
}

/// An AP1 connection with in+out parameters of `sizes` at NAA addresses from `offset`;
/// returns the MRSP outcome. Retries while the image's one slot is still taken.
fn mrsp_at(
    naa: &SimNaa,
    offset: u64,
    sizes: &[usize],
) -> (Connection<SoftEndpoint>, Result<(), Error>) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut conn = loop {
        match Connection::connect(
            &SoftTransport::default(),
            naa.addr(),
            None,
            ClientConfig::new(code(ADD_ONE)),
        ) {
            Ok(c) => break c,
            Err(Error::Transport(TransportError::Rejected(_)))
                if std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("connect: {e}"),
        }
    };
    for &size in sizes {
        let id = conn.add_param(&Buffer::zeroed(size)).expect("param");
        conn.set_input(id).expect("input");
        conn.set_output(id).expect("output");
    }
    conn.set_addr_offset(offset).expect("offset");
    let result = conn.do_mrsp();
    (conn, result)
}

fn rejected_with(result: Result<(), Error>) -> MrspErrorCode {
    match result {
        Err(Error::Protocol(MachineError::MrspRejected(code))) => code,
        other => panic!("expected an MRSP refusal, got {other:?}"),
    }
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

    let mut handle = create(&naa, ADD_ONE, vec![7; 1024], 512);
    let mrsp = settled(&naa);
    const RPCS: u64 = 4;
    for round in 0..RPCS as u8 {
        handle.input(0).expect("input")[..4].copy_from_slice(&[round, 1, 2, 3]);
        handle.invoke().expect("invoke");
        let status = handle.wait().expect("wait");
        assert_eq!(status.naa_error, ReturnCode::SUCCESS);
        assert_eq!(status.bytes_received, 512);
        let out = handle.output(0).expect("output");
        assert_eq!(&out[..5], &[round + 1, 2, 3, 4, 8]);
        assert!(out[5..].iter().all(|&b| b == 8));
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
    let mut handle = create(&naa, 77, vec![1; 64], 64);
    // The image serves one connection: a second one is rejected while the first is open.
    let second = Connection::connect(
        &SoftTransport::default(),
        naa.addr(),
        None,
        ClientConfig::new(code(ADD_ONE)),
    );
    assert!(
        matches!(second, Err(Error::Transport(TransportError::Rejected(_)))),
        "{second:?}"
    );
    handle.invoke().expect("invoke");
    let status = handle.wait().expect("wait");
    assert_eq!(status.naa_error, ReturnCode::SOCKET_UNAVAIL);
    assert!(handle.output(0).expect("output").iter().all(|&b| b == 0));
    handle.finalize();

    // The slot of the finalized handle frees when the firmware sees the disconnect: until
    // then the connection is rejected.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut handle = loop {
        match Naa::create_with(
            &SoftTransport::default(),
            u32::from(APP_ERROR),
            vec![Param::from_vec(vec![1; 64])],
            vec![Param::zeroed(64)],
            &NaaOptions::at(naa.addr()),
        ) {
            Err(Error::Transport(TransportError::Rejected(_)))
                if std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            result => break result.expect("naa_create after the first handle"),
        }
    };
    handle.invoke().expect("invoke");
    assert_eq!(handle.wait().expect("wait").naa_error.naa_error(), 0x42);
    handle.finalize();
    stop(naa);
}

#[test]
fn image_refuses_bad_mrsp_requests_and_serves_32_regions() {
    let naa = start();
    let (_, r) = mrsp_at(&naa, NAA_MEMORY, &[4096]);
    assert_eq!(rejected_with(r), MrspErrorCode::InvalidAddress);
    let (_, r) = mrsp_at(&naa, NAA_MEMORY - 4096, &[8192]);
    assert_eq!(rejected_with(r), MrspErrorCode::NotEnoughMemory);
    // The largest request (32 regions): the deepest stack of MRSP parsing.
    let before = settled(&naa);
    let (mut conn, r) = mrsp_at(&naa, 0x4000, &[256; 32]);
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
    let mut handle = create(&naa, SLOW, vec![1; 64], 64);
    handle
        .invoke_with_timeout(Duration::from_secs(20))
        .expect("invoke");
    let status = handle.wait().expect("wait");
    assert_eq!(status.naa_error, ReturnCode::KERNEL_TIMEOUT);
    // The aborted kernel's completion never arrives; the connection serves the next RPC.
    handle
        .invoke_with_timeout(Duration::from_secs(20))
        .expect("invoke again");
    assert_eq!(
        handle.wait().expect("wait").naa_error,
        ReturnCode::KERNEL_TIMEOUT
    );
    handle.finalize();
    let stats = stop(naa);
    assert_eq!(stats.kernels, 2);
    let timeouts = stats.log.iter().filter(|l| l.contains("kernel timeout"));
    assert_eq!(timeouts.count(), 2, "{:?}", stats.log);
}
