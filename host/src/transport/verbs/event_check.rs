//! [`EventCheck`]: when polling reads the rdma_cm channel next.
//!
//! Reading the channel costs a system call (and a malloc/free inside librdmacm), so polling
//! does it at most once per [`INTERVAL`]. The rate limit reads the coarse monotonic clock
//! (`CLOCK_MONOTONIC_COARSE`: the kernel's tick, read from the vDSO without the TSC and its
//! conversion), because the check runs on every poll of the fast path and a precise clock
//! read there was a visible share of a small RPC's instructions. The tick (1–10 ms) only
//! makes the interval coarser; a sleeping wait sees events at once.

use std::time::Duration;

use rustix::time::ClockId;

/// The least time between two reads of the rdma_cm channel while polling.
pub(super) const INTERVAL: Duration = Duration::from_millis(1);

/// The coarse monotonic clock, in nanoseconds.
fn coarse_now() -> u64 {
    crate::clock::nanos(ClockId::MonotonicCoarse)
}

/// The rate limit of the rdma_cm channel reads of one endpoint.
#[derive(Debug, Default)]
pub(super) struct EventCheck {
    /// Coarse time (ns) from which the next read is due; 0: due now.
    next: u64,
}

impl EventCheck {
    /// True if a read is due; it then counts as done now.
    pub(super) fn due(&mut self) -> bool {
        self.due_at(coarse_now())
    }

    /// Records a read done outside [`EventCheck::due`] (a sleeping wait's).
    pub(super) fn done(&mut self) {
        self.done_at(coarse_now());
    }

    fn due_at(&mut self, now: u64) -> bool {
        if now < self.next {
            return false;
        }
        self.done_at(now);
        true
    }

    fn done_at(&mut self, now: u64) {
        let interval = u64::try_from(INTERVAL.as_nanos()).unwrap_or(u64::MAX);
        self.next = now.saturating_add(interval);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_is_due_at_once_then_not_before_the_interval_then_again() {
        let ms = 1_000_000;
        let mut check = EventCheck::default();
        let t = 5_000 * ms;
        assert!(check.due_at(t), "a new endpoint reads at once");
        assert!(!check.due_at(t), "not again within the interval");
        assert!(!check.due_at(t + ms - 1));
        assert!(check.due_at(t + ms));
        check.done_at(t + 3 * ms);
        assert!(
            !check.due_at(t + 3 * ms + ms / 2),
            "a sleeping wait's read counts"
        );
        assert!(check.due_at(u64::MAX), "no overflow at the end of time");
        assert!(check.due_at(u64::MAX));
    }

    #[test]
    fn the_coarse_clock_is_monotonic_and_follows_the_precise_one() {
        let start = std::time::Instant::now();
        let a = coarse_now();
        std::thread::sleep(Duration::from_millis(30));
        let b = coarse_now();
        assert!(b >= a);
        let coarse = Duration::from_nanos(b - a);
        let precise = start.elapsed();
        // Within two ticks (at most 10 ms each) of the precise clock.
        assert!(
            coarse + Duration::from_millis(20) >= Duration::from_millis(30),
            "{coarse:?}"
        );
        assert!(
            coarse <= precise + Duration::from_millis(20),
            "{coarse:?} vs {precise:?}"
        );
    }
}
