//! End-to-end RPCs over the verbs transport: the software NAA and its clients in one process,
//! over a real RDMA device (Soft-RoCE in a VM in CI): MRSP, multi-region RPCs, single-send and
//! internal regions, repeated RPCs, concurrent clients, every error code, the connection limit,
//! and clients that disconnect before the MRSP or in the middle of an RPC.
//!
//! The address is `NAAICE_RDMA_ADDR` or else `RXE_VM_ADDR` (an IP of an RDMA netdev). The tests
//! that need an RDMA device are `#[ignore]`d, so that a machine without one reports them as
//! ignored rather than passed; run them with `-- --include-ignored` where there is one (the
//! Soft-RoCE VM stage does). Run that way without a device they print `SKIP`, and fail with
//! `NAAICE_REQUIRE_RDMA=1` (set it wherever RDMA is expected, so a broken setup cannot pass
//! silently). On a machine without RDMA devices, one test checks that the transport fails
//! with a clear [`TransportError::Unavailable`].
//!
//! Run in the Soft-RoCE VM, e.g.:
//! `NAAICE_REQUIRE_RDMA=1 RXE_VM_PASS_ENV=NAAICE_REQUIRE_RDMA
//!  CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER=<run-in-rxe-vm.sh>
//!  cargo test -p naaice-tests --features verbs --test verbs_rpc -- --include-ignored`
#![cfg(feature = "verbs")]

use std::net::{IpAddr, SocketAddr};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use naaice::core::ClientConfig;
use naaice::swnaa::{SoftNaa, SoftNaaConfig, SoftNaaHandle};
use naaice::transport::verbs::{VerbsEndpoint, VerbsTransport, device_names};
use naaice::transport::waiting::{WaitPolicy, cpu_demand};
use naaice::transport::{ConnectionEvent, Endpoint, Incoming, Listener, Transport, TransportError};
use naaice::{Buffer, Connection, Error, Naa, NaaOptions, Param};
use naaice_tests::suite::{self, Site, pattern, plus};
use naaice_tests::{SLEEP, code, test_kernels, wait_through_shutdown};

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

