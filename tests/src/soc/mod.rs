//! The NAA soft-core as an instruction-set simulation: the real firmware image
//! (`naaice-firmware-image`, the riscv32imc ELF file CI measures) runs on the `rvsim`
//! interpreter, with the board's devices modelled after the proposed register map
//! (`firmware/HARDWARE.md`) and the RoCE engine bridged to the software transport, so that
//! host clients talk to the *image* over [`naaice::transport::soft`].
//!
//! rvsim interprets RV32IMC; the machine-mode part the image needs (CSRs, interrupts, `mret`,
//! `wfi`) is `hart.rs`. The devices are `devices.rs`. [`SimNaa`] runs the hart on a thread,
//! sleeps in `wfi` until an enabled interrupt is pending (timer compare or kernel
//! completion), and measures what the tests report: instructions retired in each wake-up
//! (busy when the firmware popped an engine event or acknowledged a kernel completion in it,
//! idle otherwise), the painted stack's high-water mark and the deepest stack pointer.
//!
//! rvsim is chosen for its memory trait: every load and store of a device register reaches
//! the model here, in the test's process, next to the software transport.
//!
//! Time is the host's: the timer counts real microseconds, so the image's timeouts (kernel
//! 5 s) take real time, while instructions are counted, not timed.

mod devices;
mod hart;
pub mod image;

use std::mem::size_of;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use naaice::transport::soft::SoftTransport;
use naaice::transport::{Listener, Transport};
use rvsim::{CpuError, Interp, MemoryAccess, SimpleClock};

use self::devices::{EngineRegs, KernelRegs, Timer, map};
use self::hart::{Hart, MEI, MRET, MTI, WFI};
use self::image::Image;
use crate::fpga::{NaaMemory, SoftRoceEngine};

/// Instruction memory (flash) at address 0.
pub const FLASH_BYTES: usize = 16 << 10;
/// Data memory at [`RAM_BASE`].
pub const RAM_BYTES: usize = 12 << 10;
/// Data memory base address.
pub const RAM_BASE: u32 = 0x1000_0000;
/// The stack budget of `firmware/memory.x` (data memory less the statics' 4 KiB).
pub const STACK_BUDGET: u32 = 8 << 10;
/// Word painted over the free stack before reset.
const PAINT: u32 = 0x5AA5_C33C;
/// Interrupt lines are sampled at least every this many instructions (and after every CSR
/// instruction).
const IRQ_SAMPLE: u32 = 32;

/// What the simulation measured so far.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Instructions retired since reset.
    pub instructions: u64,
    /// Instructions from reset to the first `wfi` (start-up and set-up).
    pub boot: u64,
    /// Instructions in wake-ups that handled an engine event or a kernel completion.
    pub busy: u64,
    /// Wake-ups that handled an engine event or a kernel completion.
    pub busy_wakeups: u64,
    /// Instructions in wake-ups that found nothing to do (the idle poll).
    pub idle: u64,
    /// Wake-ups that found nothing to do.
    pub idle_wakeups: u64,
    /// Engine events the firmware popped.
    pub events: u64,
    /// Kernels started through the start line.
    pub kernels: u64,
    /// Interrupts taken (timer, external).
    pub interrupts: u64,
    /// Bytes the firmware sent over the UART (the `defmt` stream).
    pub uart_bytes: u64,
    /// `defmt` frames (rzCOBS frames end with a zero byte).
    pub uart_frames: u64,
    /// Deepest stack use seen through the stack pointer, in bytes.
    pub stack_sp: u32,
    /// Deepest stack use by painting: bytes below the top no longer holding the paint
    /// (computed when the simulation stops).
    pub stack_painted: u32,
    /// Static RAM of the image in bytes.
    pub statics: u32,
    /// Why the simulation stopped early (firmware fault or unsupported instruction).
    pub fault: Option<String>,
    /// The firmware's log: the UART's `defmt` frames decoded with the image's table
    /// (when the simulation stops).
    pub log: Vec<String>,
}

/// The address space of the soft-core.
struct Bus {
    flash: Vec<u8>,
    ram: Vec<u8>,
    engine: EngineRegs,
    kernels: KernelRegs,
    timer: Timer,
    uart: Vec<u8>,
}

impl Bus {
    /// The pending interrupt lines (`mip`).
    fn mip(&self) -> u32 {
        u32::from(self.timer.irq()) << MTI | u32::from(self.kernels.irq()) << MEI
    }

    fn read(&mut self, addr: u32) -> Option<u32> {
        let offset = addr % map::WINDOW;
        match addr - offset {
            map::ENGINE => self.engine.read(offset),
            map::KERNEL => self.kernels.read(offset),
            map::GPIO if offset == 0 => Some(self.kernels.gpio()),
            // UART status: never full.
            map::UART if offset == 4 => Some(0),
            map::TRNG if offset == 0 => Some(devices::random_word()),
            map::TIMER => self.timer.read(offset),
            _ => None,
        }
    }

