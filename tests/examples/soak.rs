//! Soak of a `naaice-swnaa` process: many clients running checked RPCs, plus churn (clients
//! in other processes killed with SIGKILL at random points: connecting, in the MRSP, in the
//! middle of an RPC), while the server's resident memory, open descriptors and threads are
//! sampled from `/proc`. Prints a table; fails (exit status 1) if any RPC result is wrong or
//! failed, if the server died, or if descriptors, threads or memory grow without bound.
//!
//! ```sh
//! cargo build -p naaice-swnaa && cargo build -p naaice-tests --example soak
//! target/debug/examples/soak --server target/debug/naaice-swnaa --seconds 45
//! ```
//! `tests/soak/soak.sh` does both (CI runs its short variant).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use naaice::core::{ClientConfig, FunctionCode};
use naaice::transport::soft::SoftEndpoint;
use naaice::{Buffer, Connection};

#[derive(Parser, Debug)]
#[command(about = "Soak of a naaice-swnaa process: checked RPCs, killed clients, /proc samples")]
struct Args {
    /// The naaice-swnaa binary to start.
    #[arg(long)]
    server: Option<String>,
    /// How long the load runs, in seconds.
    #[arg(long, default_value_t = 45)]
    seconds: u64,
    /// Concurrent clients running checked RPCs.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Client processes killed per second (churn).
    #[arg(long, default_value_t = 4)]
    kills_per_second: u32,
    /// Seconds between samples of the server.
    #[arg(long, default_value_t = 3)]
    sample_every: u64,
    /// Internal: run as a churn client against this address (killed by the parent).
    #[arg(long, hide = true)]
    churn_child: Option<SocketAddr>,
}

/// Kernel 1 of the software NAA adds 1 to every byte.
fn kernel() -> FunctionCode {
    FunctionCode::new(1).expect("function code 1")
}

/// xorshift64: sizes, seeds and kill delays without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Region sizes the clients pick from: tiny to 1 MiB.
const SIZES: [usize; 6] = [1, 100, 4096, 65_536, 300_000, 1 << 20];

fn connect(addr: SocketAddr, len: usize) -> naaice::Result<(Connection<SoftEndpoint>, Buffer)> {
    // Bounded waits: a stalled server fails the soak instead of hanging it.
    let mut config = ClientConfig::new(kernel());
    config.mrsp_timeout = Duration::from_secs(30);
    config.rpc_timeout = Duration::from_secs(30);
    naaice_tests::in_place_connection(addr, config, len)
}

/// What the clients counted.
#[derive(Default)]
struct Counters {
    rpcs: AtomicU64,
    wrong: AtomicU64,
    failed: AtomicU64,
    connections: AtomicU64,
    kills: AtomicU64,
}

