//! The time seam: a free-running microsecond clock (the board's `mtime`).

use naaice_core::Instant;

/// A monotonic clock.
pub trait Clock {
    /// The current time.
    fn now(&mut self) -> Instant;
}
