//! A simulated FPGA NAA for end-to-end tests: the real firmware logic (`naaice-firmware`)
//! running on the host, with the software transport playing the hardware RoCE engine.
//!
//! [`SoftRoceEngine`] implements the firmware's engine seam over a [`SoftListener`] and one
//! [`SoftEndpoint`] per connection: region-table entries become registrations at the
//! firmware's NAA address and rkey ([`SoftEndpoint::register_at`]), so the client writes to
//! exactly what the firmware advertised. [`ThreadKernels`] runs the test kernels on their own
//! threads and reports completions through [`KernelDone`], like the interrupt handler does.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::convert::Infallible;
use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use chacha20::ChaCha8Rng;
use embedded_hal::digital::{ErrorType, OutputPin};
use naaice::memory::Buffer;
use naaice::transport::soft::{
    SoftEndpoint, SoftIncoming, SoftListener, SoftRegion, SoftTransport,
};
use naaice::transport::{
    Completion as Wc, ConnectionEvent, Endpoint, Incoming, Listener, MemoryRegion, SendOp, SendWr,
    Sge, Transport, WcOpcode, WcStatus,
};
use naaice_core::config::MRSP_RECV_LEN;
use naaice_core::region::RegionFlags;
use naaice_core::{FunctionCode, KernelSet, ReturnCode};
use naaice_firmware::engine::{
    Completion, CompletionKind, ConnId, EngineEvent, PostError, RegionEntry, RoceEngine,
    WriteRequest,
};
use naaice_firmware::{
    Clock, Firmware, FirmwareConfig, Hardware, KernelDone, KernelJob, KernelUnit, MemoryMap,
};
use rand_core::SeedableRng;

/// Connections the simulated NAA serves at once.
pub const CONNECTIONS: usize = 2;

/// Kernel: output region k = input region k + 1 (bytewise), for the first min length.
pub const ADD_ONE: u8 = 1;
/// Kernel: sleeps 1 s (past the test kernel timeout) and succeeds.
pub const SLOW: u8 = 2;
/// Kernel: returns the application error 0x42.
pub const APP_ERROR: u8 = 3;

/// The board memory of the simulated NAA: 16 MiB at NAA address 0.
pub const MEMORY: MemoryMap = MemoryMap {
    base: 0,
    len: 16 << 20,
};

/// Simulated NAA memory: every placed region's buffer by NAA address (shared with kernels).
pub type NaaMemory = Arc<Mutex<BTreeMap<u64, Buffer>>>;

enum Link {
    Pending(SoftIncoming),
    Open(SoftEndpoint),
}

struct Conn {
    link: Option<Link>,
    rx: Buffer,
    rx_region: SoftRegion,
    tx: Buffer,
    tx_region: SoftRegion,
    regions: HashMap<u8, SoftRegion>,
}

impl Conn {
    fn endpoint(&mut self) -> Option<&mut SoftEndpoint> {
        match self.link.as_mut()? {
            Link::Pending(i) => Some(i.endpoint()),
            Link::Open(e) => Some(e),
        }
    }
}

/// The firmware's RoCE engine played by the software transport.
pub struct SoftRoceEngine {
    listener: SoftListener,
    conns: HashMap<ConnId, Conn>,
    next_id: ConnId,
    events: VecDeque<EngineEvent>,
    memory: NaaMemory,
}

impl SoftRoceEngine {
    /// The engine serving the connection requests of `listener`; region-table entries place
    /// their buffers in `memory`.
    pub fn new(listener: SoftListener, memory: NaaMemory) -> Self {
        Self {
            listener,
            conns: HashMap::new(),
            next_id: 0,
            events: VecDeque::new(),
            memory,
        }
    }

    fn accept_new(&mut self) {
        let Ok(Some(mut incoming)) = self.listener.next_request(Instant::now()) else {
            return;
        };
        let rx = Buffer::zeroed(1024);
        let tx = Buffer::zeroed(1024);
        let ep = incoming.endpoint();
        let (Ok(rx_region), Ok(tx_region)) = (ep.register(&rx), ep.register(&tx)) else {
            incoming.reject("no memory");
            return;
        };
        self.next_id = self.next_id.wrapping_add(1);
        let id = self.next_id;
        self.conns.insert(
            id,
            Conn {
                link: Some(Link::Pending(incoming)),
                rx,
                rx_region,
                tx,
                tx_region,
                regions: HashMap::new(),
            },
        );
        self.events.push_back(EngineEvent::ConnectRequest(id));
    }

