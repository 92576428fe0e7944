//! [`MemoryBudget`]: the region memory all connections of a software NAA may hold together.
//!
//! A connection reserves the total of its MRSP request *before* any region is allocated, and
//! holds the reservation until the connection ends; a request that does not fit is refused
//! with MRSP error 0x01 (not enough memory), so no peer can make the NAA commit memory beyond
//! the budget, whatever the number of connections. The region memory of ended connections is
//! kept for the next ones ([`RegionCache`]) within what the reservations leave free.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::region_cache::RegionCache;
use crate::memory::Buffer;

/// The budget shared by the connections of one NAA.
#[derive(Debug)]
pub(crate) struct MemoryBudget {
    limit: u64,
    used: AtomicU64,
    /// Region memory of ended connections, kept for the next ones.
    cache: Mutex<RegionCache>,
}

impl MemoryBudget {
    /// A budget of `limit` bytes, keeping at most `cache` bytes of ended connections' region
    /// memory for the next ones.
    pub(crate) fn new(limit: u64, cache: u64) -> Arc<Self> {
        Arc::new(Self {
            limit,
            used: AtomicU64::new(0),
            cache: Mutex::new(RegionCache::new(cache)),
        })
    }

    /// Reserves `bytes`, or `None` when they do not fit beside what is reserved already.
    /// Kept memory that no longer fits beside the reservations is freed.
    pub(crate) fn reserve(self: &Arc<Self>, bytes: u64) -> Option<Reservation> {
        // Under the cache's lock, as what is kept is weighed against the reservations.
        let mut cache = self.cache();
        let used = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|&total| total <= self.limit)
            })
            .ok()?;
        let freed = cache.fit(used + bytes, self.limit);
        drop(cache);
        drop(freed);
        Some(Reservation {
            budget: Arc::clone(self),
            bytes,
        })
    }

    /// Zeroed memory of `len` bytes for a region: kept memory of an ended connection when
    /// there is a block of that size, else fresh memory; `None` if none can be allocated.
    pub(crate) fn region_memory(&self, len: usize) -> Option<Buffer> {
        let kept = self.cache().take(len);
        kept.or_else(|| Buffer::try_zeroed(len))
    }

    /// Bytes of ended connections' region memory kept now.
    pub(crate) fn cached(&self) -> u64 {
        self.cache().bytes()
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, RegionCache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
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

impl Reservation {
    /// Ends the reservation of a connection that is over, keeping its region memory
    /// (`buffers`, the last handles of memory the NAA allocated) for the next connections as
    /// far as the cache takes it; the rest is freed. Kept memory is zeroed first.
    pub(crate) fn release_keeping(self, buffers: Vec<Buffer>) {
        let budget = &self.budget;
        for buffer in buffers {
            if !budget.cache().wants(buffer.len()) {
                continue;
            }
            let Ok(mut block) = buffer.into_owned() else {
                continue;
            };
            block.fill(0);
            let mut cache = budget.cache();
            // This connection's own reservation ends with this call: it does not count.
            let others = budget.used().saturating_sub(self.bytes);
            let freed = cache.keep(block, others, budget.limit);
            drop(cache);
            drop(freed);
        }
    }
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
        let budget = MemoryBudget::new(100, 0);
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

    #[test]
    fn an_ended_connections_memory_goes_zeroed_to_the_next() {
        const LEN: usize = 1 << 20;
        let budget = MemoryBudget::new(4 << 20, 2 << 20);
        let first = budget.reserve(LEN as u64).expect("fits");
        let region = budget.region_memory(LEN).expect("memory");
        let addr = region.addr();
        region.lock().fill(0xAB);
        first.release_keeping(vec![region]);
        assert_eq!(budget.used(), 0);
        assert_eq!(budget.cached(), LEN as u64);
        let _second = budget.reserve(LEN as u64).expect("fits");
        let again = budget.region_memory(LEN).expect("memory");
        assert_eq!(again.addr(), addr, "the kept memory");
        assert!(again.lock().iter().all(|&b| b == 0), "zeroed");
        assert_eq!(budget.cached(), 0);
        // Memory still held elsewhere, or the caller's, is not kept.
        let third = budget.reserve(LEN as u64).expect("fits");
        let held = budget.region_memory(LEN).expect("memory");
        let clone = held.clone();
        third.release_keeping(vec![held]);
        assert_eq!(budget.cached(), 0);
        drop(clone);
    }

    #[test]
    fn a_reservation_frees_kept_memory_that_no_longer_fits() {
        const LEN: usize = 1 << 20;
        let budget = MemoryBudget::new(3 << 20, 3 << 20);
        let a = budget.reserve(2 * LEN as u64).expect("fits");
        let regions = vec![
            budget.region_memory(LEN).expect("memory"),
            budget.region_memory(LEN).expect("memory"),
        ];
        a.release_keeping(regions);
        assert_eq!(budget.cached(), 2 * LEN as u64);
        let _b = budget.reserve(2 * LEN as u64).expect("the budget is free");
        assert_eq!(
            budget.cached(),
            LEN as u64,
            "kept + reserved stay within the budget"
        );
    }
}
