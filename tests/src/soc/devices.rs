//! The board's devices as the image sees them: the MMIO register blocks of the proposed
//! hardware interface (`firmware/HARDWARE.md`), implemented on the device side.
//!
//! * [`EngineRegs`]: the RoCE engine's event queue, command interface and message buffers,
//!   bridged to [`SoftRoceEngine`] (the software transport playing the engine).
//! * [`KernelRegs`] plus the GPIO start line: the kernel unit; a rising start line runs the
//!   loaded job on a thread, a finished job raises the machine external interrupt.
//! * [`Timer`]: microseconds since reset and the compare of the machine timer interrupt.
//! * The UART transmitter collects the `defmt` byte stream; the TRNG returns random words.

use std::collections::VecDeque;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use naaice_core::machine::WorkError;
use naaice_core::region::RegionFlags;
use naaice_firmware::RoceEngine;
use naaice_firmware::engine::{
    Access, CompletionKind, ConnId, EngineEvent, RegionEntry, WriteRequest,
};

use crate::fpga::{NaaMemory, SLOW, SoftRoceEngine, run_kernel_on};

/// Device base addresses (the proposed SoC memory map).
pub(super) mod map {
    /// RoCE engine.
    pub(crate) const ENGINE: u32 = 0x4000_0000;
    /// Kernel unit.
    pub(crate) const KERNEL: u32 = 0x4001_0000;
    /// GPIO output (bit 0: kernel start line).
    pub(crate) const GPIO: u32 = 0x4002_0000;
    /// UART.
    pub(crate) const UART: u32 = 0x4003_0000;
    /// TRNG.
    pub(crate) const TRNG: u32 = 0x4004_0000;
    /// Timer.
    pub(crate) const TIMER: u32 = 0x4005_0000;
    /// Size of each device's register window.
    pub(crate) const WINDOW: u32 = 0x1_0000;
}

/// Engine command codes (`CMD_OP`).
mod op {
    pub(super) const ACCEPT: u32 = 1;
    pub(super) const REJECT: u32 = 2;
    pub(super) const DISCONNECT: u32 = 3;
    pub(super) const RECV: u32 = 4;
    pub(super) const SEND: u32 = 5;
    pub(super) const WRITE: u32 = 6;
    pub(super) const REGION: u32 = 7;
    pub(super) const CLEAR: u32 = 8;
}

/// The `EVT_CQE` status code of a failed work request.
fn status(error: WorkError) -> u32 {
    match error {
        WorkError::LocalLength => 1,
        WorkError::LocalProtection => 2,
        WorkError::Flushed => 3,
        WorkError::RemoteAccess => 4,
        WorkError::RemoteInvalidRequest => 5,
        WorkError::RnrRetryExceeded => 6,
        WorkError::RetryExceeded => 7,
        _ => 8,
    }
}

/// Bytes of each engine message buffer.
const MSG_BYTES: usize = 1024;
/// Command argument registers.
const ARGS: usize = 16;

/// The RoCE engine's registers over the software engine.
pub(super) struct EngineRegs {
    engine: SoftRoceEngine,
    /// The event at the head of the queue (shown in the `EVT_*` registers until popped).
    head: Option<EngineEvent>,
    conn: ConnId,
    args: [u32; ARGS],
    refused: bool,
    tx: [u8; MSG_BYTES],
    rx: [u8; MSG_BYTES],
    /// Events popped by the firmware.
    pub(super) popped: u64,
}

impl EngineRegs {
    pub(super) fn new(engine: SoftRoceEngine) -> Self {
        Self {
            engine,
            head: None,
            conn: 0,
            args: [0; ARGS],
            refused: false,
            tx: [0; MSG_BYTES],
            rx: [0; MSG_BYTES],
            popped: 0,
        }
    }

    fn wr_id(&self, lo: usize) -> u64 {
        u64::from(self.args[lo]) | u64::from(self.args[lo + 1]) << 32
    }

