//! Fuzz target: drives `naaice_core::Server` with an operation sequence decoded from the input
//! (connection events, received MRSP messages, request immediates, completions with real or
//! made-up ids, region assignments, kernel results, clock jumps). Asserts: no panic, every
//! `poll_action` drain stops within a bound, and every Send is a valid MRSP message that fits
//! the buffer.
#![no_main]

use core::time::Duration;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use naaice_core::machine::{KernelSet, Placement};
use naaice_core::testkit::ops::Op;
use naaice_core::testkit::run::run_server;
use naaice_core::{FunctionCode, ServerConfig};

#[derive(Arbitrary, Debug)]
struct Case {
    kernels: u128,
    max_regions: Option<u8>,
    max_total_bytes: Option<u64>,
    placement: Option<(u64, u64)>,
    mrsp_timeout_us: u32,
    kernel_timeout_us: u32,
    completion_timeout_us: u32,
    idle_timeout_us: Option<u32>,
    ops: Vec<Op>,
}

fuzz_target!(|case: Case| {
    let mut kernels = KernelSet::empty();
    for code in 1u8..=127 {
        if case.kernels & (1u128 << code) != 0 {
            kernels.insert(FunctionCode::new(code).expect("1..=127"));
        }
    }
    let mut config = ServerConfig::new(kernels);
    if let Some(max) = case.max_regions {
        config.max_regions = max;
    }
    if let Some(max) = case.max_total_bytes {
        config.max_total_bytes = max;
    }
    if let Some((base, len)) = case.placement {
        config.placement = Placement::Requested { base, len };
    }
    config.mrsp_timeout = Duration::from_micros(u64::from(case.mrsp_timeout_us));
    config.kernel_timeout = Duration::from_micros(u64::from(case.kernel_timeout_us));
    config.completion_timeout = Duration::from_micros(u64::from(case.completion_timeout_us));
    config.idle_timeout = case
        .idle_timeout_us
        .map(|us| Duration::from_micros(u64::from(us)));

    run_server(config, &case.ops);
});
