//! `naaice-swnaa`: the software NAA server (behaves like the FPGA NAA; built-in kernels
//! 1: add 1 to every byte, 2: add 2, 3: do nothing).

use std::io::IsTerminal;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use clap::{CommandFactory, Parser};
use naaice::swnaa::plugin::{KernelSources, KernelSpec};
use naaice::swnaa::{AddressPrefix, KernelSwitch, SoftNaa, SoftNaaConfig};
use naaice::transport::waiting::WaitPolicy;
use naaice::transport::{AnyTransport, DEFAULT_PORT, Served};
use naaice::units::parse_size;
use naaice_cli::{ManExtras, print_reference, values};

/// `--version`: the version and the transports of this build.
const LONG_VERSION: &str = if cfg!(feature = "verbs") {
    concat!(env!("CARGO_PKG_VERSION"), " (transports: soft, verbs)")
} else {
    concat!(env!("CARGO_PKG_VERSION"), " (transports: soft)")
};

/// Software NAA: serves NAAICE RPCs like the FPGA NAA, for testing without hardware.
#[derive(Parser, Debug)]
#[command(
    version,
    long_version = LONG_VERSION,
    about,
    long_about = "The software NAA server: serves NAAICE RPCs like the FPGA NAA (network-attached \
accelerator), for testing clients and measuring without hardware.\n\n\
Clients (the naaice library, the C API libnaaice_ap2, naaice-bench) connect over the software \
transport (RC semantics over TCP) or over RDMA verbs, run the memory-region setup (MRSP) and \
then RPCs. With the default transport `auto` it serves both at once where an RDMA device \
exists (the software transport only otherwise), so clients with default settings reach it \
on any machine; the banner names every transport served and the client settings that reach \
it. Built-in kernels: 1 adds 1 to every byte, 2 adds 2, 3 does nothing (the benchmark's \
empty kernel); --kernel and --kernels load your own from shared libraries (C-ABI functions \
with the naa_swnaa_kernel signature of naaice_ap2.h), and SIGHUP loads them again between \
RPCs. Stops cleanly on SIGINT and SIGTERM. Logs go to stderr, coloured only on a \
terminal."
)]
struct Args {
    /// Address to listen on (IPv4 or IPv6; `::` also accepts IPv4 on dual-stack hosts).
    #[arg(short, long, default_value_t = IpAddr::V6(Ipv6Addr::UNSPECIFIED))]
    address: IpAddr,
    /// Port to listen on.
    #[arg(short, long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// Transport: `auto` (the software transport, plus verbs on the same port where an RDMA
    /// device exists), `soft` (RC semantics over TCP only) or `verbs` (RDMA through librdmacm
    /// only: RoCEv2, InfiniBand, Soft-RoCE).
    #[arg(short, long, env = "NAAICE_TRANSPORT", default_value = "auto", value_parser = parse_transport)]
    transport: AnyTransport,
    /// How each connection waits for completions: `adaptive` (spin for a budget learned from
    /// recent waits, at most 200 µs, while the connections on this machine leave a core to
    /// spare, then sleep; `adaptive:CAP_US` sets the cap), `poll` (never sleep: a dedicated core per connection, like the C software
    /// NAA), `sleep` (sleep at once) or `spin:US` (spin a fixed time, then sleep).
    #[arg(short, long, env = "NAAICE_WAIT", value_name = "POLICY", default_value_t = WaitPolicy::default())]
    wait: WaitPolicy,
    /// Most concurrent connections (more are rejected; at least 1). Default: number of cores.
    #[arg(short = 'c', long, value_parser = values::at_least_one)]
    max_connections: Option<usize>,
    /// How long a kernel may run before the RPC is answered with KERNEL_TIMEOUT (`10s`,
    /// `500ms`; a bare number is seconds).
    #[arg(short, long, value_name = "DURATION", default_value = "10s", value_parser = values::seconds)]
    kernel_timeout: Duration,
    /// How long the memory-region setup (MRSP) of a new connection may take.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = values::seconds)]
    mrsp_timeout: Duration,
    /// How long a connection may idle between RPCs before it is dropped (default: forever).
    #[arg(long, value_name = "DURATION", value_parser = values::seconds)]
    idle_timeout: Option<Duration>,
    /// When all connection slots are taken, a new client takes the slot of the connection
    /// idle the longest between RPCs if it has been idle at least this long (it is
    /// disconnected cleanly); `never`: the new client is rejected instead.
    #[arg(long, default_value = "30s", value_name = "DURATION|never", value_parser = grace)]
    evict_idle_after: Grace,
    /// Most region memory one connection may request (`4GiB`, `512MiB`; a bare number is
    /// bytes; each region at most 1 GiB).
    #[arg(long, value_name = "SIZE", default_value = "4GiB", value_parser = parse_size)]
    max_bytes: u64,
    /// Most region memory of all connections together; a client whose request does not fit
    /// gets MRSP error 0x01 (not enough memory). Default: half of the physical memory.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    memory_budget: Option<u64>,
    /// Most region memory of ended connections kept for the next ones (`0`: none): a client
    /// that connects with a region of a kept block's size gets it, zeroed, and its set-up
    /// skips the page faults of fresh memory. Regions of 64 KiB and more; kept memory yields
    /// to the memory budget.
    #[arg(long, value_name = "SIZE", default_value = "256MiB", value_parser = parse_size)]
    region_cache: u64,
    /// Address prefixes clients may connect from, comma-separated or repeated (`10.0.0.0/24`,
    /// `fd00::/8`, `10.0.0.5`); a client from elsewhere is rejected at connect and the
    /// rejection is logged. Default: any address.
    #[arg(
        long,
        env = "NAAICE_ALLOW",
        value_name = "PREFIX,...",
        value_delimiter = ',',
        value_parser = prefix
    )]
    allow: Vec<AddressPrefix>,
    /// Serve the NAA's metrics over HTTP at ADDR:PORT (`GET /metrics`, the Prometheus text
    /// exposition format: RPCs by kernel and return code, bytes, kernel and RPC times,
    /// connections, MRSPs, memory budget, workers); off by default. `--allow` does not apply
    /// to it: bind it to an address only the monitoring network reaches (`127.0.0.1:9464`).
    #[arg(long, env = "NAAICE_METRICS", value_name = "ADDR:PORT")]
    metrics: Option<SocketAddr>,
    /// Serve the C-ABI kernel SYMBOL (default `naa_kernel`) of the shared library PATH at
    /// function code CODE (repeatable): `7=./libscale.so:scale`. A kernel at 1, 2 or 3
    /// replaces the built-in one.
    #[arg(long = "kernel", value_name = "CODE=PATH[:SYMBOL]", value_parser = kernel_spec)]
    kernels_given: Vec<KernelSpec>,
    /// Serve the kernels a TOML file lists (`[[kernel]]` tables: code, library, symbol, name,
    /// timeout, init, fini, config; see docs/swnaa.md); SIGHUP reads it again.
    #[arg(long = "kernels", env = "NAAICE_KERNELS", value_name = "FILE")]
    kernels_file: Option<std::path::PathBuf>,
    /// Serve only the kernels loaded with --kernel and --kernels, not the built-ins 1-3.
    #[arg(long)]
    no_builtins: bool,
    /// Log filter (`error`, `warn`, `info` (default), `debug`, `trace`, `off`, or a `tracing`
    /// filter whose targets are naaice crates, such as `naaice=debug,warn`); anything else is
    /// refused.
    #[arg(
        short,
        long,
        env = "NAAICE_LOG",
        value_name = "FILTER",
        default_value = "info",
        value_parser = naaice_cli::log_filter_arg
    )]
    log: String,
    /// Print the man page (roff) to standard output and exit.
    #[arg(long, hide = true)]
    man_page: bool,
    /// Print the Markdown table of the options (docs/configuration.md) and exit.
    #[arg(long, hide = true)]
    options_reference: bool,
}

