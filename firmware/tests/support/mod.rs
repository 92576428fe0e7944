//! Simulated hardware for the firmware's host tests: a RoCE engine that records every command
//! and lets the test play the client, a kernel unit that records jobs, a settable clock, and
//! helpers that build the client's messages.
#![allow(dead_code, unreachable_pub)]

use std::cell::Cell;
use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::rc::Rc;

use chacha20::ChaCha8Rng;
use embedded_hal::digital::{ErrorType, OutputPin};
use naaice_core::config::MRSP_RECV_LEN;
use naaice_core::region::RegionFlags;
use naaice_core::wire::mrsp::{self, AdvertRecord, MrspErrorCode, Repr, RequestRecord};
use naaice_core::{FunctionCode, Instant, KernelSet};
use naaice_firmware::engine::{
    Completion, CompletionKind, ConnId, EngineEvent, PostError, RegionEntry, RoceEngine,
    WriteRequest,
};
use naaice_firmware::{
    Clock, Firmware, FirmwareConfig, Hardware, KernelDone, KernelJob, KernelUnit, MemoryMap,
};
use rand_core::SeedableRng;

/// The simulated board memory: 1 MiB at 0x10_0000.
pub const MEMORY: MemoryMap = MemoryMap {
    base: 0x10_0000,
    len: 0x10_0000,
};

/// Function codes with a kernel in the tests.
pub const KERNEL: u8 = 1;
pub const OTHER_KERNEL: u8 = 2;

/// A posted receive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recv {
    pub wr_id: u64,
    pub message: bool,
}

/// A simulated RoCE engine: records commands, and the test injects events.
#[derive(Debug, Default)]
pub struct SimEngine {
    pub events: VecDeque<EngineEvent>,
    pub accepted: Vec<ConnId>,
    pub rejected: Vec<ConnId>,
    pub disconnected: Vec<ConnId>,
    pub recvs: BTreeMap<ConnId, VecDeque<Recv>>,
    pub sends: Vec<(ConnId, u64, Vec<u8>)>,
    pub writes: Vec<(ConnId, WriteRequest)>,
    pub tables: BTreeMap<ConnId, BTreeMap<u8, RegionEntry>>,
    pub cleared: Vec<ConnId>,
    pub inbox: BTreeMap<ConnId, Vec<u8>>,
    /// Refuse every post (queue full).
    pub refuse_posts: bool,
}

impl RoceEngine for SimEngine {
    fn poll_event(&mut self) -> Option<EngineEvent> {
        self.events.pop_front()
    }
    fn accept(&mut self, conn: ConnId) {
        self.accepted.push(conn);
    }
    fn reject(&mut self, conn: ConnId) {
        self.rejected.push(conn);
    }
    fn disconnect(&mut self, conn: ConnId) {
        self.disconnected.push(conn);
        self.recvs.remove(&conn);
    }
    fn post_recv(&mut self, conn: ConnId, wr_id: u64, message: bool) -> Result<(), PostError> {
        if self.refuse_posts {
            return Err(PostError);
        }
        self.recvs
            .entry(conn)
            .or_default()
            .push_back(Recv { wr_id, message });
        Ok(())
    }
    fn read_message(&mut self, conn: ConnId, buf: &mut [u8]) -> usize {
        let msg = self.inbox.get(&conn).cloned().unwrap_or_default();
        let n = msg.len().min(buf.len());
        buf[..n].copy_from_slice(&msg[..n]);
        n
    }
    fn post_send(&mut self, conn: ConnId, wr_id: u64, message: &[u8]) -> Result<(), PostError> {
        if self.refuse_posts {
            return Err(PostError);
        }
        self.sends.push((conn, wr_id, message.to_vec()));
        Ok(())
    }
    fn post_write(&mut self, conn: ConnId, write: &WriteRequest) -> Result<(), PostError> {
        if self.refuse_posts {
            return Err(PostError);
        }
        self.writes.push((conn, *write));
        Ok(())
    }
    fn program_region(&mut self, conn: ConnId, index: u8, entry: &RegionEntry) {
        self.tables.entry(conn).or_default().insert(index, *entry);
    }
    fn clear_regions(&mut self, conn: ConnId) {
        self.tables.remove(&conn);
        self.cleared.push(conn);
    }
}

