//! The `naaice-swnaa` command line: help and version describe the server, a build without
//! verbs says how to get it, and logs carry no colour codes when stderr is not a terminal.

use std::process::{Command, Output};
use std::sync::mpsc;
use std::time::Duration;

mod support;
use support::spawn_reading_stderr;

fn swnaa(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_naaice-swnaa"))
        .args(args)
        .output()
        .expect("run naaice-swnaa")
}

/// Starts the server on a free loopback port with its defaults (the transport and waiting
/// variables removed) plus `extra`; returns it and its stderr lines.
fn start(extra: &[&str]) -> (std::process::Child, mpsc::Receiver<String>) {
    start_env(extra, &[])
}

/// [`start`] with the environment variables `env` set.
fn start_env(
    extra: &[&str],
    env: &[(&str, &str)],
) -> (std::process::Child, mpsc::Receiver<String>) {
    let (tx, rx) = mpsc::channel();
    let child = spawn_reading_stderr(
        Command::new(env!("CARGO_BIN_EXE_naaice-swnaa"))
            .args(["--address", "127.0.0.1", "--port", "0"])
            .args(extra)
            .env_remove("NAAICE_TRANSPORT")
            .env_remove("NAAICE_WAIT")
            .env_remove("NAAICE_LOG")
            .envs(env.iter().copied()),
        move |line| tx.send(line).is_ok(),
    );
    (child, rx)
}

#[test]
fn help_and_version_describe_the_server() {
    let help = swnaa(&["--help"]);
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(text.contains("software NAA server"), "{text}");
    assert!(text.contains("Built-in kernels"), "{text}");
    for option in [
        "--address",
        "--port",
        "--transport",
        "--kernel-timeout",
        "--evict-idle-after",
        "--memory-budget",
        "--log",
    ] {
        assert!(text.contains(option), "{option} missing from --help");
    }
    let version = swnaa(&["--version"]);
    let text = String::from_utf8_lossy(&version.stdout);
    assert!(
        text.starts_with(&format!("naaice-swnaa {}", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
    assert!(text.contains("transports: soft"), "{text}");
    let man = swnaa(&["--man-page"]);
    assert!(man.status.success());
    assert!(String::from_utf8_lossy(&man.stdout).contains(".TH naaice-swnaa 1"));
}

#[cfg(not(feature = "verbs"))]
#[test]
fn verbs_in_a_build_without_it_says_how_to_get_it() {
    let out = swnaa(&["--transport", "verbs"]);
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("--features verbs"), "{text}");
}

#[test]
fn logs_to_a_file_have_no_colour_codes() {
    let (mut child, rx) = start(&["--log", "info"]);
    // The tracing event of the listener (INFO level), not the plain "listening on" line.
    let line = loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) if line.contains("software NAA listening") => break Ok(line),
            Ok(_) => continue,
            Err(e) => break Err(e),
        }
    };
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = child.wait().expect("wait for naaice-swnaa");
    let line = line.expect("naaice-swnaa logs that it listens");
    assert!(line.contains("INFO"), "{line:?}");
    assert!(
        !line.contains('\u{1b}'),
        "colour codes in a log file: {line:?}"
    );
    assert!(
        status.success(),
        "SIGTERM ends the server cleanly: {status}"
    );
}

#[test]
fn a_bad_eviction_grace_is_a_clear_error() {
    let out = swnaa(&["--port", "0", "--evict-idle-after", "soon"]);
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("--evict-idle-after") && text.contains("never"),
        "{text}"
    );
}

#[test]
fn a_default_client_meets_a_default_server_and_the_banner_says_how() {
    let (mut child, rx) = start(&[]);
    let mut banner = Vec::new();
    while !banner
        .iter()
        .any(|l: &String| l.contains("clients: NAA_SPEC="))
    {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("banner incomplete ({e}): {banner:?}"));
        banner.push(line);
    }
    let addr: std::net::SocketAddr = banner[0]
        .strip_prefix("naaice-swnaa listening on ")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("first banner line: {banner:?}"));
    let text = banner.join("\n");
    assert!(
        text.contains(&format!("soft (RC over TCP) on {addr}"))
            && text.contains("NAAICE_TRANSPORT=auto (the default) or soft")
            && text.contains("verbs (RDMA)")
            && text.contains(&format!("NAA_SPEC=127.0.0.1:{}:", addr.port())),
        "{text}"
    );
    // A client with default settings: NAAICE_TRANSPORT unset is `auto`.
    let transport =
        naaice::discovery::environment::transport_from_lookup(|_| None).expect("defaults");
    assert_eq!(transport.name(), "auto");
    let p = naaice::Param::from_vec(vec![10, 20]);
    let mut h: naaice::Naa = naaice::Naa::create_with(
        &transport,
        1,
        vec![p.clone()],
        vec![p],
        &naaice::NaaOptions::at(addr),
    )
    .expect("the default client reaches the default server");
    h.invoke().expect("invoke");
    assert!(h.wait().expect("wait").naa_error.is_success());
    assert_eq!(h.output(0).expect("output").to_vec(), [11, 21]);
    h.finalize();
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert!(child.wait().expect("wait for naaice-swnaa").success());
}