    fn poll_connections(&mut self) {
        let mut wcs = [Wc {
            wr_id: 0,
            status: WcStatus::Success,
            opcode: WcOpcode::Send,
            byte_len: 0,
            imm: None,
        }; 16];
        for (&id, conn) in &mut self.conns {
            let Some(Link::Open(ep)) = conn.link.as_mut() else {
                continue;
            };
            while let Some(event) = ep.poll_event() {
                self.events.push_back(match event {
                    ConnectionEvent::Established => EngineEvent::Established(id),
                    ConnectionEvent::Disconnected => EngineEvent::Disconnected(id),
                });
            }
            let n = ep.poll(&mut wcs).unwrap_or(0);
            for wc in &wcs[..n] {
                self.events
                    .push_back(EngineEvent::Completion(id, completion(wc)));
            }
        }
    }
}

fn completion(wc: &Wc) -> Completion {
    let kind = match (wc.status, wc.opcode) {
        (WcStatus::Success, WcOpcode::Send) => CompletionKind::Send,
        (WcStatus::Success, WcOpcode::RdmaWrite) => CompletionKind::Write,
        (WcStatus::Success, WcOpcode::Recv) => CompletionKind::Recv { len: wc.byte_len },
        (WcStatus::Success, WcOpcode::RecvRdmaWithImm) => CompletionKind::RecvImm {
            imm: wc.imm.unwrap_or(0),
            len: wc.byte_len,
        },
        (status, _) => CompletionKind::Failed(status.work_error()),
    };
    Completion {
        wr_id: wc.wr_id,
        kind,
    }
}

impl RoceEngine for SoftRoceEngine {
    fn poll_event(&mut self) -> Option<EngineEvent> {
        if self.events.is_empty() {
            self.poll_connections();
            self.accept_new();
        }
        self.events.pop_front()
    }

    fn accept(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if let Some(Link::Pending(incoming)) = c.link.take() {
            match incoming.accept() {
                Ok(ep) => c.link = Some(Link::Open(ep)),
                Err(_) => self.events.push_back(EngineEvent::Disconnected(conn)),
            }
        }
    }

    fn reject(&mut self, conn: ConnId) {
        if let Some(Conn {
            link: Some(Link::Pending(incoming)),
            ..
        }) = self.conns.remove(&conn)
        {
            incoming.reject("Server overlad");
        }
    }

    fn disconnect(&mut self, conn: ConnId) {
        if let Some(mut c) = self.conns.remove(&conn)
            && let Some(ep) = c.endpoint()
        {
            ep.disconnect();
        }
    }

    fn post_recv(&mut self, conn: ConnId, wr_id: u64, message: bool) -> Result<(), PostError> {
        let c = self.conns.get_mut(&conn).ok_or(PostError)?;
        let sge = message.then(|| Sge {
            addr: c.rx_region.addr(),
            len: c.rx_region.len() as u32,
            lkey: c.rx_region.lkey(),
        });
        let ep = c.endpoint().ok_or(PostError)?;
        ep.post_recv(wr_id, sge).map_err(|_| PostError)
    }

    fn read_message(&mut self, conn: ConnId, buf: &mut [u8]) -> usize {
        let Some(c) = self.conns.get(&conn) else {
            return 0;
        };
        let data = c.rx.lock();
        let n = buf.len().min(data.len());
        buf[..n].copy_from_slice(&data[..n]);
        n
    }

    fn post_send(&mut self, conn: ConnId, wr_id: u64, message: &[u8]) -> Result<(), PostError> {
        let c = self.conns.get_mut(&conn).ok_or(PostError)?;
        if message.len() > c.tx.len() {
            return Err(PostError);
        }
        c.tx.lock()[..message.len()].copy_from_slice(message);
        let wr = SendWr {
            wr_id,
            op: SendOp::Send,
            local: Some(Sge {
                addr: c.tx_region.addr(),
                len: message.len() as u32,
                lkey: c.tx_region.lkey(),
            }),
            solicited: true,
        };
        let ep = c.endpoint().ok_or(PostError)?;
        ep.post_send(&[wr]).map_err(|_| PostError)
    }

