//! RPC sweep over the software transport, against the raw TCP limit of the same machine.
//!
//! One run starts a software NAA in-process on loopback (built-in kernel 3, the empty kernel)
//! and measures, for every size of the reference list (spec §8.1: `s(0) = 1`,
//! `s(k+1) = round_half_even(1.5 · s(k))` while below 1 GiB, then exactly 1 GiB; 52 sizes) plus
//! the extra sizes 64 B and 4 KiB:
//!
//! * **Fresh-connection sweep** (the low-level client measurement of spec §8.1): per sample a
//!   new connection with one in-place region (flags 0x0C, fncode 3); `setup_time` =
//!   registration + MRSP, `transfer_time` = one `do_transfer`. Written as the reference CSV
//!   `byte_length,setup_time,transfer_time` (seconds, 6 decimals) for the 52 list sizes.
//! * **Steady state**: many RPCs on one connection → median RPC latency.
//! * **Raw TCP limit**: a `std::net::TcpStream` echo on loopback (TCP_NODELAY), `size` bytes
//!   each way → median round trip, alternated sample by sample with the steady-state RPCs so
//!   that machine noise hits both; for sizes ≥ 1 MiB also the one-direction stream bandwidth
//!   (1 MiB writes for `--stream-secs`).
//!
//! It prints a table per size and the summary ratios against the targets (small RPC ≤ 4 KiB:
//! ≤ 1.5× the raw TCP round trip; ≥ 1 MiB: ≥ 0.8× the raw TCP bandwidth), and writes the
//! summary to `target/rpc_sweep_summary.txt`.
//!
//! Run:
//!
//! ```text
//! cargo bench -p naaice --bench rpc_sweep -- [--max-size BYTES] [--reps N] [--steady N]
//!     [--csv PATH] [--summary PATH] [--stream-secs SECS]
//! ```
//!
//! * `--max-size`: largest size (default 1 GiB = 1073741824).
//! * `--reps`: fresh-connection samples per size (default 10 up to 1 MiB, 5 up to 64 MiB, 2
//!   above).
//! * `--steady`: steady-state RPCs (and raw round trips) per size (default 2000, fewer for
//!   large sizes: about 256 MiB of payload per size, at least 3).
//! * `--csv`: reference-format CSV (default `target/rpc_sweep.csv` of the workspace).
//! * `--summary`: summary text (default `target/rpc_sweep_summary.txt` of the workspace).
//! * `--stream-secs`: duration of the raw stream-bandwidth measurement per size (default 0.5).
//! * `--ack-delay-us`: override the software transport's `ack_delay` (for diagnosis; the
//!   default is what is measured otherwise).
//! * `--transport verbs --addr IP` (built with `--features verbs`): the same sweep over the
//!   verbs transport, the NAA listening on `IP` (an address of an RDMA device, e.g. the
//!   Soft-RoCE VM's `$RXE_VM_ADDR`). There is no raw TCP baseline then (compare with perftest's
//!   `ib_write_lat` / `ib_write_bw`); the steady state aims at 32 MiB of payload per size, and
//!   the summary file is a CSV: `byte_length,steady_n,steady_rpc_us,steady_rpc_MBps,
//!   fresh_setup_us,fresh_transfer_us` (medians; MB/s = 2·size / time), after `#` comment lines.
//!   `--busy-poll-us` overrides the verbs transport's busy-poll time (e.g. `100000`: spin
//!   like perftest does; under emulation every sleep/wake-up of a vCPU costs milliseconds).
//!
//! Over verbs in the Soft-RoCE VM (build with `cargo bench -p naaice --features verbs --bench
//! rpc_sweep --no-run`, then run the printed binary with the VM runner):
//!
//! ```text
//! run-in-rxe-vm.sh sh -c '<bench binary> --transport verbs --addr $RXE_VM_ADDR --max-size 4194304'
//! ```
//!
//! Memory: the largest size needs about 4× its size (client and NAA buffers of the RPC, and
//! both ends of the raw echo).

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use naaice::Buffer;
use naaice::Connection;
use naaice::swnaa::{KernelRegistry, SoftNaa, SoftNaaConfig};
use naaice::transport::soft::{SoftConfig, SoftTransport};
use naaice::transport::{AnyTransport, Endpoint, Transport};
use naaice_core::{ClientConfig, FunctionCode};

