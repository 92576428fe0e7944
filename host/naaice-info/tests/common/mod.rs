//! Running `naaice-info` in the integration tests: with only the library's variables a test
//! sets, its output as text or as the parsed `--json` document.

use std::process::{Command, Output};

use naaice::discovery::environment::VARIABLES;
use serde_json::Value;

/// Runs `naaice-info` with `args` and, of the library's variables, only `env`.
pub(crate) fn info(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_naaice-info"));
    for v in VARIABLES {
        cmd.env_remove(v.name);
    }
    cmd.args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run naaice-info")
}

/// Its standard output.
pub(crate) fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `naaice-info --json` with `args` and `env`: its document and exit status.
pub(crate) fn info_json(args: &[&str], env: &[(&str, &str)]) -> (Value, Option<i32>) {
    let out = info(&[args, &["--json"]].concat(), env);
    let text = stdout(&out);
    let json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    (json, out.status.code())
}