/// The man page's sections beyond the options.
const MAN: ManExtras<'static> = ManExtras {
    variables: &[],
    every_variable: false,
    exit_status: &[
        (
            "0",
            "Stopped by SIGINT or SIGTERM after disconnecting every client.",
        ),
        (
            "1",
            "Could not start: the address is in use or invalid, the transport asked for is unavailable, or a kernel cannot be loaded.",
        ),
        ("2", "Bad command line."),
    ],
    examples: &[
        (
            "naaice-swnaa",
            "Serve on every address, port 12345, over the software transport and, where an RDMA device exists, verbs.",
        ),
        (
            "naaice-swnaa --address 10.0.0.5 --transport verbs --wait poll",
            "Serve only RDMA clients on one address, a core per connection spinning.",
        ),
        (
            "naaice-swnaa --max-connections 64 --memory-budget 32GiB --idle-timeout 10m",
            "A shared NAA service with limits.",
        ),
        (
            "naaice-swnaa --metrics 127.0.0.1:9464",
            "Serve Prometheus metrics on loopback port 9464 (scrape http://127.0.0.1:9464/metrics).",
        ),
        (
            "naaice-swnaa --kernel 7=./libscale.so:scale --kernel 8=./libsum.so",
            "Serve your kernels: scale() of libscale.so at code 7, naa_kernel() of libsum.so at code 8, beside the built-ins.",
        ),
        (
            "naaice-swnaa --kernels /etc/naaice/kernels.toml --no-builtins",
            "Serve the kernels a file lists and nothing else; `kill -HUP` loads them again.",
        ),
        (
            "naaice-swnaa --allow 10.0.0.0/24,10.0.1.0/24",
            "Serve only clients from two subnets (the compute nodes); others are rejected at connect.",
        ),
    ],
    see_also: &["naaice(7)", "naaice-info(1)", "naaice-bench(1)"],
};

