//! Client statistics end to end: `Naa::stats` after RPCs, NAA errors, a timeout and a
//! reconnect against a software NAA; the process's sum; `NAAICE_STATS=1`'s line at exit.

use std::process::Command;
use std::time::Duration;

use naaice::transport::soft::{SoftEndpoint, SoftTransport};
use naaice::{Call, Naa, NaaOptions, Param};
use naaice_core::ReturnCode;
use naaice_tests::{APP_ERROR, SLEEP, start_naa};

fn handle(addr: std::net::SocketAddr, fncode: u8) -> Naa<SoftEndpoint> {
    let p = Param::zeroed(100);
    Naa::create_with(
        &SoftTransport::default(),
        u32::from(fncode),
        vec![p.clone(), Param::zeroed(28).single_send()],
        vec![p],
        &NaaOptions::at(addr),
    )
    .expect("create")
}

#[test]
fn a_handle_counts_its_rpcs_errors_bytes_and_latency() {
    // The cancelled connection's kernel may still hold its slot when the handle reconnects:
    // two slots, whatever the CPU count (the default: one per CPU).
    let naa = start_naa(naaice::swnaa::SoftNaaConfig {
        max_connections: 2,
        ..naaice::swnaa::SoftNaaConfig::default()
    });
    let before = naaice::client::stats::process();
    let mut h = handle(naa.local_addr(), 1);
    let fresh = h.stats();
    assert_eq!((fresh.handles, fresh.connections, fresh.rpcs), (1, 1, 0));
    assert!(fresh.connect_time > Duration::ZERO && fresh.mrsp_time > Duration::ZERO);
    assert_eq!(fresh.latency(0.5), None);
    for _ in 0..10 {
        h.invoke().unwrap();
        assert!(h.wait().unwrap().naa_error.is_success());
    }
    // An application error, then an RPC that outlives its deadline.
    h.invoke_with(&Call::new().function(u32::from(APP_ERROR)).unwrap())
        .unwrap();
    assert_eq!(
        h.wait().unwrap().naa_error,
        ReturnCode::application(0x42).unwrap()
    );
    let slow = Call::new()
        .function(u32::from(SLEEP))
        .unwrap()
        .user_bytes([20, 0, 0])
        .timeout(Duration::from_millis(20));
    h.invoke_with(&slow).unwrap();
    h.wait().expect_err("times out");
    // The timed-out connection is cancelled; the next invoke reconnects.
    h.cancel();
    h.invoke().unwrap();
    h.wait().unwrap();

    let s = h.stats();
    assert_eq!(s.rpcs, 12, "{s}");
    assert_eq!(s.errors.naa, 1, "{s}");
    assert_eq!(s.errors.timeout, 1, "{s}");
    assert_eq!(s.errors.total(), 2, "{s}");
    assert_eq!(s.connections, 2, "{s}");
    // 100 B each RPC, the 28 B single-send input with the first RPC of each connection.
    assert_eq!(s.bytes_sent, 13 * 100 + 2 * 28, "{s}");
    // The outputs come back from the 12 answered RPCs (the application error's too).
    assert_eq!(s.bytes_received, 12 * 100, "{s}");
    let (p50, p99) = (s.latency(0.5).unwrap(), s.latency(0.99).unwrap());
    assert!(p50 > Duration::ZERO && p50 <= p99 && p99 <= s.latency_max().unwrap());
    let line = s.to_string();
    assert!(
        line.starts_with("1 handle, 12 RPCs, 2 errors (naa 1, timeout 1)"),
        "{line}"
    );

    h.finalize();
    let after = naaice::client::stats::process();
    assert!(after.handles > before.handles && after.rpcs >= before.rpcs + 12);
    naa.shutdown();
}

/// The child's part of [`naaice_stats_prints_one_line_at_exit`]: 3 RPCs in local mode.
fn child() {
    let p = Param::zeroed(64);
    let mut h: Naa = Naa::create_with(
        &naaice::transport::AnyTransport::from(SoftTransport::default()),
        1,
        vec![p.clone()],
        vec![p],
        &NaaOptions::local().unwrap(),
    )
    .unwrap();
    for _ in 0..3 {
        h.invoke().unwrap();
        h.wait().unwrap();
    }
}

#[test]
fn naaice_stats_prints_one_line_at_exit() {
    if std::env::var_os("NAAICE_CHILD").is_some() {
        return child();
    }
    let run = |stats: &str| {
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "naaice_stats_prints_one_line_at_exit",
                "--nocapture",
            ])
            .env("NAAICE_CHILD", "1")
            .env("NAAICE_STATS", stats)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stderr).unwrap()
    };
    let on = run("1");
    let line = on
        .lines()
        .find(|l| l.starts_with("naaice stats: pid "))
        .unwrap_or_else(|| panic!("no summary line in {on:?}"));
    assert!(
        line.contains(": 1 handle, 3 RPCs, 0 errors, 192 B sent, 192 B received"),
        "{line}"
    );
    assert!(line.contains("latency p50 "), "{line}");
    assert!(!run("0").contains("naaice stats:"));
}
