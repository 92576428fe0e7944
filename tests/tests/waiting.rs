//! How a wait spins over the software transport: under the default (adaptive) policy a
//! thread waiting for its RPC's reply spins while the connections on this machine leave every
//! busy thread a core, and sleeps at once when they outnumber the cores; one thread waiting
//! for many handles at once (`naa_set::wait_any`) spins by the same rule. This binary holds a
//! single test, so that no other test's connections change the count while it runs.

use std::time::Duration;

use naaice::core::ClientConfig;
use naaice::naa_set;
use naaice::swnaa::SoftNaaConfig;
use naaice::transport::soft::{SoftEndpoint, SoftTransport};
use naaice::waiting::{cpu_demand, cpus};
use naaice::{Buffer, Connection, Naa, NaaOptions, Param};
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

/// Voluntary context switches of this process's software-transport NIC threads, together.
fn nic_thread_switches() -> u64 {
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
    tasks
        .filter_map(|t| t.ok())
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .is_ok_and(|c| c.trim() == "naaice-soft-nic")
        })
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .filter_map(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
        })
        .sum()
}

/// Wake-ups of this thread per RPC over [`RPCS`] steady RPCs (after a warm-up in which the
/// connection's waiting learns the new situation).
fn wake_ups_per_rpc(conn: &mut Connection<SoftEndpoint>) -> f64 {
    wake_ups_per(|| {
        conn.init_transfer().expect("start an RPC");
        let result = conn.wait().expect("wait for the RPC");
        assert!(result.status.is_success(), "{result:?}");
    })
}

/// Wake-ups of this thread per call of `rpc` over [`RPCS`] calls, after 500 of warm-up.
fn wake_ups_per(mut rpc: impl FnMut()) -> f64 {
    (0..500).for_each(|_| rpc());
    let before = voluntary_switches();
    (0..RPCS).for_each(|_| rpc());
    (voluntary_switches() - before) as f64 / f64::from(RPCS)
}

/// Wake-ups per RPC of one handle waited for with [`naa_set::wait_any`] or, if `all`,
/// [`naa_set::wait_all`] (one thread over many handles, here one).
fn wake_ups_per_set_wait(naa: &mut Naa<SoftEndpoint>, all: bool) -> f64 {
    wake_ups_per(|| {
        naa.invoke().expect("start an RPC");
        let status = if all {
            let mut outcomes = naa_set::wait_all([&mut *naa]);
            outcomes.pop().flatten().expect("an RPC in flight")
        } else {
            naa_set::wait_any([&mut *naa])
                .expect("an RPC in flight")
                .result
        };
        let status = status.expect("the RPC");
        assert!(status.naa_error.is_success(), "{status:?}");
    })
}

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

/// Waits (up to 5 s) until the connections closed on both ends no longer count.
fn until_demand_at_most(cpus: usize, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while demand() > cpus {
        assert!(
            std::time::Instant::now() < deadline,
            "{} busy threads 5 s after {what}",
            cpu_demand()
        );
    }
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
    // One handle waited for as a set (one thread over many handles, `wait_any` and
    // `wait_all`) spins like a single connection's wait.
    if demand() + 2 <= cpus() {
        let mut handle = handle_on(naa.local_addr());
        for (all, name) in [(false, "wait_any"), (true, "wait_all")] {
            let woken = wake_ups_per_set_wait(&mut handle, all);
            assert!(
                woken < 0.5,
                "{name} with {} busy threads on {} CPUs slept ({woken:.2} wake-ups per RPC): \
                 it should spin",
                cpu_demand(),
                cpus()
            );
        }
        drop(handle);
        until_demand_at_most(cpus() - 2, "the handle was finalized");
    }

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

    // A set wait that sleeps wakes its own thread on input, not the transport's NIC thread
    // first (which would then wake it: two wake-ups per RPC).
    let mut handle = handle_on(naa.local_addr());
    let nic_before = nic_thread_switches();
    let woken = wake_ups_per_set_wait(&mut handle, false);
    let nic_woken = (nic_thread_switches() - nic_before) as f64 / f64::from(RPCS + 500);
    assert!(
        woken > 0.5,
        "the set waits spun ({woken:.2} wake-ups per RPC)"
    );
    assert!(
        nic_woken < 0.5,
        "the NIC threads woke {nic_woken:.2} times per RPC of a sleeping set wait: its own \
         thread should read"
    );
    drop(handle);

    // The idle connections close: once the NAA has closed its ends too, spinning resumes.
    drop(idle);
    if spun {
        until_demand_at_most(cpus(), "the idle connections closed");
    }
    spins(&mut conn, "after the idle connections closed");
    drop(naa);
}
