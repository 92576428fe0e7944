//! An idle connection arms no timer (the software NAA's worker sleeps between RPCs without
//! one; the NIC thread's hand-over timer is unit-tested in `transport::soft::queue_pair`),
//! and the NAA still acts at once when it must: a newcomer evicts an idle connection whose
//! worker sleeps, and shutdown ends workers that sleep. How much idle connections cost is
//! measured by `naaice-bench --idle`, not here.

use std::time::{Duration, Instant};

use naaice::swnaa::SoftNaaConfig;
use naaice::transport::soft::{SoftEndpoint, SoftTransport};
use naaice::{Naa, NaaOptions, Param};
use naaice_tests::start_naa;

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
fn workers_of_idle_connections_sleep_until_woken_to_leave() {
    const CONNECTIONS: usize = 4;
    let naa = start_naa(SoftNaaConfig {
        max_connections: CONNECTIONS,
        evict_idle_after: Some(Duration::from_millis(500)),
        ..SoftNaaConfig::default()
    });
    let mut handles: Vec<_> = (0..CONNECTIONS).map(|_| handle(naa.local_addr())).collect();
    // Every connection is idle beyond the grace period, its worker asleep without a timer.
    std::thread::sleep(Duration::from_millis(700));
    // Every slot is taken: a newcomer evicts the oldest, whose worker is woken to leave (a
    // worker that slept on would serve the evicted client's next RPC).
    let mut newcomer = handle(naa.local_addr());
    newcomer.invoke().expect("invoke");
    assert!(newcomer.wait().expect("wait").naa_error.is_success());
    // The evicted worker leaves once nothing is pending: an RPC of its client that arrived
    // before the worker ran is served first (on a loaded machine it may be several, one per
    // round here). Rounds of one RPC per old handle until one fails, 10 s at most.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut evicted = 0;
    while evicted == 0 && Instant::now() < deadline {
        evicted = handles
            .iter_mut()
            .map(|h| h.invoke().and_then(|()| h.wait()))
            .filter(Result::is_err)
            .count();
    }
    // (One, unless a connect attempt of the newcomer failed after its admission on a loaded
    // machine and its retry evicted another.)
    assert!(evicted >= 1, "no idle connection gave way within 10 s");

    // Shutdown wakes the sleeping workers: it returns while every client is still connected
    // (a worker that slept on would hold it for the hour an idle wait lasts; 30 s only guards
    // against that hang).
    let t = Instant::now();
    drop(naa);
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "shutdown hung ({:?}): a sleeping worker was not woken",
        t.elapsed()
    );
    drop((handles, newcomer));
}