    fn post_write(&mut self, conn: ConnId, w: &WriteRequest) -> Result<(), PostError> {
        let c = self.conns.get_mut(&conn).ok_or(PostError)?;
        let local = if w.len == 0 {
            None
        } else {
            let region = c
                .regions
                .values()
                .find(|r| r.addr() <= w.local_addr && w.local_addr < r.addr() + r.len() as u64)
                .ok_or(PostError)?;
            Some(Sge {
                addr: w.local_addr,
                len: w.len,
                lkey: region.lkey(),
            })
        };
        let op = SendOp::write(w.remote_addr, w.rkey, w.imm);
        let wr = SendWr {
            wr_id: w.wr_id,
            op,
            local,
            solicited: w.solicited,
        };
        let ep = c.endpoint().ok_or(PostError)?;
        ep.post_send(&[wr]).map_err(|_| PostError)
    }

    fn program_region(&mut self, conn: ConnId, index: u8, e: &RegionEntry) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let buffer = Buffer::zeroed(e.size.max(1) as usize);
        let Some(ep) = c.endpoint() else {
            return;
        };
        if let Ok(region) = ep.register_at(&buffer, e.addr, e.rkey) {
            self.memory
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(e.addr, buffer);
            c.regions.insert(index, region);
        }
    }

    fn clear_regions(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.get_mut(&conn) {
            let mut memory = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
            for r in c.regions.values() {
                memory.remove(&r.addr());
            }
            c.regions.clear();
        }
    }
}

/// A job handed to a kernel thread.
#[derive(Clone)]
struct Job {
    fncode: u8,
    regions: Vec<(RegionFlags, u64, u32)>,
}

/// The kernel unit: each started job runs on its own thread.
pub struct ThreadKernels {
    loaded: Arc<Mutex<Option<(u8, Job)>>>,
    aborted: Arc<[AtomicBool; CONNECTIONS]>,
}

impl KernelUnit for ThreadKernels {
    fn load(&mut self, slot: u8, job: &KernelJob<'_>) {
        let regions = job
            .regions
            .iter()
            .map(|r| (r.flags, r.local.map_or(0, |l| l.addr), r.size))
            .collect();
        if let Some(a) = self.aborted.get(usize::from(slot)) {
            a.store(false, Ordering::SeqCst);
        }
        *self.loaded.lock().unwrap_or_else(PoisonError::into_inner) = Some((
            slot,
            Job {
                fncode: job.fncode,
                regions,
            },
        ));
    }

    fn abort(&mut self, slot: u8) {
        if let Some(a) = self.aborted.get(usize::from(slot)) {
            a.store(true, Ordering::SeqCst);
        }
    }
}

/// The start line: a rising edge starts the loaded job on a thread.
pub struct StartLine {
    memory: NaaMemory,
    done: &'static KernelDone<CONNECTIONS>,
    loaded: Arc<Mutex<Option<(u8, Job)>>>,
    aborted: Arc<[AtomicBool; CONNECTIONS]>,
}

impl ErrorType for StartLine {
    type Error = Infallible;
}

impl OutputPin for StartLine {
    fn set_low(&mut self) -> Result<(), Infallible> {
        Ok(())
    }

    fn set_high(&mut self) -> Result<(), Infallible> {
        let Some((slot, job)) = self
            .loaded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return Ok(());
        };
        let memory = self.memory.clone();
        let done = self.done;
        let aborted = self.aborted.clone();
        std::thread::spawn(move || {
            let status = run_kernel(&memory, &job);
            if !aborted[usize::from(slot)].load(Ordering::SeqCst) {
                done.signal(slot, status.get());
            }
        });
        Ok(())
    }
}

/// Runs test kernel `fncode` ([`ADD_ONE`], [`SLOW`], [`APP_ERROR`]; others answer
/// SOCKET_UNAVAIL) over `regions` (flags, NAA address, size) of `memory`.
pub fn run_kernel_on(
    memory: &NaaMemory,
    fncode: u8,
    regions: Vec<(RegionFlags, u64, u32)>,
) -> ReturnCode {
    run_kernel(memory, &Job { fncode, regions })
}

