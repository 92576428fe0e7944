//! Hostile and hogging clients against the software NAA: malformed MRSP requests get an MRSP
//! Error with a code (not a bare disconnect), region sizes and the memory budget are checked
//! before anything is allocated, and a connection idle past the grace period gives its slot
//! to a newcomer when the NAA is full.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use naaice::core::machine::Error as ProtocolError;
use naaice::core::{ClientConfig, MrspErrorCode};
use naaice::swnaa::{SoftNaaConfig, SoftNaaHandle};
use naaice::transport::TransportError;
use naaice::transport::soft::SoftEndpoint;
use naaice::{Buffer, Connection, Error};
use naaice_tests::raw_client::{MrspAnswer, mrsp_request, raw_mrsp};
use naaice_tests::{SLEEP, code, in_place_connection, start_naa};

/// A connection with one in-place region of `len` bytes (kernel 1), MRSP done.
fn connected(addr: SocketAddr, len: usize) -> naaice::Result<(Connection<SoftEndpoint>, Buffer)> {
    in_place_connection(addr, ClientConfig::new(code(1)), len)
}

/// One RPC of kernel 1 (adds 1 to every byte), checked.
fn rpc(conn: &mut Connection<SoftEndpoint>, buf: &Buffer) -> naaice::Result<()> {
    let before = buf.lock().to_vec();
    let result = conn.do_transfer()?;
    assert!(result.status.is_success());
    let expected: Vec<u8> = before.iter().map(|b| b.wrapping_add(1)).collect();
    assert_eq!(*buf.lock(), expected[..]);
    Ok(())
}

#[test]
fn malformed_mrsp_requests_get_an_mrsp_error_code() {
    let naa = start_naa(SoftNaaConfig {
        max_regions: 4,
        ..SoftNaaConfig::default()
    });
    let inout = 0x0C;
    let with_type = |t: u8| {
        let mut m = mrsp_request(&[(inout, 64)]);
        m[0] = t;
        m
    };
    let mut beyond_32 = mrsp_request(&[(inout, 8); 32]);
    beyond_32[1] = 40;
    let cases: Vec<(&str, Vec<u8>, MrspErrorCode)> = vec![
        (
            "count 0",
            vec![0x01, 0, 0, 0],
            MrspErrorCode::InvalidAddress,
        ),
        ("empty message", vec![], MrspErrorCode::InvalidAddress),
        (
            "only internal regions",
            mrsp_request(&[(0x01, 64), (0x01, 64)]),
            MrspErrorCode::InvalidAddress,
        ),
        (
            "unknown type 0x07",
            with_type(0x07),
            MrspErrorCode::InvalidAddress,
        ),
        (
            "reserved type 0x03",
            with_type(0x03),
            MrspErrorCode::InvalidAddress,
        ),
        (
            "an Advertisement",
            with_type(0x02),
            MrspErrorCode::InvalidAddress,
        ),
        (
            "flags 0xFF",
            mrsp_request(&[(0xFF, 64)]),
            MrspErrorCode::InvalidAddress,
        ),
        (
            "truncated",
            mrsp_request(&[(inout, 64), (inout, 64)])[..30].to_vec(),
            MrspErrorCode::InvalidAddress,
        ),
        (
            "zero-size region",
            mrsp_request(&[(inout, 0)]),
            MrspErrorCode::InvalidAddress,
        ),
        (
            "region over 1 GiB",
            mrsp_request(&[(inout, (1 << 30) + 1)]),
            MrspErrorCode::NotEnoughMemory,
        ),
        (
            "more regions than the NAA's limit",
            mrsp_request(&[(inout, 8); 5]),
            MrspErrorCode::TooManyRegions,
        ),
        ("count beyond 32", beyond_32, MrspErrorCode::TooManyRegions),
    ];
    for (name, request, code) in cases {
        assert_eq!(
            raw_mrsp(naa.local_addr(), &request),
            MrspAnswer::Reply(vec![0x00, code as u8, 0, 0]),
            "{name}"
        );
    }
    // The NAA serves well-formed clients as before. Retried while it is full: each refused
    // connection's worker holds its slot until just after its answer went out, and the NAA
    // has as many slots as CPUs (two in CI).
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut conn, buf) = loop {
        match connected(naa.local_addr(), 64) {
            Err(Error::Transport(TransportError::Rejected(_))) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            other => break other.unwrap(),
        }
    };
    rpc(&mut conn, &buf).unwrap();
}

