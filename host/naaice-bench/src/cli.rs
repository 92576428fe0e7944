//! The command line of `naaice-bench`.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use naaice::transport::waiting::WaitPolicy;
use naaice::transport::{AnyTransport, TransportChoice};
use naaice::units::parse_size;
use naaice_cli::{ManExtras, values};

use crate::base::kind::{Api, WorkerKind};

/// Benchmarks the RPCs of a NAAICE accelerator (NAA): latency and bandwidth against size.
#[derive(Parser, Debug)]
#[command(
    name = "naaice-bench",
    version,
    about,
    long_about = "Benchmarks the RPCs of a NAAICE accelerator (NAA): latency and bandwidth \
against size.\n\n\
For every size of the reference driver's list (spec 8.1: s(0) = 1, s(k+1) = round_half_even(1.5 s(k)) \
below 1 GiB, then 1 GiB; up to --max-size) plus 64 B and 4 KiB, it measures:\n\n\
  * first RPC: per sample a new connection with one in-place region (flags 0x0C); setup = \
registration + MRSP (each also reported alone), transfer = its first RPC \
(the reference's low-level measurement);\n\n\
  * middleware: naa_create, then naa_invoke + naa_wait timed, then naa_finalize (the reference's \
middleware measurement);\n\n\
  * steady state: many RPCs on one connection;\n\n\
  * the raw-transport limit (software transport): TCP round trips of the same size on loopback, \
alternated with the steady-state RPCs, and for sizes from 1 MiB the one-direction TCP stream \
bandwidth, of 1 MiB messages (cache-resident buffers) and of messages of the size itself (buffers \
as large as the RPC's).\n\n\
Latencies are reported as p50/p90/p99 (HdrHistogram). It writes into --out: lowlevel.csv \
(byte_length,setup_time,transfer_time), middleware.csv (byte_length,transfer_time), summary.csv \
(one row per size), latency.png/.svg and bandwidth.png/.svg (ours vs the raw limit vs --compare, \
with their ratios). Bandwidth is 2 x size / time (the RPC moves size bytes each way).\n\n\
With --clients N,... it measures many clients at once instead: for every --size and N, N \
clients (each its own connection; threads of one client process, or with --client-processes a \
process each) run steady RPCs for --duration; the aggregate RPC/s and GB/s, p50/p99 latency, the \
slowest client's rate over the mean, and CPU time and context switches per RPC of the clients \
and the NAA, beside a raw TCP echo of the same N and size (software transport on this machine). \
It writes clients.csv, clients.json, clients-throughput.png/.svg (and isolation.csv with \
--isolation) into --out."
)]
pub(crate) struct Args {
    /// The NAA to benchmark, as HOST:PORT (for example an FPGA, or a naaice-swnaa started
    /// elsewhere). Without it, naaice-bench starts its own software NAA in this process: on
    /// loopback over the software transport, on --address over verbs.
    #[arg(long, value_name = "HOST:PORT")]
    pub naa: Option<String>,
    /// Transport: `soft` (RC semantics over TCP, which naaice-swnaa always serves) or
    /// `verbs` (RDMA: RoCEv2, InfiniBand, Soft-RoCE; needs a build with the cargo feature
    /// `verbs`). A benchmark measures one transport, so `auto` is refused. Default:
    /// `NAAICE_TRANSPORT` where it names one (`soft` or `verbs`), else `soft` (also for
    /// `NAAICE_TRANSPORT=auto`).
    #[arg(short, long = "transport", id = "transport", value_name = "TRANSPORT",
          value_parser = parse_transport)]
    transport_arg: Option<AnyTransport>,
    /// The transport measured: `--transport`, else `NAAICE_TRANSPORT`, else `soft` (filled in
    /// by [`Args::resolve`]).
    #[arg(skip)]
    pub transport: AnyTransport,
    /// With --naa: the process id of the NAA on this machine (for example a naaice-swnaa
    /// started beside the benchmark). The CPU time per steady RPC of the other side is then
    /// read from that process's CPU clock (all its threads) instead of this process's other
    /// threads.
    #[arg(long, value_name = "PID", requires = "naa")]
    pub naa_pid: Option<u32>,
    /// Over verbs without --naa: the address the in-process NAA listens on (an address of
    /// an RDMA device).
    #[arg(long, value_name = "IP", alias = "addr", conflicts_with = "naa")]
    pub address: Option<IpAddr>,
    /// Function code of the kernel to call. The reference measures with 3, the software
    /// NAA's empty kernel; an FPGA's empty kernel may have another code.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(1..=127))]
    pub fncode: u8,
    /// Largest size (`1GiB`, `64KiB`; a bare number is bytes; the largest one needs about 4
    /// times its size in memory here).
    #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = positive_size)]
    pub max_size: u64,
    /// New connections (first RPC and middleware samples) per size. Default: 10 up to
    /// 1 MiB, 5 up to 64 MiB, 2 above (the reference uses 10).
    #[arg(long, value_name = "N", value_parser = values::at_least_one)]
    pub reps: Option<usize>,
    /// Steady-state RPCs (and raw round trips) per size. Default: about 256 MiB of payload
    /// per size (32 MiB over verbs), between 3 and 2000.
    #[arg(long, value_name = "N", value_parser = values::at_least_one)]
    pub steady: Option<usize>,
    /// Time of the raw TCP stream-bandwidth measurements per size from 1 MiB (split over
    /// four: 1 MiB messages and messages of the size, before and after the steady state;
    /// `500ms`, `2s`; a bare number is seconds).
    #[arg(long, value_name = "DURATION", default_value = "500ms", alias = "stream-secs",
          value_parser = values::positive_seconds)]
    pub stream_time: Duration,
    /// A reference CSV to put beside ours (spec 8.2 format: byte_length,setup_time,
    /// transfer_time in seconds, several rows per size, for example the FPGA's; a middleware
    /// CSV byte_length,transfer_time works too). Compared per size by the median transfer_time.
    #[arg(long, value_name = "FILE.csv")]
    pub compare: Option<PathBuf>,
    /// Folder of the results (CSV files and plots); created if missing.
    #[arg(short, long, value_name = "DIR", default_value = "naaice-bench-out")]
    pub out: PathBuf,
    /// Low-level CSV (default OUT/lowlevel.csv).
    #[arg(long, value_name = "PATH")]
    pub csv: Option<PathBuf>,
    /// Summary CSV, one row per size (default OUT/summary.csv).
    #[arg(long, value_name = "PATH")]
    pub summary: Option<PathBuf>,
    /// Write no plots.
    #[arg(long)]
    pub no_plots: bool,
    /// Software transport: override its `ack_delay` (diagnosis only; `50us`; a bare number
    /// is microseconds).
    #[arg(long, value_name = "DURATION", alias = "ack-delay-us", value_parser = values::micros)]
    pub ack_delay: Option<Duration>,
    /// How client and in-process NAA wait for completions: `adaptive` (default: spin for a
    /// budget learned from recent waits, at most 200 µs, while the connections leave a core
    /// to spare, then sleep; `adaptive:CAP_US` sets the cap), `poll` (never sleep: a core per connection), `sleep`
    /// (sleep at once) or `spin:US` (spin a fixed time, then sleep).
    #[arg(
        long,
        env = "NAAICE_WAIT",
        value_name = "POLICY",
        conflicts_with = "busy_poll"
    )]
    pub wait: Option<WaitPolicy>,
    /// Spin this long before sleeping (the same as --wait spin:US; `100ms`
    /// to spin like perftest does; a bare number is microseconds).
    #[arg(long, value_name = "DURATION", alias = "busy-poll-us", value_parser = values::micros)]
    pub busy_poll: Option<Duration>,
    /// Log filter (`error`, `warn` (default), `info`, `debug`, `trace`, `off`, or a `tracing`
    /// filter whose targets are naaice crates, such as `naaice=debug,warn`); anything else is
    /// refused.
    #[arg(
        short,
        long,
        env = "NAAICE_LOG",
        value_name = "FILTER",
        default_value = "warn",
        value_parser = naaice_cli::log_filter_arg
    )]
    pub log: String,
    /// Many clients at once instead of the sweep: the numbers of clients to measure
    /// (`4`, or a list `1,2,4,8,16`), each client its own connection. See --size, --duration,
    /// --client-processes, --api, --overlap, --isolation.
    #[arg(long, value_name = "N,...", value_delimiter = ',',
          value_parser = clap::value_parser!(u32).range(1..=1024),
          conflicts_with_all = ["compare", "steady", "reps", "csv", "summary", "max_size"])]
    pub clients: Vec<u32>,
    /// With --clients: the RPC sizes, each measured at every N (`64`, `64,64KiB`).
    #[arg(long, value_name = "SIZE,...", value_delimiter = ',', default_value = "64",
          value_parser = positive_size, requires = "clients")]
    pub size: Vec<u64>,
    /// With --clients: how long each point (one N, one size) runs; with --idle: how long the
    /// connections are left idle (`2s`, `500ms`; a bare number is seconds).
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = values::positive_seconds)]
    pub duration: Duration,
    /// With --clients: every client in its own process (naaice-bench starts itself once per
    /// client) instead of a thread each in one client process.
    #[arg(long, requires = "clients")]
    pub client_processes: bool,
    /// With --clients: the API the clients call: `rust` (naaice::Naa invoke + wait) or `c`
    /// (naa_create, then naa_invoke + naa_wait of the C ABI, libnaaice_ap2, the NAA given to
    /// it in NAA_SPEC).
    #[arg(long, value_enum, default_value = "rust", requires = "clients")]
    pub api: Api,
    /// With --clients: also measure one thread driving N handles, each with an RPC in flight,
    /// with naaice::client::naa_set::wait_any (with --api c: naa_waitany), the middleware-level
    /// overlap case.
    #[arg(long, requires = "clients")]
    pub overlap: bool,
    /// With --clients: the isolation test at every N from 2: N-1 clients of the first --size
    /// alone, then beside one client of --big-size; reports the small clients' p99 both ways
    /// and the big client's transfer time (isolation.csv).
    #[arg(long, requires = "clients")]
    pub isolation: bool,
    /// With --isolation: the size of the big client's RPCs.
    #[arg(long, value_name = "SIZE", default_value = "16MiB", value_parser = parse_size,
          requires = "isolation")]
    pub big_size: u64,
    /// Compares the waiting policies on a busy machine: starts N busy loops (processes that
    /// spin, as other jobs' ranks do), then measures steady RPCs of every size up to
    /// --max-size (at most 4 MiB) against a software NAA in this process, with the --wait
    /// policy (default adaptive) and with `sleep`, in alternated blocks of --steady RPCs
    /// (default 600); prints both side by side and writes busy.csv. `--busy 0` compares them
    /// on the machine as it is.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=1024),
          conflicts_with_all = ["clients", "naa", "idle", "compare"])]
    pub busy: Option<u32>,
    /// Measures how a pipeline overlaps transfer and compute (`naaice::Pipeline`): offloads SIZE bytes
    /// in --chunk chunks over --depth connections to a software NAA in this process, with
    /// the empty kernel (transfer only), then with a kernel whose compute time is set to
    /// equal that transfer time (--compute), and times that kernel alone; prints the
    /// overlapped time against transfer + compute (median of --reps rounds, default 3) and
    /// writes overlap.csv.
    #[arg(long, value_name = "SIZE", value_parser = positive_size,
          conflicts_with_all = ["clients", "naa", "idle", "compare", "busy", "overlap"])]
    pub pipeline: Option<u64>,
    /// With --pipeline: the chunk size.
    #[arg(long, value_name = "SIZE", default_value = "8MiB", value_parser = positive_size,
          requires = "pipeline")]
    pub chunk: u64,
    /// With --pipeline: connections (chunks in flight at once).
    #[arg(long, value_name = "N", default_value_t = 2,
          value_parser = clap::value_parser!(u32).range(1..=64), requires = "pipeline")]
    pub depth: u32,
    /// With --pipeline: how the kernel spends its compute time: `paced` (it touches every
    /// byte, then waits for the rest of its time, as an accelerator computing off the host
    /// CPU does) or `spin` (it keeps a core busy for all of it, as a CPU kernel does).
    #[arg(
        long,
        value_name = "KIND",
        default_value = "paced",
        requires = "pipeline"
    )]
    pub compute: crate::base::kind::Compute,
    /// Measures local mode's in-process path (`NAA_SPEC=local:…`), all in this process:
    /// steady 64 B in-place RPCs (the empty kernel; --steady of them, default 20000) over
    /// the in-process transport and over the loopback software transport, with the CPU time
    /// per RPC; then 1 MiB and 64 MiB in-place RPCs with the empty kernel against one
    /// `memcpy` of the same size, and with kernel 1 against its loop alone (medians of
    /// --reps, default 200 and 10). Prints a table and writes local.csv.
    #[arg(long, conflicts_with_all = ["clients", "naa", "idle", "compare", "busy", "pipeline"])]
    pub local: bool,
    /// Measures what idle connections cost: opens N connections (one RPC each) to a software
    /// NAA in a process of its own (or to --naa, whose process --naa-pid names), leaves them
    /// idle for --duration, and prints the CPU time and context switches of this process and
    /// of the NAA's per connection and second (idle.csv).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096),
          conflicts_with_all = ["clients", "compare"])]
    pub idle: Option<u32>,
    /// Internal: a busy loop of --busy.
    #[arg(long, hide = true)]
    pub spin: bool,
    /// Internal: the NAA process of --idle (prints its address, serves until stdin ends).
    #[arg(long, hide = true)]
    pub serve: bool,
    /// Internal: the connection limit of --serve.
    #[arg(long, hide = true, default_value = "1")]
    pub serve_connections: usize,
    /// Internal: run as a client process of --clients.
    #[arg(long, hide = true, value_enum)]
    pub worker: Option<WorkerKind>,
    /// Internal: the peer of a client process.
    #[arg(long, hide = true)]
    pub worker_target: Option<SocketAddr>,
    /// Internal: the sizes of a client process's clients.
    #[arg(long, hide = true, value_delimiter = ',')]
    pub worker_sizes: Vec<u64>,
    /// Print the man page (roff) to standard output and exit.
    #[arg(long, hide = true)]
    pub man_page: bool,
    /// Print the Markdown table of the options (docs/configuration.md) and exit.
    #[arg(long, hide = true)]
    pub options_reference: bool,
}

