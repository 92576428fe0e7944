//! The software NAA's metrics endpoint (`SoftNaaConfig::metrics`): what a known workload
//! leaves in the exposition, read over HTTP and parsed with a Prometheus parser crate
//! (`prometheus-parse`), and what the endpoint answers to other requests.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use naaice::swnaa::{METRIC_NAMES, METRICS_PATH, SoftNaaConfig, SoftNaaHandle};
use naaice::transport::soft::{SoftEndpoint, SoftTransport};
use naaice::{Naa, NaaOptions, Param};
use naaice_core::ReturnCode;
use naaice_tests::{APP_ERROR, start_naa};
use prometheus_parse::Scrape;
use scrape::{get, scrape, value};

mod scrape;

/// A handle with one in-place parameter of `len` bytes.
fn handle(naa: &SoftNaaHandle, fncode: u8, len: usize) -> naaice::Result<Naa<SoftEndpoint>> {
    let p = Param::zeroed(len);
    Naa::create_with(
        &SoftTransport::default(),
        u32::from(fncode),
        vec![p.clone()],
        vec![p],
        &NaaOptions::at(naa.local_addr()),
    )
}

/// `naaice_naa_connections_rejected_total` for `reason`.
fn rejected(s: &Scrape, reason: &str) -> f64 {
    value(
        s,
        "naaice_naa_connections_rejected_total",
        &[("reason", reason)],
    )
}

fn rpc(h: &mut Naa<SoftEndpoint>) -> ReturnCode {
    h.invoke().expect("invoke");
    h.wait().expect("wait").naa_error
}

