//! A client process (the hidden `--worker` mode): connects its clients, says `ready`, runs
//! RPCs from `go` for `--duration`, reports what each client measured and what the process
//! used (see [`super::result`]), then disconnects when its standard input closes.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use naaice::transport::AnyTransport;

use crate::Error;
use crate::base::kind::WorkerKind;
use crate::base::raw::Echo;
use crate::base::setup;
use crate::base::usage::Process;
use crate::cli::Args;
use crate::clients::capi::{CClient, COverlap};
use crate::clients::client::{Client, RPC_TIMEOUT, RustClient, rust_handle, warm_up_count};
use crate::clients::overlap::Overlap;
use crate::clients::result::{ClientResult, usage_line};

/// Longest a client may take to connect and warm up (connection retries included).
const SETUP_TIMEOUT: Duration = Duration::from_secs(120);

/// What one thread of a client process runs.
enum Job {
    /// One client.
    One(Box<dyn Client>, u64),
    /// Many handles driven together.
    Overlap(Overlap),
    /// Many C handles driven together.
    COverlap(COverlap),
}

impl Job {
    fn prepare(
        transport: &AnyTransport,
        fncode: u8,
        kind: WorkerKind,
        target: SocketAddr,
        sizes: &[u64],
    ) -> Result<Self, Error> {
        match kind {
            WorkerKind::Overlap => {
                let o = Overlap::connect(transport, target, fncode, sizes)?;
                return Ok(Self::Overlap(o));
            }
            WorkerKind::COverlap => return Ok(Self::COverlap(COverlap::create(fncode, sizes)?)),
            _ => {}
        }
        let &[size] = sizes else {
            return Err("a client thread has one size".into());
        };
        let mut client: Box<dyn Client> = match kind {
            WorkerKind::Echo => Box::new(Echo::connect(target, size)?),
            WorkerKind::C => Box::new(CClient::create(fncode, size)?),
            WorkerKind::Rust | WorkerKind::Overlap | WorkerKind::COverlap => {
                Box::new(RustClient(rust_handle(transport, target, fncode, size)?))
            }
        };
        for _ in 0..warm_up_count(size) {
            client.rpc()?;
        }
        Ok(Self::One(client, size))
    }

    fn run(&mut self, until: Instant) -> Result<Vec<ClientResult>, Error> {
        match self {
            Self::One(client, size) => Ok(vec![steady(client.as_mut(), *size, until)?]),
            Self::Overlap(o) => o.run(until),
            Self::COverlap(o) => o.run(until),
        }
    }
}

/// RPCs one after the other until `until`.
fn steady(client: &mut dyn Client, size: u64, until: Instant) -> Result<ClientResult, Error> {
    let mut result = ClientResult::empty(size)?;
    let start = Instant::now();
    let mut last = start;
    while last < until {
        let t = Instant::now();
        client.rpc()?;
        last = Instant::now();
        result.count(last - t, last - start)?;
    }
    Ok(result)
}

/// A value some threads wait for until another thread sets it.
struct Gate<T>(Mutex<Option<T>>, Condvar);

impl<T: Copy> Gate<T> {
    fn new() -> Arc<Self> {
        Arc::new(Self(Mutex::new(None), Condvar::new()))
    }

    fn open(&self, v: T) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(v);
        self.1.notify_all();
    }

    fn wait(&self) -> T {
        let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(v) = *g {
                return v;
            }
            g = self.1.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// A message of a client thread to the process's main thread.
enum Event {
    Ready(Result<(), String>),
    Done(Result<Vec<ClientResult>, String>),
}

/// Runs the client process `kind` against `--worker-target` with a client per
/// `--worker-sizes` entry (all in one thread for `overlap`).
pub(crate) fn run(args: &Args, kind: WorkerKind) -> Result<(), Error> {
    let target = args.worker_target.ok_or("--worker needs --worker-target")?;
    if args.worker_sizes.is_empty() {
        return Err("--worker needs --worker-sizes".into());
    }
    let per_thread: Vec<Vec<u64>> = if kind.is_overlap() {
        vec![args.worker_sizes.clone()]
    } else {
        args.worker_sizes.iter().map(|&s| vec![s]).collect()
    };
    let transport = setup::transport(args)?;
    let fncode = args.fncode;
    let (go, quit) = (Gate::<Instant>::new(), Gate::<()>::new());
    let (tx, rx) = mpsc::channel();
    let mut threads = Vec::new();
    for sizes in per_thread {
        let (transport, go, quit, tx) = (transport.clone(), go.clone(), quit.clone(), tx.clone());
        threads.push(std::thread::spawn(move || {
            let mut job = match Job::prepare(&transport, fncode, kind, target, &sizes) {
                Ok(job) => job,
                Err(e) => return drop(tx.send(Event::Ready(Err(e.to_string())))),
            };
            let _ = tx.send(Event::Ready(Ok(())));
            let done = job.run(go.wait()).map_err(|e| e.to_string());
            let _ = tx.send(Event::Done(done));
            quit.wait();
        }));
    }
    drop(tx);
    let n = threads.len();
    for _ in 0..n {
        if let Event::Ready(Err(e)) = rx
            .recv_timeout(SETUP_TIMEOUT)
            .map_err(|_| "a client neither connected nor failed in time")?
        {
            return Err(e.into());
        }
    }
    let me = Process::this()?;
    let results = measure(args.duration, &me, &go, &rx, n)?;
    report(&results.0, &results.1)?;
    // Disconnect once the benchmark has read its own counters (it closes our input).
    let mut rest = String::new();
    while std::io::stdin().lock().read_line(&mut rest)? > 0 {}
    quit.open(());
    for t in threads {
        t.join().map_err(|_| "a client thread panicked")?;
    }
    Ok(())
}

/// Says `ready`, waits for `go`, lets the clients run and collects what they measured and
/// what the process used meanwhile.
fn measure(
    duration: Duration,
    me: &Process,
    go: &Gate<Instant>,
    rx: &mpsc::Receiver<Event>,
    n: usize,
) -> Result<(Vec<ClientResult>, crate::base::usage::Usage), Error> {
    println!("ready");
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    if line.trim() != "go" {
        return Err(format!("expected go, read {line:?}").into());
    }
    let before = me.read().ok_or("this process's usage is unreadable")?;
    go.open(Instant::now() + duration);
    let mut results = Vec::new();
    // Each client ends its last RPC by then, or that RPC has failed with its deadline.
    let end = duration + RPC_TIMEOUT + SETUP_TIMEOUT;
    for _ in 0..n {
        let event = rx
            .recv_timeout(end)
            .map_err(|_| "a client neither finished nor failed in time")?;
        match event {
            Event::Done(Ok(r)) => results.extend(r),
            Event::Done(Err(e)) => return Err(e.into()),
            Event::Ready(_) => return Err("a client was ready twice".into()),
        }
    }
    let after = me.read().ok_or("this process's usage is unreadable")?;
    Ok((results, after - before))
}

/// Prints the report lines.
fn report(results: &[ClientResult], usage: &crate::base::usage::Usage) -> Result<(), Error> {
    let mut out = std::io::stdout().lock();
    for r in results {
        writeln!(out, "{}", r.line())?;
    }
    writeln!(out, "{}", usage_line(usage))?;
    writeln!(out, "end")?;
    out.flush()?;
    Ok(())
}
