//! End-to-end RPCs over the software transport: a software NAA on loopback, clients through
//! AP1 (`Connection`) and AP2 (`Naa`). Region counts 1…32, sizes 1 B…64 MiB, single-send and
//! internal regions, 1000 RPCs on one connection, 16 concurrent clients, and every error code
//! (MRSP errors, SOCKET_UNAVAIL, KERNEL_TIMEOUT, application codes, kernel panics, the
//! connection limit, RPC deadlines).

use std::time::{Duration, Instant};

use naaice::core::machine::Error as ProtocolError;
use naaice::core::{ClientConfig, MrspErrorCode, Phase, ReturnCode};
use naaice::swnaa::{KERNEL_FAILED, SoftNaaConfig};
use naaice::transport::TransportError;
use naaice::transport::soft::{SoftEndpoint, SoftTransport};
use naaice::{Buffer, Connection, Error, Naa, NaaOptions, Param};
use naaice_tests::suite::{self, pattern, plus};
use naaice_tests::{APP_ERROR, PANIC, PROBE, SLEEP, UNTIL_TIMEOUT, code, start_naa};

type Conn = Connection<SoftEndpoint>;

fn connect(addr: std::net::SocketAddr, fncode: u8) -> Conn {
    Connection::connect(
        &SoftTransport::default(),
        addr,
        None,
        ClientConfig::new(code(fncode)),
    )
    .expect("connect")
}

/// A configuration for tests that open one connection after another: the NAA frees a
/// connection slot only once it has seen the client's disconnect, which may take a moment
/// after the client's side returned, so the default limit (one slot per core) could reject
/// the next connection.
fn roomy() -> SoftNaaConfig {
    SoftNaaConfig {
        max_connections: 64,
        ..SoftNaaConfig::default()
    }
}

#[test]
fn one_to_thirty_two_in_place_regions() {
    let naa = start_naa(roomy());
    suite::in_place_regions(|f| connect(naa.local_addr(), f), &[1, 2, 7, 31, 32]);
}

#[test]
fn sizes_from_one_byte_to_64_mib() {
    let naa = start_naa(roomy());
    let sizes = [
        1,
        2,
        3,
        4095,
        4096,
        4097,
        65_536,
        1 << 20,
        5_000_001,
        64 << 20,
    ];
    suite::in_place_sizes(|f| connect(naa.local_addr(), f), &sizes);
}

#[test]
fn separate_inputs_and_outputs_of_different_sizes() {
    let naa = start_naa(SoftNaaConfig::default());
    suite::separate_inputs_and_outputs(&mut connect(naa.local_addr(), 1));
}

#[test]
fn single_send_and_internal_regions() {
    let naa = start_naa(SoftNaaConfig::default());
    let mut conn = connect(naa.local_addr(), PROBE);
    let p0 = Buffer::from_slice(&[7; 64]);
    let p1 = Buffer::from_slice(&pattern(1000, 5));
    let p2 = Buffer::zeroed(256);
    let (i0, i1, i2) = (
        conn.add_param(&p0).unwrap(),
        conn.add_param(&p1).unwrap(),
        conn.add_param(&p2).unwrap(),
    );
    conn.set_single_send(i0).unwrap();
    conn.set_input(i1).unwrap();
    conn.set_output(i1).unwrap();
    conn.set_output(i2).unwrap();
    conn.add_internal(8192).unwrap();
    conn.set_addr_offset(0x1000_0000).unwrap();
    conn.set_immediate([0x11, 0x22, 0x33]).unwrap();
    conn.do_mrsp().unwrap();
    let original = p1.to_vec();
    for rpc in 1..=3u8 {
        let r = conn.do_transfer().unwrap();
        assert_eq!(r.bytes_received, 256);
        let out = p2.to_vec();
        assert_eq!(out[0], rpc, "internal region keeps its count across RPCs");
        assert_eq!(out[1], 7, "single-send input is the one sent in RPC 1");
        assert_eq!(
            p1.to_vec(),
            plus(&original, rpc),
            "in-place region written every RPC"
        );
        // Changing the single-send input after RPC 1 must not reach the NAA.
        p0.lock().fill(9);
    }
}

#[test]
fn thousand_rpcs_on_one_connection() {
    let naa = start_naa(SoftNaaConfig::default());
    let data = Param::from_vec(pattern(64, 3));
    let opts = NaaOptions::at(naa.local_addr());
    let mut h = Naa::create_with(
        &SoftTransport::default(),
        1,
        vec![data.clone()],
        vec![data],
        &opts,
    )
    .unwrap();
    let before = h.input(0).unwrap().to_vec();
    for _ in 0..1000 {
        h.invoke().unwrap();
        let s = h.wait().unwrap();
        assert_eq!(
            (s.state, s.naa_error, s.bytes_received),
            (Phase::Finished, ReturnCode::SUCCESS, 64)
        );
    }
    assert_eq!(
        h.output(0).unwrap().to_vec(),
        plus(&before, (1000 % 256) as u8)
    );
    h.finalize();
}

