//! The machine-mode part of the hart that `rvsim` leaves out: the machine CSRs, interrupt
//! entry, `mret` and `wfi`.
//!
//! rvsim interprets the unprivileged RV32IMC instruction set and reports every instruction
//! it does not know (machine CSRs, `mret`, `wfi`) as an illegal instruction, with the state
//! as the RISC-V privileged specification needs it for emulation: a CSR instruction has
//! advanced the program counter and written nothing, an unparsed instruction has changed
//! nothing. [`Hart`] completes those instructions.

use rvsim::{CpuState, Op};

/// `mret`.
pub(super) const MRET: u32 = 0x3020_0073;
/// `wfi`.
pub(super) const WFI: u32 = 0x1050_0073;

/// `mstatus.MIE` (interrupts enabled).
const MSTATUS_MIE: u32 = 1 << 3;
/// `mstatus.MPIE` (interrupt enable before the trap).
const MSTATUS_MPIE: u32 = 1 << 7;
/// `mstatus.MPP` (previous privilege: machine).
const MSTATUS_MPP: u32 = 3 << 11;

/// Machine timer interrupt (`mip`/`mie` bit and cause).
pub(super) const MTI: u32 = 7;
/// Machine external interrupt (`mip`/`mie` bit and cause).
pub(super) const MEI: u32 = 11;

/// What a CSR instruction does with its operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CsrOp {
    Write,
    Set,
    Clear,
}

/// The register file and machine-mode state of the hart.
#[derive(Debug)]
pub(super) struct Hart {
    /// Integer registers and program counter (rvsim's state).
    pub(super) cpu: CpuState,
    mstatus: u32,
    mie: u32,
    mtvec: u32,
    mscratch: u32,
    mepc: u32,
    mcause: u32,
    mtval: u32,
    /// Instructions retired (also `mcycle`: the model assumes one cycle per instruction).
    pub(super) instret: u64,
}

impl Hart {
    /// The hart at reset, starting at `pc`.
    pub(super) fn new(pc: u32) -> Self {
        Self {
            cpu: CpuState::new(pc),
            mstatus: 0,
            mie: 0,
            mtvec: 0,
            mscratch: 0,
            mepc: 0,
            mcause: 0,
            mtval: 0,
            instret: 0,
        }
    }

    /// The interrupts that are enabled in `mie` and pending in `mip`.
    pub(super) fn enabled(&self, mip: u32) -> u32 {
        mip & self.mie
    }

    fn read_csr(&self, csr: u32, mip: u32) -> Result<u32, String> {
        Ok(match csr {
            0x300 => self.mstatus,
            // misa: RV32 I, M, C.
            0x301 => 1 << 30 | 1 << 8 | 1 << 12 | 1 << 2,
            0x304 => self.mie,
            0x305 => self.mtvec,
            0x340 => self.mscratch,
            0x341 => self.mepc,
            0x342 => self.mcause,
            0x343 => self.mtval,
            0x344 => mip,
            // mcycle and minstret (one cycle per instruction), low and high words.
            0xB00 | 0xB02 | 0xC00 | 0xC02 => self.instret as u32,
            0xB80 | 0xB82 | 0xC80 | 0xC82 => (self.instret >> 32) as u32,
            // mvendorid, marchid, mimpid, mhartid, mconfigptr.
            0xF11..=0xF15 => 0,
            _ => return Err(format!("unknown CSR {csr:#x}")),
        })
    }

    fn write_csr(&mut self, csr: u32, value: u32) -> Result<(), String> {
        match csr {
            0x300 => self.mstatus = value & (MSTATUS_MIE | MSTATUS_MPIE) | MSTATUS_MPP,
            0x304 => self.mie = value & (1 << MTI | 1 << MEI | 1 << 3),
            0x305 => self.mtvec = value,
            0x340 => self.mscratch = value,
            0x341 => self.mepc = value & !1,
            0x342 => self.mcause = value,
            0x343 => self.mtval = value,
            // mip: the interrupt lines are the devices'; software writes are ignored.
            0x344 => {}
            0x301 | 0xF11..=0xF15 => {}
            _ => return Err(format!("write to unknown or read-only CSR {csr:#x}")),
        }
        Ok(())
    }