impl SimEngine {
    /// The client delivers `message` with a SEND: consumes the oldest receive.
    pub fn deliver(&mut self, conn: ConnId, message: &[u8]) {
        let recv = self
            .recvs
            .get_mut(&conn)
            .and_then(VecDeque::pop_front)
            .expect("a receive is posted for the client's SEND");
        assert!(recv.message, "the SEND met a zero-length receive");
        self.inbox.insert(conn, message.to_vec());
        self.complete(
            conn,
            recv.wr_id,
            CompletionKind::Recv {
                len: message.len() as u32,
            },
        );
    }

    /// The client's final WRITE WITH IMMEDIATE: consumes the oldest receive.
    pub fn write_imm(&mut self, conn: ConnId, imm: u32) {
        let recv = self
            .recvs
            .get_mut(&conn)
            .and_then(VecDeque::pop_front)
            .expect("a receive is posted for the WRITE WITH IMMEDIATE");
        self.complete(conn, recv.wr_id, CompletionKind::RecvImm { imm, len: 0 });
    }

    /// Queues the completion of work request `wr_id` on `conn`.
    fn complete(&mut self, conn: ConnId, wr_id: u64, kind: CompletionKind) {
        self.events
            .push_back(EngineEvent::Completion(conn, Completion { wr_id, kind }));
    }

    /// Completes every SEND posted on `conn` so far (once).
    pub fn complete_sends(&mut self, conn: ConnId, from: usize) {
        let ids: Vec<u64> = self.sends[from..]
            .iter()
            .filter(|s| s.0 == conn)
            .map(|s| s.1)
            .collect();
        for wr_id in ids {
            self.complete(conn, wr_id, CompletionKind::Send);
        }
    }

    /// Completes the writes of `conn` posted from index `from` on.
    pub fn complete_writes(&mut self, conn: ConnId, from: usize) {
        let ids: Vec<u64> = self.writes[from..]
            .iter()
            .filter(|w| w.0 == conn)
            .map(|w| w.1.wr_id)
            .collect();
        for wr_id in ids {
            self.complete(conn, wr_id, CompletionKind::Write);
        }
    }

    /// The last message sent on `conn`, parsed.
    pub fn last_reply(&self, conn: ConnId) -> Repr {
        let (_, _, msg) = self
            .sends
            .iter()
            .rev()
            .find(|s| s.0 == conn)
            .expect("a reply was sent");
        Repr::parse(msg).expect("the reply parses")
    }
}

/// A recorded kernel job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    pub slot: u8,
    pub fncode: u8,
    pub user: [u8; 3],
    pub rpc: u32,
    pub addrs: Vec<u64>,
}

/// A simulated kernel unit.
#[derive(Debug, Default)]
pub struct SimKernel {
    pub jobs: Vec<Job>,
    pub aborted: Vec<u8>,
}

impl KernelUnit for SimKernel {
    fn load(&mut self, slot: u8, job: &KernelJob<'_>) {
        self.jobs.push(Job {
            slot,
            fncode: job.fncode,
            user: job.user,
            rpc: job.rpc,
            addrs: job
                .regions
                .iter()
                .map(|r| r.local.expect("assigned").addr)
                .collect(),
        });
    }
    fn abort(&mut self, slot: u8) {
        self.aborted.push(slot);
    }
}

/// A clock the test sets.
#[derive(Clone, Debug, Default)]
pub struct SimClock(pub Rc<Cell<u64>>);

impl SimClock {
    pub fn advance_us(&self, us: u64) {
        self.0.set(self.0.get() + us);
    }
}

impl Clock for SimClock {
    fn now(&mut self) -> Instant {
        Instant::from_micros(self.0.get())
    }
}

/// An output pin that counts rising edges.
#[derive(Clone, Debug, Default)]
pub struct CountingPin(pub Rc<Cell<u32>>);

impl ErrorType for CountingPin {
    type Error = Infallible;
}

impl OutputPin for CountingPin {
    fn set_low(&mut self) -> Result<(), Infallible> {
        Ok(())
    }
    fn set_high(&mut self) -> Result<(), Infallible> {
        self.0.set(self.0.get() + 1);
        Ok(())
    }
}

pub type TestFirmware<P, const N: usize> =
    Firmware<'static, SimEngine, SimKernel, P, SimClock, ChaCha8Rng, N>;

/// The test configuration: 1 s kernel timeout, 2 s MRSP/completion timeouts.
pub fn config() -> FirmwareConfig {
    let mut c = FirmwareConfig::new(MEMORY, kernels());
    c.kernel_timeout = std::time::Duration::from_secs(1);
    c.mrsp_timeout = std::time::Duration::from_secs(2);
    c.completion_timeout = std::time::Duration::from_secs(2);
    c
}

