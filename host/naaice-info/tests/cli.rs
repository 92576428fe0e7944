//! `naaice-info` against its environment: the configuration report, the preferred entry for a
//! rank, and `--probe` against a live software NAA (ok), a dead address (refused), a full
//! NAA (overloaded), a silent one (timeout) and a verbs entry on a machine without RDMA
//! devices (wrong transport); the kernels a software NAA lists, and an NAA that lists none;
//! invalid variables and command lines; the man page. Variables
//! are set on the child process only, and every variable of the library's table is removed
//! from it first, so the machine's own settings do not leak in.

use std::net::{SocketAddr, TcpListener};

use naaice::core::{ClientConfig, FunctionCode};
use naaice::discovery::environment::VARIABLES;
use naaice::swnaa::{KernelRegistry, SoftNaa, SoftNaaConfig, SoftNaaHandle};
use naaice::transport::AnyTransport;
use naaice::{Buffer, Connection};
use serde_json::Value;

mod common;
use common::{info, info_json, stdout};

/// A software NAA on 127.0.0.1 with the built-in kernels (1 adds 1, 3 does nothing).
fn live_naa(config: SoftNaaConfig) -> SoftNaaHandle {
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    SoftNaa::bind(
        AnyTransport::default(),
        addr,
        config,
        KernelRegistry::builtin(),
    )
    .expect("bind a software NAA")
    .spawn()
    .expect("start the software NAA")
}

/// A port on 127.0.0.1 that nothing listens on (bound, then released).
fn dead_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// The probe results of a `--json` document.
fn probed(json: &Value) -> &Vec<Value> {
    json["probe"]["entries"].as_array().expect("probe entries")
}