/// The man page's sections beyond the options.
pub(crate) const MAN: ManExtras<'static> = ManExtras {
    variables: &[],
    every_variable: false,
    exit_status: &[
        ("0", "Every size was measured and the results written."),
        (
            "1",
            "An error: the NAA could not be reached, an RPC failed, a file could not be written.",
        ),
        ("2", "Bad command line."),
    ],
    examples: &[
        (
            "naaice-bench --max-size 1MiB",
            "Sweep sizes up to 1 MiB against a software NAA in this process, over the software transport on loopback.",
        ),
        (
            "naaice-bench --naa 10.0.0.5:12345 --transport verbs --fncode 3 --compare fpga.csv",
            "Measure an NAA over RDMA and put a reference CSV beside the results.",
        ),
        (
            "naaice-bench --naa 127.0.0.1:12345 --naa-pid $(pidof naaice-swnaa)",
            "Measure a separately started naaice-swnaa, with its CPU time per RPC.",
        ),
        (
            "naaice-bench --naa 127.0.0.1:12345 --naa-pid $(pidof naaice-swnaa) --clients 1,2,4,8 --size 64,64KiB",
            "Many clients at once against a naaice-swnaa: aggregate RPC/s beside a raw TCP echo, fairness, CPU and wake-ups per RPC on both sides.",
        ),
    ],
    see_also: &["naaice(7)", "naaice-swnaa(1)", "naaice-info(1)"],
};