    pub(super) fn read(&mut self, offset: u32) -> Option<u32> {
        if offset == 0x00 && self.head.is_none() {
            self.head = self.engine.poll_event();
        }
        let completion = match self.head {
            Some(EngineEvent::Completion(_, c)) => Some(c),
            _ => None,
        };
        let word = |i: u32| {
            let at = (i as usize) * 4;
            u32::from_le_bytes([
                self.rx[at],
                self.rx[at + 1],
                self.rx[at + 2],
                self.rx[at + 3],
            ])
        };
        Some(match offset {
            0x00 => u32::from(self.head.is_some()),
            0x04 => match self.head? {
                EngineEvent::ConnectRequest(c) => u32::from(c) << 16,
                EngineEvent::Established(c) => u32::from(c) << 16 | 1,
                EngineEvent::Disconnected(c) => u32::from(c) << 16 | 2,
                EngineEvent::Completion(c, _) => u32::from(c) << 16 | 3,
            },
            0x08 => completion.map_or(0, |c| c.wr_id as u32),
            0x0C => completion.map_or(0, |c| (c.wr_id >> 32) as u32),
            0x10 => match completion?.kind {
                CompletionKind::Send => 0,
                CompletionKind::Write => 1,
                CompletionKind::Recv { .. } => 2,
                CompletionKind::RecvImm { .. } => 3,
                CompletionKind::Failed(e) => status(e) << 8,
            },
            0x14 => match completion?.kind {
                CompletionKind::Recv { len } | CompletionKind::RecvImm { len, .. } => len,
                _ => 0,
            },
            0x18 => match completion?.kind {
                CompletionKind::RecvImm { imm, .. } => imm,
                _ => 0,
            },
            0x20 => u32::from(self.conn),
            0x28 => u32::from(self.refused),
            0x30..0x70 => self.args[((offset - 0x30) / 4) as usize],
            0x800..0xC00 => word((offset - 0x800) / 4),
            _ => return None,
        })
    }

    pub(super) fn write(&mut self, offset: u32, value: u32) -> bool {
        match offset {
            0x1C => {
                if self.head.take().is_some() {
                    self.popped += 1;
                }
            }
            0x20 => {
                self.conn = value as ConnId;
                // The receive buffer window shows this connection's last message.
                self.engine.read_message(self.conn, &mut self.rx);
            }
            0x24 => self.refused = !self.command(value),
            0x30..0x70 => self.args[((offset - 0x30) / 4) as usize] = value,
            0x400..0x800 => {
                let at = (offset - 0x400) as usize;
                self.tx[at..at + 4].copy_from_slice(&value.to_le_bytes());
            }
            _ => return false,
        }
        true
    }

    /// Executes command `code` on `CMD_CONN` with the argument registers; false if refused.
    fn command(&mut self, code: u32) -> bool {
        let conn = self.conn;
        let a = self.args;
        match code {
            op::ACCEPT => self.engine.accept(conn),
            op::REJECT => self.engine.reject(conn),
            op::DISCONNECT => self.engine.disconnect(conn),
            op::RECV => {
                let wr_id = self.wr_id(0);
                return self.engine.post_recv(conn, wr_id, a[2] != 0).is_ok();
            }
            op::SEND => {
                let len = a[2] as usize;
                let wr_id = self.wr_id(0);
                return len <= MSG_BYTES
                    && self.engine.post_send(conn, wr_id, &self.tx[..len]).is_ok();
            }
            op::WRITE => {
                let write = WriteRequest {
                    wr_id: self.wr_id(0),
                    local_addr: u64::from(a[2]) | u64::from(a[3]) << 32,
                    len: a[4],
                    remote_addr: u64::from(a[5]) | u64::from(a[6]) << 32,
                    rkey: a[7],
                    imm: (a[9] & 1 != 0).then_some(a[8]),
                    solicited: a[9] & 2 != 0,
                };
                return self.engine.post_write(conn, &write).is_ok();
            }
            op::REGION => {
                let access = match a[5] {
                    1 => Access::REMOTE_WRITE,
                    2 => Access::LOCAL_READ,
                    3 => Access::REMOTE_WRITE.union(Access::LOCAL_READ),
                    _ => return false,
                };
                let Ok(index) = u8::try_from(a[0]) else {
                    return false;
                };
                let entry = RegionEntry {
                    addr: u64::from(a[1]) | u64::from(a[2]) << 32,
                    size: a[3],
                    rkey: a[4],
                    access,
                };
                self.engine.program_region(conn, index, &entry);
            }
            op::CLEAR => self.engine.clear_regions(conn),
            _ => return false,
        }
        true
    }
}

/// Kernel completions waiting for the interrupt handler, and the job generation of each slot
/// (an abort or a new start makes a running job's completion stale).
#[derive(Default)]
struct Completions {
    queue: VecDeque<(u32, u32)>,
    generation: [u64; 8],
}

/// The kernel unit's registers and start line.
pub(super) struct KernelRegs {
    memory: NaaMemory,
    slot: u32,
    call: u32,
    nregions: u32,
    regions: [[u32; 4]; 32],
    gpio: u32,
    done: Arc<Mutex<Completions>>,
    /// Kernels started.
    pub(super) started: u64,
    /// Completions acknowledged by the interrupt handler.
    pub(super) acked: u64,
}

/// How long the [`SLOW`] kernel runs unless aborted: longer than any kernel timeout.
const SLOW_RUN: Duration = Duration::from_secs(60);

