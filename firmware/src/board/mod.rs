//! Board support for the NAA soft-core (`riscv32imc`): the SoC register map and the
//! implementations of the hardware seams over it. Only compiled with the `board` feature for
//! `riscv32`. All register access goes through [`mmio`], the one place with `unsafe`
//! (besides the `defmt` logger, which must implement an `unsafe` trait, and the two CSR
//! writes of interrupt set-up and sleep).
//!
//! **PROPOSAL.** The register map, the device behaviour and the interrupt lines below are
//! this project's proposal to the FPGA team, not a delivered hardware interface; they are
//! written down in `firmware/HARDWARE.md` and exercised by the instruction-set simulation in
//! `tests/src/soc.rs`. Change all three together.

mod logger;
mod mmio;

use core::convert::Infallible;

use chacha20::ChaCha8Rng;
use embedded_hal::delay::DelayNs;
use embedded_hal::digital::{ErrorType, OutputPin};
use naaice_core::Instant;
use naaice_core::machine::WorkError;
use rand_core::SeedableRng;

use self::mmio::Reg;
use crate::clock::Clock;
use crate::engine::{
    Completion, CompletionKind, ConnId, EngineEvent, PostError, RegionEntry, RoceEngine,
    WriteRequest,
};
use crate::kernel::{KernelDone, KernelJob, KernelUnit};

/// Connections the image serves at once.
pub const CONNECTIONS: usize = 1;

/// Kernel completions, written by the machine-external interrupt handler.
pub static KERNEL_DONE: KernelDone<CONNECTIONS> = KernelDone::new();

/// The SoC memory map (device registers; 4-byte aligned). PROPOSAL (`firmware/HARDWARE.md`).
pub(crate) mod map {
    /// RoCE engine: event queue, command interface, message buffers.
    pub(crate) const ENGINE: usize = 0x4000_0000;
    /// Kernel unit: job registers, abort, completion status.
    pub(crate) const KERNEL: usize = 0x4001_0000;
    /// GPIO output register (bit 0: kernel start line).
    pub(crate) const GPIO: usize = 0x4002_0000;
    /// UART transmitter.
    pub(crate) const UART: usize = 0x4003_0000;
    /// True random number generator.
    pub(crate) const TRNG: usize = 0x4004_0000;
    /// Microsecond timer with compare (machine timer interrupt).
    pub(crate) const TIMER: usize = 0x4005_0000;
}

/// RoCE engine registers (offsets from [`map::ENGINE`]). PROPOSAL (`firmware/HARDWARE.md`).
mod engine_reg {
    use super::{Reg, map::ENGINE};
    /// Bit 0: an event is ready.
    pub(super) const EVT_READY: Reg = Reg::at(ENGINE, 0x00);
    /// Bits 0..2 kind (0 request, 1 established, 2 disconnected, 3 completion), 16..31 conn.
    pub(super) const EVT_KIND: Reg = Reg::at(ENGINE, 0x04);
    pub(super) const EVT_WR_LO: Reg = Reg::at(ENGINE, 0x08);
    pub(super) const EVT_WR_HI: Reg = Reg::at(ENGINE, 0x0C);
    /// Completion: bits 0..3 opcode (0 send, 1 write, 2 recv, 3 recv-imm), 8..15 status.
    pub(super) const EVT_CQE: Reg = Reg::at(ENGINE, 0x10);
    pub(super) const EVT_LEN: Reg = Reg::at(ENGINE, 0x14);
    pub(super) const EVT_IMM: Reg = Reg::at(ENGINE, 0x18);
    /// Write: pop the event.
    pub(super) const EVT_POP: Reg = Reg::at(ENGINE, 0x1C);
    pub(super) const CMD_CONN: Reg = Reg::at(ENGINE, 0x20);
    /// Write: execute the command with the arguments below.
    pub(super) const CMD_OP: Reg = Reg::at(ENGINE, 0x24);
    /// Bit 0: the last command was refused.
    pub(super) const CMD_ERR: Reg = Reg::at(ENGINE, 0x28);
    /// Arguments 0..8 at 0x30, 0x34, ...
    pub(super) const fn arg(i: usize) -> Reg {
        Reg::at(ENGINE, 0x30 + 4 * i)
    }
    /// Outgoing message buffer (words).
    pub(super) const fn tx(i: usize) -> Reg {
        Reg::at(ENGINE, 0x400 + 4 * i)
    }
    /// Last received message of the connection in CMD_CONN (words).
    pub(super) const fn rx(i: usize) -> Reg {
        Reg::at(ENGINE, 0x800 + 4 * i)
    }
    pub(super) const OP_ACCEPT: u32 = 1;
    pub(super) const OP_REJECT: u32 = 2;
    pub(super) const OP_DISCONNECT: u32 = 3;
    pub(super) const OP_RECV: u32 = 4;
    pub(super) const OP_SEND: u32 = 5;
    pub(super) const OP_WRITE: u32 = 6;
    pub(super) const OP_REGION: u32 = 7;
    pub(super) const OP_CLEAR: u32 = 8;
    /// Size of each message buffer.
    pub(super) const MSG_BYTES: usize = 1024;
}