impl Args {
    /// What the options alone do not settle, for a command line that parsed: the transport
    /// (`--transport`, else `NAAICE_TRANSPORT` read by the library's
    /// [`transport_from_env`](naaice::discovery::environment::transport_from_env), `auto` there meaning
    /// this tool's default, `soft`) and the checks across options. An error is a command-line
    /// error (exit status 2).
    pub(crate) fn resolve(&mut self) -> Result<(), String> {
        self.transport = self.transport_with(naaice::discovery::environment::transport_from_env)?;
        if self.ack_delay.is_some() && self.transport.name() != "soft" {
            return Err("--ack-delay applies to the software transport only".to_owned());
        }
        if self.isolation && self.size.first() == Some(&self.big_size) {
            return Err("--isolation: --big-size must differ from the first --size".to_owned());
        }
        Ok(())
    }

    /// The transport of `--transport`, else of `from_env` (`NAAICE_TRANSPORT`; its `auto`
    /// and the default are `soft`).
    fn transport_with(
        &self,
        from_env: impl FnOnce() -> Result<AnyTransport, naaice::discovery::environment::VariableError>,
    ) -> Result<AnyTransport, String> {
        if let Some(t) = &self.transport_arg {
            return Ok(t.clone());
        }
        let chosen = from_env().map_err(|e| e.to_string())?;
        if chosen.choice() == TransportChoice::Auto {
            return Ok(AnyTransport::from(
                naaice::transport::soft::SoftTransport::default(),
            ));
        }
        Ok(chosen)
    }

