//! The C tests and examples, compiled with `-Wall -Wextra -Werror -fsanitize=address,undefined`
//! against `libnaaice_ap2.a` and run against the software NAA (`NAAICE_TRANSPORT=soft`), with
//! LeakSanitizer on: a leak, an invalid access or undefined behaviour fails the test.

mod common;

use std::process::Command;
use std::time::Duration;

use common::*;

const LIMIT: Duration = Duration::from_secs(300);

#[test]
fn header_layout_matches_the_reference() {
    let bin = build_sanitized(&out_dir("c"), "layout", &["tests/c/layout.c"]);
    let f = run_ok(sanitizer_env(&mut Command::new(bin)), LIMIT);
    assert!(
        f.stdout
            .contains("naa_param_t 24, naa_handle 16, naa_status 16"),
        "{}",
        f.stdout
    );
}

#[test]
fn header_works_from_cpp() {
    let bin = out_dir("c").join("cxx_include");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let mut cmd = Command::new(cxx);
    cmd.arg("-std=c++11")
        .args(WARNINGS)
        .args(SANITIZERS)
        .arg("-I")
        .arg(crate_dir().join("include"))
        .arg(crate_dir().join("tests/c/cxx_include.cpp"))
        .arg("-o")
        .arg(&bin)
        .arg(lib_dir().join("libnaaice_ap2.a"))
        .args(NATIVE_LIBS);
    run_ok(&mut cmd, LIMIT);
    let f = run_ok(sanitizer_env(&mut Command::new(bin)), LIMIT);
    assert!(f.stdout.contains("returned 0, state 0"), "{}", f.stdout);
}

#[test]
fn c_api_suite_under_sanitizers() {
    let bin = build_sanitized(&out_dir("c"), "ap2_test", &["tests/c/ap2_test.c"]);
    let f = run_ok(sanitizer_env(&mut Command::new(bin)), LIMIT);
    assert!(
        f.stdout.contains("many RPCs: 1000 RPCs, 0 wrong"),
        "{}",
        f.stdout
    );
    assert!(f.stdout.contains(", 0 failed"), "{}", f.stdout);
    // The library's reasons for the refused calls went to stderr.
    assert!(
        f.stderr.contains("naa_create: handle is NULL"),
        "{}",
        f.stderr
    );
}

#[test]
fn leak_checking_is_live() {
    let bin = build_sanitized(&out_dir("c"), "leak_probe", &["tests/c/leak_probe.c"]);
    let f = run(sanitizer_env(&mut Command::new(bin)), LIMIT);
    assert!(
        !f.status.success()
            && f.stderr
                .contains("ERROR: LeakSanitizer: detected memory leaks"),
        "the deliberate leak was not reported ({}):\n{}",
        f.status,
        f.stderr
    );
}

#[test]
fn vector_add_example_against_the_c_software_naa() {
    let out = out_dir("c");
    let server = build_sanitized(&out, "swnaa_server", &["examples/swnaa_server.c"]);
    let client = build_sanitized(&out, "vector_add", &["examples/vector_add.c"]);
    let mut cmd = Command::new(server);
    sanitizer_env(&mut cmd);
    let (server, port, lines) = start_server(cmd);
    for len in ["64", "300000"] {
        let mut c = Command::new(&client);
        sanitizer_env(&mut c)
            .env("NAA_SPEC", format!("127.0.0.1:{port}:10:2"))
            .arg(len);
        let f = run_ok(&mut c, LIMIT);
        assert!(
            f.stdout
                .contains(&format!("RPC 1 (naa_test): {len} elements correct"))
                && f.stdout
                    .contains(&format!("RPC 2 (naa_wait): {len} elements correct")),
            "{}",
            f.stdout
        );
    }
    // Without a matching NAA_SPEC entry the example reports the failure and exits 1.
    let mut c = Command::new(&client);
    sanitizer_env(&mut c).env("NAA_SPEC", format!("127.0.0.1:{port}:11:2"));
    let f = run(&mut c, LIMIT);
    assert_eq!(f.status.code(), Some(1), "{}", f.stderr);
    assert!(
        f.stderr
            .contains("no free NAA_SPEC entry with function code 10"),
        "{}",
        f.stderr
    );
    assert!(!sanitizer_report(&f.stderr), "{}", f.stderr);

    terminate(&server);
    let f = finish_server(server, lines);
    f.assert_clean("the C software NAA");
    assert!(f.stdout.contains("stopping"), "{}", f.stdout);
}
