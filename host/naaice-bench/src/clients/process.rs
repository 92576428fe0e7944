//! The benchmark's side of its client processes: starts them (this binary again, in the
//! hidden `--worker` mode), lets them all start together, and reads what they measured.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use crate::Error;
use crate::base::kind::WorkerKind;
use crate::base::usage::{Process, Usage};
use crate::cli::Args;
use crate::clients::client::RPC_TIMEOUT;
use crate::clients::result::{ClientResult, parse_usage};

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

/// `NAA_SPEC` for `n` handles of one process on the NAA at `target`: an entry per handle (a
/// process uses each entry for one handle at a time), one parameter, the transport named.
fn naa_spec(target: SocketAddr, fncode: u8, transport: &str, n: usize) -> String {
    let ip = match target {
        SocketAddr::V4(a) => a.ip().to_string(),
        SocketAddr::V6(a) => format!("[{}]", a.ip()),
    };
    let entry = format!("{ip}:{}:{fncode}:1:{transport}", target.port());
    vec![entry; n].join(",")
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
    if group.kind.is_c() {
        // The C ABI takes its NAA from NAA_SPEC: an entry per handle (a process uses each
        // entry for one handle at a time).
        let spec = naa_spec(
            group.target,
            args.fncode,
            args.transport.name(),
            group.sizes.len(),
        );
        cmd.env("NAA_SPEC", spec)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_c_clients_naa_spec_has_an_entry_per_handle() {
        let v4: SocketAddr = "127.0.0.1:23456".parse().unwrap();
        assert_eq!(
            naa_spec(v4, 3, "soft", 2),
            "127.0.0.1:23456:3:1:soft,127.0.0.1:23456:3:1:soft"
        );
        let v6: SocketAddr = "[::1]:9".parse().unwrap();
        assert_eq!(naa_spec(v6, 7, "verbs", 1), "[::1]:9:7:1:verbs");
        let parsed = naaice::discovery::spec::parse(&naa_spec(v4, 3, "soft", 3)).unwrap();
        assert_eq!(parsed.len(), 3);
    }

    #[test]
    fn clients_are_one_process_of_threads_or_a_process_each() {
        let at: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let threads = groups(false, WorkerKind::C, at, &[64, 64, 1 << 24]);
        assert_eq!(threads.len(), 1);
        assert_eq!(threads[0].sizes, [64, 64, 1 << 24]);
        let processes = groups(true, WorkerKind::Rust, at, &[64, 64]);
        assert_eq!(processes.len(), 2);
        assert!(processes.iter().all(|g| g.sizes == [64]));
    }
}