/// Parses a transport name; a build without verbs says how to get it.
fn parse_transport(s: &str) -> Result<AnyTransport, String> {
    values::transport("naaice-swnaa", s)
}

/// A `--kernel` argument.
fn kernel_spec(s: &str) -> Result<KernelSpec, String> {
    s.parse()
        .map_err(|e: naaice::swnaa::plugin::PluginError| match e {
            naaice::swnaa::plugin::PluginError::Spec { why, .. } => {
                format!("{why} (expected CODE=PATH[:SYMBOL], e.g. 7=./libscale.so:scale)")
            }
            e => e.to_string(),
        })
}

/// An address prefix of `--allow`.
fn prefix(s: &str) -> Result<AddressPrefix, String> {
    s.parse()
        .map_err(|e: naaice::swnaa::ParsePrefixError| e.to_string())
}

/// `--evict-idle-after`: a grace period, or `never`.
#[derive(Clone, Copy, Debug)]
struct Grace(Option<Duration>);

fn grace(s: &str) -> Result<Grace, String> {
    if s.trim() == "never" {
        return Ok(Grace(None));
    }
    values::seconds(s)
        .map(|d| Grace(Some(d)))
        .map_err(|e| format!("{e}, or `never`"))
}

fn run(mut args: Args) -> Result<(), String> {
    let filter = tracing_subscriber::EnvFilter::try_new(&args.log)
        .map_err(|e| format!("--log (NAAICE_LOG) {:?}: {e}", args.log))?;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let mut config = SoftNaaConfig {
        kernel_timeout: args.kernel_timeout,
        mrsp_timeout: args.mrsp_timeout,
        idle_timeout: args.idle_timeout,
        evict_idle_after: args.evict_idle_after.0,
        max_bytes_per_connection: args.max_bytes,
        allow: std::mem::take(&mut args.allow),
        metrics: args.metrics,
        wait: args.wait,
        region_cache: args.region_cache,
        ..SoftNaaConfig::default()
    };
    if let Some(bytes) = args.memory_budget {
        config.memory_budget = bytes;
    }
    if let Some(n) = args.max_connections {
        config.max_connections = n;
    }
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .map_err(|e| format!("signal handler: {e}"))?;
    }
    let allowed = config
        .allow
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let sources = KernelSources {
        builtins: !args.no_builtins,
        given: std::mem::take(&mut args.kernels_given),
        file: args.kernels_file.take(),
    };
    let kernels = sources.load().map_err(|e| e.to_string())?;
    let addr = SocketAddr::new(args.address, args.port);
    let naa = SoftNaa::bind(args.transport, addr, config, kernels)
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let reloads = Reloads::start(sources, naa.kernel_switch())?;
    eprint!(
        "{}",
        banner(
            naa.local_addr(),
            &naa.served(),
            args.wait,
            &naa.kernels().describe()
        )
    );
    if let Some(at) = naa.metrics_addr() {
        eprintln!("  metrics: http://{at}{}", naaice::swnaa::METRICS_PATH);
    }
    if !allowed.is_empty() {
        eprintln!("  allowed clients: {allowed} (others are rejected at connect)");
    }
    let served = naa.run(&stop).map_err(|e| e.to_string());
    // The last hold on the kernels: their fini functions run now, after the last RPC.
    reloads.stop();
    served
}

