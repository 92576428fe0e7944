//! What every mode sets up: the transport, the NAA under test, logging, output files.

use std::io::IsTerminal;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use naaice::swnaa::{KernelRegistry, SoftNaa, SoftNaaConfig, SoftNaaHandle};
use naaice::transport::soft::{SoftConfig, SoftTransport};
use naaice::transport::waiting::WaitPolicy;
use naaice::transport::{AnyTransport, TransportChoice, TransportKind};

use crate::Error;
use crate::base::process_clock::ProcessClock;
use crate::cli::Args;

/// How this run's connections wait (`--wait`, `--busy-poll-us`), both ends.
static WAIT: OnceLock<WaitPolicy> = OnceLock::new();

/// Sets how this run's connections wait (once, from the command line).
pub(crate) fn set_wait(policy: WaitPolicy) {
    let _ = WAIT.set(policy);
}

/// How this run's connections wait, both ends (the default policy unless the command line
/// said otherwise).
pub(crate) fn wait() -> WaitPolicy {
    WAIT.get().copied().unwrap_or_default()
}

/// The transport named by `--transport`, with the tuning options applied.
pub(crate) fn transport(args: &Args) -> Result<AnyTransport, Error> {
    match args.transport.choice() {
        TransportChoice::Auto => Err("--transport auto: a benchmark measures one transport; \
             name it (soft or verbs)"
            .into()),
        TransportChoice::Only(TransportKind::Soft) => {
            let mut config = SoftConfig::default();
            if let Some(delay) = args.ack_delay {
                config.ack_delay = delay;
            }
            Ok(AnyTransport::from(SoftTransport::new(config)))
        }
        TransportChoice::Only(TransportKind::Verbs) => {
            if args.ack_delay.is_some() {
                return Err("--ack-delay applies to the software transport only".into());
            }
            Ok(AnyTransport::from_choice(args.transport.choice()))
        }
    }
}

/// The NAA under test: `--naa`, or a software NAA started here that takes up to
/// `max_connections` connections at once.
pub(crate) fn naa(
    args: &Args,
    transport: &AnyTransport,
    max_connections: usize,
) -> Result<(SocketAddr, Option<SoftNaaHandle>), Error> {
    naa_serving(args, transport, max_connections, KernelRegistry::builtin())
}

/// [`naa`] with the software NAA serving `kernels`.
pub(crate) fn naa_serving(
    args: &Args,
    transport: &AnyTransport,
    max_connections: usize,
    kernels: KernelRegistry,
) -> Result<(SocketAddr, Option<SoftNaaHandle>), Error> {
    if let Some(spec) = &args.naa {
        // --address conflicts with --naa on the command line.
        let addr = spec
            .to_socket_addrs()
            .map_err(|e| format!("--naa {spec}: {e}"))?
            .next()
            .ok_or_else(|| format!("--naa {spec}: no address"))?;
        return Ok((addr, None));
    }
    let listen = match (transport.choice(), args.address) {
        (_, Some(ip)) => SocketAddr::new(ip, 0),
        (TransportChoice::Only(TransportKind::Verbs), None) => {
            return Err(
                "--transport verbs without --naa needs --address IP (an address of an RDMA \
                        device) for the in-process NAA"
                    .into(),
            );
        }
        (_, None) => SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    let config = SoftNaaConfig {
        max_connections,
        wait: wait(),
        ..SoftNaaConfig::default()
    };
    let handle = SoftNaa::bind(transport.clone(), listen, config, kernels)?.spawn()?;
    Ok((handle.local_addr(), Some(handle)))
}

/// The NAA's process clock (`--naa-pid`), if given.
pub(crate) fn naa_clock(args: &Args) -> Result<Option<ProcessClock>, Error> {
    Ok(args.naa_pid.map(ProcessClock::of).transpose()?)
}

/// Logs to stderr, coloured only on a terminal (Slurm output files stay plain).
pub(crate) fn init_logging(filter: &str) -> Result<(), Error> {
    let filter =
        tracing_subscriber::EnvFilter::try_new(filter).map_err(|e| format!("--log: {e}"))?;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    Ok(())
}

/// Writes `contents` to `path`, creating its folder.
pub(crate) fn write_file(path: &Path, contents: &str) -> Result<(), Error> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, contents).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(())
}

/// One sentence naming the NAA under test and the transport.
pub(crate) fn describe(
    naa: SocketAddr,
    own: bool,
    naa_cpu: Option<&ProcessClock>,
    transport: &AnyTransport,
) -> String {
    format!(
        "{} NAA at {naa}{} over {}",
        if own { "in-process software" } else { "the" },
        naa_cpu.map_or_else(String::new, |c| format!(" (process {})", c.pid())),
        transport.name()
    )
}

/// How often a new connection is tried (a just-closed connection may still hold the NAA's
/// slot; the reference driver retries too).
const CONNECT_TRIES: u32 = 20;
/// Pause between connection tries.
const CONNECT_PAUSE: Duration = Duration::from_millis(50);

/// Runs `f` until it succeeds, at most [`CONNECT_TRIES`] times.
pub(crate) fn retry<T>(what: &str, mut f: impl FnMut() -> naaice::Result<T>) -> Result<T, Error> {
    let mut tries = 1;
    loop {
        match f() {
            Ok(v) => return Ok(v),
            Err(e) if tries < CONNECT_TRIES => {
                tries += 1;
                tracing::info!("{what} failed ({e}); retrying");
                std::thread::sleep(CONNECT_PAUSE);
            }
            Err(e) => return Err(format!("{what}: {e}").into()),
        }
    }
}
