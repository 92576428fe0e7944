//! Client steps shared by the tests against FPGA NAAs (the firmware logic in
//! [`crate::fpga`] and the firmware image in [`crate::soc`]): regions are placed at the
//! client's requested addresses, and one connection's memory and slot are free again only
//! once the firmware has seen its disconnect, so these helpers retry those refusals for a
//! bounded time.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use naaice::Error;
use naaice::client::connection::Connection;
use naaice::client::naa::{Naa, NaaOptions, Param};
use naaice::memory::Buffer;
use naaice::transport::TransportError;
use naaice::transport::soft::{SoftEndpoint, SoftTransport};
use naaice_core::machine::Error as MachineError;
use naaice_core::wire::mrsp::MrspErrorCode;
use naaice_core::{ClientConfig, ReturnCode};

use crate::code;
use crate::fpga::{ADD_ONE, APP_ERROR, SLOW};

/// How long a just-closed connection may keep its slot or memory.
const RELEASE: Duration = Duration::from_secs(10);

/// True for the refusals a connection closed a moment ago can cause.
fn transient(e: &Error) -> bool {
    matches!(
        e,
        Error::Transport(TransportError::Rejected(_))
            | Error::Protocol(MachineError::MrspRejected(MrspErrorCode::NotEnoughMemory))
    )
}

/// An AP2 handle at the NAA `addr` for `fncode` with one input and one output parameter.
pub fn create(addr: SocketAddr, fncode: u32, input: Vec<u8>, out_len: usize) -> Naa<SoftEndpoint> {
    let deadline = Instant::now() + RELEASE;
    loop {
        match Naa::create_with(
            &SoftTransport::default(),
            fncode,
            vec![Param::from_vec(input.clone())],
            vec![Param::zeroed(out_len)],
            &NaaOptions::at(addr),
        ) {
            Err(e) if transient(&e) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            result => return result.expect("naa_create against the FPGA NAA"),
        }
    }
}

/// An AP1 connection to `addr` with in+out parameters of `sizes` requesting NAA addresses
/// from `offset`; returns the MRSP outcome.
pub fn mrsp_at(
    addr: SocketAddr,
    offset: u64,
    sizes: &[usize],
) -> (Connection<SoftEndpoint>, Result<(), Error>) {
    let deadline = Instant::now() + RELEASE;
    let mut conn = loop {
        match Connection::connect(
            &SoftTransport::default(),
            addr,
            None,
            ClientConfig::new(code(ADD_ONE)),
        ) {
            Ok(c) => break c,
            Err(e) if transient(&e) && Instant::now() < deadline => {
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

/// The MRSP error code of a refused request (panics on anything else).
pub fn rejected_with(result: Result<(), Error>) -> MrspErrorCode {
    match result {
        Err(Error::Protocol(MachineError::MrspRejected(code))) => code,
        other => panic!("expected an MRSP refusal, got {other:?}"),
    }
}

/// Asserts that a connection to `addr` is rejected at connect (no free slot).
pub fn assert_connect_rejected(addr: SocketAddr) {
    let result = Connection::connect(
        &SoftTransport::default(),
        addr,
        None,
        ClientConfig::new(code(ADD_ONE)),
    );
    assert!(
        matches!(result, Err(Error::Transport(TransportError::Rejected(_)))),
        "{result:?}"
    );
}

/// RPC number `round` on a handle of [`ADD_ONE`] with a 1024-byte input of 7s and a
/// 512-byte output: the output is the input plus one.
pub fn add_one_round(handle: &mut Naa<SoftEndpoint>, round: u8) {
    handle.input(0).expect("input")[..4].copy_from_slice(&[round, 1, 2, 3]);
    handle.invoke().expect("invoke");
    let status = handle.wait().expect("wait");
    assert_eq!(status.naa_error, ReturnCode::SUCCESS);
    assert_eq!(status.bytes_received, 512);
    let out = handle.output(0).expect("output");
    assert_eq!(&out[..5], &[round + 1, 2, 3, 4, 8]);
    assert!(out[5..].iter().all(|&b| b == 8));
}

/// An unknown function code is answered with SOCKET_UNAVAIL and leaves the outputs alone;
/// kernel [`APP_ERROR`]'s application error 0x42 reaches the client (one handle each).
pub fn unknown_code_and_application_error(addr: SocketAddr) {
    let mut handle = create(addr, 77, vec![1; 64], 64);
    handle.invoke().expect("invoke");
    let status = handle.wait().expect("wait");
    assert_eq!(status.naa_error, ReturnCode::SOCKET_UNAVAIL);
    assert!(handle.output(0).expect("output").iter().all(|&b| b == 0));
    handle.finalize();

    let mut handle = create(addr, u32::from(APP_ERROR), vec![1; 64], 64);
    handle.invoke().expect("invoke");
    assert_eq!(handle.wait().expect("wait").naa_error.naa_error(), 0x42);
    handle.finalize();
}

/// Two RPCs of kernel [`SLOW`] on one handle: both are answered with KERNEL_TIMEOUT (the
/// aborted kernel does not disturb the next RPC).
pub fn two_kernel_timeouts(addr: SocketAddr) {
    let mut handle = create(addr, u32::from(SLOW), vec![1; 64], 64);
    for _ in 0..2 {
        handle
            .invoke_with_timeout(Duration::from_secs(30))
            .expect("invoke");
        assert_eq!(
            handle.wait().expect("wait").naa_error,
            ReturnCode::KERNEL_TIMEOUT
        );
    }
    handle.finalize();
}
