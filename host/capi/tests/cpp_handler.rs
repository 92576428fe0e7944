//! The C++20 interface `include/naaice_ap2_cpp.h` (class `NAAHandler`): `tests/cpp/handler.cpp`
//! is compiled with `-std=c++20 -Wall -Wextra -Werror -pedantic` and the sanitizers
//! (AddressSanitizer with leak checking, UBSan, every finding fatal), linked with
//! `libnaaice_ap2.a`, and run against the software NAA over the software transport: results
//! of several invokes and futures, and the error paths (exceptions).

mod common;

use std::process::Command;
use std::time::Duration;

use common::kernels::{AXPY, FAILS, SUM, software_naa};
use common::*;

const LIMIT: Duration = Duration::from_secs(300);

/// The C++ compiler (`CXX`, default `g++`).
fn cxx() -> Command {
    Command::new(std::env::var("CXX").unwrap_or_else(|_| "g++".into()))
}

#[test]
fn naa_handler_invokes_futures_and_errors_under_sanitizers() {
    let bin = out_dir("cpp").join("handler");
    run_ok(
        cxx()
            .arg("-std=c++20")
            .args(WARNINGS)
            .args(SANITIZERS)
            .arg("-I")
            .arg(crate_dir().join("include"))
            .arg(crate_dir().join("tests/cpp/handler.cpp"))
            .arg("-o")
            .arg(&bin)
            .arg(lib_dir().join("libnaaice_ap2.a"))
            .args(NATIVE_LIBS),
        LIMIT,
    );
    let naa = software_naa();
    let port = naa.local_addr().port();
    // Function code 43 has an entry but no kernel; 44 has no entry.
    let entries = [
        (AXPY, 3),
        (AXPY, 3),
        (AXPY, 3),
        (AXPY, 3),
        (SUM, 2),
        (FAILS, 1),
        (43, 1),
    ];
    let spec: Vec<String> = entries
        .iter()
        .map(|(code, params)| format!("127.0.0.1:{port}:{code}:{params}"))
        .collect();
    let f = run_ok(
        sanitizer_env(&mut Command::new(&bin))
            .env("NAAICE_TRANSPORT", "soft")
            .env("NAA_SPEC", spec.join(",")),
        LIMIT,
    );
    naa.shutdown();
    println!("{}", f.stdout.trim());
    assert!(
        f.stdout.contains("cpp handler: ") && f.stdout.contains(" checks, 0 failed"),
        "{}\n{}",
        f.stdout,
        f.stderr
    );
    // The library logged the refused calls' reasons too.
    assert!(
        f.stderr
            .contains("no free NAA_SPEC entry with function code 44"),
        "{}",
        f.stderr
    );
}
