//! Helpers of the C test harness: where the built library is, compiling C with the
//! sanitizers, running programs with a time limit.
#![allow(dead_code, unreachable_pub)]

pub mod install;
pub mod kernels;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Warnings as errors.
pub const WARNINGS: &[&str] = &["-Wall", "-Wextra", "-Werror", "-pedantic"];

/// AddressSanitizer (with LeakSanitizer) and UBSan, every UBSan finding fatal.
pub const SANITIZERS: &[&str] = &[
    "-g",
    "-fno-omit-frame-pointer",
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=undefined",
];

/// What a program linked with the static library needs besides it
/// (`rustc --print native-static-libs`). No rdma-core: the verbs transport loads it at run
/// time, so programs link (and run on the software transport) where it is not installed.
pub const NATIVE_LIBS: &[&str] = &[
    "-lgcc_s",
    "-lutil",
    "-lrt",
    "-lpthread",
    "-lm",
    "-ldl",
    "-lc",
];

/// The crate's directory.
pub fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Where cargo put `libnaaice_ap2.{a,so}` for this build. `cargo test` writes them next to
/// the test binary (`target/<profile>/deps/`); `cargo build` copies its own build to
/// `target/<profile>/`, which may be older. The newer pair wins.
pub fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let deps = exe.parent().expect("test binary folder").to_path_buf();
    let candidates = [
        deps.clone(),
        deps.parent().map(Path::to_path_buf).unwrap_or(deps),
    ];
    let built = |dir: &PathBuf| -> Option<std::time::SystemTime> {
        let a = std::fs::metadata(dir.join("libnaaice_ap2.a")).ok()?;
        std::fs::metadata(dir.join("libnaaice_ap2.so")).ok()?;
        a.modified().ok()
    };
    candidates
        .iter()
        .filter_map(|d| built(d).map(|t| (t, d)))
        .max_by_key(|(t, _)| *t)
        .map(|(_, d)| d.clone())
        .unwrap_or_else(|| panic!("libnaaice_ap2.a / .so not found next to {}", exe.display()))
}

/// A scratch folder for this test binary's outputs.
pub fn out_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(&dir).expect("create the output folder");
    dir
}

/// The C compiler (`CC`, default `cc`).
pub fn cc() -> Command {
    Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
}

/// The C++ compiler (`CXX`, default `c++`).
pub fn cxx() -> Command {
    Command::new(std::env::var("CXX").unwrap_or_else(|_| "c++".into()))
}

/// Compiles `sources` (relative to the crate, or absolute) with `compiler`, [`WARNINGS`],
/// `flags` (the language standard, more warnings, [`SANITIZERS`]) and the crate's headers,
/// and links them with the static library into `bin`; panics with the compiler's output if
/// that fails.
pub fn link_with_library(
    mut compiler: Command,
    flags: &[&str],
    sources: &[impl AsRef<Path>],
    bin: &Path,
) {
    compiler
        .args(WARNINGS)
        .args(flags)
        .arg("-I")
        .arg(crate_dir().join("include"));
    for s in sources {
        compiler.arg(crate_dir().join(s));
    }
    compiler
        .arg("-o")
        .arg(bin)
        .arg(lib_dir().join("libnaaice_ap2.a"))
        .args(NATIVE_LIBS);
    run_ok(&mut compiler, Duration::from_secs(300));
}

/// Compiles C11 `sources` (relative to the crate) with the sanitizers against the static
/// library into `out/name`.
pub fn build_sanitized(out: &Path, name: &str, sources: &[&str]) -> PathBuf {
    let bin = out.join(name);
    link_with_library(cc(), &[&["-std=c11"], SANITIZERS].concat(), sources, &bin);
    bin
}

/// Sanitizer and library settings for running a test program.
pub fn sanitizer_env(cmd: &mut Command) -> &mut Command {
    cmd.env(
        "ASAN_OPTIONS",
        "detect_leaks=1:halt_on_error=1:abort_on_error=0",
    )
    .env("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1")
    .env("NAAICE_TRANSPORT", "soft")
    .env("NAAICE_LOG", "warn")
    .env_remove("NAA_SPEC")
    .env_remove("NAA_LOCAL_IP")
}

/// Output of a finished program.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    /// Panics with the program's output unless its stdout has `needle` (for the C tests'
    /// check count: `", 0 failed"`).
    pub fn assert_says(&self, needle: &str) {
        assert!(
            self.stdout.contains(needle),
            "{needle:?} missing.\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout,
            self.stderr
        );
    }

    /// Panics with the program's output unless it exited with 0 and no sanitizer reported.
    pub fn assert_clean(&self, what: &str) {
        assert!(
            self.status.success() && !sanitizer_report(&self.stderr),
            "{what} failed ({}).\n--- stdout\n{}\n--- stderr\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
    }
}

/// True if `stderr` holds a sanitizer report.
pub fn sanitizer_report(stderr: &str) -> bool {
    stderr.contains("ERROR: AddressSanitizer")
        || stderr.contains("ERROR: LeakSanitizer")
        || stderr.contains("runtime error:")
}

fn drain(mut r: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        let _ = tx.send(s);
    });
    rx
}

/// Runs `cmd` to its end, killing it after `limit`.
pub fn run(cmd: &mut Command, limit: Duration) -> Finished {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    finish(Guarded(child), limit, &format!("{cmd:?}"))
}

/// Runs `cmd` and panics with its output unless it succeeds.
pub fn run_ok(cmd: &mut Command, limit: Duration) -> Finished {
    let f = run(cmd, limit);
    f.assert_clean(&format!("{cmd:?}"));
    f
}

/// A child process that is killed if the test ends (or panics) before it does.
pub struct Guarded(pub Child);

impl Drop for Guarded {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Waits for `child` (whose stdout and stderr are piped) up to `limit`.
pub fn finish(mut child: Guarded, limit: Duration, what: &str) -> Finished {
    let out = drain(child.0.stdout.take().expect("piped stdout"));
    let err = drain(child.0.stderr.take().expect("piped stderr"));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.0.try_wait().expect("wait for the child") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.0.kill();
            let _ = child.0.wait();
            let stderr = err.recv_timeout(Duration::from_secs(5)).unwrap_or_default();
            panic!("{what} did not finish within {limit:?}; stderr:\n{stderr}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Finished {
        status,
        stdout: out
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_default(),
        stderr: err
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_default(),
    }
}

/// Starts the C software NAA example `server` on a free loopback port; returns it and the
/// port it printed.
pub fn start_server(mut cmd: Command) -> (Guarded, u16, mpsc::Receiver<String>) {
    let mut child = Guarded(
        cmd.args(["127.0.0.1", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the server"),
    );
    let stdout = child.0.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let first = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the server prints its port");
    let port = first
        .strip_prefix("listening on port ")
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"));
    (child, port, rx)
}

/// Sends SIGTERM to `child` (through `kill(1)`, so the harness needs no unsafe code).
pub fn terminate(child: &Guarded) {
    let status = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -TERM failed");
}

/// Waits for a server started by [`start_server`] to exit after [`terminate`].
pub fn finish_server(mut child: Guarded, lines: mpsc::Receiver<String>) -> Finished {
    let err = drain(child.0.stderr.take().expect("piped stderr"));
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.0.try_wait().expect("wait for the server") {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the server did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stdout = String::new();
    while let Ok(l) = lines.recv_timeout(Duration::from_secs(5)) {
        stdout.push_str(&l);
        stdout.push('\n');
    }
    Finished {
        status,
        stdout,
        stderr: err
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_default(),
    }
}