/// Waits until the scrape shows `open` connections (a worker ends a moment after its client).
fn until_open(naa: &SoftNaaHandle, open: f64) -> Scrape {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let s = scrape(naa);
        if value(&s, "naaice_naa_connections_open", &[]) == open || Instant::now() > until {
            return s;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_known_workload_is_counted_exactly() {
    let naa = start_naa(SoftNaaConfig {
        max_connections: 1,
        evict_idle_after: None,
        memory_budget: 1 << 20,
        metrics: Some("127.0.0.1:0".parse().unwrap()),
        ..SoftNaaConfig::default()
    });
    let start = until_open(&naa, 0.0);
    assert_eq!(
        value(&start, "naaice_naa_connections_accepted_total", &[]),
        0.0
    );
    assert_eq!(
        value(&start, "naaice_naa_memory_budget_free_bytes", &[]),
        f64::from(1 << 20)
    );
    // Every metric the documentation lists is there, with its type, before any RPC.
    let families: HashMap<&str, ()> = start
        .docs
        .keys()
        .map(|k| (k.trim_end_matches("_total"), ()))
        .collect();
    for name in METRIC_NAMES {
        assert!(
            families.contains_key(name),
            "{name} missing: {:?}",
            start.docs.keys()
        );
    }

    // 7 RPCs of kernel 1 (64 B in place), then a second client while the one slot is taken.
    let mut a = handle(&naa, 1, 64).expect("create");
    for _ in 0..7 {
        assert_eq!(rpc(&mut a), ReturnCode::SUCCESS);
    }
    let busy = scrape(&naa);
    assert_eq!(value(&busy, "naaice_naa_connections_open", &[]), 1.0);
    assert_eq!(value(&busy, "naaice_naa_workers", &[]), 1.0);
    assert_eq!(
        value(&busy, "naaice_naa_memory_budget_used_bytes", &[]),
        64.0
    );
    handle(&naa, 1, 64).expect_err("rejected: one slot");
    drop(a);
    until_open(&naa, 0.0);

    // One application error, one code without a kernel, one MRSP over the memory budget.
    let mut b = handle(&naa, APP_ERROR, 16).expect("create");
    assert_eq!(rpc(&mut b), ReturnCode::application(0x42).unwrap());
    drop(b);
    until_open(&naa, 0.0);
    let mut c = handle(&naa, 99, 16).expect("create");
    assert_eq!(rpc(&mut c), ReturnCode::SOCKET_UNAVAIL);
    drop(c);
    until_open(&naa, 0.0);
    handle(&naa, 1, 2 << 20).expect_err("over the memory budget");
    let s = until_open(&naa, 0.0);

    let rpcs = |fncode: &str, rc: &str| {
        value(
            &s,
            "naaice_naa_rpcs_total",
            &[("fncode", fncode), ("rc", rc)],
        )
    };
    assert_eq!(rpcs("1", "0"), 7.0);
    assert_eq!(rpcs(&APP_ERROR.to_string(), "66"), 1.0);
    assert_eq!(rpcs("unknown", "1"), 1.0);
    assert_eq!(
        value(&s, "naaice_naa_rpc_input_bytes_total", &[("fncode", "1")]),
        7.0 * 64.0
    );
    assert_eq!(
        value(&s, "naaice_naa_rpc_output_bytes_total", &[("fncode", "1")]),
        7.0 * 64.0
    );
    // The histograms count every RPC that ran a kernel.
    for h in ["naaice_naa_kernel_seconds", "naaice_naa_rpc_seconds"] {
        assert_eq!(value(&s, h, &[("fncode", "1")]), 7.0, "{h}");
        assert_eq!(
            value(&s, &format!("{h}_count"), &[("fncode", "1")]),
            7.0,
            "{h}"
        );
    }
    assert_eq!(rejected(&s, "limit"), 1.0);
    assert_eq!(rejected(&s, "memory_budget"), 1.0);
    assert_eq!(rejected(&s, "allow"), 0.0);
    assert_eq!(rejected(&s, "evicted_idle"), 0.0);
    // a, b, c and the one over the budget were admitted; the MRSP of the last failed.
    assert_eq!(value(&s, "naaice_naa_connections_accepted_total", &[]), 4.0);
    assert_eq!(value(&s, "naaice_naa_mrsp_total", &[("result", "ok")]), 3.0);
    assert_eq!(
        value(&s, "naaice_naa_mrsp_total", &[("result", "failed")]),
        1.0
    );
    assert_eq!(value(&s, "naaice_naa_memory_budget_used_bytes", &[]), 0.0);
    assert_eq!(value(&s, "naaice_naa_workers_busy", &[]), 0.0);
    naa.shutdown();
}

#[test]
fn clients_outside_the_allow_list_and_evictions_are_counted() {
    let naa = start_naa(SoftNaaConfig {
        max_connections: 1,
        evict_idle_after: Some(Duration::from_millis(50)),
        metrics: Some("127.0.0.1:0".parse().unwrap()),
        ..SoftNaaConfig::default()
    });
    let mut idle = handle(&naa, 1, 8).expect("create");
    assert_eq!(rpc(&mut idle), ReturnCode::SUCCESS);
    std::thread::sleep(Duration::from_millis(100));
    let mut newcomer = handle(&naa, 1, 8).expect("takes the idle one's slot");
    assert_eq!(rpc(&mut newcomer), ReturnCode::SUCCESS);
    let s = scrape(&naa);
    assert_eq!(rejected(&s, "evicted_idle"), 1.0);
    naa.shutdown();

    let denied = start_naa(SoftNaaConfig {
        allow: vec!["10.99.0.0/16".parse().unwrap()],
        metrics: Some("127.0.0.1:0".parse().unwrap()),
        ..SoftNaaConfig::default()
    });
    handle(&denied, 1, 8).expect_err("not allowed");
    let s = scrape(&denied);
    assert_eq!(rejected(&s, "allow"), 1.0);
    assert_eq!(value(&s, "naaice_naa_connections_accepted_total", &[]), 0.0);
    denied.shutdown();
}

#[test]
fn the_endpoint_answers_only_its_path_and_is_off_by_default() {
    let naa = start_naa(SoftNaaConfig {
        metrics: Some("127.0.0.1:0".parse().unwrap()),
        ..SoftNaaConfig::default()
    });
    let addr = naa.metrics_addr().expect("on");
    assert_ne!(addr.port(), 0);
    let (status, _, body) = get(addr, "/other");
    assert_eq!(status, 404);
    assert!(body.contains(METRICS_PATH), "{body}");
    let (status, _, _) = get(addr, "/metrics?x=1");
    assert_eq!(status, 200);
    naa.shutdown();
    // The NAA gone, so is its endpoint (its listening socket closes a moment later).
    let until = Instant::now() + Duration::from_secs(5);
    while std::net::TcpStream::connect(addr).is_ok() {
        assert!(Instant::now() < until, "the endpoint still listens");
        std::thread::sleep(Duration::from_millis(10));
    }

    let off = start_naa(SoftNaaConfig::default());
    assert_eq!(off.metrics_addr(), None);
    off.shutdown();
}

#[test]
fn an_address_in_use_is_a_clear_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let err = naaice::swnaa::SoftNaa::bind(
        SoftTransport::default(),
        "127.0.0.1:0".parse().unwrap(),
        SoftNaaConfig {
            metrics: Some(taken.local_addr().unwrap()),
            ..SoftNaaConfig::default()
        },
        naaice::swnaa::KernelRegistry::builtin(),
    )
    .expect_err("the port is taken");
    let text = err.to_string();
    assert!(text.contains("cannot serve metrics on"), "{text}");
}

/// Kernels a reload adds are counted by code; a served code shows (at 0) before its first
/// RPC; a code neither served nor counted is not listed.
#[test]
fn kernels_a_reload_adds_are_counted() {
    use naaice::core::FunctionCode;
    use naaice::swnaa::{KernelContext, KernelRegistry, SoftNaa};

    let config = SoftNaaConfig {
        metrics: Some("127.0.0.1:0".parse().unwrap()),
        // Two connections at once, whatever the CPU count (the default: one per CPU).
        max_connections: 2,
        ..SoftNaaConfig::default()
    };
    let naa = SoftNaa::bind(
        SoftTransport::default(),
        "127.0.0.1:0".parse().unwrap(),
        config,
        KernelRegistry::builtin(),
    )
    .expect("bind");
    let switch = naa.kernel_switch();
    let naa = naa.spawn().expect("spawn");
    let mut a = handle(&naa, 1, 64).expect("create");
    assert_eq!(rpc(&mut a), ReturnCode::SUCCESS);
    let mut kernels = KernelRegistry::empty();
    for code in [1, 9] {
        kernels.register(
            FunctionCode::new(code).unwrap(),
            |_: &mut KernelContext<'_, '_>| ReturnCode::SUCCESS,
        );
    }
    switch.replace(kernels);
    let mut b = handle(&naa, 9, 64).expect("create");
    assert_eq!(rpc(&mut b), ReturnCode::SUCCESS);
    assert_eq!(rpc(&mut b), ReturnCode::SUCCESS);
    a.finalize();
    b.finalize();
    let s = until_open(&naa, 0.0);
    let rpcs = "naaice_naa_rpcs_total";
    assert_eq!(value(&s, rpcs, &[("fncode", "1"), ("rc", "0")]), 1.0);
    assert_eq!(value(&s, rpcs, &[("fncode", "9"), ("rc", "0")]), 2.0);
    let listed = |code: &str| {
        s.samples.iter().any(|x| {
            x.metric == "naaice_naa_rpc_input_bytes_total" && x.labels.get("fncode") == Some(code)
        })
    };
    assert!(listed("1") && listed("9"));
    assert!(
        !listed("2") && !listed("3"),
        "codes no longer served and never counted"
    );
}
