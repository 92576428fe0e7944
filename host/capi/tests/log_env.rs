//! The C library's logging set-up from the environment: a misspelled `NAAICE_LOG` (which
//! `tracing` alone would take for a target, silencing every message) falls back to `warn`
//! and says so once on stderr, and misspelled variable names are warned about once, with the
//! nearest known name. The environment is read once per process: each case runs in a child.

use std::process::Command;
use std::ptr;

use naaice::discovery::environment::VARIABLES;
use naaice_ap2::ap2::*;
use naaice_ap2::*;

/// Child: two `naa_create` calls that fail (no `NAA_SPEC`), so that the library logs an
/// error for each.
#[test]
#[ignore = "run as a child process by a_bad_log_filter_falls_back_to_warn"]
fn child() {
    if std::env::var_os("NAAICE_CHILD").is_none() {
        return;
    }
    let mut x = vec![0u8; 16];
    let mut p = [naa_param_t {
        addr: x.as_mut_ptr().cast(),
        size: x.len(),
        single_send: CBool(0),
    }];
    for _ in 0..2 {
        let mut h = naa_handle {
            function_code: 0,
            comm_ctx: ptr::null_mut(),
        };
        // SAFETY: pointers to live locals; the handle is finalized below.
        unsafe {
            assert_ne!(
                naa_create(1, p.as_mut_ptr(), 1, p.as_mut_ptr(), 1, &mut h),
                0
            );
            naa_finalize(&mut h);
        }
    }
}

/// Runs the child with only `env` of the library's variables and returns its stderr.
fn child_stderr(env: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child", "--ignored", "--nocapture"])
        .env("NAAICE_CHILD", "1");
    for v in VARIABLES {
        cmd.env_remove(v.name);
    }
    let out = cmd
        .envs(env.iter().copied())
        .output()
        .expect("run the child");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    stderr
}

#[test]
fn a_bad_log_filter_falls_back_to_warn() {
    let stderr = child_stderr(&[("NAAICE_LOG", "degub"), ("NAAICE_RPC_TIMOUT", "5")]);
    let said = |needle: &str| stderr.matches(needle).count();
    assert_eq!(
        said("naaice: NAAICE_LOG=\"degub\": not a log filter"),
        1,
        "{stderr}"
    );
    assert_eq!(said("logging at warn instead"), 1, "{stderr}");
    // The messages at warn and above are there: both failures are logged.
    assert_eq!(said("NAA_SPEC is not set"), 2, "{stderr}");
    assert_eq!(
        said("NAAICE_RPC_TIMOUT is not a variable naaice reads (did you mean NAAICE_RPC_TIMEOUT?)"),
        1,
        "{stderr}"
    );
}

#[test]
fn a_good_log_filter_and_known_variables_say_nothing_more() {
    let stderr = child_stderr(&[
        ("NAAICE_LOG", "naaice=warn,error"),
        ("NAAICE_RPC_TIMEOUT", "5"),
    ]);
    assert!(!stderr.contains("not a log filter"), "{stderr}");
    assert!(!stderr.contains("is not a variable"), "{stderr}");
    assert_eq!(stderr.matches("NAA_SPEC is not set").count(), 2, "{stderr}");
}
