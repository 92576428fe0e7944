//! Volatile access to the SoC's 32-bit memory-mapped registers: the only `unsafe` of the
//! firmware besides the logger's.

use core::ptr;

/// One 32-bit register at a fixed address of the SoC memory map ([`super::map`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reg(usize);

impl Reg {
    /// The register at `base + offset`. Only constructed from the constants of
    /// [`super::map`], which are 4-byte aligned addresses of SoC registers.
    pub(crate) const fn at(base: usize, offset: usize) -> Self {
        Self(base + offset)
    }

    /// Reads the register.
    pub(crate) fn read(self) -> u32 {
        #[allow(unsafe_code)]
        // SAFETY: `self.0` is an aligned address of a 32-bit register in the SoC's device
        // region (see `map`); it is always mapped, has no Rust-visible aliasing, and a
        // volatile read has no side effect beyond what the register documents.
        unsafe {
            ptr::read_volatile(self.0 as *const u32)
        }
    }

    /// Writes the register.
    pub(crate) fn write(self, value: u32) {
        #[allow(unsafe_code)]
        // SAFETY: as for `read`; device registers are not Rust memory, so the volatile
        // store cannot break any Rust invariant.
        unsafe {
            ptr::write_volatile(self.0 as *mut u32, value);
        }
    }
}
