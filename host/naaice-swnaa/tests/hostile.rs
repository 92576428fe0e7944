//! `naaice-swnaa` against hostile peers, as a separate process with a small descriptor limit:
//! silent TCP connections that exhaust its file descriptors must not lock it up.

use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use naaice::core::{ClientConfig, FunctionCode};
use naaice::transport::soft::{SoftConfig, SoftTransport};
use naaice::{Buffer, Connection};

mod support;
use support::spawn_reading_stderr;

/// A `naaice-swnaa` child with its stderr lines collected.
struct Server {
    child: Child,
    addr: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Starts the server with at most `nofile` open files (soft and hard limit).
    fn start(nofile: u32, extra: &[&str]) -> Self {
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let lines = Arc::clone(&log);
        let child = spawn_reading_stderr(
            Command::new("sh")
                .arg("-c")
                .arg(format!("ulimit -n {nofile} && exec \"$0\" \"$@\""))
                .arg(env!("CARGO_BIN_EXE_naaice-swnaa"))
                .args(["--address", "127.0.0.1", "--port", "0", "--log", "info"])
                .args(extra),
            move |line| {
                if let Some(rest) = line.strip_prefix("naaice-swnaa listening on ") {
                    let _ = tx.send(rest.split(' ').next().unwrap_or("").to_owned());
                }
                lines.lock().unwrap().push(line);
                true
            },
        );
        let addr = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("naaice-swnaa never said where it listens")
            .parse()
            .expect("listening address");
        Self { child, addr, log }
    }

    fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .map(|d| d.count())
            .unwrap_or(0)
    }

    fn lines_containing(&self, needle: &str) -> Vec<String> {
        let log = self.log.lock().unwrap();
        log.iter().filter(|l| l.contains(needle)).cloned().collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client's RPC (kernel 1 adds 1 to every byte) until `deadline`; panics when none
/// succeeded by then.
fn served_before(addr: SocketAddr, deadline: Instant) -> Duration {
    let start = Instant::now();
    let mut last = String::new();
    while Instant::now() < deadline {
        match try_rpc(addr) {
            Ok(()) => return start.elapsed(),
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no client was served within {:?}: {last}", start.elapsed());
}

fn try_rpc(addr: SocketAddr) -> naaice::Result<()> {
    let code = FunctionCode::new(1).expect("function code 1");
    let transport = SoftTransport::new(SoftConfig {
        connect_timeout: Duration::from_secs(3),
        ..SoftConfig::default()
    });
    let mut config = ClientConfig::new(code);
    config.mrsp_timeout = Duration::from_secs(5);
    config.rpc_timeout = Duration::from_secs(5);
    let mut conn = Connection::connect(&transport, addr, None, config)?;
    let buf = Buffer::from_slice(&[1, 2, 3]);
    let id = conn.add_param(&buf)?;
    conn.set_input(id)?;
    conn.set_output(id)?;
    conn.do_mrsp()?;
    let result = conn.do_transfer()?;
    assert!(result.status.is_success());
    assert_eq!(&*buf.lock(), &[2, 3, 4]);
    Ok(())
}

/// Silent connections that exhaust the server's descriptors: while they stay, a normal client
/// is still served (stalled handshakes give way); once they are closed, the server drops
/// them at once, gets its descriptors back and logs the accept errors only a few times.
#[test]
fn descriptor_exhaustion_does_not_lock_the_server_up() {
    let server = Server::start(64, &[]);
    // A normal client first, so every lazily opened descriptor of the server is open.
    served_before(server.addr, Instant::now() + Duration::from_secs(20));
    let baseline = server.open_fds();
    let silent: Vec<TcpStream> = (0..100)
        .map(|_| TcpStream::connect(server.addr).expect("TCP connect (backlog)"))
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    let took = served_before(server.addr, Instant::now() + Duration::from_secs(15));
    eprintln!("served with 100 silent connections open after {took:?}");
    drop(silent);
    let took = served_before(server.addr, Instant::now() + Duration::from_secs(15));
    eprintln!("served after the silent connections closed in {took:?}");
    let deadline = Instant::now() + Duration::from_secs(15);
    while server.open_fds() > baseline + 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        server.open_fds() <= baseline + 2,
        "descriptors not released: {} open, {baseline} before",
        server.open_fds()
    );
    let accept_lines = server.lines_containing("accept");
    assert!(
        accept_lines.len() <= 10,
        "{} log lines about accept errors (rate limit broken):\n{}",
        accept_lines.len(),
        accept_lines[..accept_lines.len().min(5)].join("\n")
    );
}