    fn write(&mut self, addr: u32, value: u32) -> bool {
        let offset = addr % map::WINDOW;
        match addr - offset {
            map::ENGINE => self.engine.write(offset, value),
            map::KERNEL => self.kernels.write(offset, value),
            map::GPIO if offset == 0 => {
                self.kernels.write_gpio(value);
                true
            }
            map::UART if offset == 0 => {
                self.uart.push(value as u8);
                true
            }
            map::TIMER => self.timer.write(offset, value),
            _ => false,
        }
    }

    fn fetch32(&self, pc: u32) -> Option<u32> {
        let at = pc as usize;
        let b = self.flash.get(at..at + 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

impl rvsim::Memory for Bus {
    fn access<T: Copy>(&mut self, addr: u32, access: MemoryAccess<'_, T>) -> bool {
        if (addr as usize) < FLASH_BYTES {
            return match access {
                MemoryAccess::Store(_) => false,
                other => rvsim::Memory::access(&mut self.flash[..], addr, other),
            };
        }
        if let Some(at) = addr
            .checked_sub(RAM_BASE)
            .filter(|a| (*a as usize) < RAM_BYTES)
        {
            return match access {
                MemoryAccess::Exec(_) => false,
                other => rvsim::Memory::access(&mut self.ram[..], at, other),
            };
        }
        // Device registers: aligned 32-bit loads and stores only.
        if size_of::<T>() != 4 || !addr.is_multiple_of(4) {
            return false;
        }
        let mut word = [0u8; 4];
        match access {
            MemoryAccess::Load(dest) => {
                let Some(value) = self.read(addr) else {
                    return false;
                };
                word = value.to_le_bytes();
                rvsim::Memory::access(&mut word[..], 0, MemoryAccess::Load(dest))
            }
            MemoryAccess::Store(value) => {
                rvsim::Memory::access(&mut word[..], 0, MemoryAccess::Store(value))
                    && self.write(addr, u32::from_le_bytes(word))
            }
            MemoryAccess::Exec(_) => false,
        }
    }
}

/// The simulated soft-core with its devices.
struct Soc {
    hart: Hart,
    bus: Bus,
    clock: SimpleClock,
    image: Image,
    stats: Arc<Mutex<Stats>>,
    /// Start of the current wake-up: instructions, engine events, kernel completions
    /// acknowledged.
    wake: (u64, u64, u64),
    booted: bool,
    min_sp: u32,
}

impl Soc {
    fn new(image: Image, engine: SoftRoceEngine, memory: NaaMemory) -> Self {
        let mut ram = vec![0; RAM_BYTES];
        // Paint the stack area (everything above the statics).
        let from = (image.stack_limit - RAM_BASE) as usize;
        for w in ram[from..].chunks_exact_mut(4) {
            w.copy_from_slice(&PAINT.to_le_bytes());
        }
        let stats = Stats {
            statics: image.statics,
            ..Stats::default()
        };
        Self {
            hart: Hart::new(image.entry),
            bus: Bus {
                flash: image.flash.clone(),
                ram,
                engine: EngineRegs::new(engine),
                kernels: KernelRegs::new(memory),
                timer: Timer::new(),
                uart: Vec::new(),
            },
            clock: SimpleClock::new(),
            min_sp: image.stack_top,
            image,
            stats: Arc::new(Mutex::new(stats)),
            wake: (0, 0, 0),
            booted: false,
        }
    }

    /// Runs until `stop` is set or the firmware faults.
    fn run(&mut self, stop: &AtomicBool) -> Result<(), String> {
        let mut sample = 0;
        loop {
            sample += 1;
            if sample >= IRQ_SAMPLE {
                sample = 0;
                if stop.load(Ordering::Relaxed) {
                    return Ok(());
                }
                self.interrupt();
            }
            let pc = self.hart.cpu.pc;
            let result = {
                let mut interp = Interp::new(&mut self.hart.cpu, &mut self.bus, &mut self.clock);
                interp.step()
            };
            self.hart.instret += 1;
            match result {
                Ok(_) if self.hart.cpu.pc == pc => {
                    return Err(format!(
                        "firmware halted at {pc:#x} (panic, abort or exception handler)"
                    ));
                }
                Ok(_) => {}
                Err((CpuError::IllegalInstruction, Some(op))) => {
                    let mip = self.bus.mip();
                    self.hart
                        .csr(op, mip)
                        .map_err(|e| format!("at {pc:#x}: {e}"))?;
                    sample = IRQ_SAMPLE;
                }
                Err((CpuError::IllegalInstruction, None)) => match self.bus.fetch32(pc) {
                    Some(MRET) => {
                        self.hart.mret();
                        sample = IRQ_SAMPLE;
                    }
                    Some(WFI) => {
                        self.hart.cpu.pc = pc + 4;
                        if !self.wait(stop) {
                            return Ok(());
                        }
                        sample = IRQ_SAMPLE;
                    }
                    other => return Err(format!("illegal instruction {other:x?} at {pc:#x}")),
                },
                Err((e, op)) => return Err(format!("{e:?} at {pc:#x} ({op:?})")),
            }
            // The stack pointer is 0 until the start-up code sets it.
            let sp = self.hart.cpu.x[2];
            if sp >= RAM_BASE {
                self.min_sp = self.min_sp.min(sp);
            }
        }
    }

    fn interrupt(&mut self) {
        let mip = self.bus.mip();
        if self.hart.interrupt(mip).is_some() {
            self.stats
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .interrupts += 1;
        }
    }

    /// `wfi`: books the wake-up that ends here, then sleeps until an enabled interrupt is
    /// pending. False if the simulation is to stop.
    fn wait(&mut self, stop: &AtomicBool) -> bool {
        self.book();
        loop {
            if self.hart.enabled(self.bus.mip()) != 0 {
                break;
            }
            if stop.load(Ordering::SeqCst) {
                return false;
            }
            let nap = self
                .bus
                .timer
                .until_compare()
                .min(Duration::from_micros(200));
            std::thread::sleep(nap);
        }
        self.wake = (
            self.hart.instret,
            self.bus.engine.popped,
            self.bus.kernels.acked,
        );
        true
    }

    /// Adds the wake-up that ends now to the statistics.
    fn book(&mut self) {
        let instructions = self.hart.instret - self.wake.0;
        let busy = self.bus.engine.popped != self.wake.1 || self.bus.kernels.acked != self.wake.2;
        let mut s = self.stats.lock().unwrap_or_else(PoisonError::into_inner);
        if !self.booted {
            self.booted = true;
            s.boot = instructions;
        } else if busy {
            s.busy += instructions;
            s.busy_wakeups += 1;
        } else {
            s.idle += instructions;
            s.idle_wakeups += 1;
        }
        s.instructions = self.hart.instret;
        s.events = self.bus.engine.popped;
        s.kernels = self.bus.kernels.started;
        s.uart_bytes = self.bus.uart.len() as u64;
        s.uart_frames = self.bus.uart.iter().filter(|&&b| b == 0).count() as u64;
        s.stack_sp = self.image.stack_top - self.min_sp;
    }

    /// The painted stack's high-water mark in bytes.
    fn painted(&self) -> u32 {
        let from = (self.image.stack_limit - RAM_BASE) as usize;
        let untouched = self.bus.ram[from..]
            .chunks_exact(4)
            .take_while(|w| *w == PAINT.to_le_bytes())
            .count();
        self.image.stack_top - self.image.stack_limit - 4 * untouched as u32
    }
}

/// The firmware image running in the simulator as an NAA on 127.0.0.1; stopped when
/// dropped or by [`SimNaa::stop`].
pub struct SimNaa {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    stats: Arc<Mutex<Stats>>,
    thread: Option<JoinHandle<()>>,
}

impl SimNaa {
    /// Builds the image (once per process), loads it and starts the simulation.
    pub fn start() -> Result<Self, String> {
        let image = image::load(image::build()?, FLASH_BYTES)?;
        let listener = SoftTransport::default()
            .listen(crate::loopback())
            .map_err(|e| format!("listen: {e}"))?;
        let addr = listener.local_addr();
        let memory = NaaMemory::default();
        let mut soc = Soc::new(image, SoftRoceEngine::new(listener, memory.clone()), memory);
        let stats = soc.stats.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let stop_flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let result = soc.run(&stop_flag);
            soc.book();
            let painted = soc.painted();
            let log = image::decode_log(&soc.image.elf, &soc.bus.uart);
            let mut s = soc.stats.lock().unwrap_or_else(PoisonError::into_inner);
            s.stack_painted = painted;
            s.fault = result.err();
            match log {
                Ok(lines) => s.log = lines,
                Err(e) => s.fault = s.fault.take().or(Some(e)),
            }
        });
        Ok(Self {
            addr,
            stop,
            stats,
            thread: Some(thread),
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The measurements so far (updated whenever the core goes to sleep).
    pub fn stats(&self) -> Stats {
        self.stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Stops the simulation; returns the final measurements, or the fault that stopped the
    /// firmware.
    pub fn stop(mut self) -> Result<Stats, String> {
        self.halt();
        let stats = self.stats();
        match stats.fault {
            Some(f) => Err(f),
            None => Ok(stats),
        }
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for SimNaa {
    fn drop(&mut self) {
        self.halt();
    }
}
