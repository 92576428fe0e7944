//! [`RegionCache`]: region memory of ended connections, kept zeroed for the next ones.
//!
//! Fresh memory costs a page fault per page when it is first touched, and registration for
//! RDMA touches every page: a connection's set-up with a 1 MiB region pays 256 faults before
//! the NAA can answer its MRSP, a 64 MiB region 16 384. Clients usually reconnect with the
//! regions they had (a job's ranks, a benchmark, a retry), so the NAA keeps the memory of
//! ended connections and hands it to the next request of exactly the same size, zeroed: no
//! connection ever sees another's data. What is kept is bounded: by the cache's own limit,
//! by what the memory budget leaves free (kept memory and reserved memory together never
//! exceed the budget: a reservation evicts what no longer fits), and by a count of blocks.

use std::collections::VecDeque;

use crate::memory::Buffer;

/// Regions smaller than this are not kept: the allocator reuses such memory itself.
pub(crate) const SMALLEST_KEPT: usize = 64 << 10;
/// At most this many blocks are kept (a lookup scans them).
const MOST_BLOCKS: usize = 64;

/// Region memory kept for the next connections (see the [module](self) documentation).
#[derive(Debug)]
pub(crate) struct RegionCache {
    /// Most bytes kept.
    limit: u64,
    /// Bytes kept now.
    bytes: u64,
    /// The blocks, oldest first; every byte zero.
    blocks: VecDeque<Box<[u8]>>,
}

impl RegionCache {
    /// An empty cache keeping at most `limit` bytes (zero: nothing is kept).
    pub(crate) fn new(limit: u64) -> Self {
        Self {
            limit,
            bytes: 0,
            blocks: VecDeque::new(),
        }
    }

    /// Bytes kept now.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Whether a block of `len` bytes would be kept at all (before zeroing it).
    pub(crate) fn wants(&self, len: usize) -> bool {
        len >= SMALLEST_KEPT && len as u64 <= self.limit
    }

    /// The most recently kept block of exactly `len` bytes, zeroed, as a buffer.
    pub(crate) fn take(&mut self, len: usize) -> Option<Buffer> {
        let i = self.blocks.iter().rposition(|b| b.len() == len)?;
        let block = self.blocks.remove(i)?;
        self.bytes -= block.len() as u64;
        Some(Buffer::from_boxed(block))
    }

    /// Keeps `block` (every byte zero) if it fits beside `reserved` bytes within `budget`,
    /// evicting the oldest blocks as needed; returns what is to be freed (outside any lock:
    /// freeing large blocks takes time).
    pub(crate) fn keep(&mut self, block: Box<[u8]>, reserved: u64, budget: u64) -> Vec<Box<[u8]>> {
        let len = block.len() as u64;
        let room = self.limit.min(budget.saturating_sub(reserved));
        if !self.wants(block.len()) || len > room {
            return vec![block];
        }
        let mut freed = Vec::new();
        while self.bytes + len > room || self.blocks.len() >= MOST_BLOCKS {
            freed.extend(self.evict_oldest());
        }
        self.bytes += len;
        self.blocks.push_back(block);
        freed
    }

    /// Evicts the oldest blocks until what is kept fits beside `reserved` bytes within
    /// `budget`; returns them (to be freed outside any lock).
    pub(crate) fn fit(&mut self, reserved: u64, budget: u64) -> Vec<Box<[u8]>> {
        let mut freed = Vec::new();
        while self.bytes > budget.saturating_sub(reserved) {
            freed.extend(self.evict_oldest());
        }
        freed
    }

    fn evict_oldest(&mut self) -> Option<Box<[u8]>> {
        let block = self.blocks.pop_front()?;
        self.bytes -= block.len() as u64;
        Some(block)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: usize = SMALLEST_KEPT;

    fn block(len: usize) -> Box<[u8]> {
        vec![0; len].into_boxed_slice()
    }

    #[test]
    fn a_kept_block_goes_to_the_next_request_of_its_size_only() {
        let mut cache = RegionCache::new(10 * K as u64);
        let b = block(2 * K);
        let addr = b.as_ptr() as u64;
        assert!(cache.keep(b, 0, u64::MAX).is_empty());
        assert_eq!(cache.bytes(), 2 * K as u64);
        assert!(cache.take(2 * K + 1).is_none(), "exact sizes only");
        assert!(cache.take(K).is_none());
        let taken = cache.take(2 * K).expect("kept");
        assert_eq!(taken.addr(), addr, "the same memory");
        assert_eq!(cache.bytes(), 0);
        assert!(cache.take(2 * K).is_none(), "taken once");
    }

    #[test]
    fn small_blocks_and_blocks_over_the_limit_are_not_kept() {
        let mut cache = RegionCache::new(4 * K as u64);
        assert_eq!(cache.keep(block(K - 1), 0, u64::MAX).len(), 1);
        assert_eq!(cache.keep(block(4 * K + 1), 0, u64::MAX).len(), 1);
        assert_eq!(cache.bytes(), 0);
        let mut off = RegionCache::new(0);
        assert!(!off.wants(K));
        assert_eq!(off.keep(block(K), 0, u64::MAX).len(), 1);
    }

    #[test]
    fn the_oldest_blocks_make_room_within_the_limit() {
        let mut cache = RegionCache::new(4 * K as u64);
        for len in [K, K + 1, K + 2] {
            assert!(cache.keep(block(len), 0, u64::MAX).is_empty());
        }
        let freed = cache.keep(block(K + 3), 0, u64::MAX);
        assert_eq!(freed.len(), 1, "the oldest makes room");
        assert_eq!(freed[0].len(), K);
        assert_eq!(cache.bytes(), 3 * K as u64 + 6);
        let freed = cache.keep(block(2 * K), 0, u64::MAX);
        assert_eq!(freed.len(), 2, "as many as needed, oldest first");
        assert_eq!((freed[0].len(), freed[1].len()), (K + 1, K + 2));
        assert!(cache.take(K + 3).is_some() && cache.take(2 * K).is_some());
        assert_eq!(cache.bytes(), 0);
    }

    #[test]
    fn kept_and_reserved_memory_never_exceed_the_budget() {
        let budget = 8 * K as u64;
        let mut cache = RegionCache::new(u64::MAX);
        assert!(cache.keep(block(4 * K), 2 * K as u64, budget).is_empty());
        // Only 2 K left beside 6 K reserved: the new block does not fit, the old one goes.
        let freed = cache.keep(block(2 * K), 4 * K as u64, budget);
        assert_eq!(freed.len(), 1);
        assert_eq!(cache.bytes(), 2 * K as u64);
        assert_eq!(
            cache.keep(block(3 * K), 6 * K as u64, budget).len(),
            1,
            "no room"
        );
        // A reservation that takes the rest of the budget evicts what is kept.
        assert_eq!(cache.fit(8 * K as u64, budget).len(), 1);
        assert_eq!(cache.bytes(), 0);
    }

    #[test]
    fn at_most_so_many_blocks_are_kept() {
        let mut cache = RegionCache::new(u64::MAX);
        for _ in 0..MOST_BLOCKS + 5 {
            let _ = cache.keep(block(K), 0, u64::MAX);
        }
        assert_eq!(cache.bytes(), (MOST_BLOCKS * K) as u64);
    }
}