/// Kernel unit registers (offsets from [`map::KERNEL`]). PROPOSAL (`firmware/HARDWARE.md`).
mod kernel_reg {
    use super::{Reg, map::KERNEL};
    pub(super) const SLOT: Reg = Reg::at(KERNEL, 0x00);
    /// Bits 0..7 fncode, 8..31 user bytes.
    pub(super) const CALL: Reg = Reg::at(KERNEL, 0x04);
    pub(super) const RPC: Reg = Reg::at(KERNEL, 0x08);
    pub(super) const NREGIONS: Reg = Reg::at(KERNEL, 0x0C);
    /// Write a slot number: stop its kernel.
    pub(super) const ABORT: Reg = Reg::at(KERNEL, 0x10);
    /// Completion (read in the interrupt handler): slot, status; write ACK to clear.
    pub(super) const DONE_SLOT: Reg = Reg::at(KERNEL, 0x14);
    pub(super) const DONE_STATUS: Reg = Reg::at(KERNEL, 0x18);
    pub(super) const DONE_ACK: Reg = Reg::at(KERNEL, 0x1C);
    /// Region `i`: address low, address high, size, flags at 0x40 + 16·i.
    pub(super) const fn region(i: usize, word: usize) -> Reg {
        Reg::at(KERNEL, 0x40 + 16 * i + 4 * word)
    }
}

/// The RoCE engine over its registers.
#[derive(Debug)]
pub struct MmioEngine(());

fn split(v: u64) -> (u32, u32) {
    (v as u32, (v >> 32) as u32)
}

impl MmioEngine {
    fn command(&mut self, conn: ConnId, op: u32) -> Result<(), PostError> {
        engine_reg::CMD_CONN.write(u32::from(conn));
        engine_reg::CMD_OP.write(op);
        if engine_reg::CMD_ERR.read() & 1 == 0 {
            Ok(())
        } else {
            Err(PostError)
        }
    }

    fn args(&mut self, values: &[u32]) {
        for (i, v) in values.iter().enumerate() {
            engine_reg::arg(i).write(*v);
        }
    }
}

fn work_error(status: u32) -> WorkError {
    match status {
        1 => WorkError::LocalLength,
        2 => WorkError::LocalProtection,
        3 => WorkError::Flushed,
        4 => WorkError::RemoteAccess,
        5 => WorkError::RemoteInvalidRequest,
        6 => WorkError::RnrRetryExceeded,
        7 => WorkError::RetryExceeded,
        _ => WorkError::Other,
    }
}

impl RoceEngine for MmioEngine {
    fn poll_event(&mut self) -> Option<EngineEvent> {
        if engine_reg::EVT_READY.read() & 1 == 0 {
            return None;
        }
        let kind = engine_reg::EVT_KIND.read();
        let conn = (kind >> 16) as ConnId;
        let event = match kind & 0x7 {
            0 => EngineEvent::ConnectRequest(conn),
            1 => EngineEvent::Established(conn),
            2 => EngineEvent::Disconnected(conn),
            _ => {
                let wr_id = u64::from(engine_reg::EVT_WR_LO.read())
                    | u64::from(engine_reg::EVT_WR_HI.read()) << 32;
                let cqe = engine_reg::EVT_CQE.read();
                let len = engine_reg::EVT_LEN.read();
                let status = (cqe >> 8) & 0xFF;
                let kind = match (status, cqe & 0xF) {
                    (0, 0) => CompletionKind::Send,
                    (0, 1) => CompletionKind::Write,
                    (0, 2) => CompletionKind::Recv { len },
                    (0, 3) => CompletionKind::RecvImm {
                        imm: engine_reg::EVT_IMM.read(),
                        len,
                    },
                    (s, _) => CompletionKind::Failed(work_error(s)),
                };
                EngineEvent::Completion(conn, Completion { wr_id, kind })
            }
        };
        engine_reg::EVT_POP.write(1);
        Some(event)
    }

    fn accept(&mut self, conn: ConnId) {
        let _ = self.command(conn, engine_reg::OP_ACCEPT);
    }

    fn reject(&mut self, conn: ConnId) {
        let _ = self.command(conn, engine_reg::OP_REJECT);
    }

    fn disconnect(&mut self, conn: ConnId) {
        let _ = self.command(conn, engine_reg::OP_DISCONNECT);
    }

