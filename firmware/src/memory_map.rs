//! The board's memory map: the window of NAA memory that regions may occupy.

/// A window `base .. base + len` of NAA (board) memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MemoryMap {
    /// First usable address.
    pub base: u64,
    /// Length in bytes.
    pub len: u64,
}

impl MemoryMap {
    /// True if `addr .. addr + size` lies inside the window.
    pub fn contains(&self, addr: u64, size: u32) -> bool {
        let end = self.base.saturating_add(self.len);
        addr >= self.base && addr.checked_add(u64::from(size)).is_some_and(|e| e <= end)
    }
}

/// True if the ranges `a .. a + a_len` and `b .. b + b_len` share a byte.
pub(crate) fn overlaps(a: u64, a_len: u32, b: u64, b_len: u32) -> bool {
    a_len > 0
        && b_len > 0
        && a < b.saturating_add(u64::from(b_len))
        && b < a.saturating_add(u64::from(a_len))
}