type Error = Box<dyn std::error::Error>;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;
/// Function code of the built-in empty kernel.
const EMPTY_KERNEL: u8 = 3;
/// Payload per size the steady state aims at (bounds the run time of large sizes).
const STEADY_BYTES: u64 = 256 * MIB;
/// The same over verbs (Soft-RoCE moves ~0.2 GB/s under emulation).
const STEADY_BYTES_VERBS: u64 = 32 * MIB;
/// Most steady-state RPCs per size.
const STEADY_MAX: usize = 2000;
/// Fewest steady-state RPCs per size.
const STEADY_MIN: usize = 3;
/// Chunk of the raw stream-bandwidth measurement.
const STREAM_CHUNK: usize = MIB as usize;

/// Command-line options.
struct Opts {
    max_size: u64,
    reps: Option<usize>,
    steady: Option<usize>,
    csv: PathBuf,
    summary: PathBuf,
    stream_secs: f64,
    /// Transport overrides (diagnosis only; defaults are measured otherwise).
    ack_delay_us: Option<u64>,
    /// The transport (`--transport soft|verbs`).
    transport: AnyTransport,
    /// Listening address of the NAA over verbs.
    addr: Option<std::net::IpAddr>,
    /// Verbs busy-poll override.
    busy_poll_us: Option<u64>,
}

fn parse_args() -> Result<Opts, Error> {
    let mut o = Opts {
        max_size: GIB,
        reps: None,
        steady: None,
        csv: target_dir().join("rpc_sweep.csv"),
        summary: target_dir().join("rpc_sweep_summary.txt"),
        stream_secs: 0.5,
        ack_delay_us: None,
        transport: AnyTransport::Soft(SoftTransport::default()),
        addr: None,
        busy_poll_us: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let (key, inline) = match a.split_once('=') {
            Some((k, v)) => (k.to_string(), Some(v.to_string())),
            None => (a.clone(), None),
        };
        let mut value = || -> Result<String, Error> {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{key} needs a value").into())
        };
        match key.as_str() {
            // cargo bench passes --bench; libtest-style filters are ignored too.
            "--bench" => {}
            "--max-size" => o.max_size = value()?.parse()?,
            "--reps" => o.reps = Some(value()?.parse()?),
            "--steady" => o.steady = Some(value()?.parse()?),
            "--csv" => o.csv = PathBuf::from(value()?),
            "--summary" => o.summary = PathBuf::from(value()?),
            "--stream-secs" => o.stream_secs = value()?.parse()?,
            "--ack-delay-us" => o.ack_delay_us = Some(value()?.parse()?),
            "--transport" => o.transport = value()?.parse()?,
            "--addr" => o.addr = Some(value()?.parse()?),
            "--busy-poll-us" => o.busy_poll_us = Some(value()?.parse()?),
            "-h" | "--help" => {
                println!(
                    "rpc_sweep [--max-size BYTES] [--reps N] [--steady N] [--csv PATH] \
                     [--summary PATH] [--stream-secs SECS] \
                     [--ack-delay-us US] [--transport soft|verbs] [--addr IP] \
                     [--busy-poll-us US]"
                );
                std::process::exit(0);
            }
            other if !other.starts_with('-') => {}
            other => return Err(format!("unknown option {other}").into()),
        }
    }
    if o.max_size == 0 {
        return Err("--max-size must be at least 1".into());
    }
    if o.transport.name() == "verbs" && o.addr.is_none() {
        return Err("--transport verbs needs --addr IP (an address of an RDMA device)".into());
    }
    Ok(o)
}

/// The workspace's `target` directory (cargo runs benches in the package directory).
fn target_dir() -> PathBuf {
    let host = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    host.parent().unwrap_or(host).join("target")
}