    fn post_recv(&mut self, conn: ConnId, wr_id: u64, message: bool) -> Result<(), PostError> {
        let (lo, hi) = split(wr_id);
        self.args(&[lo, hi, u32::from(message)]);
        self.command(conn, engine_reg::OP_RECV)
    }

    fn read_message(&mut self, conn: ConnId, buf: &mut [u8]) -> usize {
        engine_reg::CMD_CONN.write(u32::from(conn));
        let n = buf.len().min(engine_reg::MSG_BYTES);
        for (i, chunk) in buf[..n].chunks_mut(4).enumerate() {
            let word = engine_reg::rx(i).read().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
        n
    }

    fn post_send(&mut self, conn: ConnId, wr_id: u64, message: &[u8]) -> Result<(), PostError> {
        if message.len() > engine_reg::MSG_BYTES {
            return Err(PostError);
        }
        for (i, chunk) in message.chunks(4).enumerate() {
            let mut word = [0; 4];
            word[..chunk.len()].copy_from_slice(chunk);
            engine_reg::tx(i).write(u32::from_le_bytes(word));
        }
        let (lo, hi) = split(wr_id);
        self.args(&[lo, hi, message.len() as u32]);
        self.command(conn, engine_reg::OP_SEND)
    }

    fn post_write(&mut self, conn: ConnId, w: &WriteRequest) -> Result<(), PostError> {
        let (wr_lo, wr_hi) = split(w.wr_id);
        let (l_lo, l_hi) = split(w.local_addr);
        let (r_lo, r_hi) = split(w.remote_addr);
        let flags = u32::from(w.imm.is_some()) | u32::from(w.solicited) << 1;
        self.args(&[
            wr_lo,
            wr_hi,
            l_lo,
            l_hi,
            w.len,
            r_lo,
            r_hi,
            w.rkey,
            w.imm.unwrap_or(0),
            flags,
        ]);
        self.command(conn, engine_reg::OP_WRITE)
    }

    fn program_region(&mut self, conn: ConnId, index: u8, e: &RegionEntry) {
        let (lo, hi) = split(e.addr);
        self.args(&[
            u32::from(index),
            lo,
            hi,
            e.size,
            e.rkey,
            u32::from(e.access.bits()),
        ]);
        let _ = self.command(conn, engine_reg::OP_REGION);
    }

    fn clear_regions(&mut self, conn: ConnId) {
        let _ = self.command(conn, engine_reg::OP_CLEAR);
    }
}

/// The kernel unit over its registers.
#[derive(Debug)]
pub struct MmioKernel(());

impl KernelUnit for MmioKernel {
    fn load(&mut self, slot: u8, job: &KernelJob<'_>) {
        kernel_reg::SLOT.write(u32::from(slot));
        let [a, b, c] = job.user;
        kernel_reg::CALL.write(u32::from_le_bytes([job.fncode, a, b, c]));
        kernel_reg::RPC.write(job.rpc);
        kernel_reg::NREGIONS.write(job.regions.len() as u32);
        for (i, r) in job.regions.iter().enumerate() {
            let (lo, hi) = split(r.local.map_or(0, |l| l.addr));
            kernel_reg::region(i, 0).write(lo);
            kernel_reg::region(i, 1).write(hi);
            kernel_reg::region(i, 2).write(r.size);
            kernel_reg::region(i, 3).write(u32::from(r.flags.bits()));
        }
    }

    fn abort(&mut self, slot: u8) {
        kernel_reg::ABORT.write(u32::from(slot));
    }
}

/// The kernel unit's start line (GPIO bit 0).
#[derive(Debug)]
pub struct StartLine(());

impl ErrorType for StartLine {
    type Error = Infallible;
}

impl OutputPin for StartLine {
    fn set_low(&mut self) -> Result<(), Infallible> {
        let r = Reg::at(map::GPIO, 0);
        r.write(r.read() & !1);
        Ok(())
    }

