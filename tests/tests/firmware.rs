//! End to end against the FPGA firmware logic: the host client (software transport, AP2
//! `Naa` and AP1 `Connection`) talks to `naaice-firmware` running on the host, with the
//! software transport playing the RoCE engine (`naaice_tests::fpga`).

use naaice_core::wire::mrsp::MrspErrorCode;
use naaice_core::{Phase, ReturnCode};
use naaice_tests::fpga::{ADD_ONE, FpgaNaa, MEMORY, firmware_config};
use naaice_tests::fpga_client::{
    add_one_round, assert_connect_rejected, create, mrsp_at, rejected_with, two_kernel_timeouts,
    unknown_code_and_application_error,
};

#[test]
fn ap2_runs_several_rpcs_on_the_fpga_firmware() {
    let naa = FpgaNaa::start(firmware_config());
    let mut handle = create(naa.addr(), u32::from(ADD_ONE), vec![7; 1024], 512);
    for round in 0..3u8 {
        add_one_round(&mut handle, round);
    }
    handle.finalize();
}

#[test]
fn unknown_function_code_and_application_errors_reach_the_client() {
    let naa = FpgaNaa::start(firmware_config());
    unknown_code_and_application_error(naa.addr());
}

#[test]
fn kernel_timeout_is_reported_and_the_connection_stays_usable() {
    let naa = FpgaNaa::start(firmware_config());
    two_kernel_timeouts(naa.addr());
}

#[test]
fn mrsp_errors_for_bad_addresses_sizes_and_counts() {
    let naa = FpgaNaa::start(firmware_config());
    let (_, r) = mrsp_at(naa.addr(), MEMORY.base + MEMORY.len, &[4096]);
    assert_eq!(rejected_with(r), MrspErrorCode::InvalidAddress);
    let (_, r) = mrsp_at(naa.addr(), MEMORY.base + MEMORY.len - 4096, &[8192]);
    assert_eq!(rejected_with(r), MrspErrorCode::NotEnoughMemory);
    let (_, r) = mrsp_at(naa.addr(), 0, &[64; 5]);
    assert_eq!(rejected_with(r), MrspErrorCode::TooManyRegions);
    // After the refusals the NAA serves a valid request.
    let (mut conn, r) = mrsp_at(naa.addr(), 0x4000, &[256]);
    r.expect("valid request");
    let result = conn.do_transfer().expect("rpc");
    assert_eq!(result.status, ReturnCode::SUCCESS);
    conn.disconnect();
}

#[test]
fn concurrent_connections_need_disjoint_memory_and_respect_the_limit() {
    let naa = FpgaNaa::start(firmware_config());
    let (mut a, r) = mrsp_at(naa.addr(), 0x10_0000, &[4096]);
    r.expect("first");
    let (mut b, r) = mrsp_at(naa.addr(), 0x20_0000, &[4096]);
    r.expect("second, disjoint");
    // A third connection exceeds the limit of 2: rejected at connect.
    assert_connect_rejected(naa.addr());
    for conn in [&mut a, &mut b] {
        for _ in 0..2 {
            let result = conn.do_transfer().expect("rpc");
            assert_eq!(result.status, ReturnCode::SUCCESS);
        }
        assert_eq!(conn.phase(), Phase::Finished);
    }
    // In-place input+output: every byte went up by one per RPC.
    let buffer = a.param(naaice_core::RegionId::new(0)).expect("param");
    assert!(buffer.to_vec().iter().all(|&x| x == 2));
    a.disconnect();

    // The freed slot is reusable, but memory in use by `b` is not.
    let (_, r) = mrsp_at(naa.addr(), 0x20_0800, &[64]);
    assert_eq!(rejected_with(r), MrspErrorCode::NotEnoughMemory);
    let (mut c, r) = mrsp_at(naa.addr(), 0x10_0000, &[4096]);
    r.expect("reconnect on the released memory");
    assert_eq!(c.do_transfer().expect("rpc").status, ReturnCode::SUCCESS);
    c.disconnect();
    b.disconnect();
}