impl KernelRegs {
    pub(super) fn new(memory: NaaMemory) -> Self {
        Self {
            memory,
            slot: 0,
            call: 0,
            nregions: 0,
            regions: [[0; 4]; 32],
            gpio: 0,
            done: Arc::default(),
            started: 0,
            acked: 0,
        }
    }

    fn done(&self) -> std::sync::MutexGuard<'_, Completions> {
        self.done.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The machine external interrupt line: a completion is waiting.
    pub(super) fn irq(&self) -> bool {
        !self.done().queue.is_empty()
    }

    pub(super) fn read(&mut self, offset: u32) -> Option<u32> {
        let head = self.done().queue.front().copied();
        Some(match offset {
            0x00 => self.slot,
            0x04 => self.call,
            0x0C => self.nregions,
            0x14 => head.map_or(u32::MAX, |h| h.0),
            0x18 => head.map_or(0, |h| h.1),
            0x40..0x240 => {
                let i = ((offset - 0x40) / 16) as usize;
                self.regions[i][((offset % 16) / 4) as usize]
            }
            _ => return None,
        })
    }

    pub(super) fn write(&mut self, offset: u32, value: u32) -> bool {
        match offset {
            0x00 => self.slot = value,
            0x04 => self.call = value,
            // The RPC counter is informational for the kernels.
            0x08 => {}
            0x0C => self.nregions = value.min(32),
            0x10 => {
                if let Some(g) = self.done().generation.get_mut(value as usize) {
                    *g += 1;
                }
            }
            0x1C => {
                if self.done().queue.pop_front().is_some() {
                    self.acked += 1;
                }
            }
            0x40..0x240 => {
                let i = ((offset - 0x40) / 16) as usize;
                self.regions[i][((offset % 16) / 4) as usize] = value;
            }
            _ => return false,
        }
        true
    }

    /// The GPIO output register: a rising bit 0 starts the loaded job.
    pub(super) fn write_gpio(&mut self, value: u32) {
        let rising = value & 1 != 0 && self.gpio & 1 == 0;
        self.gpio = value;
        if rising {
            self.start();
        }
    }

    pub(super) fn gpio(&self) -> u32 {
        self.gpio
    }

    fn start(&mut self) {
        let slot = self.slot;
        let Some(generation) = self.done().generation.get_mut(slot as usize).map(|g| {
            *g += 1;
            *g
        }) else {
            return;
        };
        self.started += 1;
        let fncode = self.call as u8;
        let regions: Vec<_> = self.regions[..self.nregions as usize]
            .iter()
            .map(|r| {
                let flags = RegionFlags::from_bits_truncate(r[3] as u8);
                (flags, u64::from(r[0]) | u64::from(r[1]) << 32, r[2])
            })
            .collect();
        let memory = self.memory.clone();
        let done = self.done.clone();
        let current = move || {
            done.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .generation[slot as usize]
                == generation
        };
        let done = self.done.clone();
        std::thread::spawn(move || {
            let status = if fncode == SLOW {
                let start = Instant::now();
                while current() && start.elapsed() < SLOW_RUN {
                    std::thread::sleep(Duration::from_millis(5));
                }
                0
            } else {
                run_kernel_on(&memory, fncode, regions).get()
            };
            let mut d = done.lock().unwrap_or_else(PoisonError::into_inner);
            if d.generation[slot as usize] == generation {
                d.queue.push_back((slot, status));
            }
        });
    }
}

/// The microsecond timer: counter since reset and compare register.
pub(super) struct Timer {
    epoch: Instant,
    compare: u64,
}

impl Timer {
    pub(super) fn new() -> Self {
        Self {
            epoch: Instant::now(),
            compare: u64::MAX,
        }
    }

    /// Microseconds since reset.
    pub(super) fn now(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    /// The machine timer interrupt line.
    pub(super) fn irq(&self) -> bool {
        self.now() >= self.compare
    }

    /// Time until the compare passes (zero if it has).
    pub(super) fn until_compare(&self) -> Duration {
        Duration::from_micros(self.compare.saturating_sub(self.now()))
    }

    pub(super) fn read(&self, offset: u32) -> Option<u32> {
        Some(match offset {
            0x00 => self.now() as u32,
            0x04 => (self.now() >> 32) as u32,
            0x08 => self.compare as u32,
            0x0C => (self.compare >> 32) as u32,
            _ => return None,
        })
    }

    pub(super) fn write(&mut self, offset: u32, value: u32) -> bool {
        let v = u64::from(value);
        match offset {
            0x08 => self.compare = self.compare & !0xFFFF_FFFF | v,
            0x0C => self.compare = self.compare & 0xFFFF_FFFF | v << 32,
            _ => return false,
        }
        true
    }
}

/// A random word for the TRNG register.
pub(super) fn random_word() -> u32 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u8(0);
    h.finish() as u32
}