    fn set_high(&mut self) -> Result<(), Infallible> {
        let r = Reg::at(map::GPIO, 0);
        r.write(r.read() | 1);
        Ok(())
    }
}

/// Timer registers (offsets from [`map::TIMER`]; PROPOSAL): a 64-bit counter of
/// microseconds since reset and a 64-bit compare value. The machine timer interrupt line
/// (`mip.MTIP`) is high while `MTIME >= MTIMECMP`.
mod timer_reg {
    use super::{Reg, map::TIMER};
    pub(super) const MTIME_LO: Reg = Reg::at(TIMER, 0x00);
    pub(super) const MTIME_HI: Reg = Reg::at(TIMER, 0x04);
    pub(super) const MTIMECMP_LO: Reg = Reg::at(TIMER, 0x08);
    pub(super) const MTIMECMP_HI: Reg = Reg::at(TIMER, 0x0C);
}

/// Time from the microsecond timer.
#[derive(Debug)]
pub struct TimerClock(());

/// Microseconds since reset (the timer counts microseconds: no division).
pub fn micros() -> u64 {
    loop {
        let hi = timer_reg::MTIME_HI.read();
        let lo = timer_reg::MTIME_LO.read();
        // The low word wrapped between the two reads: read again.
        if timer_reg::MTIME_HI.read() == hi {
            return u64::from(hi) << 32 | u64::from(lo);
        }
    }
}

impl Clock for TimerClock {
    fn now(&mut self) -> Instant {
        Instant::from_micros(micros())
    }
}

/// The idle sleep: `wfi` until the timer compare (or another interrupt) wakes the core.
#[derive(Debug)]
pub struct Sleep(());

impl DelayNs for Sleep {
    fn delay_ns(&mut self, ns: u32) {
        self.delay_us(ns.div_ceil(1000));
    }

    fn delay_us(&mut self, us: u32) {
        let until = micros().saturating_add(u64::from(us));
        // High word first: the compare passes through a later value, never an earlier one.
        timer_reg::MTIMECMP_HI.write(u32::MAX);
        timer_reg::MTIMECMP_LO.write(until as u32);
        timer_reg::MTIMECMP_HI.write((until >> 32) as u32);
        loop {
            // With interrupts masked, so that the timer cannot fire between the check and the
            // `wfi` (whose wake-up ignores `mstatus.MIE`); a pending interrupt is taken when
            // the critical section ends.
            let done = critical_section::with(|_| {
                if micros() >= until {
                    return true;
                }
                #[allow(unsafe_code)]
                // SAFETY: only the `timer_irq` handler below reacts to the machine timer
                // interrupt, and it only masks the interrupt again.
                unsafe {
                    riscv::register::mie::set_mtimer();
                }
                riscv::asm::wfi();
                false
            });
            if done {
                return;
            }
        }
    }
}

/// The board's peripherals.
#[derive(Debug)]
pub struct Board {
    /// The RoCE engine.
    pub engine: MmioEngine,
    /// The kernel unit.
    pub kernels: MmioKernel,
    /// The kernel start line.
    pub start: StartLine,
    /// The clock.
    pub clock: TimerClock,
    /// The idle sleep.
    pub sleep: Sleep,
}

impl Board {
    /// The peripherals (call once, at reset).
    pub fn init() -> Self {
        Self {
            engine: MmioEngine(()),
            kernels: MmioKernel(()),
            start: StartLine(()),
            clock: TimerClock(()),
            sleep: Sleep(()),
        }
    }

    /// A secure generator for rkeys, seeded from the TRNG.
    pub fn rng(&mut self) -> ChaCha8Rng {
        let mut seed = [0u8; 32];
        for chunk in seed.chunks_mut(4) {
            chunk.copy_from_slice(&Reg::at(map::TRNG, 0).read().to_le_bytes());
        }
        ChaCha8Rng::from_seed(seed)
    }

    /// Enables the machine-external interrupt (kernel completions).
    pub fn enable_interrupts(&mut self) {
        #[allow(unsafe_code)]
        // SAFETY: the only machine-external handler is `kernel_done_irq`, which touches
        // nothing but the kernel unit's completion registers and `KERNEL_DONE` (behind a
        // critical section); enabling it cannot break a critical section in progress
        // because this runs in the main thread outside of one.
        unsafe {
            riscv::interrupt::enable_interrupt(riscv::interrupt::Interrupt::MachineExternal);
            riscv::interrupt::enable();
        }
    }
}

/// Machine timer interrupt: the sleep's compare passed. Masks the line again (the sleep
/// re-arms it).
#[riscv_rt::core_interrupt(riscv::interrupt::Interrupt::MachineTimer)]
fn timer_irq() {
    #[allow(unsafe_code)]
    // SAFETY: masking an interrupt cannot break a critical section or any other invariant.
    unsafe {
        riscv::register::mie::clear_mtimer();
    }
}

/// Machine-external interrupt: the kernel unit finished a kernel.
#[riscv_rt::core_interrupt(riscv::interrupt::Interrupt::MachineExternal)]
fn kernel_done_irq() {
    let slot = kernel_reg::DONE_SLOT.read();
    let status = kernel_reg::DONE_STATUS.read();
    kernel_reg::DONE_ACK.write(1);
    // An out-of-range slot is the hardware's error; it is dropped, never wrapped.
    if let Ok(slot) = u8::try_from(slot) {
        KERNEL_DONE.signal(slot, status);
    }
}
