//! How `naaice-swnaa` ends on a bad command line (exit status 2, naming the option) and with
//! its output a pipe nobody reads any more (quietly, as C programs do: no panic).

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output, Stdio};

fn swnaa(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_naaice-swnaa"))
        .args(args)
        .env_remove("NAAICE_TRANSPORT")
        .env_remove("NAAICE_LOG")
        .output()
        .expect("run naaice-swnaa")
}

#[test]
fn bad_values_are_command_line_errors() {
    for (args, option, why) in [
        (
            &["--max-connections", "0"][..],
            "--max-connections",
            "at least 1",
        ),
        (
            &["--max-connections=-3"][..],
            "--max-connections",
            "not a count",
        ),
        (
            &["--max-connections", "many"][..],
            "--max-connections",
            "not a count",
        ),
    ] {
        let out = swnaa(&[&["--address", "127.0.0.1", "--port", "0"][..], args].concat());
        let text = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {text}");
        assert!(
            text.contains(option) && text.contains(why),
            "{args:?}: {text}"
        );
    }
}

/// A pipe whose reading end is closed already: writing into it fails (EPIPE, or SIGPIPE).
fn closed_pipe() -> Stdio {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    Stdio::from(writer)
}

/// Ended quietly after writing into a closed pipe: by SIGPIPE, as a C program would, and not
/// by a panic (exit status 101) or an error message.
fn assert_quiet_end(out: &Output, what: &str) {
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        !text.contains("panicked") && !text.contains("Broken pipe"),
        "{what}: {text}"
    );
    assert_ne!(out.status.code(), Some(101), "{what}: {text}");
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{what}: {:?}",
        out.status
    );
}

#[test]
fn a_closed_stdout_pipe_ends_it_quietly() {
    // `naaice-swnaa --man-page | head -0`
    let out = Command::new(env!("CARGO_BIN_EXE_naaice-swnaa"))
        .arg("--man-page")
        .stdout(closed_pipe())
        .stderr(Stdio::piped())
        .output()
        .expect("run naaice-swnaa");
    assert_quiet_end(&out, "--man-page into a closed pipe");
}

#[test]
fn a_closed_stderr_pipe_ends_the_server_quietly() {
    // `naaice-swnaa 2>&1 | head -0`: the banner goes into a closed pipe.
    let mut child = Command::new(env!("CARGO_BIN_EXE_naaice-swnaa"))
        .args(["--address", "127.0.0.1", "--port", "0"])
        .env_remove("NAAICE_TRANSPORT")
        .stdout(Stdio::null())
        .stderr(closed_pipe())
        .spawn()
        .expect("start naaice-swnaa");
    let status = child.wait().expect("wait for naaice-swnaa");
    assert_ne!(status.code(), Some(101), "{status:?}");
    assert_eq!(status.signal(), Some(libc::SIGPIPE), "{status:?}");
}
