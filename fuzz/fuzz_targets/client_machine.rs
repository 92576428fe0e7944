//! Fuzz target: drives `naaice_core::Client` with an operation sequence decoded from the input
//! (connection events, completions with real or made-up ids, received messages, reply
//! immediates, commands, clock jumps). Asserts: no panic, every `poll_action` drain stops
//! within a bound, every Send is a valid MRSP message that fits the buffer, and an expired
//! deadline is cleared by `handle_timeout`.
#![no_main]

use core::time::Duration;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use naaice_core::testkit::ops::{Op, table_from};
use naaice_core::testkit::run::run_client;
use naaice_core::{ClientConfig, FunctionCode};

#[derive(Arbitrary, Debug)]
struct Case {
    fncode: u8,
    mrsp_timeout_us: u32,
    rpc_timeout_us: u32,
    max_records: Option<u8>,
    params: Vec<(u64, u32, u32, u8)>,
    internal: u8,
    addr_offset: Option<u64>,
    ops: Vec<Op>,
}

fuzz_target!(|case: Case| {
    let fncode = FunctionCode::new(case.fncode % 127 + 1).expect("1..=127");
    let mut config = ClientConfig::new(fncode);
    config.mrsp_timeout = Duration::from_micros(u64::from(case.mrsp_timeout_us));
    config.rpc_timeout = Duration::from_micros(u64::from(case.rpc_timeout_us));
    if let Some(max) = case.max_records {
        config.max_records = max;
    }
    let params: Vec<_> = case
        .params
        .iter()
        .map(|&(addr, rkey, size, sel)| (addr, rkey, u64::from(size), sel))
        .collect();
    let table = table_from(&params, case.internal, case.addr_offset.unwrap_or(0));
    run_client(config, table, &case.ops);
});
