//! Installing with `install.sh` into a scratch prefix, from this test build's libraries and
//! programs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::{crate_dir, lib_dir, run_ok};

const LIMIT: Duration = Duration::from_secs(300);

/// Builds `naaice-swnaa`, `naaice-bench` and `naaice-info` in this test's profile and target folder (cargo
/// holds no lock on it while tests run); returns the folder holding them.
pub fn programs_dir() -> PathBuf {
    let lib = lib_dir();
    let profile_dir = if lib.ends_with("deps") {
        lib.parent().expect("profile folder").to_path_buf()
    } else {
        lib
    };
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev".to_owned(),
        Some(name) => name.to_owned(),
        None => panic!("no profile folder in {}", profile_dir.display()),
    };
    let target = profile_dir.parent().expect("target folder");
    run_ok(
        Command::new(env!("CARGO"))
            .args(["build", "--locked", "--profile", &profile])
            .args([
                "-p",
                "naaice-swnaa",
                "-p",
                "naaice-bench",
                "-p",
                "naaice-info",
            ])
            .arg("--target-dir")
            .arg(target)
            .current_dir(crate_dir()),
        LIMIT,
    );
    profile_dir
}

/// Runs `install.sh prefix` (after emptying `prefix`) with this build's libraries and
/// programs; returns its standard output.
pub fn install(prefix: &Path) -> String {
    let _ = std::fs::remove_dir_all(prefix);
    let f = run_ok(
        Command::new("sh")
            .arg(crate_dir().join("install.sh"))
            .arg(prefix)
            .env("NAAICE_LIB_DIR", lib_dir())
            .env("NAAICE_BIN_DIR", programs_dir()),
        LIMIT,
    );
    f.stdout
}
