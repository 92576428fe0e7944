//! `--idle N`: what idle connections cost. Opens N connections (a handle each, with one RPC
//! so that each is fully set up) to a software NAA in a process of its own (this program with
//! `--serve`), or to `--naa` (its process given with `--naa-pid`), leaves them idle for
//! `--duration`, and reports the CPU time and the context switches of this process and of the
//! NAA's over that time: per idle connection and second, and as a share of one core. Writes
//! idle.csv.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use naaice::swnaa::{KernelRegistry, SoftNaa, SoftNaaConfig};
use naaice::{Naa, NaaOptions, Param};

use crate::Error;
use crate::base::setup::write_file;
use crate::base::usage::{Process, Usage};
use crate::cli::Args;

/// Time the connections are left alone before the measurement starts.
const SETTLE: Duration = Duration::from_secs(1);
/// What `--serve` prints before the address.
const LISTENING: &str = "listening on ";

/// The NAA process started for the measurement; ended when dropped.
struct Server {
    child: Child,
    /// Kept open: the server ends when it reaches end of file.
    _stdout: BufReader<ChildStdout>,
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `--serve` with this run's transport options; returns it and its address.
fn start_server(args: &Args, connections: usize) -> Result<(Server, SocketAddr), Error> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(&exe);
    cmd.arg("--serve")
        .arg("--serve-connections")
        .arg(connections.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    if let Some(policy) = args.wait_policy() {
        cmd.arg("--wait").arg(policy.to_string());
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("starting the NAA process ({}): {e}", exe.display()))?;
    let stdout = child.stdout.take().ok_or("the NAA process has no stdout")?;
    let mut stdout = BufReader::new(stdout);
    let mut line = String::new();
    stdout.read_line(&mut line)?;
    let addr = line
        .trim()
        .strip_prefix(LISTENING)
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| format!("the NAA process printed {line:?}, not its address"))?;
    Ok((
        Server {
            child,
            _stdout: stdout,
        },
        addr,
    ))
}

/// `--serve`: a software NAA on loopback that prints its address and serves until its
/// standard input ends.
pub(crate) fn serve(args: &Args) -> Result<(), Error> {
    let transport = crate::base::setup::transport(args)?;
    let config = SoftNaaConfig {
        max_connections: args.serve_connections.max(1),
        wait: crate::base::setup::wait(),
        ..SoftNaaConfig::default()
    };
    let naa = SoftNaa::bind(
        transport,
        SocketAddr::from(([127, 0, 0, 1], 0)),
        config,
        KernelRegistry::builtin(),
    )?
    .spawn()?;
    println!("{LISTENING}{}", naa.local_addr());
    // Until the parent closes our standard input (or exits).
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    naa.shutdown();
    Ok(())
}

/// One process's cost over `secs` for `n` connections: (CPU share of a core, context
/// switches per connection and second).
fn cost(u: Usage, n: u32, secs: f64) -> (f64, f64) {
    let switches = (u.voluntary + u.involuntary) as f64;
    (u.cpu.as_secs_f64() / secs, switches / f64::from(n) / secs)
}

/// Runs `--idle N`.
pub(crate) fn run(args: &Args, n: u32) -> Result<(), Error> {
    let transport = crate::base::setup::transport(args)?;
    let connections = usize::try_from(n)?;
    let (server, naa_addr, naa_process) = match &args.naa {
        Some(_) => {
            let (addr, _) = crate::base::setup::naa(args, &transport, connections)?;
            let pid = args
                .naa_pid
                .ok_or("--idle with --naa needs --naa-pid (the NAA's process to measure)")?;
            (None, addr, Process::of(pid)?)
        }
        None => {
            let (server, addr) = start_server(args, connections)?;
            let pid = server.child.id();
            (Some(server), addr, Process::of(pid)?)
        }
    };
    let this = Process::this()?;
    let mut handles = Vec::with_capacity(connections);
    for _ in 0..n {
        let p = Param::zeroed(64);
        let mut h: Naa = Naa::create_with(
            &transport,
            args.fncode.into(),
            vec![p.clone()],
            vec![p],
            &NaaOptions {
                wait: crate::base::setup::wait(),
                ..NaaOptions::at(naa_addr)
            },
        )?;
        h.invoke()?;
        h.wait()?;
        handles.push(h);
    }
    std::thread::sleep(SETTLE);
    let read = |p: &Process| p.read().ok_or("a measured process ended");
    let (client0, naa0) = (read(&this)?, read(&naa_process)?);
    let start = Instant::now();
    std::thread::sleep(args.duration);
    let (client1, naa1) = (read(&this)?, read(&naa_process)?);
    let secs = start.elapsed().as_secs_f64();
    drop(handles);
    drop(server);
    let rows = [("client", client1 - client0), ("naa", naa1 - naa0)];
    println!(
        "naaice-bench --idle {n}: {n} idle connections over {}, {secs:.1} s",
        transport.name()
    );
    println!(
        "{:>8}  {:>12}  {:>14}  {:>26}",
        "process", "CPU (core %)", "CPU time (ms)", "switches / connection / s"
    );
    let mut csv = String::from("process,connections,seconds,cpu_s,voluntary,involuntary\n");
    for (name, u) in rows {
        let (share, per) = cost(u, n, secs);
        println!(
            "{name:>8}  {:>12.3}  {:>14.3}  {per:>26.3}",
            share * 100.0,
            u.cpu.as_secs_f64() * 1e3
        );
        csv.push_str(&format!(
            "{name},{n},{secs:.3},{:.6},{},{}\n",
            u.cpu.as_secs_f64(),
            u.voluntary,
            u.involuntary
        ));
    }
    std::fs::create_dir_all(&args.out)?;
    write_file(&args.out.join("idle.csv"), &csv)?;
    Ok(())
}