#[test]
fn the_memory_budget_is_shared_by_all_connections() {
    let naa = start_naa(SoftNaaConfig {
        memory_budget: 1 << 20,
        max_connections: 4,
        ..SoftNaaConfig::default()
    });
    let addr = naa.local_addr();
    let (mut first, first_buf) = connected(addr, 600 << 10).unwrap();
    rpc(&mut first, &first_buf).unwrap();
    match connected(addr, 600 << 10) {
        Err(Error::Protocol(ProtocolError::MrspRejected(MrspErrorCode::NotEnoughMemory))) => {}
        other => panic!("expected MRSP error 0x01, got {:?}", other.map(|_| ())),
    }
    // 1 GiB (the region limit, far below the per-connection 4 GiB) is refused by the budget
    // before anything is allocated.
    assert_eq!(
        raw_mrsp(addr, &mrsp_request(&[(0x0C, 1 << 30)])),
        MrspAnswer::Reply(vec![0x00, 0x01, 0, 0])
    );
    // Requests within what is left still fit.
    let (mut small, small_buf) = connected(addr, 100 << 10).unwrap();
    rpc(&mut small, &small_buf).unwrap();
    // When the first client leaves, its memory is the next one's.
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut second, second_buf) = loop {
        match connected(addr, 600 << 10) {
            Ok(c) => break c,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("the first client's memory never came back: {e}"),
        }
    };
    rpc(&mut second, &second_buf).unwrap();
}

/// A newcomer finds every slot taken and is rejected as overloaded.
fn assert_overloaded(addr: SocketAddr) {
    match connected(addr, 64) {
        Err(Error::Transport(TransportError::Rejected(reason))) => {
            assert!(reason.contains("overloaded"), "{reason}");
        }
        other => panic!("expected a rejection, got {:?}", other.map(|_| ())),
    }
}

/// A software NAA of `slots` connections that gives the slot of a connection idle past `grace`
/// to a newcomer.
fn evicting_after(grace: Duration, slots: usize) -> SoftNaaHandle {
    start_naa(SoftNaaConfig {
        max_connections: slots,
        evict_idle_after: Some(grace),
        ..SoftNaaConfig::default()
    })
}

#[test]
fn a_connection_whose_kernel_runs_is_busy_not_idle() {
    // a was idle past the grace period, then starts an RPC whose kernel runs 800 ms: while it
    // runs, a is busy, so a newcomer finds the NAA full instead of taking a's slot.
    let grace = Duration::from_millis(300);
    let naa = evicting_after(grace, 1);
    let addr = naa.local_addr();
    let (mut a, _buf) = in_place_connection(addr, ClientConfig::new(code(SLEEP)), 64).unwrap();
    std::thread::sleep(grace + Duration::from_millis(200));
    a.set_immediate([80, 0, 0]).unwrap(); // 800 ms kernel
    a.init_transfer().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert_overloaded(addr);
    assert!(a.wait().expect("a's RPC completes").status.is_success());
}

#[test]
fn an_idle_connection_gives_its_slot_to_a_newcomer() {
    let grace = Duration::from_millis(500);
    let naa = evicting_after(grace, 2);
    let addr = naa.local_addr();
    // b is the older connection: its RPCs, not only its first one, count as activity.
    let (mut b, b_buf) = connected(addr, 64).unwrap();
    rpc(&mut b, &b_buf).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let (mut a, a_buf) = connected(addr, 64).unwrap();
    rpc(&mut a, &a_buf).unwrap();
    // Both idle for less than the grace period: the newcomer is rejected.
    assert_overloaded(addr);
    // a stays idle past the grace period, b keeps working.
    let until = Instant::now() + grace + Duration::from_millis(300);
    while Instant::now() < until {
        rpc(&mut b, &b_buf).unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    let (mut c, c_buf) = connected(addr, 64).expect("the newcomer takes a's slot");
    rpc(&mut c, &c_buf).unwrap();
    rpc(&mut b, &b_buf).unwrap();
    // a was disconnected cleanly: its next RPC fails with the disconnect, at once.
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    let result = a
        .init_transfer_with_timeout(Duration::from_secs(30))
        .and_then(|()| a.wait());
    let error = result.expect_err("the evicted connection's RPC must fail");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );
    assert!(
        error.to_string().contains("disconnect"),
        "unclear error: {error}"
    );
}
