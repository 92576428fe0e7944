//! What the adaptive waiting policy counts, end to end over the software transport: each open
//! connection end in this process is one busy thread of the CPU demand while it lives, and
//! RPCs complete whichever side of the spin-or-sleep decision the demand puts them on, for
//! single handles and for sets (`naa_set::wait_any` / `wait_all`). The decisions themselves
//! are unit-tested with the CPUs' state injected (`naaice::transport::waiting`); how long waits take is
//! measured by `naaice-bench`, not here. This binary holds a single test, so that no other
//! test's connections change the count while it runs.

use std::time::{Duration, Instant};

use naaice::client::naa_set;
use naaice::core::ClientConfig;
use naaice::swnaa::SoftNaaConfig;
use naaice::transport::soft::{SoftEndpoint, SoftTransport};
use naaice::transport::waiting::{cores_to_spare, cpu_demand, cpus, launcher_local_tasks};
use naaice::{Buffer, Connection, Naa, NaaOptions, Param};
use naaice_tests::{code, in_place_connection, start_naa};

/// The empty kernel.
const EMPTY: u8 = 3;

/// A middleware handle of the empty kernel on the NAA at `addr` (one 64-byte input).
fn handle_on(addr: std::net::SocketAddr) -> Naa<SoftEndpoint> {
    Naa::create_with(
        &SoftTransport::default(),
        EMPTY.into(),
        vec![Param::zeroed(64)],
        vec![],
        &NaaOptions::at(addr),
    )
    .expect("create a handle on the in-process NAA")
}

/// Waits (up to 10 s: the NAA closes its end on its own thread) until the demand is `want`.
fn until_demand(want: usize, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while cpu_demand() != want {
        assert!(
            Instant::now() < deadline,
            "demand {} 10 s after {what}, expected {want}",
            cpu_demand()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `n` RPCs on `conn` and on `handle` (waited for as a set, `wait_any` then `wait_all`).
fn rpcs(conn: &mut Connection<SoftEndpoint>, handle: &mut Naa<SoftEndpoint>, n: usize) {
    for i in 0..n {
        conn.init_transfer().expect("start an RPC");
        let result = conn.wait().expect("wait for the RPC");
        assert!(result.status.is_success(), "{result:?}");
        handle.invoke().expect("start a set's RPC");
        let status = if i % 2 == 0 {
            naa_set::wait_any([&mut *handle])
                .expect("an RPC in flight")
                .result
        } else {
            naa_set::wait_all([&mut *handle])
                .pop()
                .flatten()
                .expect("an RPC in flight")
        };
        assert!(status.expect("the RPC").naa_error.is_success());
    }
}

#[test]
fn open_connection_ends_count_as_busy_threads_and_rpcs_complete_either_way() {
    let naa = start_naa(SoftNaaConfig {
        max_connections: 1024,
        ..SoftNaaConfig::default()
    });
    let connect = || {
        in_place_connection(naa.local_addr(), ClientConfig::new(code(EMPTY)), 64)
            .expect("connect to the in-process NAA")
    };
    // Nothing open: only the job's other tasks on this node count.
    let base = launcher_local_tasks() - 1;
    until_demand(base, "start");

    // Client and NAA ends of one connection, both in this process: two busy threads.
    let (mut conn, _buf) = connect();
    until_demand(base + 2, "one connection");
    let mut handle = handle_on(naa.local_addr());
    until_demand(base + 4, "a handle");
    rpcs(&mut conn, &mut handle, 200);

    // Idle connections until the busy threads outnumber the CPUs: waits then sleep at once,
    // and RPCs still complete (on both sides of the decision).
    let mut idle: Vec<(Connection<SoftEndpoint>, Buffer)> = Vec::new();
    while cpu_demand() <= cpus() {
        idle.push(connect());
        until_demand(base + 4 + 2 * idle.len(), "another connection");
    }
    assert!(!cores_to_spare());
    rpcs(&mut conn, &mut handle, 200);

    // Closed connections stop counting once the NAA has closed its ends too.
    drop(idle);
    until_demand(base + 4, "the idle connections closed");
    rpcs(&mut conn, &mut handle, 200);
    drop(handle);
    drop(conn);
    until_demand(base, "everything closed");
    drop(naa);
}