/// The 52 sizes of the reference driver (spec §8.1).
fn reference_sizes() -> Vec<u64> {
    let mut sizes = vec![1u64];
    loop {
        let s = *sizes.last().unwrap_or(&1);
        // round_half_even(1.5 · s), exactly in integers.
        let next = if s % 2 == 0 {
            s / 2 * 3
        } else {
            let floor = (3 * s - 1) / 2;
            if floor % 2 == 0 { floor } else { floor + 1 }
        };
        if next >= GIB {
            break;
        }
        sizes.push(next);
    }
    sizes.push(GIB);
    sizes
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// A buffer of `size` bytes with every page touched (like a client that fills its input).
fn filled(size: u64) -> Buffer {
    let v: Vec<u8> = (0..size).map(|i| i as u8).collect();
    Buffer::from_vec(v)
}

// ------------------------------------------------------------------------------------------
// RPC side

fn fncode() -> FunctionCode {
    FunctionCode::new(EMPTY_KERNEL).unwrap_or_else(|| unreachable!("3 is a valid code"))
}

/// Connects (retrying a few times: a just-closed connection may still hold its slot).
fn connect<T: Transport>(transport: &T, naa: SocketAddr) -> Result<Connection<T::Endpoint>, Error> {
    let mut tries = 0;
    loop {
        match Connection::connect(transport, naa, None, ClientConfig::new(fncode())) {
            Ok(c) => return Ok(c),
            Err(e) if tries < 20 => {
                tries += 1;
                eprintln!("connect failed ({e}); retrying");
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Registers `buffer` as one in-place region (flags 0x0C) and runs the MRSP.
fn setup<E: Endpoint>(conn: &mut Connection<E>, buffer: &Buffer) -> Result<(), Error> {
    let id = conn.add_param(buffer)?;
    conn.set_input(id)?;
    conn.set_output(id)?;
    conn.do_mrsp()?;
    Ok(())
}

/// One RPC; returns its duration in seconds.
fn rpc<E: Endpoint>(conn: &mut Connection<E>) -> Result<f64, Error> {
    let t = Instant::now();
    let r = conn.do_transfer()?;
    let dt = t.elapsed().as_secs_f64();
    if !r.status.is_success() {
        return Err(format!("RPC failed with status {}", r.status).into());
    }
    Ok(dt)
}

/// One fresh-connection sample: (setup_time, transfer_time) in seconds.
fn fresh_sample<T: Transport>(
    transport: &T,
    naa: SocketAddr,
    buffer: &Buffer,
) -> Result<(f64, f64), Error> {
    let mut conn = connect(transport, naa)?;
    let t = Instant::now();
    setup(&mut conn, buffer)?;
    let setup_time = t.elapsed().as_secs_f64();
    let transfer_time = rpc(&mut conn)?;
    conn.disconnect();
    Ok((setup_time, transfer_time))
}

// ------------------------------------------------------------------------------------------
// Raw TCP side

/// Mode byte of a raw connection: echo `size`-byte messages.
const MODE_ECHO: u8 = 1;
/// Mode byte of a raw connection: discard until EOF, then reply with the byte count.
const MODE_SINK: u8 = 2;

/// A raw TCP peer on loopback: a thread per connection, like the NAA's workers.
struct RawPeer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RawPeer {
    fn start() -> Result<Self, Error> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("raw-tcp-master".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    if flag.load(Ordering::Relaxed) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let _ = std::thread::Builder::new()
                        .name("raw-tcp-peer".into())
                        .spawn(move || {
                            if let Err(e) = serve_raw(stream) {
                                eprintln!("raw peer: {e}");
                            }
                        });
                }
            })?;
        Ok(Self {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// Opens a raw connection in `mode` for messages of `size` bytes.
    fn open(&self, mode: u8, size: u64) -> Result<TcpStream, Error> {
        let mut s = TcpStream::connect(self.addr)?;
        s.set_nodelay(true)?;
        let mut hello = [0u8; 9];
        hello[0] = mode;
        hello[1..].copy_from_slice(&size.to_le_bytes());
        s.write_all(&hello)?;
        Ok(s)
    }
}

impl Drop for RawPeer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve_raw(mut s: TcpStream) -> std::io::Result<()> {
    s.set_nodelay(true)?;
    let mut hello = [0u8; 9];
    s.read_exact(&mut hello)?;
    let size = u64::from_le_bytes(hello[1..].try_into().unwrap_or_default()) as usize;
    match hello[0] {
        MODE_ECHO => {
            let mut buf = vec![0u8; size];
            loop {
                match s.read_exact(&mut buf) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                    Err(e) => return Err(e),
                }
                s.write_all(&buf)?;
            }
        }
        MODE_SINK => {
            let mut buf = vec![0u8; STREAM_CHUNK];
            let mut total = 0u64;
            loop {
                match s.read(&mut buf)? {
                    0 => break,
                    n => total += n as u64,
                }
            }
            s.write_all(&total.to_le_bytes())
        }
        _ => Ok(()),
    }
}

/// One raw round trip of `buf.len()` bytes each way; seconds.
fn raw_rtt(s: &mut TcpStream, buf: &mut [u8]) -> Result<f64, Error> {
    let t = Instant::now();
    s.write_all(buf)?;
    s.read_exact(buf)?;
    Ok(t.elapsed().as_secs_f64())
}

/// One-direction stream bandwidth (bytes/s): 1 MiB writes for `secs`, until the peer has read
/// everything.
fn stream_bw(peer: &RawPeer, secs: f64) -> Result<f64, Error> {
    let mut s = peer.open(MODE_SINK, 0)?;
    let chunk = vec![0x5au8; STREAM_CHUNK];
    let t = Instant::now();
    let until = Duration::from_secs_f64(secs);
    let mut sent = 0u64;
    while t.elapsed() < until {
        s.write_all(&chunk)?;
        sent += STREAM_CHUNK as u64;
    }
    s.shutdown(Shutdown::Write)?;
    let mut total = [0u8; 8];
    s.read_exact(&mut total)?;
    let dt = t.elapsed().as_secs_f64();
    let total = u64::from_le_bytes(total);
    if total != sent {
        return Err(format!("stream: sent {sent}, peer read {total}").into());
    }
    Ok(total as f64 / dt)
}

// ------------------------------------------------------------------------------------------
// The run

/// Results of one size.
struct Row {
    size: u64,
    steady_n: usize,
    rpc_med: f64,
    raw_med: f64,
    fresh_setup_med: f64,
    fresh_xfer_med: f64,
    stream_bw: Option<f64>,
}

impl Row {
    fn ratio(&self) -> f64 {
        self.rpc_med / self.raw_med
    }
    fn rpc_bw(&self) -> f64 {
        2.0 * self.size as f64 / self.rpc_med
    }
    fn raw_bw(&self) -> f64 {
        2.0 * self.size as f64 / self.raw_med
    }
}

fn steady_count(o: &Opts, size: u64) -> usize {
    let budget = if o.transport.name() == "verbs" {
        STEADY_BYTES_VERBS
    } else {
        STEADY_BYTES
    };
    o.steady
        .unwrap_or_else(|| ((budget / size) as usize).clamp(STEADY_MIN, STEADY_MAX))
}

fn fresh_reps(o: &Opts, size: u64) -> usize {
    o.reps.unwrap_or(if size <= MIB {
        10
    } else if size <= 64 * MIB {
        5
    } else {
        2
    })
}

/// Measures one size; without a raw peer (verbs) only the RPCs.
fn measure_size<T: Transport>(
    o: &Opts,
    transport: &T,
    naa: SocketAddr,
    peer: Option<&RawPeer>,
    size: u64,
    csv: Option<&mut String>,
) -> Result<Row, Error> {
    let buffer = filled(size);
    let n = steady_count(o, size);
    let mut streams = Vec::new();
    if let Some(peer) = peer.filter(|_| size >= MIB) {
        streams.push(stream_bw(peer, o.stream_secs / 2.0)?);
    }

    // Steady state, alternating raw round trips and RPCs.
    let (mut rpc_t, mut raw_t) = (Vec::with_capacity(n), Vec::with_capacity(n));
    {
        let mut conn = connect(transport, naa)?;
        setup(&mut conn, &buffer)?;
        let mut raw = peer.map(|p| p.open(MODE_ECHO, size)).transpose()?;
        let mut raw_buf = vec![0x33u8; if raw.is_some() { size as usize } else { 0 }];
        let mut raw_rtt = |raw_t: &mut Vec<f64>| -> Result<(), Error> {
            if let Some(raw) = raw.as_mut() {
                raw_t.push(raw_rtt(raw, &mut raw_buf)?);
            }
            Ok(())
        };
        let warmup = (n / 10).clamp(1, 50);
        let mut discard = Vec::new();
        for _ in 0..warmup {
            rpc(&mut conn)?;
            raw_rtt(&mut discard)?;
        }
        for i in 0..n {
            if i % 2 == 0 {
                raw_rtt(&mut raw_t)?;
                rpc_t.push(rpc(&mut conn)?);
            } else {
                rpc_t.push(rpc(&mut conn)?);
                raw_rtt(&mut raw_t)?;
            }
        }
        conn.disconnect();
    }
    if let Some(peer) = peer.filter(|_| size >= MIB) {
        streams.push(stream_bw(peer, o.stream_secs / 2.0)?);
    }

    // Fresh connections (the reference measurement).
    let reps = fresh_reps(o, size);
    let (mut setups, mut xfers) = (Vec::with_capacity(reps), Vec::with_capacity(reps));
    let mut csv = csv;
    for _ in 0..reps {
        let (s, t) = fresh_sample(transport, naa, &buffer)?;
        if let Some(csv) = csv.as_deref_mut() {
            let _ = writeln!(csv, "{size},{s:.6},{t:.6}");
        }
        setups.push(s);
        xfers.push(t);
    }

    Ok(Row {
        size,
        steady_n: n,
        rpc_med: median(&mut rpc_t),
        raw_med: median(&mut raw_t),
        fresh_setup_med: median(&mut setups),
        fresh_xfer_med: median(&mut xfers),
        stream_bw: streams.iter().copied().reduce(f64::max),
    })
}

fn us(s: f64) -> f64 {
    s * 1e6
}

fn gbs(bps: f64) -> f64 {
    bps / 1e9
}

fn table(rows: &[Row]) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{:>10} {:>5} | {:>11} {:>11} {:>6} | {:>11} {:>11} | {:>8} {:>8} {:>8} {:>7} {:>7}",
        "bytes",
        "n",
        "rpc med µs",
        "tcp rtt µs",
        "ratio",
        "fresh xfer",
        "fresh setup",
        "rpc GB/s",
        "rtt GB/s",
        "strm GB/s",
        "rpc/rtt",
        "rpc/strm"
    );
    for r in rows {
        let _ = write!(
            t,
            "{:>10} {:>5} | {:>11.1} {:>11.1} {:>6.2} | {:>11.1} {:>11.1} |",
            r.size,
            r.steady_n,
            us(r.rpc_med),
            us(r.raw_med),
            r.ratio(),
            us(r.fresh_xfer_med),
            us(r.fresh_setup_med)
        );
        if r.size >= MIB {
            let stream = r.stream_bw.unwrap_or(f64::NAN);
            let _ = write!(
                t,
                " {:>8.2} {:>8.2} {:>8.2} {:>7.2} {:>7.2}",
                gbs(r.rpc_bw()),
                gbs(r.raw_bw()),
                gbs(stream),
                r.rpc_bw() / r.raw_bw(),
                r.rpc_bw() / stream
            );
        }
        t.push('\n');
    }
    t
}

fn summary(rows: &[Row]) -> String {
    let mut s = String::new();
    let verdict = |ok: bool| if ok { "MET" } else { "MISSED" };
    let mut small: Vec<f64> = rows
        .iter()
        .filter(|r| r.size <= 4 * KIB)
        .map(Row::ratio)
        .collect();
    if !small.is_empty() {
        let worst = small.iter().copied().fold(f64::MIN, f64::max);
        let med = median(&mut small);
        let _ = writeln!(
            s,
            "small RPC (≤ 4 KiB, steady) / raw TCP round trip: median {med:.2}×, worst {worst:.2}× \
             over {} sizes  (target ≤ 1.50×: {} by median, {} for all)",
            small.len(),
            verdict(med <= 1.5),
            verdict(worst <= 1.5)
        );
    }
    let big: Vec<&Row> = rows.iter().filter(|r| r.size >= MIB).collect();
    if !big.is_empty() {
        let mut rtt: Vec<f64> = big.iter().map(|r| r.rpc_bw() / r.raw_bw()).collect();
        let mut strm: Vec<f64> = big
            .iter()
            .filter_map(|r| r.stream_bw.map(|b| r.rpc_bw() / b))
            .collect();
        let min = |v: &[f64]| v.iter().copied().fold(f64::MAX, f64::min);
        let (rtt_min, strm_min) = (min(&rtt), min(&strm));
        let (rtt_med, strm_med) = (median(&mut rtt), median(&mut strm));
        let _ = writeln!(
            s,
            "RPC bandwidth (≥ 1 MiB, steady) / raw TCP round-trip bandwidth: median {rtt_med:.2}×, \
             worst {rtt_min:.2}× over {} sizes  (target ≥ 0.80×: {} by median, {} for all)",
            big.len(),
            verdict(rtt_med >= 0.8),
            verdict(rtt_min >= 0.8)
        );
        let _ = writeln!(
            s,
            "RPC bandwidth (≥ 1 MiB, steady) / raw TCP stream bandwidth:     median {strm_med:.2}×, \
             worst {strm_min:.2}×  (target ≥ 0.80×: {} by median, {} for all)",
            verdict(strm_med >= 0.8),
            verdict(strm_min >= 0.8)
        );
        let best = big.iter().map(|r| r.rpc_bw()).fold(0.0, f64::max);
        let stream = big.iter().filter_map(|r| r.stream_bw).fold(0.0, f64::max);
        let _ = writeln!(
            s,
            "peak RPC bandwidth {:.2} GB/s (2·size/t); peak raw stream {:.2} GB/s",
            gbs(best),
            gbs(stream)
        );
    }
    s
}

/// The sizes to measure: the reference list up to `--max-size` (in the CSV) plus 64 B and
/// 4 KiB (not in the CSV).
fn sweep_sizes(o: &Opts) -> Vec<(u64, bool)> {
    let mut sizes: Vec<(u64, bool)> = reference_sizes()
        .into_iter()
        .filter(|&s| s <= o.max_size)
        .map(|s| (s, true))
        .collect();
    for extra in [64, 4 * KIB] {
        if extra <= o.max_size {
            sizes.push((extra, false));
        }
    }
    sizes.sort_unstable();
    sizes
}

/// Measures every size; returns the rows and the reference CSV.
fn sweep<T: Transport>(
    o: &Opts,
    transport: &T,
    naa: SocketAddr,
    peer: Option<&RawPeer>,
    sizes: &[(u64, bool)],
) -> Result<(Vec<Row>, String), Error> {
    let mut csv = String::from("byte_length,setup_time,transfer_time\n");
    let mut rows = Vec::new();
    for &(size, in_csv) in sizes {
        let t = Instant::now();
        let row = measure_size(o, transport, naa, peer, size, in_csv.then_some(&mut csv))?;
        eprintln!(
            "{size:>10} B: rpc {:>10.1} µs, raw {:>10.1} µs ({:.2}×), fresh {:>10.1} µs  [{:.1} s]",
            us(row.rpc_med),
            us(row.raw_med),
            row.ratio(),
            us(row.fresh_xfer_med),
            t.elapsed().as_secs_f64()
        );
        rows.push(row);
    }
    Ok((rows, csv))
}

/// Writes `contents` to `path`, creating its directory.
fn write_file(path: &std::path::Path, contents: &str) -> Result<(), Error> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, contents)?;
    Ok(())
}

