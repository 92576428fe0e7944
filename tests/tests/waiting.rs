//! How a wait spins over the software transport: under the default (adaptive) policy a
//! thread waiting for its RPC's reply spins while the connections on this machine leave every
//! busy thread a core, and sleeps at once when they outnumber the cores. This binary holds a
//! single test, so that no other test's connections change the count while it runs.

use std::time::Duration;

use naaice::core::ClientConfig;
use naaice::swnaa::SoftNaaConfig;
use naaice::transport::soft::SoftEndpoint;
use naaice::waiting::{cpu_demand, cpus};
use naaice::{Buffer, Connection};
use naaice_tests::{code, in_place_connection, start_naa};

/// The empty kernel: the RPC's time is the transport's.
const EMPTY: u8 = 3;
/// RPCs per measurement.
const RPCS: u32 = 2000;

/// Voluntary context switches of the calling thread: how often it slept and was woken.
fn voluntary_switches() -> u64 {
    let status = std::fs::read_to_string("/proc/thread-self/status").expect("thread status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("voluntary_ctxt_switches in /proc/thread-self/status")
}

/// Wake-ups of this thread per RPC over [`RPCS`] steady RPCs (after a warm-up in which the
/// connection's waiting learns the new situation).
fn wake_ups_per_rpc(conn: &mut Connection<SoftEndpoint>) -> f64 {
    let mut rpc = || {
        conn.init_transfer().expect("start an RPC");
        let result = conn.wait().expect("wait for the RPC");
        assert!(result.status.is_success(), "{result:?}");
    };
    (0..500).for_each(|_| rpc());
    let before = voluntary_switches();
    (0..RPCS).for_each(|_| rpc());
    (voluntary_switches() - before) as f64 / f64::from(RPCS)
}

/// The demand as the census reads it now (it reuses a reading for a millisecond).
fn demand() -> usize {
    std::thread::sleep(Duration::from_millis(5));
    cpu_demand()
}

#[test]
fn adaptive_waits_spin_only_while_the_connections_leave_a_core_to_spare() {
    let naa = start_naa(SoftNaaConfig {
        max_connections: 256,
        ..SoftNaaConfig::default()
    });
    let connect = || {
        in_place_connection(naa.local_addr(), ClientConfig::new(code(EMPTY)), 64)
            .expect("connect to the in-process NAA")
    };
    let (mut conn, _buf) = connect();
    // Client and NAA ends of one connection, both in this process: two busy threads.
    let spins = |conn: &mut Connection<SoftEndpoint>, when: &str| -> bool {
        if demand() > cpus() {
            eprintln!(
                "{when}: {} busy threads on {} CPUs (other connections on this machine): \
                 spinning not checked",
                cpu_demand(),
                cpus()
            );
            return false;
        }
        let woken = wake_ups_per_rpc(conn);
        assert!(
            woken < 0.5,
            "{when}: with {} busy threads on {} CPUs the waits slept ({woken:.2} wake-ups per \
             RPC): they should spin",
            cpu_demand(),
            cpus()
        );
        true
    };
    let spun = spins(&mut conn, "one connection");

    // Idle connections until the busy threads outnumber the CPUs: every wait sleeps.
    let mut idle: Vec<(Connection<SoftEndpoint>, Buffer)> = Vec::new();
    while demand() <= cpus() {
        idle.push(connect());
    }
    let woken = wake_ups_per_rpc(&mut conn);
    assert!(
        woken > 0.5,
        "with {} busy threads on {} CPUs the waits spun ({woken:.2} wake-ups per RPC): they \
         should sleep",
        cpu_demand(),
        cpus()
    );

    // The idle connections close: once the NAA has closed its ends too, spinning resumes.
    drop(idle);
    if spun {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while demand() > cpus() {
            assert!(
                std::time::Instant::now() < deadline,
                "{} busy threads 5 s after the idle connections closed",
                cpu_demand()
            );
        }
    }
    spins(&mut conn, "after the idle connections closed");
    drop(naa);
}