#[test]
fn sixteen_concurrent_clients() {
    let naa = start_naa(SoftNaaConfig {
        max_connections: 16,
        ..SoftNaaConfig::default()
    });
    let options = NaaOptions::at(naa.local_addr());
    suite::concurrent_clients(&SoftTransport::default(), &options, 16, 50, 4096);
}

#[test]
fn over_the_connection_limit_is_rejected_clearly() {
    let naa = start_naa(SoftNaaConfig {
        max_connections: 1,
        ..SoftNaaConfig::default()
    });
    let first = connect(naa.local_addr(), 1);
    let second = Connection::connect(
        &SoftTransport::default(),
        naa.local_addr(),
        None,
        ClientConfig::new(code(1)),
    );
    match second {
        Err(Error::Transport(TransportError::Rejected(reason))) => {
            assert!(reason.contains("overloaded"), "{reason}")
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    drop(first);
    // The slot is returned when the first client leaves.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match Connection::connect(
            &SoftTransport::default(),
            naa.local_addr(),
            None,
            ClientConfig::new(code(1)),
        ) {
            Ok(_) => break,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("slot never returned: {e}"),
        }
    }
}

fn in_place(naa: &naaice::swnaa::SoftNaaHandle, fncode: u32, len: usize) -> Naa<SoftEndpoint> {
    let p = Param::from_vec(pattern(len, 9));
    Naa::create_with(
        &SoftTransport::default(),
        fncode,
        vec![p.clone()],
        vec![p],
        &NaaOptions::at(naa.local_addr()),
    )
    .unwrap()
}

#[test]
fn unknown_function_code_gets_socket_unavail_and_the_connection_survives() {
    let naa = start_naa(SoftNaaConfig::default());
    let mut h = in_place(&naa, 99, 128);
    let before = h.input(0).unwrap().to_vec();
    for _ in 0..3 {
        h.invoke().unwrap();
        let s = h.wait().unwrap();
        assert_eq!(
            (s.naa_error, s.bytes_received),
            (ReturnCode::SOCKET_UNAVAIL, 0)
        );
        assert_eq!(s.naa_error.naa_error(), 0x01);
    }
    assert_eq!(
        h.output(0).unwrap().to_vec(),
        before,
        "no output written on error"
    );
}

#[test]
fn kernel_over_its_timeout_gets_kernel_timeout_and_the_connection_survives() {
    let naa = start_naa(SoftNaaConfig {
        kernel_timeout: Duration::from_millis(100),
        ..SoftNaaConfig::default()
    });
    suite::kernel_timeout_keeps_the_connection(&mut connect(naa.local_addr(), SLEEP));
    suite::kernel_timeout_is_visible_to_the_kernel(&mut connect(naa.local_addr(), UNTIL_TIMEOUT));
}

#[test]
fn application_error_code_arrives_with_the_outputs() {
    let naa = start_naa(SoftNaaConfig::default());
    let mut h = in_place(&naa, u32::from(APP_ERROR), 32);
    let before = h.input(0).unwrap().to_vec();
    h.invoke().unwrap();
    let s = h.wait().unwrap();
    assert_eq!(s.naa_error.get(), 0x42);
    assert_eq!(
        s.naa_error.class(),
        naaice::core::wire::ReturnClass::Application
    );
    assert_eq!(h.output(0).unwrap().to_vec(), plus(&before, 1));
}

#[test]
fn panicking_kernel_is_reported_and_the_naa_keeps_serving() {
    let naa = start_naa(SoftNaaConfig::default());
    let mut h = in_place(&naa, u32::from(PANIC), 8);
    h.invoke().unwrap();
    assert_eq!(h.wait().unwrap().naa_error, KERNEL_FAILED);
    let mut other = in_place(&naa, 1, 8);
    other.invoke().unwrap();
    assert!(other.wait().unwrap().naa_error.is_success());
}

#[test]
fn mrsp_errors_reach_the_client() {
    let naa = start_naa(SoftNaaConfig {
        max_regions: 4,
        max_bytes_per_connection: 1 << 20,
        ..SoftNaaConfig::default()
    });
    let opts = NaaOptions::at(naa.local_addr());
    let params = |n: usize, len: usize| (0..n).map(|_| Param::zeroed(len)).collect::<Vec<_>>();
    let cases = [
        (params(5, 8), MrspErrorCode::TooManyRegions),
        (params(2, 600 << 10), MrspErrorCode::NotEnoughMemory),
    ];
    for (inputs, code) in cases {
        match Naa::create_with(&SoftTransport::default(), 1, inputs, vec![], &opts) {
            Err(Error::Protocol(ProtocolError::MrspRejected(c))) => assert_eq!(c, code),
            other => panic!("expected MRSP error {code:?}, got {other:?}"),
        }
    }
    // Within the limits the same NAA accepts.
    Naa::create_with(&SoftTransport::default(), 1, params(4, 8), vec![], &opts).unwrap();
}

