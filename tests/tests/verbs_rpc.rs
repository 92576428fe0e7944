//! End-to-end RPCs over the verbs transport: the software NAA and its clients in one process,
//! over a real RDMA device (Soft-RoCE in a VM in CI): MRSP, multi-region RPCs, single-send and
//! internal regions, repeated RPCs, concurrent clients, every error code, the connection limit,
//! and clients that disconnect before the MRSP or in the middle of an RPC.
//!
//! The address is `NAAICE_RDMA_ADDR` or else `RXE_VM_ADDR` (an IP of an RDMA netdev). Without
//! any RDMA device every test prints `SKIP` and passes, except with `NAAICE_REQUIRE_RDMA=1`,
//! which turns the skip into a failure (set it wherever RDMA is expected, so a broken setup
//! cannot pass silently). On a machine without RDMA devices, one test checks that the
//! transport fails with a clear [`TransportError::Unavailable`].
//!
//! Run in the Soft-RoCE VM, e.g.:
//! `NAAICE_REQUIRE_RDMA=1 RXE_VM_PASS_ENV=NAAICE_REQUIRE_RDMA
//!  CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER=<run-in-rxe-vm.sh>
//!  cargo test -p naaice-tests --features verbs --test verbs_rpc`
#![cfg(feature = "verbs")]

use std::net::{IpAddr, SocketAddr};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use naaice::core::machine::Error as ProtocolError;
use naaice::core::{ClientConfig, MrspErrorCode, Phase, ReturnCode};
use naaice::swnaa::{KERNEL_FAILED, SoftNaa, SoftNaaConfig, SoftNaaHandle};
use naaice::transport::verbs::{VerbsConfig, VerbsEndpoint, VerbsTransport, device_names};
use naaice::transport::{Transport, TransportError};
use naaice::{Buffer, Connection, Error, Naa, NaaOptions, Param};
use naaice_tests::suite::{self, pattern, plus};
use naaice_tests::{APP_ERROR, PANIC, PROBE, SLEEP, code, test_kernels};

type Conn = Connection<VerbsEndpoint>;

/// The IP to run on, or `None` (after printing why) when there is no RDMA device.
fn rdma_ip(test: &str) -> Option<IpAddr> {
    let devices = device_names().unwrap_or_else(|e| panic!("listing RDMA devices: {e}"));
    let required = std::env::var("NAAICE_REQUIRE_RDMA").is_ok_and(|v| v == "1");
    if devices.is_empty() {
        assert!(
            !required,
            "NAAICE_REQUIRE_RDMA=1 but this machine has no RDMA device"
        );
        println!("SKIP {test}: no RDMA device on this machine (set NAAICE_REQUIRE_RDMA=1 to fail)");
        return None;
    }
    let addr = std::env::var("NAAICE_RDMA_ADDR")
        .or_else(|_| std::env::var("RXE_VM_ADDR"))
        .unwrap_or_else(|_| {
            panic!("RDMA devices {devices:?} found, but neither NAAICE_RDMA_ADDR nor RXE_VM_ADDR names an IP on one")
        });
    Some(
        addr.parse()
            .unwrap_or_else(|e| panic!("bad RDMA address {addr:?}: {e}")),
    )
}

/// Runs `body` on its own thread and fails the test if it takes longer than `limit` (a
/// hanging verbs call must not hang the suite).
fn bounded(limit: Duration, body: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        body();
        let _ = tx.send(());
    });
    match rx.recv_timeout(limit) {
        Ok(()) => worker.join().expect("test body"),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The body panicked: re-raise its panic.
            if let Err(p) = worker.join() {
                std::panic::resume_unwind(p);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("test did not finish within {limit:?}"),
    }
}

/// The verbs test: skipped without RDMA, bounded by `secs`.
fn verbs_test(name: &str, secs: u64, body: impl FnOnce(IpAddr) + Send + 'static) {
    if let Some(ip) = rdma_ip(name) {
        bounded(Duration::from_secs(secs), move || body(ip));
    }
}

fn start_naa(ip: IpAddr, config: SoftNaaConfig) -> SoftNaaHandle {
    let naa = SoftNaa::bind(
        VerbsTransport::default(),
        SocketAddr::new(ip, 0),
        config,
        test_kernels(),
    )
    .expect("bind the software NAA over verbs");
    naa.spawn().expect("spawn the software NAA")
}

