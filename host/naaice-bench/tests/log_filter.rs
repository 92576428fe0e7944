//! `--log` goes through the library's log-filter check (`naaice_cli::log_filter_arg`, the
//! same for every binary; `naaice-swnaa`'s tests go through its forms and `NAAICE_LOG`): a
//! filter that would select nothing is a usage error, exit status 2.

use std::process::Command;

#[test]
fn a_log_filter_typo_is_a_usage_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_naaice-bench"))
        .args(["--log", "degub"])
        .env_remove("NAAICE_LOG")
        .output()
        .expect("run naaice-bench");
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("did you mean debug?"), "{text}");
}