#[test]
fn zero_outputs_and_single_send_only_inputs() {
    let naa = start_naa(SoftNaaConfig::default());
    // No output: the NAA answers with a zero-length write.
    let mut conn = connect(naa.local_addr(), 1);
    let input = Buffer::from_slice(&[1; 100]);
    let id = conn.add_param(&input).unwrap();
    conn.set_single_send(id).unwrap();
    conn.do_mrsp().unwrap();
    for _ in 0..3 {
        // RPC 2 and 3 send nothing but the zero-length WRITE WITH IMM (D-08).
        let r = conn.do_transfer().unwrap();
        assert_eq!((r.status, r.bytes_received), (ReturnCode::SUCCESS, 0));
    }
    assert_eq!(conn.rpc_count(), 3);
}

#[test]
fn buffers_are_inaccessible_while_an_rpc_is_in_flight() {
    let naa = start_naa(SoftNaaConfig::default());
    let mut h = in_place(&naa, u32::from(SLEEP), 64);
    h.invoke().unwrap();
    assert!(matches!(h.input(0), Err(Error::Busy)));
    assert!(matches!(h.output(0), Err(Error::Busy)));
    assert!(matches!(h.invoke(), Err(Error::Busy)));
    h.wait().unwrap();
    assert!(h.output(0).is_ok());
    assert!(matches!(h.input(5), Err(Error::InvalidArgument(_))));
}

#[test]
fn test_never_blocks_and_wait_finishes() {
    let naa = start_naa(SoftNaaConfig::default());
    let p = Param::from_vec(vec![0; 64]);
    let opts = NaaOptions::at(naa.local_addr());
    let mut h = Naa::create_with(
        &SoftTransport::default(),
        u32::from(SLEEP),
        vec![p.clone()],
        vec![p],
        &opts,
    )
    .unwrap();
    // The user bytes are 0 in AP2, so SLEEP sleeps 0 ms; use a slow kernel through AP1 instead
    // for timing, and here only check that test() returns promptly and eventually succeeds.
    h.invoke().unwrap();
    let mut polls = 0;
    let status = loop {
        let t = Instant::now();
        let s = h.test().unwrap();
        assert!(
            t.elapsed() < Duration::from_millis(50),
            "test() blocked for {:?}",
            t.elapsed()
        );
        polls += 1;
        if let Some(s) = s {
            break s;
        }
    };
    assert!(polls >= 1);
    assert!(status.naa_error.is_success());
    assert_eq!(
        h.wait().unwrap(),
        status,
        "wait after test returns the same status"
    );
}

#[test]
fn rpc_deadline_fails_the_call_in_time() {
    let naa = start_naa(SoftNaaConfig::default());
    let mut conn = connect(naa.local_addr(), SLEEP);
    let buf = Buffer::zeroed(8);
    let id = conn.add_param(&buf).unwrap();
    conn.set_input(id).unwrap();
    conn.do_mrsp().unwrap();
    conn.set_immediate([200, 0, 0]).unwrap(); // 2 s kernel
    let t = Instant::now();
    conn.init_transfer_with_timeout(Duration::from_millis(200))
        .unwrap();
    match conn.wait() {
        Err(Error::Protocol(ProtocolError::Timeout { .. })) => {}
        other => panic!("expected a timeout, got {other:?}"),
    }
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_millis(1500),
        "{took:?}"
    );
}

#[test]
fn invalid_arguments_are_errors() {
    let naa = start_naa(SoftNaaConfig::default());
    let opts = NaaOptions::at(naa.local_addr());
    for fncode in [0u32, 128, 256, 0x181] {
        let r = Naa::create_with(
            &SoftTransport::default(),
            fncode,
            vec![Param::zeroed(1)],
            vec![],
            &opts,
        );
        assert!(
            matches!(r, Err(Error::InvalidArgument(_))),
            "fncode {fncode}: {r:?}"
        );
    }
    // No parameter at all: nothing to reply into.
    let r = Naa::create_with(&SoftTransport::default(), 1, vec![], vec![], &opts);
    assert!(
        matches!(r, Err(Error::Protocol(ProtocolError::NoParameterRegions))),
        "{r:?}"
    );
    let mut conn = connect(naa.local_addr(), 1);
    assert!(conn.do_transfer().is_err(), "RPC before MRSP");
    let b = Buffer::zeroed(4);
    let id = conn.add_param(&b).unwrap();
    assert!(conn.set_bytes_to_send(id, Some(5)).is_err());
}