#[test]
fn durations_and_sizes_take_units() {
    // A bad value of each kind names the option and shows the accepted forms; good values
    // with units start the server (checked with a bad port afterwards, so it exits at once).
    for (option, bad, hint) in [
        ("--kernel-timeout", "soon", "500ms"),
        ("--max-bytes", "lots", "4GiB"),
        ("--memory-budget", "4 parsecs", "64KiB"),
    ] {
        let out = swnaa(&["--port", "0", option, bad]);
        assert_eq!(out.status.code(), Some(2), "{option} {bad}");
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(text.contains(option) && text.contains(hint), "{text}");
    }
    let out = swnaa(&[
        "--address",
        "192.0.2.1", // TEST-NET-1: not an address of this machine, so binding fails
        "--kernel-timeout",
        "1.5",
        "--mrsp-timeout",
        "500ms",
        "--evict-idle-after",
        "never",
        "--max-bytes",
        "512MiB",
        "--memory-budget",
        "1 GiB",
    ]);
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("cannot listen on 192.0.2.1"), "{text}");
}

/// docs/configuration.md's table of this binary's options is what the binary accepts, and the
/// man page has the usual sections.
#[test]
fn the_configuration_reference_and_man_page_are_the_code() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_naaice-swnaa"));
    let table = naaice_cli::check_binary_reference(exe, &repo).unwrap();
    assert!(
        table.contains("`--transport`, `-t` | `NAAICE_TRANSPORT` | `auto`"),
        "{table}"
    );
}

/// Reads lines from the server until one contains `needle` (60 s at most); returns them all.
fn lines_until(rx: &mpsc::Receiver<String>, needle: &str) -> Vec<String> {
    let mut lines = Vec::new();
    while !lines.iter().any(|l: &String| l.contains(needle)) {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => lines.push(line),
            Err(e) => panic!("no line with {needle:?} ({e}): {lines:?}"),
        }
    }
    lines
}

/// The server's address from its banner.
fn listening_on(rx: &mpsc::Receiver<String>) -> std::net::SocketAddr {
    let lines = lines_until(rx, "naaice-swnaa listening on ");
    lines
        .iter()
        .find_map(|l| l.strip_prefix("naaice-swnaa listening on "))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("banner: {lines:?}"))
}

/// One create and RPC against `addr` as the only entry of an `NAA_SPEC` (software transport,
/// connect deadline 1 s), as a rank of a job connects.
fn try_client(addr: std::net::SocketAddr) -> naaice::Result<()> {
    let transport = naaice::discovery::environment::transport_from_lookup(|name| {
        (name == "NAAICE_TRANSPORT").then(|| "soft".to_owned())
    })
    .expect("soft transport");
    let entries = naaice::discovery::spec::parse(&format!("{addr}:1:1")).expect("NAA_SPEC");
    let options = naaice::NaaOptions {
        connect_timeout: Duration::from_secs(1),
        pool: Some(naaice::discovery::select::Pool::new(entries)),
        rank: Some(naaice::discovery::environment::Rank::SINGLE),
        ..naaice::NaaOptions::default()
    };
    let p = naaice::Param::from_vec(vec![1, 2]);
    let mut h: naaice::Naa =
        naaice::Naa::create_with(&transport, 1, vec![p.clone()], vec![p], &options)?;
    h.invoke()?;
    assert!(h.wait()?.naa_error.is_success());
    h.finalize();
    Ok(())
}

/// A server process that is killed if the test fails before [`Server::stop`].
struct Server(Option<std::process::Child>);

impl Server {
    /// SIGTERM, then checks that the server ended cleanly.
    fn stop(mut self) {
        let mut child = self.0.take().expect("running");
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        assert!(child.wait().expect("wait for naaice-swnaa").success());
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// [`start_env`], then checks that the banner lists `allowed` as the allowed clients; the
/// server, where it listens and its stderr lines.
fn start_allowing(
    extra: &[&str],
    env: &[(&str, &str)],
    allowed: &str,
) -> (Server, std::net::SocketAddr, mpsc::Receiver<String>) {
    let (child, rx) = start_env(extra, env);
    let server = Server(Some(child));
    let addr = listening_on(&rx);
    let banner = lines_until(&rx, "allowed clients:");
    let wanted = format!("allowed clients: {allowed}");
    assert!(banner.iter().any(|l| l.contains(&wanted)), "{banner:?}");
    (server, addr, rx)
}

#[test]
fn an_allow_list_rejects_clients_from_elsewhere_at_connect() {
    // 127.0.0.1 is outside both prefixes: the client is rejected with a reason naming its
    // address, and the server logs the rejection.
    let (server, addr, rx) = start_allowing(
        &["--allow", "10.0.0.0/24", "--allow", "192.0.2.0/24"],
        &[],
        "10.0.0.0/24, 192.0.2.0/24",
    );
    let err = try_client(addr).expect_err("a client from outside the allow list");
    let text = err.to_string();
    assert!(
        text.contains(&format!("tried {addr} [entry 1]"))
            && text.contains("connection rejected by the peer: ")
            && text.contains(
                "NAA access denied: 127.0.0.1 is not in the allowed prefixes \
                 (10.0.0.0/24, 192.0.2.0/24)"
            ),
        "{text}"
    );
    let log = lines_until(&rx, "client address not allowed");
    let line = log.last().expect("the rejection line");
    assert!(
        line.contains("127.0.0.1") && line.contains("10.0.0.0/24"),
        "{line}"
    );
    server.stop();

    // The variable, with a prefix that holds the client, lets it in; the banner shows the
    // list read from it.
    let (server, addr, _rx) = start_allowing(
        &[],
        &[("NAAICE_ALLOW", "192.0.2.0/24,127.0.0.0/8")],
        "192.0.2.0/24, 127.0.0.0/8",
    );
    try_client(addr).expect("a client inside the allow list is served");
    server.stop();
}

#[test]
fn a_bad_allow_prefix_is_a_clear_error() {
    let out = swnaa(&["--port", "0", "--allow", "10.0.0.0/24,10.0.0.0/40"]);
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("--allow") && text.contains("\"10.0.0.0/40\" is not an address prefix"),
        "{text}"
    );
}