fn connect(addr: SocketAddr, fncode: u8) -> Conn {
    Connection::connect(
        &VerbsTransport::default(),
        addr,
        None,
        ClientConfig::new(code(fncode)),
    )
    .expect("connect over verbs")
}

fn in_place(naa: &SoftNaaHandle, fncode: u32, len: usize) -> Naa<VerbsEndpoint> {
    let p = Param::from_vec(pattern(len, 9));
    Naa::create_with(
        &VerbsTransport::default(),
        fncode,
        vec![p.clone()],
        vec![p],
        &NaaOptions::at(naa.local_addr()),
    )
    .expect("create an NAA handle over verbs")
}

#[test]
fn without_rdma_devices_the_transport_is_unavailable() {
    let devices = device_names().expect("listing devices never fails");
    if !devices.is_empty() {
        println!("RDMA devices present ({devices:?}): nothing to check here");
        return;
    }
    let t = VerbsTransport::default();
    let deadline = Instant::now() + Duration::from_secs(5);
    match t.connect("10.77.0.1:12345".parse().unwrap(), None, deadline) {
        Err(TransportError::Unavailable(why)) => {
            assert!(why.contains("RDMA"), "message names the problem: {why}")
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    match t.listen("0.0.0.0:0".parse().unwrap()) {
        Err(TransportError::Unavailable(_)) => {}
        other => panic!("expected Unavailable, got {other:?}"),
    }
    // The AP2 layer passes the error through.
    match Naa::create_with(
        &t,
        1,
        vec![Param::zeroed(8)],
        vec![],
        &NaaOptions::at("10.77.0.1:12345".parse().unwrap()),
    ) {
        Err(Error::Transport(TransportError::Unavailable(_))) => {}
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[test]
fn mrsp_and_one_to_thirty_two_in_place_regions() {
    verbs_test("regions", 120, |ip| {
        let naa = start_naa(ip, SoftNaaConfig::default());
        suite::in_place_regions(|f| connect(naa.local_addr(), f), &[1, 2, 7, 31, 32]);
    });
}

#[test]
fn sizes_from_one_byte_to_eight_mib() {
    verbs_test("sizes", 180, |ip| {
        let naa = start_naa(ip, SoftNaaConfig::default());
        let sizes = [1, 3, 511, 512, 513, 4095, 4096, 65_536, 1 << 20, 8 << 20];
        suite::in_place_sizes(|f| connect(naa.local_addr(), f), &sizes);
    });
}

#[test]
fn separate_inputs_and_outputs_of_different_sizes() {
    verbs_test("separate", 60, |ip| {
        let naa = start_naa(ip, SoftNaaConfig::default());
        suite::separate_inputs_and_outputs(&mut connect(naa.local_addr(), 1));
    });
}

#[test]
fn single_send_internal_regions_and_user_bytes() {
    verbs_test("single_send", 60, |ip| {
        let naa = start_naa(ip, SoftNaaConfig::default());
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
            assert_eq!(out[0], rpc, "internal region keeps its count");
            assert_eq!(out[1], 7, "the single-send input is the one of RPC 1");
            assert_eq!(p1.to_vec(), plus(&original, rpc));
            p0.lock().fill(9);
        }
    });
}

#[test]
fn zero_outputs_and_single_send_only_inputs() {
    verbs_test("zero_outputs", 60, |ip| {
        let naa = start_naa(ip, SoftNaaConfig::default());
        let mut conn = connect(naa.local_addr(), 1);
        let input = Buffer::from_slice(&[1; 100]);
        let id = conn.add_param(&input).unwrap();
        conn.set_single_send(id).unwrap();
        conn.do_mrsp().unwrap();
        for _ in 0..3 {
            let r = conn.do_transfer().unwrap();
            assert_eq!((r.status, r.bytes_received), (ReturnCode::SUCCESS, 0));
        }
    });
}

#[test]
fn two_hundred_rpcs_on_one_connection() {
    verbs_test("repeated", 180, |ip| {
        let naa = start_naa(ip, SoftNaaConfig::default());
        let data = Param::from_vec(pattern(64, 3));
        let mut h = Naa::create_with(
            &VerbsTransport::default(),
            1,
            vec![data.clone()],
            vec![data],
            &NaaOptions::at(naa.local_addr()),
        )
        .unwrap();
        let before = h.input(0).unwrap().to_vec();
        for _ in 0..200 {
            h.invoke().unwrap();
            let s = h.wait().unwrap();
            assert_eq!(
                (s.state, s.naa_error, s.bytes_received),
                (Phase::Finished, ReturnCode::SUCCESS, 64)
            );
        }
        assert_eq!(h.output(0).unwrap().to_vec(), plus(&before, 200));
        h.finalize();
    });
}

#[test]
fn four_concurrent_clients() {
    verbs_test("concurrent", 180, |ip| {
        let naa = start_naa(
            ip,
            SoftNaaConfig {
                max_connections: 4,
                ..SoftNaaConfig::default()
            },
        );
        let options = NaaOptions::at(naa.local_addr());
        suite::concurrent_clients(&VerbsTransport::default(), &options, 4, 30, 4096);
    });
}

/// Sixteen clients at once, both sides without busy-polling, so every wait goes through
/// arming the completion channel and sleeping: a lost wake-up (D-15: the C server hung 8 of
/// 40 clients on Soft-RoCE) would hang a client until the test's limit.
#[test]
fn sixteen_event_driven_clients_never_miss_a_wakeup() {
    verbs_test("event_driven", 240, |ip| {
        let sleepy = VerbsTransport::new(VerbsConfig {
            busy_poll: Duration::ZERO,
            ..VerbsConfig::default()
        });
        let naa = SoftNaa::bind(
            sleepy.clone(),
            SocketAddr::new(ip, 0),
            SoftNaaConfig {
                max_connections: 16,
                ..SoftNaaConfig::default()
            },
            test_kernels(),
        )
        .expect("bind")
        .spawn()
        .expect("spawn");
        let options = NaaOptions {
            rpc_timeout: Duration::from_secs(120),
            ..NaaOptions::at(naa.local_addr())
        };
        suite::concurrent_clients(&sleepy, &options, 16, 20, 100);
    });
}

#[test]
fn poll_and_test_never_block() {
    verbs_test("nonblocking", 60, |ip| {
        let naa = start_naa(ip, SoftNaaConfig::default());
        // AP1: while a 1 s kernel runs, poll() keeps returning "not yet" (it would return the
        // result if it had blocked until the RPC finished).
        let mut conn = connect(naa.local_addr(), SLEEP);
        let buf = Buffer::zeroed(64);
        let id = conn.add_param(&buf).unwrap();
        conn.set_input(id).unwrap();
        conn.set_output(id).unwrap();
        conn.do_mrsp().unwrap();
        conn.set_immediate([100, 0, 0]).unwrap();
        conn.init_transfer().unwrap();
        let started = Instant::now();
        let mut polls = 0;
        while started.elapsed() < Duration::from_millis(300) {
            assert!(conn.poll().unwrap().is_none(), "finished before the kernel");
            polls += 1;
        }
        assert!(polls > 1, "poll() returned only {polls} time(s) in 300 ms");
        assert!(conn.wait().unwrap().status.is_success());
        // AP2: test() until done, then wait() gives the same status.
        let mut h = in_place(&naa, 1, 64);
        h.invoke().unwrap();
        let status = loop {
            if let Some(s) = h.test().unwrap() {
                break s;
            }
        };
        assert!(status.naa_error.is_success());
        assert_eq!(h.wait().unwrap(), status);
    });
}

#[test]
fn unknown_function_code_gets_socket_unavail() {
    verbs_test("socket_unavail", 60, |ip| {
        let naa = start_naa(ip, SoftNaaConfig::default());
        let mut h = in_place(&naa, 99, 128);
        let before = h.input(0).unwrap().to_vec();
        for _ in 0..3 {
            h.invoke().unwrap();
            let s = h.wait().unwrap();
            assert_eq!(
                (s.naa_error, s.bytes_received),
                (ReturnCode::SOCKET_UNAVAIL, 0)
            );
        }
        assert_eq!(h.output(0).unwrap().to_vec(), before);
    });
}

#[test]
fn kernel_over_its_timeout_gets_kernel_timeout() {
    verbs_test("kernel_timeout", 60, |ip| {
        let naa = start_naa(
            ip,
            SoftNaaConfig {
                kernel_timeout: Duration::from_millis(100),
                ..SoftNaaConfig::default()
            },
        );
        let mut conn = connect(naa.local_addr(), SLEEP);
        let buf = Buffer::zeroed(16);
        let id = conn.add_param(&buf).unwrap();
        conn.set_input(id).unwrap();
        conn.set_output(id).unwrap();
        conn.do_mrsp().unwrap();
        conn.set_immediate([50, 0, 0]).unwrap(); // the kernel sleeps 500 ms
        let r = conn.do_transfer().unwrap();
        assert_eq!(
            (r.status, r.bytes_received),
            (ReturnCode::KERNEL_TIMEOUT, 0)
        );
        std::thread::sleep(Duration::from_millis(500));
        conn.set_immediate([0, 0, 0]).unwrap();
        let r = conn.do_transfer().unwrap();
        assert_eq!(
            r.status,
            ReturnCode::SUCCESS,
            "usable after the late kernel"
        );
    });
}

#[test]
fn application_error_code_and_kernel_panic() {
    verbs_test("app_error", 60, |ip| {
        let naa = start_naa(ip, SoftNaaConfig::default());
        let mut h = in_place(&naa, u32::from(APP_ERROR), 32);
        let before = h.input(0).unwrap().to_vec();
        h.invoke().unwrap();
        let s = h.wait().unwrap();
        assert_eq!(s.naa_error.get(), 0x42);
        assert_eq!(h.output(0).unwrap().to_vec(), plus(&before, 1));
        let mut p = in_place(&naa, u32::from(PANIC), 8);
        p.invoke().unwrap();
        assert_eq!(p.wait().unwrap().naa_error, KERNEL_FAILED);
    });
}

#[test]
fn mrsp_errors_reach_the_client() {
    verbs_test("mrsp_errors", 60, |ip| {
        let naa = start_naa(
            ip,
            SoftNaaConfig {
                max_regions: 4,
                max_bytes_per_connection: 1 << 20,
                ..SoftNaaConfig::default()
            },
        );
        let opts = NaaOptions::at(naa.local_addr());
        let params = |n: usize, len: usize| (0..n).map(|_| Param::zeroed(len)).collect::<Vec<_>>();
        let cases = [
            (params(5, 8), MrspErrorCode::TooManyRegions),
            (params(2, 600 << 10), MrspErrorCode::NotEnoughMemory),
        ];
        for (inputs, code) in cases {
            match Naa::create_with(&VerbsTransport::default(), 1, inputs, vec![], &opts) {
                Err(Error::Protocol(ProtocolError::MrspRejected(c))) => assert_eq!(c, code),
                other => panic!("expected MRSP error {code:?}, got {other:?}"),
            }
        }
        Naa::create_with(&VerbsTransport::default(), 1, params(4, 8), vec![], &opts).unwrap();
    });
}

#[test]
fn over_the_connection_limit_is_rejected_with_the_reason() {
    verbs_test("limit", 60, |ip| {
        let naa = start_naa(
            ip,
            SoftNaaConfig {
                max_connections: 1,
                ..SoftNaaConfig::default()
            },
        );
        let first = connect(naa.local_addr(), 1);
        match Connection::connect(
            &VerbsTransport::default(),
            naa.local_addr(),
            None,
            ClientConfig::new(code(1)),
        ) {
            Err(Error::Transport(TransportError::Rejected(reason))) => {
                assert!(reason.contains("overloaded"), "{reason}")
            }
            other => panic!("expected a rejection, got {other:?}"),
        }
        drop(first);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match Connection::connect(
                &VerbsTransport::default(),
                naa.local_addr(),
                None,
                ClientConfig::new(code(1)),
            ) {
                Ok(_) => break,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(e) => panic!("slot never returned: {e}"),
            }
        }
    });
}

#[test]
fn connect_without_a_listener_fails_quickly() {
    verbs_test("no_listener", 30, |ip| {
        // A port nobody listens on, on the local RDMA address: rejected at once.
        let listener = VerbsTransport::default()
            .listen(SocketAddr::new(ip, 0))
            .unwrap();
        let addr = naaice::transport::Listener::local_addr(&listener);
        drop(listener);
        let t = Instant::now();
        let r =
            VerbsTransport::default().connect(addr, None, Instant::now() + Duration::from_secs(10));
        assert!(r.is_err(), "connect to a closed port succeeded");
        assert!(t.elapsed() < Duration::from_secs(10));
        println!(
            "connect to a closed port: {:?} after {:?}",
            r.err(),
            t.elapsed()
        );
    });
}

/// The NAA listens on every address (`::`, as `naaice-swnaa` does by default) and an IPv4
/// client reaches it; `0.0.0.0` works too.
#[test]
fn listening_on_all_addresses() {
    verbs_test("all_addresses", 60, |ip| {
        for any in ["[::]:0", "0.0.0.0:0"] {
            let naa = SoftNaa::bind(
                VerbsTransport::default(),
                any.parse().unwrap(),
                SoftNaaConfig::default(),
                test_kernels(),
            )
            .unwrap_or_else(|e| panic!("bind {any}: {e}"))
            .spawn()
            .unwrap();
            let port = naa.local_addr().port();
            assert_ne!(port, 0, "the bound port is reported");
            let p = Param::from_vec(pattern(300, 4));
            let mut h = Naa::create_with(
                &VerbsTransport::default(),
                2,
                vec![p.clone()],
                vec![p],
                &NaaOptions::at(SocketAddr::new(ip, port)),
            )
            .unwrap_or_else(|e| panic!("connect to {ip}:{port} (NAA on {any}): {e}"));
            h.invoke().unwrap();
            assert!(h.wait().unwrap().naa_error.is_success());
            assert_eq!(h.output(0).unwrap().to_vec(), plus(&pattern(300, 4), 2));
        }
    });
}

/// A connect that nobody answers (rdma_cm would retry the REQ for minutes) ends at the
/// caller's deadline.
#[test]
fn connect_to_a_silent_address_ends_at_the_deadline() {
    verbs_test("silent_address", 60, |ip| {
        let IpAddr::V4(v4) = ip else {
            println!("IPv6 RDMA address: no silent neighbour to pick");
            return;
        };
        let [a, b, c, d] = v4.octets();
        let silent = SocketAddr::new(IpAddr::from([a, b, c, d.wrapping_add(100)]), 12345);
        let t = Instant::now();
        let r = VerbsTransport::default().connect(silent, None, t + Duration::from_secs(2));
        let took = t.elapsed();
        println!("connect to {silent}: {:?} after {took:?}", r.as_ref().err());
        assert!(r.is_err(), "nobody owns {silent}");
        assert!(took < Duration::from_secs(10), "took {took:?}");
    });
}

/// Connects and leaves at once, before the MRSP, many times (the C software NAA crashes on
/// this, D-31); then a normal client still gets served.
#[test]
fn clients_leaving_before_the_mrsp_do_not_hurt_the_naa() {
    verbs_test("leave_before_mrsp", 90, |ip| {
        let naa = start_naa(ip, SoftNaaConfig::default());
        for i in 0..10 {
            let conn = connect(naa.local_addr(), 1);
            if i % 2 == 0 {
                conn.disconnect();
            } else {
                drop(conn);
            }
        }
        // A raw endpoint that connects and is dropped without any protocol at all.
        for _ in 0..3 {
            let ep = VerbsTransport::default()
                .connect(
                    naa.local_addr(),
                    None,
                    Instant::now() + Duration::from_secs(10),
                )
                .unwrap();
            drop(ep);
        }
        let mut h = in_place(&naa, 1, 256);
        let before = h.input(0).unwrap().to_vec();
        h.invoke().unwrap();
        assert!(h.wait().unwrap().naa_error.is_success());
        assert_eq!(h.output(0).unwrap().to_vec(), plus(&before, 1));
    });
}

/// Clients that vanish in every phase: during the MRSP, while their input writes are in
/// flight, and while the NAA writes the outputs back (D-31). Every worker ends and returns
/// its slot (all four slots are usable afterwards), and the NAA keeps serving.
#[test]
fn clients_vanishing_in_every_phase() {
    verbs_test("vanish", 120, |ip| {
        let naa = start_naa(
            ip,
            SoftNaaConfig {
                max_connections: 4,
                ..SoftNaaConfig::default()
            },
        );
        let addr = naa.local_addr();
        let big = pattern(4 << 20, 1);
        let with_region = |fncode: u8, data: &[u8]| {
            let mut conn = connect_retrying(addr, fncode);
            let b = Buffer::from_slice(data);
            let id = conn.add_param(&b).unwrap();
            conn.set_input(id).unwrap();
            conn.set_output(id).unwrap();
            conn
        };
        for round in 0..3 {
            // During the MRSP.
            let mut conn = with_region(1, &big[..4096]);
            conn.init_mrsp().unwrap();
            drop(conn);
            // While 4 MiB of input is being written.
            let mut conn = with_region(1, &big);
            conn.do_mrsp().unwrap();
            conn.init_transfer().unwrap();
            drop(conn);
            // While the NAA writes 4 MiB back.
            let mut conn = with_region(2, &big);
            conn.do_mrsp().unwrap();
            conn.init_transfer().unwrap();
            std::thread::sleep(Duration::from_millis(10 + 20 * round));
            conn.disconnect();
        }
        let mut handles: Vec<_> = (0..4)
            .map(|_| {
                let mut conn = with_region(1, &big[..4096]);
                conn.do_mrsp().unwrap();
                conn
            })
            .collect();
        for conn in &mut handles {
            for _ in 0..2 {
                assert!(conn.do_transfer().unwrap().status.is_success());
            }
        }
    });
}

/// Connects, retrying while the NAA is at its connection limit (workers of clients that just
/// left may still be finishing).
fn connect_retrying(addr: SocketAddr, fncode: u8) -> Conn {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match Connection::connect(
            &VerbsTransport::default(),
            addr,
            None,
            ClientConfig::new(code(fncode)),
        ) {
            Ok(c) => return c,
            Err(Error::Transport(TransportError::Rejected(_))) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("connect: {e}"),
        }
    }
}

/// A client that disconnects while its RPC runs on the NAA (and one that leaves right after
/// the MRSP); the NAA finishes cleanly and serves the next client.
#[test]
fn client_disconnect_mid_rpc_and_the_naa_continues() {
    verbs_test("disconnect_mid_rpc", 90, |ip| {
        let naa = start_naa(
            ip,
            SoftNaaConfig {
                max_connections: 3,
                ..SoftNaaConfig::default()
            },
        );
        for round in 0..3 {
            let mut conn = connect(naa.local_addr(), SLEEP);
            let buf = Buffer::from_slice(&pattern(64 << 10, round));
            let id = conn.add_param(&buf).unwrap();
            conn.set_input(id).unwrap();
            conn.set_output(id).unwrap();
            conn.do_mrsp().unwrap();
            if round == 2 {
                drop(conn); // after the MRSP, before any RPC
                continue;
            }
            conn.set_immediate([20, 0, 0]).unwrap(); // 200 ms kernel
            conn.init_transfer().unwrap();
            std::thread::sleep(Duration::from_millis(50));
            conn.disconnect(); // while the kernel runs
        }
        // Every slot must come back (the workers end once their kernels return), and the NAA
        // must still serve: three clients at once.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut served = Vec::new();
        while served.len() < 3 {
            let p = Param::from_vec(pattern(512, 1));
            match Naa::create_with(
                &VerbsTransport::default(),
                1,
                vec![p.clone()],
                vec![p],
                &NaaOptions::at(naa.local_addr()),
            ) {
                Ok(mut h) => {
                    h.invoke().unwrap();
                    assert!(h.wait().unwrap().naa_error.is_success());
                    // Keep it open: the next one needs another slot.
                    served.push(h);
                }
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => panic!("the NAA did not recover: {e}"),
            }
        }
    });
}

/// The server disconnects (shutdown) while a client waits for its reply: the client gets an
/// error, not a hang, also while it busy-polls (a 60 s busy-poll phase still looks at
/// connection events).
#[test]
fn naa_shutdown_mid_rpc_fails_the_client() {
    verbs_test("server_gone", 120, |ip| {
        let spinning = VerbsConfig {
            busy_poll: Duration::from_secs(60),
            ..VerbsConfig::default()
        };
        for config in [VerbsConfig::default(), spinning] {
            let naa = start_naa(ip, SoftNaaConfig::default());
            let mut conn = Connection::connect(
                &VerbsTransport::new(config.clone()),
                naa.local_addr(),
                None,
                ClientConfig::new(code(SLEEP)),
            )
            .unwrap();
            let buf = Buffer::zeroed(64);
            let id = conn.add_param(&buf).unwrap();
            conn.set_input(id).unwrap();
            conn.set_output(id).unwrap();
            conn.do_mrsp().unwrap();
            conn.set_immediate([100, 0, 0]).unwrap(); // 1 s kernel
            conn.init_transfer().unwrap();
            let stopper = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                naa.shutdown();
            });
            let t = Instant::now();
            let r = conn.wait();
            stopper.join().unwrap();
            assert!(
                r.is_err(),
                "RPC succeeded although the NAA went away: {r:?}"
            );
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "noticed after {:?} ({config:?})",
                t.elapsed()
            );
        }
    });
}