pub fn kernels() -> KernelSet {
    KernelSet::empty()
        .with(FunctionCode::new(KERNEL).expect("code"))
        .with(FunctionCode::new(OTHER_KERNEL).expect("code"))
}

/// A firmware over simulated hardware, with the start pin `pin` and rng seed `seed`.
pub fn firmware_with<P: OutputPin, const N: usize>(
    config: FirmwareConfig,
    pin: P,
    seed: u8,
) -> (TestFirmware<P, N>, SimClock, &'static KernelDone<N>) {
    let clock = SimClock::default();
    let done: &'static KernelDone<N> = Box::leak(Box::new(KernelDone::new()));
    let msg = Box::leak(Box::new([0u8; MRSP_RECV_LEN]));
    let hw = Hardware {
        engine: SimEngine::default(),
        kernels: SimKernel::default(),
        start: pin,
        clock: clock.clone(),
    };
    let rng = ChaCha8Rng::from_seed([seed; 32]);
    (Firmware::new(config, hw, rng, done, msg), clock, done)
}

/// A firmware for up to 2 connections with a counting start pin.
pub fn firmware() -> (
    TestFirmware<CountingPin, 2>,
    SimClock,
    &'static KernelDone<2>,
) {
    firmware_with(config(), CountingPin::default(), 7)
}

/// Steps until the firmware has nothing left to do.
pub fn settle<P: OutputPin, const N: usize>(fw: &mut TestFirmware<P, N>) {
    for _ in 0..64 {
        if !fw.step().is_zero() {
            return;
        }
    }
    panic!("firmware never settled");
}

/// A parameter record.
pub fn param(flags: RegionFlags, requested: u64, size: u32) -> RequestRecord {
    RequestRecord {
        flags,
        requested_addr: requested,
        addr: 0x7f00_0000_0000 + requested,
        rkey: 0xC11E_0000 | (requested as u32 >> 12),
        size,
    }
}

/// An internal record.
pub fn internal(requested: u64, size: u32) -> RequestRecord {
    RequestRecord {
        flags: RegionFlags::INTERNAL,
        requested_addr: requested,
        addr: 0,
        rkey: 0,
        size,
    }
}

/// An Advertisement+Request message.
pub fn aar(records: &[RequestRecord]) -> Vec<u8> {
    let mut buf = vec![0u8; 4 + 24 * records.len()];
    let n = mrsp::emit_advertise_request(&mut buf, records.iter().copied()).expect("emit AAR");
    buf.truncate(n);
    buf
}

/// The standard request: input 1024 B at base + 0x1000, output 512 B at base + 0x2000.
pub fn standard_request() -> Vec<RequestRecord> {
    vec![
        param(RegionFlags::INPUT, MEMORY.base + 0x1000, 1024),
        param(RegionFlags::OUTPUT, MEMORY.base + 0x2000, 512),
    ]
}

/// Connects `conn` and runs the MRSP with `records`; returns the reply.
pub fn connect_and_mrsp<P: OutputPin, const N: usize>(
    fw: &mut TestFirmware<P, N>,
    conn: ConnId,
    records: &[RequestRecord],
) -> Repr {
    let engine = &mut fw.hardware_mut().engine;
    engine.events.push_back(EngineEvent::ConnectRequest(conn));
    engine.events.push_back(EngineEvent::Established(conn));
    settle(fw);
    assert!(fw.hardware().engine.accepted.contains(&conn));
    let sends = fw.hardware().engine.sends.len();
    fw.hardware_mut().engine.deliver(conn, &aar(records));
    settle(fw);
    let reply = fw.hardware().engine.last_reply(conn);
    fw.hardware_mut().engine.complete_sends(conn, sends);
    settle(fw);
    reply
}

/// The Advertisement records of a reply (panics on an error reply).
pub fn advert(reply: &Repr) -> Vec<AdvertRecord> {
    match reply {
        Repr::Advertise(r) => r.to_vec(),
        other => panic!("expected an Advertisement, got {other:?}"),
    }
}

/// The error code of a reply (panics otherwise).
pub fn refusal(reply: &Repr) -> MrspErrorCode {
    match reply {
        Repr::Error(code) => *code,
        other => panic!("expected an MRSP error, got {other:?}"),
    }
}

/// The immediate for function code `fncode` with no user bytes.
pub fn call(fncode: u8) -> u32 {
    naaice_core::wire::imm::encode_request(FunctionCode::new(fncode).expect("code"), [0; 3])
}