/// The machine-readable summary of a verbs run (CSV after `#` comment lines).
#[cfg(feature = "verbs")]
fn verbs_summary(rows: &[Row], header: &str) -> String {
    let mut s = String::new();
    for line in header.lines() {
        let _ = writeln!(s, "# {line}");
    }
    s.push_str(
        "byte_length,steady_n,steady_rpc_us,steady_rpc_MBps,fresh_setup_us,fresh_transfer_us\n",
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{:.3},{:.3},{:.3},{:.3}",
            r.size,
            r.steady_n,
            us(r.rpc_med),
            r.rpc_bw() / 1e6,
            us(r.fresh_setup_med),
            us(r.fresh_xfer_med)
        );
    }
    s
}

#[cfg(feature = "verbs")]
fn run_verbs(o: &Opts, sizes: &[(u64, bool)]) -> Result<(), Error> {
    use naaice::transport::verbs::{VerbsConfig, VerbsTransport};
    let ip = o.addr.ok_or("--transport verbs needs --addr")?;
    let mut config = VerbsConfig::default();
    if let Some(us) = o.busy_poll_us {
        config.busy_poll = Duration::from_micros(us);
    }
    let transport = VerbsTransport::new(config.clone());
    let naa = SoftNaa::bind(
        transport.clone(),
        SocketAddr::new(ip, 0),
        SoftNaaConfig {
            max_connections: 16,
            ..SoftNaaConfig::default()
        },
        KernelRegistry::builtin(),
    )?
    .spawn()?;
    println!(
        "software NAA over verbs on {}; {} sizes up to {} bytes",
        naa.local_addr(),
        sizes.len(),
        o.max_size
    );
    let started = Instant::now();
    let (rows, csv) = sweep(o, &transport, naa.local_addr(), None, sizes)?;
    write_file(&o.csv, &csv)?;
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let header = format!(
        "rpc_sweep over verbs: software NAA (kernel 3) in-process on {}, {cpus} CPUs, {:.1} s\n\
         transport: busy_poll {:?}\n\
         steady = median over steady_n RPCs on one connection (MB/s = 2*size/time);\n\
         fresh = median over new connections: setup = registration + MRSP, transfer = first RPC",
        naa.local_addr(),
        started.elapsed().as_secs_f64(),
        config.busy_poll
    );
    let summary = verbs_summary(&rows, &header);
    println!("\n{summary}");
    write_file(&o.summary, &summary)?;
    println!("CSV: {}  summary: {}", o.csv.display(), o.summary.display());
    naa.shutdown();
    Ok(())
}

