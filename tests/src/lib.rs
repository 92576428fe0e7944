//! Shared fixtures of the end-to-end tests in `tests/tests/`: a software NAA on loopback with
//! test kernels, and a way to run a test body in a child process (for kill tests and for
//! process-wide settings such as `NAA_SPEC`).

pub mod fpga;
pub mod fpga_client;
pub mod join;
pub mod raw_client;
pub mod rendezvous;
pub mod site;
pub mod soc;
pub mod suite;

use std::net::SocketAddr;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use naaice::core::ClientConfig;
use naaice::swnaa::{KernelContext, KernelRegistry, SoftNaa, SoftNaaConfig, SoftNaaHandle};
use naaice::transport::soft::{SoftEndpoint, SoftTransport};
use naaice::{Buffer, Connection};
use naaice_core::{FunctionCode, ReturnCode};

/// Kernel that sleeps for the time given in its first user byte (in 10 ms units).
pub const SLEEP: u8 = 20;
/// Kernel that returns the application error 0x42 after adding 1 like kernel 1.
pub const APP_ERROR: u8 = 21;
/// Kernel that panics.
pub const PANIC: u8 = 22;
/// Kernel of the single-send/internal test: counts RPCs in internal region 0, reports the
/// count and the first byte of parameter 0 in parameter 2, and adds 1 to parameter 1.
pub const PROBE: u8 = 23;
/// Kernel that adds 1 to every parameter byte, then runs until its kernel timeout has passed
/// ([`KernelContext::timed_out`]).
pub const UNTIL_TIMEOUT: u8 = 24;

/// A function code constant.
pub fn code(c: u8) -> FunctionCode {
    FunctionCode::new(c).expect("valid test function code")
}

/// The built-in kernels plus the test kernels above.
pub fn test_kernels() -> KernelRegistry {
    let mut k = KernelRegistry::builtin();
    k.register(code(SLEEP), |ctx: &mut KernelContext<'_, '_>| {
        std::thread::sleep(Duration::from_millis(10 * u64::from(ctx.user_bytes()[0])));
        ReturnCode::SUCCESS
    });
    k.register(code(UNTIL_TIMEOUT), |ctx: &mut KernelContext<'_, '_>| {
        for r in ctx.regions().iter_mut().filter(|r| !r.is_internal()) {
            r.data.iter_mut().for_each(|b| *b = b.wrapping_add(1));
        }
        while !ctx.timed_out() {
            std::thread::sleep(Duration::from_millis(1));
        }
        ReturnCode::SUCCESS
    });
    k.register(code(APP_ERROR), |ctx: &mut KernelContext<'_, '_>| {
        for r in ctx.regions().iter_mut().filter(|r| !r.is_internal()) {
            r.data.iter_mut().for_each(|b| *b = b.wrapping_add(1));
        }
        ReturnCode::application(0x42).expect("0x42 is an application code")
    });
    k.register(code(PANIC), |_: &mut KernelContext<'_, '_>| -> ReturnCode {
        panic!("test kernel panics on purpose")
    });
    k.register(code(PROBE), |ctx: &mut KernelContext<'_, '_>| {
        let count = {
            let internal = ctx.internal(0).expect("internal region");
            internal[0] = internal[0].wrapping_add(1);
            internal[0]
        };
        let first = ctx.param(0).expect("param 0")[0];
        ctx.param(1)
            .expect("param 1")
            .iter_mut()
            .for_each(|b| *b = b.wrapping_add(1));
        let out = ctx.param(2).expect("param 2");
        out[0] = count;
        out[1] = first;
        ReturnCode::SUCCESS
    });
    k
}

/// Waits for the RPC that `conn` has in progress while `naa` shuts down `after` into the
/// wait; returns the wait's result and how long the wait took.
pub fn wait_through_shutdown<E: naaice::transport::Endpoint>(
    conn: &mut Connection<E>,
    naa: SoftNaaHandle,
    after: Duration,
) -> (naaice::Result<naaice_core::machine::RpcResult>, Duration) {
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(after);
        naa.shutdown();
    });
    let t = std::time::Instant::now();
    let result = conn.wait();
    let took = t.elapsed();
    stopper.join().expect("the NAA's shutdown panicked");
    (result, took)
}