    /// Path of the low-level CSV.
    pub(crate) fn lowlevel_csv(&self) -> PathBuf {
        self.csv
            .clone()
            .unwrap_or_else(|| self.out.join("lowlevel.csv"))
    }

    /// The wait policy asked for with --wait or --busy-poll-us, if any.
    pub(crate) fn wait_policy(&self) -> Option<WaitPolicy> {
        self.wait.or(self.busy_poll.map(WaitPolicy::Spin))
    }

    /// Path of the summary CSV.
    pub(crate) fn summary_csv(&self) -> PathBuf {
        self.summary
            .clone()
            .unwrap_or_else(|| self.out.join("summary.csv"))
    }
}

/// A size of at least 1 byte (`64KiB`; a bare number is bytes).
fn positive_size(s: &str) -> Result<u64, String> {
    match parse_size(s)? {
        0 => Err("must be at least 1 byte".to_owned()),
        n => Ok(n),
    }
}

/// Parses a transport name (`auto` is refused: a benchmark measures one transport); a build
/// without verbs says how to get it.
fn parse_transport(s: &str) -> Result<AnyTransport, String> {
    let t = values::transport("naaice-bench", s)?;
    if t.choice() == TransportChoice::Auto {
        return Err("a benchmark measures one transport: name it (soft or verbs)".to_owned());
    }
    Ok(t)
}