#[test]
fn reports_the_configuration_and_the_entry_this_rank_prefers() {
    let env = [
        (
            "NAA_SPEC",
            "127.0.0.1:7001:1:1, 127.0.0.1:7002:1:1, 127.0.0.1:7003:3:0:soft",
        ),
        ("NAAICE_RANK", "1"),
        ("NAAICE_NRANKS", "2"),
        ("NAAICE_TRANSPORT", "soft"),
    ];
    let out = info(&[], &env);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    for needle in [
        concat!("naaice-info ", env!("CARGO_PKG_VERSION")),
        "rdma-core: ",
        "verbs transport: ",
        "NAAICE_TRANSPORT            soft  [environment]",
        "NAAICE_RPC_TIMEOUT          3600s  [default]",
        "rank: 1 of 2, local rank ? (from NAAICE_RANK)",
        "#2  127.0.0.1:7002  fn 1  params 1",
        "#3  127.0.0.1:7003  fn 3  params 0  transport soft",
        "fn 1 with 1 param: rank 1 prefers #2, then #1",
        "fn 3 with 0 params: rank 1 prefers #3 (no failover)",
        "Result: configuration valid (exit status 0)",
    ] {
        assert!(text.contains(needle), "{needle:?} missing:\n{text}");
    }
    assert!(!text.contains("Probe"), "{text}");

    let (json, code) = info_json(&[], &env);
    assert_eq!(code, Some(0));
    assert_eq!(json["build"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(json["build"]["verbs"], cfg!(feature = "verbs"));
    assert!(json["rdma"]["rdma_core_loaded"].is_boolean());
    let vars = json["configuration"]["variables"].as_array().unwrap();
    assert_eq!(vars.len(), VARIABLES.len());
    let var = |name: &str| vars.iter().find(|v| v["name"] == name).unwrap();
    assert_eq!(var("NAAICE_TRANSPORT")["source"], "environment");
    assert_eq!(var("NAAICE_TRANSPORT")["value"], "soft");
    assert_eq!(var("NAAICE_WAIT")["source"], "default");
    assert_eq!(var("NAAICE_LOG")["default"], "warn");
    assert_eq!(json["rank"]["rank"], 1);
    assert_eq!(json["rank"]["source"], "NAAICE_RANK");
    assert_eq!(json["spec"]["entries"].as_array().unwrap().len(), 3);
    assert_eq!(json["spec"]["preferences"][0]["preferred"], 2);
    assert_eq!(
        json["spec"]["preferences"][0]["order"],
        serde_json::json!([2, 1])
    );
    assert!(json["probe"].is_null());
    assert_eq!(json["exit_status"], 0);
}

#[test]
fn probes_a_live_naa_and_a_dead_address() {
    let naa = live_naa(SoftNaaConfig::default());
    let port = naa.local_addr().port();
    let spec = format!("127.0.0.1:{port}:1:1,127.0.0.1:{}:1:1", dead_port());
    let env = [("NAA_SPEC", spec.as_str())];

    let out = info(&["--probe", "--timeout", "5s"], &env);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    for needle in [
        format!("#1  127.0.0.1:{port}  ok  over soft"),
        "NAA returned 0x00: NAA_SUCCESS; 64 bytes written back".into(),
        "  refused  [asked: auto (the default)]".into(),
        "Connection refused".into(),
        "1 of 2 entries ok".into(),
        "Result: 1 problem (exit status 1)".into(),
    ] {
        assert!(text.contains(&needle), "{needle:?} missing:\n{text}");
    }
    assert!(text.contains("connect ") && text.contains("MRSP ") && text.contains("RPC "));

    let (json, code) = info_json(&["--probe", "--timeout", "5s"], &env);
    assert_eq!(code, Some(1));
    let entries = probed(&json);
    assert_eq!(entries.len(), 2);
    let live = &entries[0];
    assert_eq!(live["outcome"], "ok", "{live}");
    assert_eq!(live["transport"], "soft");
    assert_eq!(live["transport_asked"], "auto");
    assert_eq!(live["return_code"], 0);
    assert_eq!(live["bytes_received"], 64);
    for time in ["connect_ms", "mrsp_ms", "rpc_ms"] {
        assert!(
            live[time].as_f64().is_some_and(|t| t >= 0.0),
            "{time}: {live}"
        );
    }
    let dead = &entries[1];
    assert_eq!(dead["outcome"], "refused", "{dead}");
    assert_eq!(dead["stage"], "connect");
    assert!(
        dead["error"].as_str().unwrap().contains("refused"),
        "{dead}"
    );
    assert!(dead["mrsp_ms"].is_null());
    assert_eq!(json["exit_status"], 1);
    assert_eq!(json["problems"].as_array().unwrap().len(), 1);

    // Only the live entry, then a spec given on the command line (kernel 3, no inputs).
    let out = info(&["--entry", "1"], &env);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let spec3 = format!("127.0.0.1:{port}:3:0");
    let (json, code) = info_json(&["--probe", "--spec", &spec3], &[]);
    assert_eq!(code, Some(0), "{json}");
    assert_eq!(json["spec"]["source"], "--spec");
    assert_eq!(probed(&json)[0]["outcome"], "ok");
    naa.shutdown();
}

#[test]
fn invalid_variables_name_the_variable_and_fail() {
    let out = info(&[], &[("NAA_SPEC", "127.0.0.1:x:1:1")]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("error: NAA_SPEC entry 1 (\"127.0.0.1:x:1:1\"): port \"x\""),
        "{text}"
    );

    let env = [
        ("NAA_SPEC", "127.0.0.1:7001:1:1"),
        ("NAAICE_TRANSPORT", "pigeon"),
    ];
    let out = info(&["--probe"], &env);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("error: NAAICE_TRANSPORT=\"pigeon\": \"pigeon\" is not a transport"),
        "{text}"
    );
    assert!(
        text.contains("skipped: the transport configuration is invalid"),
        "{text}"
    );
    let (json, _) = info_json(&[], &env);
    let problems = json["problems"].as_array().unwrap();
    assert!(
        problems.len() == 1
            && problems[0]
                .as_str()
                .unwrap()
                .starts_with("NAAICE_TRANSPORT="),
        "{problems:?}"
    );

    let out = info(&[], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("NAA_SPEC is not set"));
}

#[test]
fn a_full_naa_is_overloaded() {
    let config = SoftNaaConfig {
        max_connections: 1,
        evict_idle_after: None,
        ..SoftNaaConfig::default()
    };
    let naa = live_naa(config);
    // Hold the one slot with a connection that has done its MRSP.
    let code = FunctionCode::new(1).unwrap();
    let mut held = Connection::connect(
        &AnyTransport::default(),
        naa.local_addr(),
        None,
        ClientConfig::new(code),
    )
    .expect("connect");
    let buffer = Buffer::from_vec(vec![0; 64]);
    let id = held.add_param(&buffer).unwrap();
    held.set_input(id).unwrap();
    held.set_output(id).unwrap();
    held.do_mrsp().expect("MRSP");

    let spec = format!("127.0.0.1:{}:1:1", naa.local_addr().port());
    let (json, code) = info_json(&["--probe"], &[("NAA_SPEC", &spec)]);
    assert_eq!(code, Some(1));
    let entry = &probed(&json)[0];
    assert_eq!(entry["outcome"], "overloaded", "{entry}");
    assert!(
        entry["error"].as_str().unwrap().contains("overloaded"),
        "{entry}"
    );
    drop(held);
    naa.shutdown();
}

#[test]
fn a_silent_naa_times_out() {
    // The kernel accepts TCP connections into the backlog; nobody answers the handshake.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let spec = format!("127.0.0.1:{}:1:1", silent.local_addr().unwrap().port());
    let (json, code) = info_json(&["--probe", "--timeout", "300ms"], &[("NAA_SPEC", &spec)]);
    assert_eq!(code, Some(1));
    let entry = &probed(&json)[0];
    assert_eq!(entry["outcome"], "timeout", "{entry}");
}

#[cfg(feature = "verbs")]
#[test]
fn a_verbs_entry_without_rdma_devices_is_the_wrong_transport() {
    let Some(why) = naaice::transport::auto::verbs_unusable() else {
        eprintln!("skipped: this machine can use verbs");
        return;
    };
    let spec = format!("127.0.0.1:{}:1:1:verbs", dead_port());
    let (json, code) = info_json(&["--probe"], &[("NAA_SPEC", &spec)]);
    assert_eq!(code, Some(1));
    let entry = &probed(&json)[0];
    assert_eq!(
        entry["outcome"], "wrong-transport",
        "{entry} (verbs: {why})"
    );
    assert_eq!(entry["transport_asked"], "verbs");
    assert_eq!(entry["asked_by"], "NAA_SPEC entry");
    assert!(
        entry["error"].as_str().unwrap().contains("unavailable"),
        "{entry}"
    );
    assert_eq!(json["rdma"]["verbs_unusable"], why.as_str());
}

#[cfg(not(feature = "verbs"))]
#[test]
fn a_verbs_entry_in_a_build_without_verbs_is_a_configuration_error() {
    let out = info(&["--probe"], &[("NAA_SPEC", "127.0.0.1:7001:1:1:verbs")]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("verbs transport is not part of this build"),
        "{text}"
    );
    assert!(text.contains("this build has no verbs transport"), "{text}");
}

#[test]
fn command_line_errors_exit_2() {
    let env = [("NAA_SPEC", "127.0.0.1:7001:1:1")];
    for args in [
        &["--entry", "0"][..],
        &["--entry", "2"],
        &["--timeout", "soon"],
        &["--bogus"],
    ] {
        let out = info(args, &env);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    }
}

#[test]
fn help_and_man_page_document_exit_status_and_environment() {
    let help = info(&["--help"], &[]);
    assert_eq!(help.status.code(), Some(0));
    let text = stdout(&help);
    for needle in [
        "--probe",
        "--json",
        "--timeout",
        "--spec",
        "--entry",
        "Exit status: 0",
    ] {
        assert!(
            text.contains(needle),
            "{needle} missing from --help:\n{text}"
        );
    }
    let version = stdout(&info(&["--version"], &[]));
    assert!(version.contains("transports: soft"), "{version}");
    let man = info(&["--man-page"], &[]);
    assert_eq!(man.status.code(), Some(0));
    let page = stdout(&man);
    for needle in [
        ".TH naaice-info 1",
        ".SH DESCRIPTION",
        ".SH ENVIRONMENT",
        "\\fBNAAICE_TRANSPORT\\fR",
        "\\fBNAAICE_LOG\\fR",
        ".SH \"EXIT STATUS\"",
        ".SH EXAMPLES",
    ] {
        assert!(page.contains(needle), "{needle} missing from the man page");
    }
}

/// docs/configuration.md's table of this binary's options is what the binary accepts, and the
/// man page has the usual sections.
#[test]
fn the_configuration_reference_and_man_page_are_the_code() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_naaice-info"));
    let table = naaice_cli::check_binary_reference(exe, &repo).unwrap();
    assert!(table.contains("`--probe`"), "{table}");
}

