//! The naaice-rs extensions for single calls, from C (compiled with the sanitizers like the
//! other C tests): `naa_cancel` and per-call deadlines against a kernel that never finishes,
//! per-call function codes and user bytes with the 24-bit return code, and local mode (the
//! same C program against the in-process NAA and a software NAA, same output).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use common::*;
use naaice::core::{FunctionCode, ReturnCode};
use naaice::swnaa::{KernelContext, KernelRegistry, SoftNaa, SoftNaaConfig, SoftNaaHandle};
use naaice::transport::soft::SoftTransport;

const LIMIT: Duration = Duration::from_secs(300);

/// Kernel that blocks until the test releases [`GATE`].
const BLOCK: u8 = 40;
/// The echo kernel of `examples/call_args.c`.
const ECHO: u8 = 41;

/// The slow kernel of `examples/call_args.c` (1 s).
const SLOW: u8 = 42;

/// Kernels started, and whether they may return.
static GATE: (Mutex<(usize, bool)>, Condvar) = (Mutex::new((0, false)), Condvar::new());

fn block(_: &mut KernelContext<'_, '_>) -> ReturnCode {
    let mut st = GATE.0.lock().unwrap();
    st.0 += 1;
    GATE.1.notify_all();
    while !st.1 {
        st = GATE.1.wait(st).unwrap();
    }
    ReturnCode::SUCCESS
}

fn wait_started(n: usize) {
    let mut st = GATE.0.lock().unwrap();
    while st.0 < n {
        st = GATE.1.wait(st).unwrap();
    }
}

fn release() {
    GATE.0.lock().unwrap().1 = true;
    GATE.1.notify_all();
}

/// The same kernel as `echo` in `examples/call_args.c`.
fn echo(ctx: &mut KernelContext<'_, '_>) -> ReturnCode {
    let (fncode, user) = (ctx.fncode(), ctx.user_bytes());
    match ctx.param(0) {
        Some(p) if p.len() >= 4 => p[..4].copy_from_slice(&[fncode, user[0], user[1], user[2]]),
        _ => return ReturnCode::application(0x10).unwrap_or(ReturnCode::KERNEL_FAILED),
    }
    let rc = u32::from(user[0]) << 16 | u32::from(user[1]) << 8 | u32::from(user[2]);
    ReturnCode::new(rc).unwrap_or(ReturnCode::KERNEL_FAILED)
}

fn software_naa() -> SoftNaaHandle {
    let mut kernels = KernelRegistry::builtin();
    let code = |c: u8| FunctionCode::new(c).expect("test function codes are 1..=127");
    kernels.register(code(BLOCK), block);
    kernels.register(code(ECHO), echo);
    kernels.register(code(SLOW), |_: &mut KernelContext<'_, '_>| {
        std::thread::sleep(Duration::from_secs(1));
        ReturnCode::SUCCESS
    });
    let config = SoftNaaConfig {
        max_connections: 8,
        ..SoftNaaConfig::default()
    };
    SoftNaa::bind(
        SoftTransport::default(),
        "127.0.0.1:0".parse().expect("loopback address"),
        config,
        kernels,
    )
    .and_then(SoftNaa::spawn)
    .expect("start the software NAA")
}

#[test]
fn cancel_and_deadlines_from_c_against_a_kernel_that_never_finishes() {
    let bin = build_sanitized(&out_dir("c"), "ap2_cancel", &["tests/c/ap2_cancel.c"]);
    let naa = software_naa();
    let port = naa.local_addr().port();
    let mut cmd = Command::new(bin);
    sanitizer_env(&mut cmd)
        .env(
            "NAA_SPEC",
            format!("127.0.0.1:{port}:{BLOCK}:1,127.0.0.1:{port}:1:1"),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = Guarded(cmd.spawn().expect("start ap2_cancel"));
    let stdout = child.0.stdout.take().expect("piped stdout");
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let first = lines
        .recv_timeout(LIMIT)
        .expect("the program starts its RPC");
    assert_eq!(first, "invoked");
    // Cancel only once the kernel really blocks its worker.
    wait_started(1);
    let mut stdin = child.0.stdin.take().expect("piped stdin");
    stdin.write_all(b"started\n").expect("tell the program");
    drop(stdin);
    let stderr = child.0.stderr.take().expect("piped stderr");
    let (etx, err) = mpsc::channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut s);
        let _ = etx.send(s);
    });
    let status = child.0.wait().expect("wait for ap2_cancel");
    let stdout: Vec<String> = lines.iter().collect();
    let stderr = err.recv_timeout(LIMIT).unwrap_or_default();
    assert!(
        status.success() && !sanitizer_report(&stderr),
        "{status}\n{}\n{stderr}",
        stdout.join("\n")
    );
    assert!(stdout.iter().any(|l| l == "cancel: 0 failed"), "{stdout:?}");
    // Both the cancelled RPC and the one past its deadline ran the blocking kernel.
    wait_started(2);
    release();
    naa.shutdown();
}

