//! # naaice-firmware
//!
//! The control plane of the FPGA NAA: the program of the small RISC-V soft-core next to the
//! hardware RoCEv2 engine. `no_std`, no allocation; the protocol itself is naaice-core's
//! [`naaice_core::Server`] machine in the FPGA mode ([`naaice_core::Placement::Requested`]).
//!
//! What it does per connection (spec §2–§4):
//! * answers the client's MRSP request: validates it against the board's [`MemoryMap`] and
//!   limits (0x01 not enough memory, 0x02 invalid address, 0x03 too many regions), places
//!   every region at the client's requested address, gives it an unpredictable rkey and
//!   programs the engine's region table;
//! * runs RPCs: decodes the immediate, starts the kernel, answers an unknown function code
//!   with SOCKET_UNAVAIL and a kernel over its deadline with KERNEL_TIMEOUT, and writes the
//!   outputs back with the return code in the final immediate;
//! * handles disconnects at any phase and re-connections; up to `N` connections at once,
//!   each with its own region table.
//!
//! The hardware sits behind small traits: [`RoceEngine`] (queues and region table),
//! [`KernelUnit`] plus an `embedded-hal` output pin (kernel start) and [`KernelDone`]
//! (completions recorded by the interrupt handler, behind `critical-section`), [`Clock`],
//! and an `embedded-hal` delay for the idle loop. With the `board` feature on
//! `riscv32imc-unknown-none-elf`, the `board` module implements them with MMIO registers;
//! it is the only code with `unsafe`. Its register map is a proposal to the FPGA team
//! (`firmware/HARDWARE.md`), exercised by running the image in an instruction-set simulator
//! (`tests/tests/firmware_image.rs`).
#![no_std]
#![deny(unsafe_code)]

mod log;

pub mod clock;
pub mod config;
pub mod engine;
pub mod firmware;
pub mod kernel;
pub mod memory_map;
pub mod rkey;

#[cfg(all(feature = "board", target_arch = "riscv32"))]
pub mod board;

pub use clock::Clock;
pub use config::FirmwareConfig;
pub use engine::{EngineEvent, RoceEngine};
pub use firmware::{Firmware, Hardware};
pub use kernel::{KernelDone, KernelJob, KernelUnit};
pub use memory_map::MemoryMap;
