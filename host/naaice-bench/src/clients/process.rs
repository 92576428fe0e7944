//! The benchmark's side of its client processes: starts them (this binary again, in the
//! hidden `--worker` mode), lets them all start together, and reads what they measured.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use crate::Error;
use crate::cli::Args;
use crate::clients::kind::WorkerKind;
use crate::clients::result::{ClientResult, parse_usage};
use crate::clients::worker::RPC_TIMEOUT;
use crate::usage::{Process, Usage};

/// One client process: what its threads do, against which peer, a client per size.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    /// What its threads do.
    pub kind: WorkerKind,
    /// The NAA or the raw echo peer.
    pub target: SocketAddr,
    /// A client per entry (its RPC size).
    pub sizes: Vec<u64>,
}

/// The client processes of `sizes` clients: one process with a thread each, or a process
/// each.
pub(crate) fn groups(
    processes: bool,
    kind: WorkerKind,
    target: SocketAddr,
    sizes: &[u64],
) -> Vec<Group> {
    if processes {
        sizes
            .iter()
            .map(|&s| Group {
                kind,
                target,
                sizes: vec![s],
            })
            .collect()
    } else {
        vec![Group {
            kind,
            target,
            sizes: sizes.to_vec(),
        }]
    }
}

/// What one measurement (one point) gave.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// Every client's result.
    pub clients: Vec<ClientResult>,
    /// The client processes' usage, summed.
    pub client_usage: Usage,
    /// The serving side's usage (the NAA or the echo peer), if its process is known.
    pub server_usage: Option<Usage>,
}

/// A started client process; killed if dropped before it finished.
struct Running {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Running {
    fn line(&mut self) -> Result<String, Error> {
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            let status = self.child.wait()?;
            return Err(format!("a client process ended early ({status})").into());
        }
        Ok(line.trim_end().to_owned())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The command line of a client process of `group`.
fn command(args: &Args, group: &Group) -> Result<Command, Error> {
    let mut cmd = Command::new(std::env::current_exe()?);
    let sizes: Vec<String> = group.sizes.iter().map(u64::to_string).collect();
    cmd.arg("--worker")
        .arg(group.kind.name())
        .arg("--worker-target")
        .arg(group.target.to_string())
        .arg("--worker-sizes")
        .arg(sizes.join(","))
        .arg("--duration")
        .arg(format!("{}", args.duration.as_secs_f64()))
        .arg("--fncode")
        .arg(args.fncode.to_string())
        .arg("--transport")
        .arg(args.transport.name())
        .arg("--log")
        .arg(&args.log);
    if let Some(d) = args.ack_delay {
        cmd.arg("--ack-delay").arg(format!("{}", d.as_micros()));
    }
    if let Some(w) = args.wait_policy() {
        cmd.arg("--wait")
            .arg(w.to_string())
            .env("NAAICE_WAIT", w.to_string());
    }
    if group.kind == WorkerKind::C {
        // The C ABI takes its NAA from NAA_SPEC: an entry per handle (a process uses each
        // entry for one handle at a time).
        let ip = match group.target {
            SocketAddr::V4(a) => a.ip().to_string(),
            SocketAddr::V6(a) => format!("[{}]", a.ip()),
        };
        let entry = format!(
            "{ip}:{}:{}:1:{}",
            group.target.port(),
            args.fncode,
            args.transport.name()
        );
        cmd.env("NAA_SPEC", vec![entry; group.sizes.len()].join(","))
            .env("NAAICE_TRANSPORT", args.transport.name())
            .env("NAAICE_RPC_TIMEOUT", RPC_TIMEOUT.as_secs().to_string());
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    Ok(cmd)
}

/// Runs one measurement: starts a process per group, waits until every client is connected,
/// starts them together, and collects their results; `server` is the serving side's
/// process (its usage is read around the measurement).
pub(crate) fn run_point(
    args: &Args,
    groups: &[Group],
    server: Option<&Process>,
) -> Result<Outcome, Error> {
    let mut running = Vec::with_capacity(groups.len());
    for g in groups {
        let mut child = command(args, g)?.spawn()?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        running.push(Running {
            child,
            stdin: Some(stdin),
            stdout,
        });
    }
    for r in &mut running {
        let line = r.line()?;
        if line != "ready" {
            return Err(format!("a client process said {line:?} instead of ready").into());
        }
    }
    let before = server.and_then(Process::read);
    for r in &mut running {
        let stdin = r.stdin.as_mut().ok_or("no stdin")?;
        stdin.write_all(b"go\n")?;
        stdin.flush()?;
    }
    let mut clients = Vec::new();
    let mut client_usage = Usage::default();
    for r in &mut running {
        loop {
            let line = r.line()?;
            if line == "end" {
                break;
            } else if line.starts_with("usage ") {
                client_usage = client_usage + parse_usage(&line)?;
            } else {
                clients.push(ClientResult::parse(&line)?);
            }
        }
    }
    let after = server.and_then(Process::read);
    for r in &mut running {
        drop(r.stdin.take());
    }
    for r in &mut running {
        let status = r.child.wait()?;
        if !status.success() {
            return Err(format!("a client process failed at the end ({status})").into());
        }
    }
    Ok(Outcome {
        clients,
        client_usage,
        server_usage: before.zip(after).map(|(b, a)| a - b),
    })
}
