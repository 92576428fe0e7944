//! The C tests and examples, compiled with `-Wall -Wextra -Werror -fsanitize=address,undefined`
//! against `libnaaice_ap2.a` and run against the software NAA (`NAAICE_TRANSPORT=soft`), with
//! LeakSanitizer on: a leak, an invalid access or undefined behaviour fails the test.

mod common;

use std::process::Command;
use std::time::Duration;

use common::*;
use naaice::core::{FunctionCode, ReturnCode};
use naaice::swnaa::{KernelContext, KernelRegistry, SoftNaaHandle};

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
    let flags = [&["-std=c++11"], SANITIZERS].concat();
    link_with_library(cxx(), &flags, &["tests/c/cxx_include.cpp"], &bin);
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
    // Server and client on their default transport (NAAICE_TRANSPORT unset: auto), as a
    // user starts them: they meet on any machine.
    let mut cmd = Command::new(server);
    sanitizer_env(&mut cmd).env_remove("NAAICE_TRANSPORT");
    let (server, port, lines) = start_server(cmd);
    for len in ["64", "300000"] {
        let mut c = Command::new(&client);
        sanitizer_env(&mut c)
            .env_remove("NAAICE_TRANSPORT")
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

/// Return code of the test kernels when the regions are not what the program should have
/// announced.
const WRONG_LAYOUT: u8 = 0x10;

/// The AP1 probe (function code 5, see `tests/c/ap1_client.c`): counts RPCs in internal
/// region 0, adds 1 to every byte of p1, and writes the call and the NAA's copies of p0 and p1
/// into p2.
fn ap1_probe(ctx: &mut KernelContext<'_, '_>) -> ReturnCode {
    let wrong = ReturnCode::application(WRONG_LAYOUT).unwrap_or(ReturnCode::KERNEL_TIMEOUT);
    let sizes: Vec<usize> = ctx.regions().iter().map(|r| r.data.len()).collect();
    if sizes != [64, 1000, 256, 8192] || ctx.param_count() != 3 {
        return wrong;
    }
    let (fncode, user, rpc) = (ctx.fncode(), ctx.user_bytes(), ctx.rpc());
    let Some(internal) = ctx.internal(0) else {
        return wrong;
    };
    let count = u32::from_le_bytes([internal[0], internal[1], internal[2], internal[3]]) + 1;
    internal[..4].copy_from_slice(&count.to_le_bytes());
    let p0 = ctx.param(0).map(|p| p.to_vec()).unwrap_or_default();
    let mut p1 = Vec::new();
    if let Some(p) = ctx.param(1) {
        p.iter_mut().for_each(|b| *b = b.wrapping_add(1));
        p1 = p[..256 - 6 - 64].to_vec();
    }
    let Some(p2) = ctx.param(2) else {
        return wrong;
    };
    p2[..3].copy_from_slice(&user);
    p2[3] = fncode;
    p2[4] = count as u8;
    p2[5] = rpc as u8;
    p2[6..70].copy_from_slice(&p0);
    p2[70..].copy_from_slice(&p1);
    ReturnCode::SUCCESS
}

/// Vector addition on 32-bit integers (function code 10): p2 = p0 + p1.
fn vector_add(ctx: &mut KernelContext<'_, '_>) -> ReturnCode {
    let wrong = ReturnCode::application(WRONG_LAYOUT).unwrap_or(ReturnCode::KERNEL_TIMEOUT);
    let (Some(a), Some(b)) = (
        ctx.param(0).map(|p| p.to_vec()),
        ctx.param(1).map(|p| p.to_vec()),
    ) else {
        return wrong;
    };
    let Some(c) = ctx.param(2) else {
        return wrong;
    };
    if a.len() != b.len() || a.len() != c.len() || a.len() % 4 != 0 {
        return wrong;
    }
    for ((c, a), b) in c
        .chunks_exact_mut(4)
        .zip(a.chunks_exact(4))
        .zip(b.chunks_exact(4))
    {
        let word = |x: &[u8]| i32::from_ne_bytes([x[0], x[1], x[2], x[3]]);
        c.copy_from_slice(&word(a).wrapping_add(word(b)).to_ne_bytes());
    }
    ReturnCode::SUCCESS
}

/// Adds 1 to every byte of every parameter region (function codes 21-52).
fn add_one(ctx: &mut KernelContext<'_, '_>) -> ReturnCode {
    for r in ctx.regions().iter_mut().filter(|r| !r.is_internal()) {
        r.data.iter_mut().for_each(|b| *b = b.wrapping_add(1));
    }
    ReturnCode::SUCCESS
}

/// The software NAA of `naaice-swnaa` (the same library), on a free loopback port over the
/// software transport, with the kernels the reference-style programs expect.
fn software_naa() -> SoftNaaHandle {
    let mut kernels = KernelRegistry::builtin();
    let code = |c: u8| FunctionCode::new(c).expect("test function codes are 1..=127");
    kernels.register(code(5), ap1_probe);
    kernels.register(code(10), vector_add);
    for n in 1..=32 {
        kernels.register(code(20 + n), add_one);
    }
    kernels::serve(kernels)
}

/// Compiles a program that includes only the library's headers with implicit declarations
/// as errors (the reference's programs rely on naaice.h for the standard headers).
fn build_reference_style(name: &str) -> std::path::PathBuf {
    let bin = out_dir("c").join(name);
    let flags = [
        &["-std=c11", "-Werror=implicit-function-declaration"],
        SANITIZERS,
    ]
    .concat();
    link_with_library(cc(), &flags, &[format!("tests/c/{name}.c")], &bin);
    bin
}

#[test]
fn ap1_low_level_client_byte_for_byte() {
    let bin = build_reference_style("ap1_client");
    let naa = software_naa();
    let port = naa.local_addr().port().to_string();
    let f = run_ok(
        sanitizer_env(&mut Command::new(bin)).args(["127.0.0.1", &port]),
        LIMIT,
    );
    naa.shutdown();
    f.assert_says(", 0 failed");
    // The reasons for the refused calls also went to stderr.
    assert!(
        f.stderr
            .contains("naaice_set_input_mr: region index 3 is out of range"),
        "{}",
        f.stderr
    );
}

#[test]
fn ap2_reference_style_program() {
    let bin = build_reference_style("ap2_reference_style");
    let naa = software_naa();
    let spec = format!("127.0.0.1:{}:10:2", naa.local_addr().port());
    for n in ["1", "1000", "70000"] {
        let f = run_ok(
            sanitizer_env(&mut Command::new(&bin))
                .env("NAA_SPEC", &spec)
                .arg(n),
            LIMIT,
        );
        assert!(
            f.stdout.contains(": correct\nRPC 2 (naa_wait): correct"),
            "{n}: {}",
            f.stdout
        );
    }
    naa.shutdown();
}

#[test]
fn ap2_one_to_thirty_two_in_place_parameters_and_last_error() {
    let bin = build_reference_style("ap2_in_place");
    let naa = software_naa();
    let port = naa.local_addr().port();
    let spec: Vec<String> = (1..=32)
        .map(|n| format!("127.0.0.1:{port}:{}:{n}", 20 + n))
        .collect();
    let f = run_ok(
        sanitizer_env(&mut Command::new(bin)).env("NAA_SPEC", spec.join(",")),
        LIMIT,
    );
    naa.shutdown();
    for n in 1..=32 {
        assert!(
            f.stdout.contains(&format!("in place, {n} parameters: ok")),
            "{n}: {}\n{}",
            f.stdout,
            f.stderr
        );
    }
    f.assert_says(", 0 failed");
}

#[test]
fn many_naas_example_overlaps_rpcs_from_one_thread() {
    let bin = build_sanitized(&out_dir("c"), "many_naas", &["examples/many_naas.c"]);
    let f = run_ok(sanitizer_env(&mut Command::new(bin)).arg("8"), LIMIT);
    assert!(
        f.stdout.contains(
            "round 1: 8 RPCs overlapped (naa_waitall)\nround 2: 8 RPCs overlapped (naa_waitany)"
        ),
        "{}\n{}",
        f.stdout,
        f.stderr
    );
}

#[test]
fn set_functions_semantics_under_sanitizers() {
    let bin = build_sanitized(&out_dir("c"), "ap2_sets", &["tests/c/ap2_sets.c"]);
    let f = run_ok(sanitizer_env(&mut Command::new(bin)), LIMIT);
    f.assert_says(", 0 failed");
}

/// The tutorial's and README's C program (`docs/tutorial/hello.c`) under the sanitizers, in
/// local mode.
#[test]
fn tutorial_hello_under_sanitizers() {
    let bin = build_sanitized(&out_dir("c"), "hello", &["../../docs/tutorial/hello.c"]);
    let f = run_ok(
        sanitizer_env(&mut Command::new(bin)).env("NAA_SPEC", "local:1:1"),
        LIMIT,
    );
    assert!(f.stdout.contains("0 wrong"), "{}", f.stdout);
}

/// Local mode in process from C, under the sanitizers: the kernel runs on the NAA's memory,
/// not on the program's arrays (it sees other pointers), KERNEL_TIMEOUT leaves the in-place
/// data unchanged, an
/// unknown function code gets SOCKET_UNAVAIL, and two local handles run under `naa_waitall`.
#[test]
fn local_mode_in_process_under_sanitizers() {
    let bin = build_sanitized(
        &out_dir("c"),
        "local_in_place",
        &["tests/c/local_in_place.c"],
    );
    let f = run_ok(
        sanitizer_env(&mut Command::new(bin)).env("NAA_SPEC", "local:20:2,local:20:2"),
        LIMIT,
    );
    f.assert_says("in place in process: 0 wrong");
    f.assert_says("after a kernel timeout: 0 changed");
    f.assert_says("two handles with naa_waitall: 0 wrong");
}