/// Starts a software NAA on 127.0.0.1 with [`test_kernels`].
pub fn start_naa(config: SoftNaaConfig) -> SoftNaaHandle {
    let naa = SoftNaa::bind(SoftTransport::default(), loopback(), config, test_kernels())
        .expect("bind software NAA");
    naa.spawn().expect("spawn software NAA")
}

/// A software NAA whose [`UNTIL_TIMEOUT`] kernel runs for 1 s (its kernel timeout), with 4
/// connection slots, for tests of deadlines and cancellation.
pub struct SlowNaa(pub SoftNaaHandle);

impl SlowNaa {
    /// Starts it.
    pub fn start() -> Self {
        Self(start_naa(SoftNaaConfig {
            kernel_timeout: Duration::from_secs(1),
            max_connections: 4,
            ..SoftNaaConfig::default()
        }))
    }

    /// An AP2 handle for `fncode` on it, with one 8-byte input and one 8-byte output.
    pub fn create(&self, fncode: u32) -> naaice::Naa<SoftEndpoint> {
        naaice::Naa::create_with(
            &SoftTransport::default(),
            fncode,
            vec![naaice::Param::zeroed(8)],
            vec![naaice::Param::zeroed(8)],
            &naaice::NaaOptions::at(self.0.local_addr()),
        )
        .expect("create")
    }
}

/// A connection to the software NAA at `addr` with one in-place region (input and output) of
/// `len` zero bytes, returned with it (it must outlive the connection); MRSP done.
pub fn in_place_connection(
    addr: SocketAddr,
    config: ClientConfig,
    len: usize,
) -> naaice::Result<(Connection<SoftEndpoint>, Buffer)> {
    let mut conn = Connection::connect(&SoftTransport::default(), addr, None, config)?;
    let buf = Buffer::zeroed(len);
    let id = conn.add_param(&buf)?;
    conn.set_input(id)?;
    conn.set_output(id)?;
    conn.do_mrsp()?;
    Ok((conn, buf))
}

/// A connection to the software NAA at `addr` (kernel 1), retried every 10 ms while the NAA
/// rejects it (a just-closed connection may still hold the only slot); panics with `what` and
/// the last error once `within` has passed.
pub fn connect_within(addr: SocketAddr, within: Duration, what: &str) -> Connection<SoftEndpoint> {
    let deadline = std::time::Instant::now() + within;
    loop {
        match Connection::connect(
            &SoftTransport::default(),
            addr,
            None,
            ClientConfig::new(code(1)),
        ) {
            Ok(conn) => return conn,
            Err(e) => {
                assert!(std::time::Instant::now() < deadline, "{what}: {e}");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// 127.0.0.1 with a free port.
pub fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().expect("loopback address")
}

/// Runs the `#[ignore]`d test `name` of the current test binary in a child process with
/// extra environment variables.
pub fn spawn_child(name: &str, env: &[(&str, &str)]) -> Child {
    let exe = std::env::current_exe().expect("test binary path");
    let mut cmd = Command::new(exe);
    cmd.args([
        "--exact",
        name,
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("NAAICE_CHILD", "1")
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("spawn child test process")
}

/// Runs a child test to the end and returns its output.
pub fn run_child(name: &str, env: &[(&str, &str)]) -> Output {
    spawn_child(name, env)
        .wait_with_output()
        .expect("child output")
}

/// True inside a child started by [`spawn_child`] (child-only tests return at once otherwise).
pub fn is_child() -> bool {
    std::env::var_os("NAAICE_CHILD").is_some()
}

/// Reads the child's stdout line by line until a line contains `prefix`; returns the rest of
/// that line after it. Panics after `timeout`.
pub fn read_line_with_prefix(child: &mut Child, prefix: &str, timeout: Duration) -> String {
    use std::io::BufRead;
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    let prefix_shown = prefix.to_owned();
    let prefix = prefix.to_owned();
    std::thread::spawn(move || {
        let mut found = false;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            // The test harness prints "test name ... " on the same line first.
            if let Some(at) = line.find(&prefix).filter(|_| !found) {
                found = true;
                let _ = tx.send(line[at + prefix.len()..].trim().to_owned());
            }
            // Keep reading, so that the child's later output does not hit a closed pipe.
        }
    });
    rx.recv_timeout(timeout)
        .unwrap_or_else(|_| panic!("child never printed {prefix_shown:?}"))
}
