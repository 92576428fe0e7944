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

#[test]
fn naa_handler_invokes_futures_and_errors_under_sanitizers() {
    let bin = out_dir("cpp").join("handler");
    let flags = [&["-std=c++20"], SANITIZERS].concat();
    link_with_library(cxx(), &flags, &["tests/cpp/handler.cpp"], &bin);
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