/// One client: connections of random size, each for a random number of checked RPCs.
fn client(
    addr: SocketAddr,
    seed: u64,
    stop: &AtomicBool,
    counters: &Counters,
    errors: &Mutex<Vec<String>>,
) {
    let mut rng = Rng(seed | 1);
    while !stop.load(Ordering::Relaxed) {
        let len = SIZES[rng.below(SIZES.len() as u64) as usize];
        let (mut conn, buf) = match connect(addr, len) {
            Ok(c) => c,
            Err(e) => {
                counters.failed.fetch_add(1, Ordering::Relaxed);
                errors.lock().unwrap().push(format!("connect/MRSP: {e}"));
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        counters.connections.fetch_add(1, Ordering::Relaxed);
        for _ in 0..1 + rng.below(200) {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let seed = rng.next() as u8;
            {
                let mut data = buf.lock();
                for (i, b) in data.iter_mut().enumerate() {
                    *b = seed.wrapping_add(i as u8);
                }
            }
            match conn.do_transfer() {
                Ok(r) if r.status.is_success() => {
                    let data = buf.lock();
                    let ok = data
                        .iter()
                        .enumerate()
                        .all(|(i, &b)| b == seed.wrapping_add(i as u8).wrapping_add(1));
                    if ok {
                        counters.rpcs.fetch_add(1, Ordering::Relaxed);
                    } else {
                        counters.wrong.fetch_add(1, Ordering::Relaxed);
                        errors
                            .lock()
                            .unwrap()
                            .push(format!("wrong result ({len} bytes)"));
                    }
                }
                Ok(r) => {
                    counters.wrong.fetch_add(1, Ordering::Relaxed);
                    errors
                        .lock()
                        .unwrap()
                        .push(format!("return code {:?}", r.status));
                }
                Err(e) => {
                    counters.failed.fetch_add(1, Ordering::Relaxed);
                    errors.lock().unwrap().push(format!("RPC: {e}"));
                    break;
                }
            }
        }
    }
}

/// Churn child: connects, then runs 4 MiB RPCs until it is killed.
fn churn_child(addr: SocketAddr) -> ExitCode {
    let Ok((mut conn, _buf)) = connect(addr, 4 << 20) else {
        return ExitCode::FAILURE;
    };
    loop {
        if conn.do_transfer().is_err() {
            return ExitCode::FAILURE;
        }
    }
}

/// Starts churn children and kills each after a random 0–300 ms.
fn churn(addr: SocketAddr, per_second: u32, stop: &AtomicBool, counters: &Counters) {
    let exe = std::env::current_exe().expect("own path");
    let mut rng = Rng(0x5eed);
    let pause = Duration::from_secs(1) / per_second.max(1);
    while !stop.load(Ordering::Relaxed) {
        let child = Command::new(&exe)
            .args(["--churn-child", &addr.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        if let Ok(mut child) = child {
            std::thread::sleep(Duration::from_millis(rng.below(300)));
            let _ = child.kill(); // SIGKILL
            let _ = child.wait();
            counters.kills.fetch_add(1, Ordering::Relaxed);
        }
        std::thread::sleep(pause);
    }
}

/// One sample of the server from /proc.
#[derive(Clone, Copy, Debug)]
struct Sample {
    at: Duration,
    rss_kib: u64,
    fds: usize,
    threads: u64,
}

fn sample(pid: u32, start: Instant) -> Option<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
    };
    Some(Sample {
        at: start.elapsed(),
        rss_kib: field("VmRSS:")?,
        threads: field("Threads:")?,
        fds: std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count(),
    })
}

/// Starts the server on a free loopback port; returns it with its address and a flag set
/// when its log shows a panic.
fn start_server(path: &str) -> (Child, SocketAddr, Arc<AtomicBool>) {
    let mut child = Command::new(path)
        .args([
            "--address",
            "127.0.0.1",
            "--port",
            "0",
            "--max-connections",
            "64",
        ])
        .args(["--log", "warn"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {path}: {e}"));
    let stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    let panicked = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&panicked);
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("naaice-swnaa listening on ") {
                let _ = tx.send(rest.split(' ').next().unwrap_or("").to_owned());
            }
            if line.contains("panicked") {
                eprintln!("server: {line}");
                flag.store(true, Ordering::Relaxed);
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the server never said where it listens")
        .parse()
        .expect("listening address");
    (child, addr, panicked)
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(addr) = args.churn_child {
        return churn_child(addr);
    }
    let Some(server) = args.server.as_deref() else {
        eprintln!("soak: --server PATH (the naaice-swnaa binary) is required");
        return ExitCode::FAILURE;
    };
    let (mut child, addr, panicked) = start_server(server);
    let pid = child.id();
    let start = Instant::now();
    // Warm-up: one connection of every size, so lazily created server state exists.
    for len in SIZES {
        let (mut conn, _buf) = connect(addr, len).expect("warm-up connection");
        conn.do_transfer().expect("warm-up RPC");
    }
    std::thread::sleep(Duration::from_millis(500));
    let idle = sample(pid, start).expect("server sample");
    println!(
        "soak: {} clients, {} kills/s, {} s against {server} (pid {pid}) at {addr}",
        args.clients, args.kills_per_second, args.seconds
    );
    println!(
        "{:>6} {:>9} {:>5} {:>8} {:>9} {:>7} {:>6}",
        "t [s]", "RSS [MiB]", "fds", "threads", "RPCs", "conns", "kills"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(Counters::default());
    let errors = Arc::new(Mutex::new(Vec::new()));
    let mut threads = Vec::new();
    for i in 0..args.clients {
        let (stop, counters, errors) = (
            Arc::clone(&stop),
            Arc::clone(&counters),
            Arc::clone(&errors),
        );
        threads.push(std::thread::spawn(move || {
            client(
                addr,
                0x9E37_79B9 * (i as u64 + 1),
                &stop,
                &counters,
                &errors,
            );
        }));
    }
    {
        let (stop, counters) = (Arc::clone(&stop), Arc::clone(&counters));
        let per_second = args.kills_per_second;
        threads.push(std::thread::spawn(move || {
            churn(addr, per_second, &stop, &counters)
        }));
    }
    let print = |s: &Sample| {
        println!(
            "{:>6.0} {:>9.1} {:>5} {:>8} {:>9} {:>7} {:>6}",
            s.at.as_secs_f64(),
            s.rss_kib as f64 / 1024.0,
            s.fds,
            s.threads,
            counters.rpcs.load(Ordering::Relaxed),
            counters.connections.load(Ordering::Relaxed),
            counters.kills.load(Ordering::Relaxed)
        );
    };
    print(&idle);
    let mut samples = Vec::new();
    let end = Instant::now() + Duration::from_secs(args.seconds);
    while Instant::now() < end {
        std::thread::sleep(Duration::from_secs(args.sample_every).min(end - Instant::now()));
        let Some(s) = sample(pid, start) else { break };
        print(&s);
        samples.push(s);
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    // Every client is gone: the server must be back where it was when idle. Its workers of
    // ended connections wait 30 s for new ones before they end (all but one, which the idle
    // sample counts already), so that long at least.
    let settle = Instant::now() + Duration::from_secs(45);
    let mut after = sample(pid, start);
    while after.is_some_and(|s| s.fds > idle.fds || s.threads > idle.threads)
        && Instant::now() < settle
    {
        std::thread::sleep(Duration::from_millis(200));
        after = sample(pid, start);
    }
    let exited = child.try_wait().ok().flatten();
    let _ = child.kill();
    let _ = child.wait();

    let mut failures = Vec::new();
    let Some(after) = after else {
        match exited {
            Some(status) => println!("soak: FAILED: the server died ({status})"),
            None => println!("soak: FAILED: the server's /proc entry could not be read"),
        }
        return ExitCode::FAILURE;
    };
    println!("after the clients left:");
    print(&after);
    let rpcs = counters.rpcs.load(Ordering::Relaxed);
    let wrong = counters.wrong.load(Ordering::Relaxed);
    let failed = counters.failed.load(Ordering::Relaxed);
    if let Some(status) = exited {
        failures.push(format!("the server died ({status})"));
    }
    if panicked.load(Ordering::Relaxed) {
        failures.push("the server's log shows a panic".to_owned());
    }
    if wrong > 0 || failed > 0 {
        let errors = errors.lock().unwrap();
        failures.push(format!(
            "{wrong} wrong and {failed} failed RPCs or connections; first: {:?}",
            &errors[..errors.len().min(5)]
        ));
    }
    if rpcs == 0 {
        failures.push("no RPC completed".to_owned());
    }
    if after.fds > idle.fds || after.threads > idle.threads {
        failures.push(format!(
            "descriptors or threads leaked: {} fds / {} threads after, {} / {} idle before",
            after.fds, after.threads, idle.fds, idle.threads
        ));
    }
    // Memory may grow while the allocator warms up, but not keep growing: the last third of
    // the run may not exceed the first third by more than half plus 64 MiB.
    let third = samples.len() / 3;
    if third > 0 {
        let max = |s: &[Sample]| s.iter().map(|s| s.rss_kib).max().unwrap_or(0);
        let (early, late) = (
            max(&samples[..third]),
            max(&samples[samples.len() - third..]),
        );
        println!(
            "RSS max: first third {:.1} MiB, last third {:.1} MiB",
            early as f64 / 1024.0,
            late as f64 / 1024.0
        );
        if late > early + early / 2 + (64 << 10) {
            failures.push(format!(
                "resident memory keeps growing: {early} KiB → {late} KiB"
            ));
        }
    }
    let secs = args.seconds.max(1);
    println!(
        "soak: {rpcs} checked RPCs ({} per s), {} connections, {} clients killed, {wrong} wrong, {failed} failed",
        rpcs / secs,
        counters.connections.load(Ordering::Relaxed),
        counters.kills.load(Ordering::Relaxed)
    );
    if failures.is_empty() {
        println!("soak: OK");
        ExitCode::SUCCESS
    } else {
        for f in &failures {
            println!("soak: FAILED: {f}");
        }
        ExitCode::FAILURE
    }
}
