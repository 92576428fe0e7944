//! The `naaice-bench` command line: help, clear errors for bad input, and a tiny sweep
//! against its own software NAA that writes every output file. (`tests/bench/ci.sh` runs it
//! against a separately started `naaice-swnaa` and checks the files' contents.)

use std::path::Path;
use std::process::{Command, Output};

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_naaice-bench"))
        .args(args)
        .output()
        .expect("run naaice-bench")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn help_explains_every_option() {
    let out = bench(&["--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for option in [
        "--naa <HOST:PORT>",
        "--transport",
        "--address",
        "--fncode",
        "--max-size",
        "--reps",
        "--steady",
        "--stream-time",
        "--compare <FILE.csv>",
        "--out",
        "--csv",
        "--summary",
        "--no-plots",
        "--ack-delay",
        "--wait <POLICY>",
        "--busy-poll",
        "--log",
    ] {
        let line = text
            .lines()
            .position(|l| {
                let l = l.trim_start();
                // `--opt …` or `-o, --opt …`
                l.starts_with(option) || l.get(4..).is_some_and(|l| l.starts_with(option))
            })
            .unwrap_or_else(|| panic!("{option} missing from --help"));
        // clap puts the explanation on the next line in the long help.
        let next = text.lines().nth(line + 1).unwrap_or("");
        assert!(
            next.trim().len() > 10,
            "{option} has no explanation: {next:?}"
        );
    }
    assert!(text.contains("byte_length,setup_time,transfer_time"));
}

#[test]
fn bad_input_is_a_clear_error() {
    let cases: [(&[&str], &str); 4] = [
        (&["--max-size", "0"], "--max-size"),
        (
            &["--compare", "/nonexistent/ref.csv", "--no-plots"],
            "--compare",
        ),
        (&["--naa", "no-such-host.invalid:12345"], "--naa"),
        (&["--naa", "127.0.0.1:1", "--max-size", "1"], "connect"),
    ];
    for (args, want) in cases {
        let out = bench(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
    }
    let out = bench(&["--fncode", "200"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[cfg(not(feature = "verbs"))]
#[test]
fn verbs_in_a_build_without_it_says_how_to_get_it() {
    let out = bench(&["--transport", "verbs"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--features verbs"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_tiny_sweep_writes_every_file() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tiny-sweep");
    let _ = std::fs::remove_dir_all(&dir);
    let out = bench(&[
        "--max-size",
        "100",
        "--reps",
        "2",
        "--steady",
        "5",
        "--out",
        dir.to_str().expect("UTF-8 path"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lowlevel = std::fs::read_to_string(dir.join("lowlevel.csv")).expect("lowlevel.csv");
    let mut lines = lowlevel.lines();
    assert_eq!(lines.next(), Some("byte_length,setup_time,transfer_time"));
    // 11 reference sizes up to 100 bytes (1 … 72), 2 new connections each.
    assert_eq!(lines.count(), 22, "{lowlevel}");
    let middleware = std::fs::read_to_string(dir.join("middleware.csv")).expect("middleware");
    assert!(middleware.starts_with("byte_length,transfer_time\n"));
    assert_eq!(middleware.lines().count(), 23);
    let summary = std::fs::read_to_string(dir.join("summary.csv")).expect("summary.csv");
    // The header, 11 reference sizes and 64 B.
    assert_eq!(
        summary.lines().filter(|l| !l.starts_with('#')).count(),
        1 + 12
    );
    // Over the software transport, the run is judged against its own raw TCP limit.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("software transport against the raw TCP limit of this run:")
            && stdout.contains("up to 1 MiB, steady RPC / raw round trip: worst"),
        "{stdout}"
    );
    for plot in [
        "latency.png",
        "latency.svg",
        "bandwidth.png",
        "bandwidth.svg",
    ] {
        let len = std::fs::metadata(dir.join(plot)).map_or(0, |m| m.len());
        assert!(len > 1000, "{plot}: {len} bytes");
    }
}

/// docs/configuration.md's table of this binary's options is what the binary accepts, and the
/// man page has the usual sections.
#[test]
fn the_configuration_reference_and_man_page_are_the_code() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let exe = Path::new(env!("CARGO_BIN_EXE_naaice-bench"));
    let table = naaice::cli::check_binary_reference(exe, &repo).unwrap();
    assert!(table.contains("`--max-size` |  | `1GiB` | SIZE"), "{table}");
}
