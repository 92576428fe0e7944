//! Refused clients are counted, not hidden: a burst of refusals logs few lines, and the counts
//! of those lines (the first line of a window, the summary when the window ends, the last
//! summary when the server stops) add up to every refusal. The connection-limit refusal names
//! the limit and the option that raises it.

use std::net::SocketAddr;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use naaice::transport::Transport;
use naaice::transport::soft::SoftTransport;

mod support;
use support::spawn_reading_stderr;

/// Starts the server on a free loopback port with `extra`; returns it and its stderr lines.
fn start(extra: &[&str]) -> (Child, mpsc::Receiver<String>) {
    let (tx, rx) = mpsc::channel();
    let child = spawn_reading_stderr(
        Command::new(env!("CARGO_BIN_EXE_naaice-swnaa"))
            .args(["--address", "127.0.0.1", "--port", "0", "--log", "warn"])
            .args(extra)
            .env_remove("NAAICE_TRANSPORT")
            .env_remove("NAAICE_WAIT")
            .env_remove("NAAICE_LOG")
            .env_remove("NAAICE_ALLOW"),
        move |line| tx.send(line).is_ok(),
    );
    (child, rx)
}

/// The server's address from its banner.
fn listening_on(rx: &mpsc::Receiver<String>) -> SocketAddr {
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the banner");
        if let Some(addr) = line
            .strip_prefix("naaice-swnaa listening on ")
            .and_then(|rest| rest.split(' ').next())
        {
            return addr.parse().expect("the banner's address");
        }
    }
}

/// `n` connection attempts over the software transport, each refused; returns the reason of
/// the first.
fn refused_connects(addr: SocketAddr, n: usize) -> String {
    let transport = SoftTransport::default();
    let mut first = None;
    for i in 0..n {
        let deadline = Instant::now() + Duration::from_secs(30);
        match transport.connect(addr, None, deadline) {
            Ok(_) => panic!("connection {i} was accepted"),
            Err(e) => {
                first.get_or_insert(e.to_string());
            }
        }
    }
    first.expect("at least one attempt")
}

/// SIGTERM, then every line the server wrote until it ended; checks that it ended cleanly.
fn stop(mut child: Child, rx: &mpsc::Receiver<String>) -> Vec<String> {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert!(child.wait().expect("wait for naaice-swnaa").success());
    // stderr is closed: the reader ends and the channel with it.
    rx.iter().collect()
}

/// The lines containing `message`, and the sum of their `count=` fields.
fn counted(lines: &[String], message: &str) -> (Vec<String>, u64) {
    let matching: Vec<String> = lines
        .iter()
        .filter(|l| l.contains(message))
        .cloned()
        .collect();
    let sum = matching
        .iter()
        .map(|l| {
            let digits: String = l
                .split_once(" count=")
                .unwrap_or_else(|| panic!("no count in {l:?}"))
                .1
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse::<u64>().expect("a count")
        })
        .sum();
    (matching, sum)
}

#[test]
fn every_client_refused_by_the_allow_list_is_counted_in_the_log() {
    const N: usize = 300;
    let (child, rx) = start(&["--allow", "192.0.2.0/24"]);
    let addr = listening_on(&rx);
    let reason = refused_connects(addr, N);
    assert!(reason.contains("NAA access denied"), "{reason}");
    let log = stop(child, &rx);
    let (lines, sum) = counted(&log, "client address not allowed");
    assert_eq!(sum, N as u64, "{lines:#?}");
    assert!(lines.len() < N / 10, "not throttled: {} lines", lines.len());
}

#[test]
fn every_client_over_the_connection_limit_is_counted_and_told_the_limit() {
    const N: usize = 200;
    let (child, rx) = start(&["--max-connections", "1", "--evict-idle-after", "never"]);
    let addr = listening_on(&rx);
    // The one slot: a client that stays connected between RPCs.
    let transport = naaice::discovery::environment::transport_from_lookup(|name| {
        (name == "NAAICE_TRANSPORT").then(|| "soft".to_owned())
    })
    .expect("soft transport");
    let p = naaice::Param::from_vec(vec![1, 2]);
    let held: naaice::Naa = naaice::Naa::create_with(
        &transport,
        1,
        vec![p.clone()],
        vec![p],
        &naaice::NaaOptions::at(addr),
    )
    .expect("the first client takes the only slot");
    let reason = refused_connects(addr, N);
    assert!(
        reason
            .contains("NAA overloaded: connection limit reached (1; raise with --max-connections"),
        "{reason}"
    );
    held.finalize();
    let log = stop(child, &rx);
    let (lines, sum) = counted(&log, "connection limit reached");
    assert_eq!(sum, N as u64, "{lines:#?}");
    assert!(lines.len() < N / 10, "not throttled: {} lines", lines.len());
    // The form scripts count (tests/cluster/multinode.sh), with the limit and its knob.
    assert!(
        lines[0].contains("connection limit reached; rejecting")
            && lines[0].contains("--max-connections")
            && lines[0].contains("max_connections=1"),
        "{}",
        lines[0]
    );
}