/// The verbs transport on `ip`.
fn site(ip: IpAddr) -> Site {
    Site {
        transport: VerbsTransport::default().into(),
        ip,
        wait: WaitPolicy::default(),
        in_process: false,
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
        // Without rdma-core the message names its packages; with rdma-core but no device,
        // the missing device; both name the way to a software NAA.
        Err(TransportError::Unavailable(why)) => assert!(
            (why.contains("rdma-core is not installed") || why.contains("no usable RDMA device"))
                && why.contains("software transport"),
            "message names the problem and the fix: {why}"
        ),
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

// The shared bodies of `naaice_tests::suite`, each a test over verbs.
naaice_tests::suite_tests!(
    ignore = "needs an RDMA device: run with --include-ignored where there is one",
    |name, body: fn(&Site)| { verbs_test(name, 60, move |ip| body(&site(ip))) }
);

#[test]
#[ignore = "needs an RDMA device: run with --include-ignored where there is one"]
fn auto_uses_verbs_where_the_naa_serves_it_and_falls_back_to_soft() {
    use naaice::transport::{AnyTransport, TransportKind};
    verbs_test("auto_transport", 60, |ip| {
        let auto = AnyTransport::default();
        let serve = |t: AnyTransport| {
            SoftNaa::bind(
                t,
                SocketAddr::new(ip, 0),
                SoftNaaConfig::default(),
                test_kernels(),
            )
            .expect("bind the software NAA")
        };
        // A server on `auto` serves both transports on one port number.
        let both = serve(auto.clone());
        let served = both.served();
        assert!(served.iter().all(|s| s.addr.is_ok()), "{served:?}");
        let both = both.spawn().expect("spawn");
        let deadline = || Instant::now() + Duration::from_secs(10);
        let ep = auto
            .connect(both.local_addr(), None, deadline())
            .expect("auto connect");
        assert_eq!(
            ep.kind(),
            TransportKind::Verbs,
            "auto prefers verbs where it reaches the NAA"
        );
        drop(ep);
        let p = Param::from_vec(pattern(4096, 3));
        let mut h: Naa = Naa::create_with(
            &auto,
            2,
            vec![p.clone()],
            vec![p],
            &NaaOptions::at(both.local_addr()),
        )
        .expect("create over auto");
        h.invoke().expect("invoke");
        assert!(h.wait().expect("wait").naa_error.is_success());
        assert_eq!(h.output(0).unwrap().to_vec(), plus(&pattern(4096, 3), 2));
        h.finalize();
        // A software-transport-only NAA: auto falls back to soft after verbs finds no listener.
        let soft_only = serve("soft".parse().unwrap()).spawn().expect("spawn");
        let started = Instant::now();
        let ep = auto
            .connect(soft_only.local_addr(), None, deadline())
            .expect("auto falls back to soft");
        assert_eq!(ep.kind(), TransportKind::Soft);
        println!(
            "auto: verbs refused, soft connected after {:?}",
            started.elapsed()
        );
    });
}

#[test]
#[ignore = "needs an RDMA device: run with --include-ignored where there is one"]
fn mrsp_and_one_to_thirty_two_in_place_regions() {
    verbs_test("regions", 120, |ip| {
        suite::in_place_regions(&site(ip), &[1, 2, 7, 31, 32])
    });
}
#[test]
#[ignore = "needs an RDMA device: run with --include-ignored where there is one"]
fn sizes_from_one_byte_to_eight_mib() {
    verbs_test("sizes", 180, |ip| {
        let sizes = [1, 3, 511, 512, 513, 4095, 4096, 65_536, 1 << 20, 8 << 20];
        suite::in_place_sizes(&site(ip), &sizes);
    });
}
#[test]
#[ignore = "needs an RDMA device: run with --include-ignored where there is one"]
fn two_hundred_rpcs_on_one_connection() {
    verbs_test("repeated", 180, |ip| suite::repeated_rpcs(&site(ip), 200));
}
#[test]
#[ignore = "needs an RDMA device: run with --include-ignored where there is one"]
fn four_concurrent_clients() {
    verbs_test("concurrent", 180, |ip| {
        suite::concurrent_clients(&site(ip), 4, 30, 4096)
    });
}
/// Sixteen clients at once, both sides sleeping at once (no spinning), so every wait goes through
/// arming the completion channel and sleeping: a lost wake-up (D-15: the C server hung 8 of
/// 40 clients on Soft-RoCE) would hang a client until the test's limit.
#[test]
#[ignore = "needs an RDMA device: run with --include-ignored where there is one"]
fn sixteen_event_driven_clients_never_miss_a_wakeup() {
    verbs_test("event_driven", 240, |ip| {
        let site = Site {
            wait: WaitPolicy::Sleep,
            ..site(ip)
        };
        suite::concurrent_clients(&site, 16, 20, 100);
    });
}
#[test]
#[ignore = "needs an RDMA device: run with --include-ignored where there is one"]
fn connect_without_a_listener_fails_quickly() {
    verbs_test("no_listener", 30, |ip| {
        // A port nobody listens on, on the local RDMA address: rejected at once.
        let listener = VerbsTransport::default()
            .listen(SocketAddr::new(ip, 0))
            .unwrap();
        let addr = Listener::local_addr(&listener);
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
#[ignore = "needs an RDMA device: run with --include-ignored where there is one"]
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

/// The server endpoint's liveness probe, asked from another thread while nobody polls the
/// endpoint (what the NAA's admission does when its slots seem full): not over while the
/// client is connected, over once the client disconnected, and still over once the endpoint
/// is gone.
#[test]
#[ignore = "needs an RDMA device: run with --include-ignored where there is one"]
fn liveness_sees_the_client_leave_without_the_endpoint_being_polled() {
    verbs_test("liveness", 60, |ip| {
        let soon = || Instant::now() + Duration::from_secs(20);
        let mut listener = VerbsTransport::default()
            .listen(SocketAddr::new(ip, 0))
            .expect("listen over verbs");
        let addr = listener.local_addr();
        let client = std::thread::spawn(move || {
            VerbsTransport::default()
                .connect(addr, None, soon())
                .expect("connect over verbs")
        });
        let incoming = listener
            .next_request(soon())
            .expect("listen")
            .expect("a connection request");
        let mut server = incoming.accept().expect("accept");
        let mut client = client.join().unwrap();
        // The server learns of ESTABLISHED through its events, as a worker does.
        let deadline = soon();
        while server.poll_event() != Some(ConnectionEvent::Established) {
            assert!(Instant::now() < deadline, "no ESTABLISHED on the server");
            std::thread::sleep(Duration::from_millis(1));
        }
        let probe = server.liveness().expect("the verbs transport has a probe");
        let asked = std::thread::spawn({
            let probe = probe.clone();
            move || probe.is_over()
        });
        assert!(!asked.join().unwrap(), "over while the client is connected");
        client.disconnect();
        let deadline = soon();
        while !probe.is_over() {
            assert!(
                Instant::now() < deadline,
                "the client's disconnect was not seen"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(server);
        assert!(probe.is_over());
    });
}

/// A connect that nobody answers (rdma_cm would retry the REQ for minutes) ends at the
/// caller's deadline.
#[test]
#[ignore = "needs an RDMA device: run with --include-ignored where there is one"]
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
#[ignore = "needs an RDMA device: run with --include-ignored where there is one"]
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
#[ignore = "needs an RDMA device: run with --include-ignored where there is one"]
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
#[ignore = "needs an RDMA device: run with --include-ignored where there is one"]
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

/// When a newcomer needs a slot, the connection idle the longest gives way, not an older one
/// that keeps working: every RPC counts as activity (over verbs the answer's completion comes
/// back within the post, so nothing between two RPCs looks busy but the RPC itself).
#[test]
#[ignore = "needs an RDMA device: run with --include-ignored where there is one"]
fn a_connection_in_use_keeps_its_slot_however_old() {
    verbs_test("in_use_keeps_its_slot", 60, |ip| {
        let grace = Duration::from_millis(500);
        let naa = start_naa(
            ip,
            SoftNaaConfig {
                max_connections: 2,
                evict_idle_after: Some(grace),
                ..SoftNaaConfig::default()
            },
        );
        let rpc = |h: &mut Naa<VerbsEndpoint>| -> naaice::Result<()> {
            h.invoke()?;
            assert!(h.wait()?.naa_error.is_success());
            Ok(())
        };
        let mut b = in_place(&naa, 1, 64);
        rpc(&mut b).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let mut a = in_place(&naa, 1, 64);
        rpc(&mut a).unwrap();
        let until = Instant::now() + grace + Duration::from_millis(300);
        while Instant::now() < until {
            rpc(&mut b).unwrap();
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut c = in_place(&naa, 1, 64);
        rpc(&mut c).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        rpc(&mut b).expect("b, in use all along, keeps its connection");
        let error = rpc(&mut a).expect_err("a, idle the longest, gave way");
        assert!(
            error.to_string().contains("disconnect"),
            "unclear error: {error}"
        );
    });
}

/// A connection to the SLEEP kernel at `addr` with `config`, one in-place 64-byte region, MRSP
/// done (the region is returned: it must outlive the connection).
fn sleep_connection(addr: SocketAddr, wait: WaitPolicy) -> (Conn, Buffer) {
    let mut conn = Connection::connect(
        &VerbsTransport::default(),
        addr,
        None,
        ClientConfig::new(code(SLEEP)),
    )
    .unwrap();
    conn.set_wait(wait);
    let buf = Buffer::zeroed(64);
    let id = conn.add_param(&buf).unwrap();
    conn.set_input(id).unwrap();
    conn.set_output(id).unwrap();
    conn.do_mrsp().unwrap();
    (conn, buf)
}

/// The server disconnects (shutdown) while a client waits for its reply: the client gets an
/// error, not a hang, also while it polls without ever sleeping (polling still looks at
/// connection events).
#[test]
#[ignore = "needs an RDMA device: run with --include-ignored where there is one"]
fn naa_shutdown_mid_rpc_fails_the_client() {
    verbs_test("server_gone", 120, |ip| {
        for wait in [WaitPolicy::default(), WaitPolicy::Poll] {
            let naa = start_naa(ip, SoftNaaConfig::default());
            let (mut conn, _buf) = sleep_connection(naa.local_addr(), wait);
            conn.set_immediate([100, 0, 0]).unwrap(); // 1 s kernel
            conn.init_transfer().unwrap();
            let (r, took) = wait_through_shutdown(&mut conn, naa, Duration::from_millis(100));
            assert!(
                r.is_err(),
                "RPC succeeded although the NAA went away: {r:?}"
            );
            assert!(
                took < Duration::from_secs(30),
                "noticed after {took:?} ({wait})"
            );
        }
    });
}

/// A connection counts in the machine's CPU demand while it lives: with the NAA in this
/// process, one busy thread per end. Other tests of this binary open and close connections
/// meanwhile: a few tries, one of which must see exactly the two ends come and go.
#[test]
#[ignore = "needs an RDMA device: run with --include-ignored where there is one"]
fn a_connection_counts_one_busy_thread_per_end_while_it_lives() {
    verbs_test("cpu_demand", 60, |ip| {
        let naa = start_naa(ip, SoftNaaConfig::default());
        let settle = || {
            std::thread::sleep(Duration::from_millis(5));
            cpu_demand()
        };
        let seen: Vec<(usize, usize, usize)> = (0..8)
            .map(|_| {
                let before = settle();
                let conn = connect(naa.local_addr(), 1);
                let during = settle();
                drop(conn);
                // The NAA closes its end when it notices (under emulation, within a second).
                let until = Instant::now() + Duration::from_secs(2);
                let mut after = settle();
                while after != before && Instant::now() < until {
                    after = settle();
                }
                (before, during, after)
            })
            .collect();
        assert!(
            seen.iter().any(|&(b, d, a)| d == b + 2 && a == b),
            "demand before / during / after a connection: {seen:?}"
        );
    });
}