#[test]
fn call_args_example_same_output_local_and_software_naa() {
    let bin = build_sanitized(&out_dir("c"), "call_args", &["examples/call_args.c"]);

    // Local mode: no NAA at all; verbs asked for, the in-process NAA is reached with the
    // software transport anyway.
    let mut local = Command::new(&bin);
    sanitizer_env(&mut local).env("NAA_SPEC", format!("local:{ECHO}:1"));
    if cfg!(feature = "verbs") {
        local.env("NAAICE_TRANSPORT", "verbs");
    }
    let local = run_ok(&mut local, LIMIT);

    let naa = software_naa();
    let spec = format!("127.0.0.1:{}:{ECHO}:1", naa.local_addr().port());
    let remote = run_ok(
        sanitizer_env(&mut Command::new(&bin)).env("NAA_SPEC", spec),
        LIMIT,
    );
    naa.shutdown();

    let expected = "fncode 41 user ab cd ef: return code 0xabcdef, data 41 171 205 239\n\
                    fncode 1 user 00 00 00: return code 0x000000, data 42 172 206 240\n\
                    fncode 200: refused (not in 1..=127)\n\
                    naa_invoke: return code 0x000000, data 41 0 0 0\n\
                    fncode 42 with a 100 ms deadline: timed out\n\
                    after naa_cancel: fncode 41 user ab cd ef: return code 0xabcdef, data 41 171 205 239\n\
                    all ok\n";
    assert_eq!(local.stdout, expected, "local mode\n{}", local.stderr);
    // Its statistics: 4 answered RPCs, the one past its deadline, two connections (the
    // cancel reconnects).
    for run in [&local, &remote] {
        assert!(
            run.stderr
                .contains("stats: 4 RPCs, 1 timed out, 2 connections"),
            "{}",
            run.stderr
        );
    }
    println!("{}", remote.stderr);
    assert_eq!(
        remote.stdout, local.stdout,
        "software NAA\n{}",
        remote.stderr
    );
}

/// `naa_stats` and `naa_stats_process` from C (sanitized): counts after RPCs and an NAA
/// error, latencies, the size rule, the process's sum.
#[test]
fn client_statistics_from_c() {
    let f = sanitized_against_naa("ap2_stats", |port| format!("127.0.0.1:{port}:1:1"));
    println!("{}", f.stdout);
    f.assert_says("stats: 6 RPCs, 1 NAA errors");
    f.assert_says("stats: 0 failed");
}

/// `naa_pipeline_*` from C under the sanitizers: every byte through two connections, the
/// report, a failed chunk, invalid arguments.
#[test]
fn pipeline_from_c() {
    let f = sanitized_against_naa("ap2_pipeline", |port| {
        format!("127.0.0.1:{port}:1:1,127.0.0.1:{port}:99:1")
    });
    f.assert_says(", 0 failed");
}

/// Builds `tests/c/NAME.c` under the sanitizers and runs it against this file's software NAA
/// with the `NAA_SPEC` that `spec` makes from the NAA's port; its output.
fn sanitized_against_naa(name: &str, spec: impl FnOnce(u16) -> String) -> Finished {
    let bin = build_sanitized(&out_dir("c"), name, &[&format!("tests/c/{name}.c")]);
    let naa = software_naa();
    let mut cmd = Command::new(bin);
    sanitizer_env(&mut cmd).env("NAA_SPEC", spec(naa.local_addr().port()));
    let f = run_ok(&mut cmd, LIMIT);
    naa.shutdown();
    f
}
