//! End to end against the FPGA firmware logic: the host client (software transport, AP2
//! `Naa` and AP1 `Connection`) talks to `naaice-firmware` running on the host, with the
//! software transport playing the RoCE engine (`naaice_tests::fpga`).

use std::time::Duration;

use naaice::Error;
use naaice::connection::Connection;
use naaice::memory::Buffer;
use naaice::naa::{Naa, NaaOptions, Param};
use naaice::transport::TransportError;
use naaice::transport::soft::{SoftEndpoint, SoftTransport};
use naaice_core::machine::Error as MachineError;
use naaice_core::wire::mrsp::MrspErrorCode;
use naaice_core::{ClientConfig, Phase, ReturnCode};
use naaice_tests::code;
use naaice_tests::fpga::{ADD_ONE, APP_ERROR, FpgaNaa, MEMORY, SLOW, firmware_config};

fn create(naa: &FpgaNaa, fncode: u32, input: Vec<u8>, out_len: usize) -> Naa<SoftEndpoint> {
    // The memory of a handle finalized a moment ago is free only once the firmware has seen
    // its disconnect: until then a request for the same addresses is refused with 0x01.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match Naa::create_with(
            &SoftTransport::default(),
            fncode,
            vec![Param::from_vec(input.clone())],
            vec![Param::zeroed(out_len)],
            &NaaOptions::at(naa.addr()),
        ) {
            Err(Error::Protocol(MachineError::MrspRejected(MrspErrorCode::NotEnoughMemory)))
                if std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            result => return result.expect("naa_create against the firmware"),
        }
    }
}

#[test]
fn ap2_runs_several_rpcs_on_the_fpga_firmware() {
    let naa = FpgaNaa::start(firmware_config());
    let mut handle = create(&naa, u32::from(ADD_ONE), vec![7; 1024], 512);
    for round in 0..3u8 {
        handle.input(0).expect("input")[..4].copy_from_slice(&[round, 1, 2, 3]);
        handle.invoke().expect("invoke");
        let status = handle.wait().expect("wait");
        assert_eq!(status.naa_error, ReturnCode::SUCCESS);
        assert_eq!(status.bytes_received, 512);
        let out = handle.output(0).expect("output");
        assert_eq!(&out[..5], &[round + 1, 2, 3, 4, 8]);
        assert!(out[5..].iter().all(|&b| b == 8));
    }
    handle.finalize();
}

#[test]
fn unknown_function_code_and_application_errors_reach_the_client() {
    let naa = FpgaNaa::start(firmware_config());
    let mut handle = create(&naa, 77, vec![1; 64], 64);
    handle.invoke().expect("invoke");
    let status = handle.wait().expect("wait");
    assert_eq!(status.naa_error, ReturnCode::SOCKET_UNAVAIL);
    assert!(handle.output(0).expect("output").iter().all(|&b| b == 0));
    handle.finalize();

    let mut handle = create(&naa, u32::from(APP_ERROR), vec![1; 64], 64);
    handle.invoke().expect("invoke");
    let status = handle.wait().expect("wait");
    assert_eq!(status.naa_error.naa_error(), 0x42);
    handle.finalize();
}

#[test]
fn kernel_timeout_is_reported_and_the_connection_stays_usable() {
    let naa = FpgaNaa::start(firmware_config());
    let mut handle = create(&naa, u32::from(SLOW), vec![1; 64], 64);
    handle
        .invoke_with_timeout(Duration::from_secs(10))
        .expect("invoke");
    let status = handle.wait().expect("wait");
    assert_eq!(status.naa_error, ReturnCode::KERNEL_TIMEOUT);
    // The aborted kernel does not disturb the next RPC, which times out the same way.
    handle.invoke().expect("invoke again");
    assert_eq!(
        handle.wait().expect("wait").naa_error,
        ReturnCode::KERNEL_TIMEOUT
    );
    handle.finalize();
}

/// An AP1 connection with parameters of `sizes` (all input+output) requesting NAA addresses
/// from `offset`; returns the MRSP outcome.
fn mrsp_at(
    naa: &FpgaNaa,
    offset: u64,
    sizes: &[usize],
) -> (Connection<SoftEndpoint>, Result<(), Error>) {
    // A slot freed by a disconnect a moment ago may not be free yet: retry rejections.
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

#[test]
fn mrsp_errors_for_bad_addresses_sizes_and_counts() {
    let naa = FpgaNaa::start(firmware_config());
    let (_, r) = mrsp_at(&naa, MEMORY.base + MEMORY.len, &[4096]);
    assert_eq!(rejected_with(r), MrspErrorCode::InvalidAddress);
    let (_, r) = mrsp_at(&naa, MEMORY.base + MEMORY.len - 4096, &[8192]);
    assert_eq!(rejected_with(r), MrspErrorCode::NotEnoughMemory);
    let (_, r) = mrsp_at(&naa, 0, &[64; 5]);
    assert_eq!(rejected_with(r), MrspErrorCode::TooManyRegions);
    // After the refusals the NAA serves a valid request.
    let (mut conn, r) = mrsp_at(&naa, 0x4000, &[256]);
    r.expect("valid request");
    let result = conn.do_transfer().expect("rpc");
    assert_eq!(result.status, ReturnCode::SUCCESS);
    conn.disconnect();
}

#[test]
fn concurrent_connections_need_disjoint_memory_and_respect_the_limit() {
    let naa = FpgaNaa::start(firmware_config());
    let (mut a, r) = mrsp_at(&naa, 0x10_0000, &[4096]);
    r.expect("first");
    let (mut b, r) = mrsp_at(&naa, 0x20_0000, &[4096]);
    r.expect("second, disjoint");
    // A third connection exceeds the limit of 2: rejected at connect.
    let third = Connection::connect(
        &SoftTransport::default(),
        naa.addr(),
        None,
        ClientConfig::new(code(ADD_ONE)),
    );
    assert!(
        matches!(third, Err(Error::Transport(TransportError::Rejected(_)))),
        "{third:?}"
    );
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
    let (_, r) = mrsp_at(&naa, 0x20_0800, &[64]);
    assert_eq!(rejected_with(r), MrspErrorCode::NotEnoughMemory);
    let (mut c, r) = mrsp_at(&naa, 0x10_0000, &[4096]);
    r.expect("reconnect on the released memory");
    assert_eq!(c.do_transfer().expect("rpc").status, ReturnCode::SUCCESS);
    c.disconnect();
    b.disconnect();
}
