//! Region flags: byte 0 of each Advertisement+Request record (spec §2.4).

bitflags::bitflags! {
    /// Region flags: byte 0 of each Advertisement+Request record (spec §2.4).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct RegionFlags: u8 {
        /// NAA-only memory; never transferred. Never combined with other bits.
        const INTERNAL = 0x01;
        /// The input is transferred only in the first RPC of a connection. Implies INPUT.
        const SINGLESEND = 0x02;
        /// The client writes the region to the NAA in each RPC.
        const INPUT = 0x04;
        /// The NAA writes the region back to the client in each RPC.
        const OUTPUT = 0x08;
    }
}

impl RegionFlags {
    /// Validates a flag byte from the wire: no unknown bits, INTERNAL alone, and SINGLESEND
    /// only together with INPUT (the combinations the C client produces: 0x00, 0x01, 0x04,
    /// 0x06, 0x08, 0x0C, 0x0E).
    pub const fn from_wire(byte: u8) -> Option<Self> {
        let Some(flags) = Self::from_bits(byte) else {
            return None;
        };
        if flags.contains(Self::INTERNAL) && byte != Self::INTERNAL.bits() {
            return None;
        }
        if flags.contains(Self::SINGLESEND) && !flags.contains(Self::INPUT) {
            return None;
        }
        Some(flags)
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for RegionFlags {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "RegionFlags({=u8:#x})", self.bits())
    }
}
