//! [`MemoryBudget`]: the region memory all connections of a software NAA may hold together.
//!
//! A connection reserves the total of its MRSP request *before* any region is allocated, and
//! holds the reservation until the connection ends; a request that does not fit is refused
//! with MRSP error 0x01 (not enough memory), so no peer can make the NAA commit memory beyond
//! the budget, whatever the number of connections.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The budget shared by the connections of one NAA.
#[derive(Debug)]
pub(crate) struct MemoryBudget {
    limit: u64,
    used: AtomicU64,
}

impl MemoryBudget {
    /// A budget of `limit` bytes.
    pub(crate) fn new(limit: u64) -> Arc<Self> {
        Arc::new(Self {
            limit,
            used: AtomicU64::new(0),
        })
    }

    /// Reserves `bytes`, or `None` when they do not fit beside what is reserved already.
    pub(crate) fn reserve(self: &Arc<Self>, bytes: u64) -> Option<Reservation> {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|&total| total <= self.limit)
            })
            .ok()?;
        Some(Reservation {
            budget: Arc::clone(self),
            bytes,
        })
    }

    /// Bytes reserved now.
    pub(crate) fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    /// The limit in bytes.
    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }
}

/// Bytes of a [`MemoryBudget`] held by one connection; given back on drop.
#[derive(Debug)]
pub(crate) struct Reservation {
    budget: Arc<MemoryBudget>,
    bytes: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// The default budget: half of the machine's physical memory (at least 64 MiB).
#[allow(
    clippy::useless_conversion,
    reason = "totalram is a c_ulong: u32 on 32-bit targets"
)]
pub fn default_memory_budget() -> u64 {
    let info = rustix::system::sysinfo();
    let total = u64::from(info.totalram).saturating_mul(u64::from(info.mem_unit.max(1)));
    (total / 2).max(64 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_fit_the_limit_and_come_back_on_drop() {
        let budget = MemoryBudget::new(100);
        let a = budget.reserve(60).expect("fits");
        assert!(budget.reserve(41).is_none());
        let b = budget.reserve(40).expect("fits exactly");
        assert_eq!(budget.used(), 100);
        assert!(budget.reserve(1).is_none());
        assert!(budget.reserve(u64::MAX).is_none());
        drop(a);
        assert_eq!(budget.used(), 40);
        drop(b);
        assert_eq!(budget.used(), 0);
        assert!(default_memory_budget() >= 64 << 20);
    }
}
