//! A log filter that would select nothing (a typo such as `degub` or `verbose`, which
//! `tracing` takes for a target) is a command-line error, from `--log` and from
//! `NAAICE_LOG` alike: exit status 2 and a message naming the accepted forms.

use std::process::{Command, Output};

fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_naaice-bench"))
        .args(args)
        .env_remove("NAAICE_LOG")
        .envs(env.iter().copied())
        .output()
        .expect("run naaice-bench")
}

#[test]
fn a_log_filter_typo_is_a_usage_error() {
    for (args, env, bad) in [
        (&["--log", "degub"][..], &[][..], "degub"),
        (&["--log", "naaice=verbose"], &[], "verbose"),
        (&[], &[("NAAICE_LOG", "verbose")], "verbose"),
    ] {
        let out = run(args, env);
        let text = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: {text}");
        assert!(
            text.contains("--log")
                && text.contains(&format!("\"{bad}\""))
                && text.contains("a level (error, warn, info, debug, trace, off)")
                && text.contains("naaice=debug,warn"),
            "{args:?} {env:?}: {text}"
        );
    }
    let text = String::from_utf8_lossy(&run(&["--log", "degub"], &[]).stderr).into_owned();
    assert!(text.contains("did you mean debug?"), "{text}");
}