fn main() -> Result<(), Error> {
    let o = parse_args()?;
    let sizes = sweep_sizes(&o);
    #[cfg(feature = "verbs")]
    if let AnyTransport::Verbs(_) = o.transport {
        return run_verbs(&o, &sizes);
    }

    let mut soft = SoftConfig::default();
    if let Some(us) = o.ack_delay_us {
        soft.ack_delay = Duration::from_micros(us);
    }
    let transport = AnyTransport::from(SoftTransport::new(soft.clone()));
    let config = SoftNaaConfig {
        max_connections: 16,
        ..SoftNaaConfig::default()
    };
    let naa = SoftNaa::bind(
        transport.clone(),
        "127.0.0.1:0".parse()?,
        config,
        KernelRegistry::builtin(),
    )?
    .spawn()?;
    let peer = RawPeer::start()?;
    println!(
        "software NAA on {}, raw TCP peer on {}; {} sizes up to {} bytes",
        naa.local_addr(),
        peer.addr,
        sizes.len(),
        o.max_size
    );

    let started = Instant::now();
    let (rows, csv) = sweep(&o, &transport, naa.local_addr(), Some(&peer), &sizes)?;
    write_file(&o.csv, &csv)?;
    let table = table(&rows);
    let summary = summary(&rows);
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let report = format!(
        "rpc_sweep: software NAA (kernel 3) vs raw TCP on loopback, {cpus} CPUs, {:.1} s\n\
         transport: ack_delay {:?}\n\
         steady = median over n RPCs on one connection, alternated with n raw TCP round trips;\n\
         fresh = median transfer_time / setup_time of new connections (reference CSV);\n\
         GB/s for ≥ 1 MiB: 2·size / median time (rpc, rtt) and one-direction stream.\n\n\
         {table}\n{summary}",
        started.elapsed().as_secs_f64(),
        soft.ack_delay
    );
    println!("\n{report}");
    write_file(&o.summary, &report)?;
    println!("CSV: {}  summary: {}", o.csv.display(), o.summary.display());
    drop(peer);
    naa.shutdown();
    Ok(())
}