/// The thread that reloads the kernels on SIGHUP.
struct Reloads {
    signals: signal_hook::iterator::Handle,
    thread: std::thread::JoinHandle<()>,
}

impl Reloads {
    /// On SIGHUP, loads the kernels again (the kernels file is read again, every library
    /// opened again) and serves them from each connection's next call; a reload that fails
    /// is logged and the kernels served stay.
    fn start(sources: KernelSources, switch: KernelSwitch) -> Result<Self, String> {
        let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGHUP])
            .map_err(|e| format!("signal handler: {e}"))?;
        let handle = signals.handle();
        let thread = std::thread::Builder::new()
            .name("naaice-reload".into())
            .spawn(move || {
                for _ in signals.forever() {
                    match sources.load() {
                        Ok(kernels) => {
                            let served = kernels.describe();
                            drop(switch.replace(kernels));
                            tracing::info!(kernels = %served, "SIGHUP: kernels reloaded");
                        }
                        Err(e) => tracing::error!(
                            error = %e,
                            "SIGHUP: kernels not reloaded; still serving the ones loaded before"
                        ),
                    }
                }
            })
            .map_err(|e| format!("reload thread: {e}"))?;
        Ok(Self {
            signals: handle,
            thread,
        })
    }

    /// Ends the thread (and its hold on the kernels).
    fn stop(self) {
        self.signals.close();
        let _ = self.thread.join();
    }
}

/// What the server prints when it starts (the first line's form is kept for scripts that
/// read the port from it): each transport with its address (or why it is not served) and
/// the client settings that reach it.
fn banner(addr: SocketAddr, served: &[Served], wait: WaitPolicy, kernels: &str) -> String {
    let mut text = format!(
        "naaice-swnaa listening on {addr} (version {}, kernels {kernels}; waiting: {wait})\n",
        env!("CARGO_PKG_VERSION")
    );
    for s in served {
        text += &format!("  {s}\n");
    }
    {
        let host = if addr.ip().is_unspecified() {
            "<this host's address>".to_owned()
        } else if addr.is_ipv6() {
            format!("[{}]", addr.ip())
        } else {
            addr.ip().to_string()
        };
        text += &format!(
            "  clients: NAA_SPEC={host}:{}:<fn_code>:<param_count>\n",
            addr.port()
        );
    }
    text
}

/// Gives `SIGPIPE` its default action back (Rust ignores it, so a write to a closed pipe
/// fails with EPIPE and `eprint!` panics): with stdout or stderr a pipe whose reader has gone
/// (`naaice-swnaa --man-page | head -1`), the server ends quietly, as C programs do. The
/// transports never raise it on their sockets (they are used by C programs, which keep the
/// default action too).
fn default_sigpipe() {
    // SAFETY: sets a signal's disposition to its default at the start of `main`, before any
    // other thread runs; no handler of ours is involved.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

fn main() -> ExitCode {
    default_sigpipe();
    let args = Args::parse();
    if let Some(code) =
        print_reference(Args::command(), args.man_page, args.options_reference, &MAN)
    {
        return code;
    }
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("naaice-swnaa: {e}");
            ExitCode::FAILURE
        }
    }
}
