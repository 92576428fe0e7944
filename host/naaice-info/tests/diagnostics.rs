//! What `naaice-info` flags beyond invalid values: a `NAAICE_LOG` that would silence the
//! library, misspelled variable names, an invalid `--log`; the locked-memory limit; and
//! `--probe` of `local:` entries, which start the in-process NAA. Variables are set on the
//! child process only, every variable of the library's table removed first.

mod common;
use common::{info, info_json, stdout};

const SPEC: (&str, &str) = ("NAA_SPEC", "127.0.0.1:7001:1:1");

#[test]
fn a_log_filter_that_selects_nothing_is_a_problem() {
    for bad in ["degub", "verbose", "naaice=loud"] {
        let out = info(&[], &[SPEC, ("NAAICE_LOG", bad)]);
        let text = stdout(&out);
        assert_eq!(out.status.code(), Some(1), "{bad}: {text}");
        assert!(
            text.contains(&format!("NAAICE_LOG=\"{bad}\": not a log filter"))
                && text.contains("the library logs at warn instead")
                && text.contains("Result: 1 problem (exit status 1)")
                && !text.contains("configuration valid"),
            "{bad}: {text}"
        );
    }
    let out = info(&[], &[SPEC, ("NAAICE_LOG", "naaice=debug,warn")]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn misspelled_variables_are_problems_with_the_nearest_name() {
    let env = [SPEC, ("NAAICE_RPC_TIMOUT", "5")];
    let out = info(&[], &env);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "NAAICE_RPC_TIMOUT is not a variable naaice reads (did you mean NAAICE_RPC_TIMEOUT?); \
             it has no effect"
        ) && text.contains("Result: 1 problem"),
        "{text}"
    );
    let (json, code) = info_json(&[], &env);
    assert_eq!(code, Some(1));
    let unknown = &json["configuration"]["unknown_variables"][0];
    assert_eq!(unknown["name"], "NAAICE_RPC_TIMOUT", "{json}");
    assert_eq!(unknown["nearest"], "NAAICE_RPC_TIMEOUT", "{json}");
}

#[test]
fn an_invalid_log_option_is_a_usage_error() {
    let out = info(&["--log", "degub"], &[SPEC]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--log") && err.contains("did you mean debug?"),
        "{err}"
    );
    assert_eq!(info(&["--log", "debug"], &[SPEC]).status.code(), Some(0));
}

#[test]
fn shows_the_locked_memory_limit() {
    let out = info(&[], &[SPEC]);
    let text = stdout(&out);
    assert!(text.contains("locked memory (ulimit -l): "), "{text}");
    let (json, _) = info_json(&[], &[SPEC]);
    let memlock = &json["rdma"]["memlock"];
    // This machine's limit, whatever it is: read, or the reason it is unknown.
    assert!(
        memlock["error"].is_string()
            || memlock["soft_bytes"].is_u64()
            || memlock["soft_bytes"].is_null(),
        "{memlock}"
    );
}

/// The job-script idiom `naaice-info --probe || exit 1` passes a correct spec with a local
/// entry: the probe starts the in-process NAA and runs the MRSP and an RPC on it.
#[test]
fn probes_local_entries_on_the_in_process_naa() {
    let out = info(&["--probe"], &[("NAA_SPEC", "local:1:2")]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("configuration valid, every probed entry ok"),
        "{text}"
    );
    let (json, code) = info_json(&["--probe", "--spec", "local:3:0"], &[]);
    assert_eq!(code, Some(0), "{json}");
    let entry = &json["probe"]["entries"][0];
    assert_eq!(entry["outcome"], "ok", "{entry}");
    assert_eq!(entry["transport"], "in-process", "{entry}");
    assert_eq!(entry["attempts"][0]["transport"], "in-process", "{entry}");
    assert_eq!(entry["kernels"][2]["name"], "empty", "{entry}");
    assert_eq!(entry["return_code"], 0, "{entry}");
    // `local:…:soft`: the loopback NAA, over the software transport.
    let (json, code) = info_json(&["--probe", "--spec", "local:3:0:soft"], &[]);
    assert_eq!(code, Some(0), "{json}");
    let entry = &json["probe"]["entries"][0];
    assert_eq!(entry["outcome"], "ok", "{entry}");
    assert_eq!(entry["transport"], "soft", "{entry}");
    assert!(
        entry["address"].as_str().unwrap().starts_with("127.0.0.1:"),
        "{entry}"
    );
}
