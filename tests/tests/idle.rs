//! An idle connection arms no timer: once its RPCs are over, neither side's threads (the
//! NIC threads of both ends, the software NAA's worker) wake up until something happens to
//! it, and the NAA still notices at once when it must act (an eviction, its shutdown). This
//! counts wake-ups, which only timers cause on an idle connection however busy the machine
//! is: it checks behaviour, not speed. This binary holds a single test, so that no other
//! test's threads are counted.

use std::time::{Duration, Instant};

use naaice::swnaa::SoftNaaConfig;
use naaice::transport::soft::{SoftEndpoint, SoftTransport};
use naaice::{Naa, NaaOptions, Param};
use naaice_tests::start_naa;

/// Voluntary context switches (wake-ups after sleeping) of this process's threads named
/// `names`, together.
fn wake_ups(names: &[&str]) -> u64 {
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
    tasks
        .filter_map(|t| t.ok())
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| names.contains(&c.trim()))
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

fn handle(addr: std::net::SocketAddr) -> Naa<SoftEndpoint> {
    let p = Param::zeroed(64);
    let mut h = Naa::create_with(
        &SoftTransport::default(),
        3,
        vec![p.clone()],
        vec![p],
        &NaaOptions::at(addr),
    )
    .expect("create a handle");
    h.invoke().expect("invoke");
    assert!(h.wait().expect("wait").naa_error.is_success());
    h
}

#[test]
fn idle_connections_do_not_wake_their_threads_and_the_naa_still_acts_at_once() {
    const CONNECTIONS: usize = 4;
    let naa = start_naa(SoftNaaConfig {
        max_connections: CONNECTIONS,
        evict_idle_after: Some(Duration::from_millis(500)),
        ..SoftNaaConfig::default()
    });
    let mut handles: Vec<_> = (0..CONNECTIONS).map(|_| handle(naa.local_addr())).collect();
    // The hand-over after the last RPC, and the first slice of each sleeping wait.
    std::thread::sleep(Duration::from_millis(500));
    let threads = ["naaice-soft-nic", "naaice-worker"];
    let before = wake_ups(&threads);
    std::thread::sleep(Duration::from_secs(1));
    let woken = wake_ups(&threads) - before;
    // 12 threads (2 NIC threads per connection, a worker each); formerly ~500 a second each.
    assert!(
        woken <= 3,
        "{woken} wake-ups of the idle connections' threads in 1 s"
    );

    // Every slot is taken and idle beyond the grace period: a newcomer evicts the oldest,
    // whose worker, asleep without a timer, is woken to leave.
    let t = Instant::now();
    let mut newcomer = handle(naa.local_addr());
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "the newcomer waited {:?}",
        t.elapsed()
    );
    newcomer.invoke().expect("invoke");
    assert!(newcomer.wait().expect("wait").naa_error.is_success());
    let evicted = handles
        .iter_mut()
        .map(|h| h.invoke().and_then(|()| h.wait()))
        .filter(Result::is_err)
        .count();
    // (One, unless a connect attempt of the newcomer failed after its admission on a loaded
    // machine and its retry evicted another.)
    assert!(evicted >= 1, "no idle connection gave way");

    // Shutdown wakes the sleeping workers: it returns while every client is still connected.
    let t = Instant::now();
    drop(naa);
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "shutdown took {:?}",
        t.elapsed()
    );
    drop((handles, newcomer));
}
