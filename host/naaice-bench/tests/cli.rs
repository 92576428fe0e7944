//! The `naaice-bench` command line: help, clear errors for bad input, and a tiny sweep
//! against its own software NAA that writes every output file. (`tests/bench/ci.sh` runs it
//! against a separately started `naaice-swnaa` and checks the files' contents.)

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The shortest sweep: one size of 1 byte, one repetition, three steady RPCs, no plots.
const QUICK: [&str; 7] = [
    "--max-size",
    "1",
    "--reps",
    "1",
    "--steady",
    "3",
    "--no-plots",
];

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_naaice-bench"))
        .args(args)
        .output()
        .expect("run naaice-bench")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs `naaice-bench` with `args` and `--out` a fresh directory `name` of the tests' scratch
/// space; checks that it succeeded and returns the directory and what it printed.
fn bench_into(name: &str, args: &[&str]) -> (PathBuf, Output) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    let mut all = args.to_vec();
    all.extend(["--out", dir.to_str().expect("UTF-8 path")]);
    let out = bench(&all);
    assert!(out.status.success(), "{}", stderr(&out));
    (dir, out)
}

/// Each of `plots` in `dir` was written and holds more than a header.
fn assert_plots(dir: &Path, plots: &[&str]) {
    for plot in plots {
        let len = std::fs::metadata(dir.join(plot)).map_or(0, |m| m.len());
        assert!(len > 1000, "{plot}: {len} bytes");
    }
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
        "--clients <N,...>",
        "--size <SIZE,...>",
        "--duration",
        "--client-processes",
        "--api",
        "--overlap",
        "--isolation",
        "--big-size",
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
    let cases: [(&[&str], &str); 3] = [
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

#[test]
fn bad_values_are_command_line_errors() {
    // Exit status 2 (a usage error, before anything runs), naming the option and the rule.
    let cases: [(&[&str], &str); 8] = [
        (&["--max-size", "0"], "--max-size"),
        (&["--stream-time", "0"], "--stream-time"),
        (&["--reps", "0"], "--reps"),
        (&["--steady", "0"], "--steady"),
        (&["--transport", "auto"], "one transport"),
        (
            &["--naa", "127.0.0.1:1", "--address", "127.0.0.1"],
            "--address",
        ),
        (&["--clients", "1", "--size", "0"], "--size"),
        (&["--clients", "1", "--duration", "0"], "--duration"),
    ];
    for (args, want) in cases {
        let out = bench(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
    }
}

#[cfg(feature = "verbs")]
#[test]
fn the_transport_comes_from_naaice_transport_unless_the_command_line_names_one() {
    let with_env = |value: &str, args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_naaice-bench"))
            .args(args)
            .env("NAAICE_TRANSPORT", value)
            .output()
            .expect("run naaice-bench")
    };
    for (value, args, status, says) in [
        // NAAICE_TRANSPORT=verbs is read: the in-process NAA over verbs needs --address.
        (
            "verbs",
            &["--max-size", "1"][..],
            1,
            "--transport verbs without --naa needs --address",
        ),
        // ... and so is its ack-delay rule.
        (
            "verbs",
            &["--ack-delay", "50us"],
            2,
            "software transport only",
        ),
        // A bad value is a usage error naming the variable.
        (
            "carrier-pigeon",
            &["--max-size", "1"],
            2,
            "NAAICE_TRANSPORT",
        ),
    ] {
        let out = with_env(value, args);
        assert_eq!(out.status.code(), Some(status), "{}", stderr(&out));
        assert!(stderr(&out).contains(says), "{}", stderr(&out));
    }
    // The command line wins, and `auto` (or nothing) is the tool's default, soft.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("transport-env");
    for (value, args) in [("verbs", &["--transport", "soft"][..]), ("auto", &[][..])] {
        let _ = std::fs::remove_dir_all(&dir);
        let out = with_env(
            value,
            &[
                args,
                &QUICK,
                &[
                    "--stream-time",
                    "10ms",
                    "--out",
                    dir.to_str().expect("UTF-8 path"),
                ],
            ]
            .concat(),
        );
        assert!(out.status.success(), "{value} {args:?}: {}", stderr(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("over soft"), "{value} {args:?}: {text}");
    }
}

#[test]
fn a_closed_stdout_pipe_ends_it_quietly() {
    use std::os::unix::process::ExitStatusExt;
    // `naaice-bench … | head -0`: its first line goes into a pipe nobody reads.
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("closed-pipe");
    let out = Command::new(env!("CARGO_BIN_EXE_naaice-bench"))
        .args(QUICK)
        .args(["--out", dir.to_str().expect("UTF-8 path")])
        .env_remove("NAAICE_TRANSPORT")
        .stdout(writer)
        .output()
        .expect("run naaice-bench");
    let text = stderr(&out);
    assert!(!text.contains("panicked"), "{text}");
    assert_ne!(out.status.code(), Some(101), "{text}");
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{:?}: {text}",
        out.status
    );
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
    let (dir, out) = bench_into(
        "tiny-sweep",
        &["--max-size", "100", "--reps", "2", "--steady", "5"],
    );
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
    assert_plots(
        &dir,
        &[
            "latency.png",
            "latency.svg",
            "bandwidth.png",
            "bandwidth.svg",
        ],
    );
}

/// docs/configuration.md's table of this binary's options is what the binary accepts, and the
/// man page has the usual sections.
#[test]
fn the_configuration_reference_and_man_page_are_the_code() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let exe = Path::new(env!("CARGO_BIN_EXE_naaice-bench"));
    let table = naaice_cli::check_binary_reference(exe, &repo).unwrap();
    assert!(table.contains("`--max-size` |  | `1GiB` | SIZE"), "{table}");
}

/// The rows of a CSV after its `#` lines, as (header, rows of cells).
fn csv_rows(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    let split = |l: &str| l.split(',').map(str::to_owned).collect::<Vec<_>>();
    let header = split(lines.next().expect("header"));
    (header, lines.map(split).collect())
}

/// `--clients`: threads with the Rust API, the overlap case and the isolation test against
/// the in-process NAA; every row has positive rates, a raw echo beside it and the fairness.
#[test]
fn many_clients_write_their_rows() {
    let (dir, _) = bench_into(
        "clients-threads",
        &[
            "--clients",
            "1,2",
            "--size",
            "64,4KiB",
            "--duration",
            "200ms",
            "--overlap",
            "--isolation",
            "--big-size",
            "64KiB",
        ],
    );
    let (header, rows) = csv_rows(&dir.join("clients.csv"));
    let col = |row: &[String], name: &str| -> String {
        let i = header.iter().position(|h| h == name);
        row[i.unwrap_or_else(|| panic!("no column {name}"))].clone()
    };
    // (threads, overlap) × N 1, 2 × 2 sizes.
    assert_eq!(rows.len(), 8, "{rows:?}");
    for row in &rows {
        for name in [
            "rpc_per_s",
            "p99_us",
            "slowest_vs_mean",
            "client_cpu_us_per_rpc",
            "naa_cpu_us_per_rpc",
            "raw_rpc_per_s",
            "rpc_vs_raw",
        ] {
            let v: f64 = col(row, name).parse().unwrap_or(-1.0);
            assert!(v > 0.0, "{name} = {v} in {row:?}");
        }
    }
    let modes: Vec<String> = rows.iter().map(|r| col(r, "mode")).collect();
    assert_eq!(modes.iter().filter(|m| *m == "overlap").count(), 4);
    let (iso_header, iso) = csv_rows(&dir.join("isolation.csv"));
    assert_eq!(iso.len(), 1, "{iso:?}");
    assert!(iso_header.contains(&"p99_rise_vs_big".to_owned()));
    let json = std::fs::read_to_string(dir.join("clients.json")).expect("clients.json");
    assert!(json.contains("\"rows\": [") && json.contains("\"isolation\": ["));
    assert_plots(&dir, &["clients-throughput.png", "clients-throughput.svg"]);
}

/// `--clients` with a process per client calling the C ABI, and one thread driving both
/// handles with `naa_waitany`.
#[test]
fn many_clients_through_the_c_abi_in_processes() {
    let (dir, _) = bench_into(
        "clients-c",
        &[
            "--clients",
            "2",
            "--api",
            "c",
            "--client-processes",
            "--overlap",
            "--duration",
            "200ms",
            "--no-plots",
        ],
    );
    let (header, rows) = csv_rows(&dir.join("clients.csv"));
    assert_eq!(rows.len(), 2, "{rows:?}");
    let at = |name: &str| header.iter().position(|h| h == name).expect(name);
    for (row, mode) in rows.iter().zip(["processes", "overlap"]) {
        assert_eq!(row[at("mode")], mode);
        assert_eq!(row[at("api")], "c");
        assert_eq!(row[at("clients")], "2");
        let rpcs: u64 = row[at("rpcs")].parse().expect("rpcs");
        assert!(rpcs > 0, "{rows:?}");
    }
}

#[test]
fn idle_connections_are_measured_on_both_sides() {
    let (dir, out) = bench_into("idle", &["--idle", "4", "--duration", "300ms"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("4 idle connections"), "{text}");
    let (header, rows) = csv_rows(&dir.join("idle.csv"));
    assert_eq!(
        header,
        [
            "process",
            "connections",
            "seconds",
            "cpu_s",
            "voluntary",
            "involuntary"
        ]
    );
    let processes: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(processes, ["client", "naa"]);
    for row in &rows {
        assert_eq!(row[1], "4");
        let seconds: f64 = row[2].parse().expect("seconds");
        assert!(seconds >= 0.3, "{row:?}");
    }
}

#[test]
fn busy_compares_both_policies_beside_busy_loops() {
    let (dir, out) = bench_into(
        "busy",
        &["--busy", "1", "--max-size", "2", "--steady", "20"],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("1 busy loops"), "{text}");
    assert!(text.contains("worst ratio adaptive / sleep"), "{text}");
    let (header, rows) = csv_rows(&dir.join("busy.csv"));
    assert_eq!(
        header,
        ["byte_length", "busy_loops", "policy", "p50_s", "mean_s"]
    );
    let got: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r[0].as_str(), r[2].as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("1", "adaptive"),
            ("1", "sleep"),
            ("2", "adaptive"),
            ("2", "sleep")
        ]
    );
    for row in &rows {
        let p50: f64 = row[3].parse().expect("p50");
        assert!(p50 > 0.0, "{row:?}");
    }
    // The busy loops ended with the run.
    let spinning = std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read_to_string(e.path().join("cmdline")).ok())
        .filter(|c| c.contains("naaice-bench") && c.contains("--spin"))
        .count();
    assert_eq!(spinning, 0, "busy loops left running");
}

#[test]
fn bad_client_options_are_clear_errors() {
    let cases: [(&[&str], i32, &str); 5] = [
        (&["--clients", "0"], 2, "--clients"),
        (&["--clients", "1", "--size", "0"], 2, "--size"),
        (&["--clients", "1", "--duration", "0"], 2, "--duration"),
        (
            &["--clients", "2", "--isolation", "--big-size", "64"],
            2,
            "--big-size",
        ),
        (
            &[
                "--clients",
                "1",
                "--naa",
                "127.0.0.1:1",
                "--duration",
                "100ms",
            ],
            1,
            "127.0.0.1:1",
        ),
    ];
    for (args, code, want) in cases {
        let out = bench(args);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
    }
    // Options of one mode are refused in the other.
    for args in [
        &["--overlap"][..],
        &["--api", "c"],
        &["--clients", "2", "--steady", "5"],
        &["--clients", "2", "--big-size", "1MiB"],
    ] {
        let out = bench(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
}