#[test]
fn the_probe_lists_the_kernels_a_software_naa_serves() {
    let mut kernels = KernelRegistry::builtin();
    let code = FunctionCode::new(7).unwrap();
    kernels.register_named(
        code,
        "scale by 2",
        |_: &mut naaice::swnaa::KernelContext<'_, '_>| naaice::core::ReturnCode::SUCCESS,
    );
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let naa = SoftNaa::bind(
        AnyTransport::default(),
        addr,
        SoftNaaConfig::default(),
        kernels,
    )
    .expect("bind")
    .spawn()
    .expect("spawn");
    let port = naa.local_addr().port();
    let spec = format!("127.0.0.1:{port}:7:1,127.0.0.1:{port}:9:1");
    let out = info(&["--probe"], &[("NAA_SPEC", spec.as_str())]);
    let text = stdout(&out);
    assert!(
        text.contains("kernels served: 1 add1, 2 add2, 3 empty, 7 scale by 2\n"),
        "{text}"
    );
    assert!(
        text.contains("7 scale by 2 (not function code 9)"),
        "{text}"
    );
    let (json, _) = info_json(&["--probe"], &[("NAA_SPEC", spec.as_str())]);
    let listed = &probed(&json)[0]["kernels"];
    assert_eq!(listed[3]["code"], 7, "{listed}");
    assert_eq!(listed[3]["name"], "scale by 2", "{listed}");
    naa.shutdown();

    // An NAA that closes a request it does not know (as one without catalogs does): the
    // probe says so.
    let old = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = old.local_addr().unwrap().port();
    let closer = std::thread::spawn(move || {
        for _ in 0..2 {
            let (mut s, _) = old.accept().unwrap();
            let mut hdr = [0u8; 24];
            let _ = std::io::Read::read_exact(&mut s, &mut hdr);
        }
    });
    let (json, code) = info_json(
        &["--probe"],
        &[("NAA_SPEC", &format!("127.0.0.1:{port}:1:1"))],
    );
    assert_eq!(code, Some(1));
    let entry = &probed(&json)[0];
    assert_eq!(entry["outcome"], "rejected", "{entry}");
    assert!(entry["kernels"].is_null());
    assert!(
        entry["kernels_note"]
            .as_str()
            .is_some_and(|n| n.contains("does not answer catalog requests")),
        "{entry}"
    );
    closer.join().unwrap();
}