    /// Completes CSR instruction `op` that rvsim refused (the program counter has already
    /// advanced). Errors name an instruction the model does not support.
    pub(super) fn csr(&mut self, op: Op, mip: u32) -> Result<(), String> {
        let x = &self.cpu.x;
        let (rd, csr, how, operand, source) = match op {
            Op::Csrrw { rd, rs1, csr } => (rd, csr, CsrOp::Write, x[rs1], rs1 as u32),
            Op::Csrrs { rd, rs1, csr } => (rd, csr, CsrOp::Set, x[rs1], rs1 as u32),
            Op::Csrrc { rd, rs1, csr } => (rd, csr, CsrOp::Clear, x[rs1], rs1 as u32),
            Op::Csrrwi { rd, zimm, csr } => (rd, csr, CsrOp::Write, zimm, zimm),
            Op::Csrrsi { rd, zimm, csr } => (rd, csr, CsrOp::Set, zimm, zimm),
            Op::Csrrci { rd, zimm, csr } => (rd, csr, CsrOp::Clear, zimm, zimm),
            other => return Err(format!("unsupported instruction {other:?}")),
        };
        // csrrw with rd = x0 does not read; set and clear with x0 (or 0) do not write.
        let old = if how == CsrOp::Write && rd == 0 {
            0
        } else {
            self.read_csr(csr, mip)?
        };
        match how {
            CsrOp::Write => self.write_csr(csr, operand)?,
            _ if source == 0 => {}
            CsrOp::Set => self.write_csr(csr, old | operand)?,
            CsrOp::Clear => self.write_csr(csr, old & !operand)?,
        }
        if rd != 0 {
            self.cpu.x[rd] = old;
        }
        Ok(())
    }

    /// `mret`: back to `mepc` with the interrupt enable from before the trap.
    pub(super) fn mret(&mut self) {
        let mpie = self.mstatus & MSTATUS_MPIE != 0;
        self.mstatus = (self.mstatus & !MSTATUS_MIE)
            | if mpie { MSTATUS_MIE } else { 0 }
            | MSTATUS_MPIE
            | MSTATUS_MPP;
        self.cpu.pc = self.mepc;
    }

    /// Takes the highest-priority interrupt of `mip` if interrupts are enabled; returns its
    /// cause number.
    pub(super) fn interrupt(&mut self, mip: u32) -> Option<u32> {
        if self.mstatus & MSTATUS_MIE == 0 {
            return None;
        }
        let pending = self.enabled(mip);
        // Priority: external, software, timer.
        let cause = [MEI, 3, MTI].into_iter().find(|c| pending & 1 << c != 0)?;
        self.mepc = self.cpu.pc;
        self.mcause = 1 << 31 | cause;
        self.mtval = 0;
        self.mstatus = MSTATUS_MPIE | MSTATUS_MPP;
        // Direct mode (riscv-rt's default); vectored mode adds 4 · cause.
        self.cpu.pc = if self.mtvec & 3 == 1 {
            (self.mtvec & !3) + 4 * cause
        } else {
            self.mtvec & !3
        };
        Some(cause)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csr_instructions_read_modify_write_and_respect_x0() {
        let mut h = Hart::new(0);
        h.cpu.x[5] = 0x888;
        // csrrw x6, mie, x5: old value to x6, mie keeps only the modelled bits.
        h.csr(
            Op::Csrrw {
                rd: 6,
                rs1: 5,
                csr: 0x304,
            },
            0,
        )
        .unwrap();
        assert_eq!(h.cpu.x[6], 0);
        assert_eq!(h.mie, 0x888);
        // csrrc x7, mie, x0: reads, does not write.
        h.csr(
            Op::Csrrc {
                rd: 7,
                rs1: 0,
                csr: 0x304,
            },
            0,
        )
        .unwrap();
        assert_eq!((h.cpu.x[7], h.mie), (0x888, 0x888));
        // csrrci mie, 8: clears the software-interrupt bit.
        h.csr(
            Op::Csrrci {
                rd: 0,
                zimm: 8,
                csr: 0x304,
            },
            0,
        )
        .unwrap();
        assert_eq!(h.mie, 0x880);
        // mip reads the lines; minstret counts instructions.
        h.instret = 0x1_0000_0002;
        h.csr(
            Op::Csrrs {
                rd: 8,
                rs1: 0,
                csr: 0x344,
            },
            1 << MEI,
        )
        .unwrap();
        h.csr(
            Op::Csrrs {
                rd: 9,
                rs1: 0,
                csr: 0xB82,
            },
            0,
        )
        .unwrap();
        assert_eq!((h.cpu.x[8], h.cpu.x[9]), (1 << MEI, 1));
        assert!(
            h.csr(
                Op::Csrrs {
                    rd: 1,
                    rs1: 0,
                    csr: 0x7C0
                },
                0
            )
            .is_err()
        );
    }

    #[test]
    fn interrupts_trap_only_when_enabled_and_mret_restores() {
        let mut h = Hart::new(0x100);
        h.mtvec = 0x94;
        h.mie = 1 << MTI | 1 << MEI;
        assert_eq!(h.interrupt(1 << MTI), None, "mstatus.MIE clear");
        h.mstatus = MSTATUS_MIE;
        // External beats timer.
        assert_eq!(h.interrupt(1 << MTI | 1 << MEI), Some(MEI));
        assert_eq!((h.cpu.pc, h.mepc, h.mcause), (0x94, 0x100, 1 << 31 | MEI));
        assert_eq!(h.mstatus & MSTATUS_MIE, 0);
        assert_eq!(h.interrupt(1 << MTI), None, "no nesting");
        h.mret();
        assert_eq!(h.cpu.pc, 0x100);
        assert_ne!(h.mstatus & MSTATUS_MIE, 0);
    }
}