fn run_kernel(memory: &NaaMemory, job: &Job) -> ReturnCode {
    let buffer = |addr: u64| {
        memory
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&addr)
            .cloned()
    };
    match job.fncode {
        ADD_ONE => {
            let inputs = job
                .regions
                .iter()
                .filter(|r| r.0.contains(RegionFlags::INPUT));
            let outputs = job
                .regions
                .iter()
                .filter(|r| r.0.contains(RegionFlags::OUTPUT));
            for (input, output) in inputs.zip(outputs) {
                let (Some(src), Some(dst)) = (buffer(input.1), buffer(output.1)) else {
                    return ReturnCode::application(0x7F).unwrap_or(ReturnCode::SUCCESS);
                };
                let data = src.to_vec();
                let mut out = dst.lock();
                for (o, i) in out.iter_mut().zip(data) {
                    *o = i.wrapping_add(1);
                }
            }
            ReturnCode::SUCCESS
        }
        SLOW => {
            std::thread::sleep(Duration::from_secs(1));
            ReturnCode::SUCCESS
        }
        APP_ERROR => ReturnCode::application(0x42).unwrap_or(ReturnCode::SUCCESS),
        _ => ReturnCode::SOCKET_UNAVAIL,
    }
}

/// Microseconds since the simulated NAA started.
pub struct HostClock(Instant);

impl Clock for HostClock {
    fn now(&mut self) -> naaice_core::Instant {
        naaice_core::Instant::from_micros(self.0.elapsed().as_micros() as u64)
    }
}

/// The firmware's settings in the tests: [`MEMORY`], at most 4 regions, kernels
/// [`ADD_ONE`], [`SLOW`], [`APP_ERROR`], kernel timeout 200 ms.
pub fn firmware_config() -> FirmwareConfig {
    let code = |c| FunctionCode::new(c).expect("valid code");
    let kernels = KernelSet::empty()
        .with(code(ADD_ONE))
        .with(code(SLOW))
        .with(code(APP_ERROR));
    let mut config = FirmwareConfig::new(MEMORY, kernels);
    config.max_regions = 4;
    config.kernel_timeout = Duration::from_millis(200);
    config.poll_interval = Duration::from_micros(200);
    config
}

/// A running simulated FPGA NAA; stopped when dropped.
pub struct FpgaNaa {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FpgaNaa {
    /// Starts the firmware on 127.0.0.1 (a free port) on its own thread.
    pub fn start(config: FirmwareConfig) -> Self {
        let listener = SoftTransport::default()
            .listen(crate::loopback())
            .expect("listen");
        let addr = listener.local_addr();
        let stop = Arc::new(AtomicBool::new(false));
        let stop_flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let memory = NaaMemory::default();
            let done: &'static KernelDone<CONNECTIONS> = Box::leak(Box::new(KernelDone::new()));
            let msg: &'static mut [u8; MRSP_RECV_LEN] = Box::leak(Box::new([0; MRSP_RECV_LEN]));
            let loaded = Arc::new(Mutex::new(None));
            let aborted: Arc<[AtomicBool; CONNECTIONS]> = Arc::new(Default::default());
            let hw = Hardware {
                engine: SoftRoceEngine::new(listener, memory.clone()),
                kernels: ThreadKernels {
                    loaded: loaded.clone(),
                    aborted: aborted.clone(),
                },
                start: StartLine {
                    memory,
                    done,
                    loaded,
                    aborted,
                },
                clock: HostClock(Instant::now()),
            };
            let mut seed = [0u8; 32];
            for chunk in seed.chunks_mut(8) {
                let mut h = std::collections::hash_map::RandomState::new().build_hasher();
                h.write_u8(0);
                chunk.copy_from_slice(&h.finish().to_le_bytes());
            }
            let mut fw: Firmware<'_, _, _, _, _, _, CONNECTIONS> =
                Firmware::new(config, hw, ChaCha8Rng::from_seed(seed), done, msg);
            let mut delay = SleepDelay;
            while !stop_flag.load(Ordering::SeqCst) {
                fw.idle(&mut delay);
            }
        });
        Self {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for FpgaNaa {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The idle delay of the host run: a thread sleep.
struct SleepDelay;

impl embedded_hal::delay::DelayNs for SleepDelay {
    fn delay_ns(&mut self, ns: u32) {
        std::thread::sleep(Duration::from_nanos(u64::from(ns)));
    }
}
