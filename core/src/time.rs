//! Time as the caller tells it: the core never reads a clock.

use core::ops::{Add, Sub};
use core::time::Duration;

/// A point in time, in microseconds since an epoch the caller chooses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Instant {
    micros: u64,
}

impl Instant {
    /// The epoch.
    pub const ZERO: Self = Self { micros: 0 };

    /// An instant `micros` microseconds after the epoch.
    pub const fn from_micros(micros: u64) -> Self {
        Self { micros }
    }

    /// An instant `millis` milliseconds after the epoch (saturating).
    pub const fn from_millis(millis: u64) -> Self {
        Self {
            micros: millis.saturating_mul(1000),
        }
    }

    /// Microseconds since the epoch.
    pub const fn as_micros(self) -> u64 {
        self.micros
    }

    /// Time from `earlier` to `self`, or zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Self) -> Duration {
        Duration::from_micros(self.micros.saturating_sub(earlier.micros))
    }
}

impl Add<Duration> for Instant {
    type Output = Self;
    /// Saturates at the far future instead of overflowing.
    fn add(self, rhs: Duration) -> Self {
        let add = u64::try_from(rhs.as_micros()).unwrap_or(u64::MAX);
        Self {
            micros: self.micros.saturating_add(add),
        }
    }
}

impl Sub<Duration> for Instant {
    type Output = Self;
    /// Saturates at the epoch.
    fn sub(self, rhs: Duration) -> Self {
        let sub = u64::try_from(rhs.as_micros()).unwrap_or(u64::MAX);
        Self {
            micros: self.micros.saturating_sub(sub),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Instant::from_millis(5);
        assert_eq!(t.as_micros(), 5000);
        assert_eq!((t + Duration::from_micros(7)).as_micros(), 5007);
        assert_eq!((t - Duration::from_secs(1)), Instant::ZERO);
        assert_eq!((t + Duration::MAX).as_micros(), u64::MAX);
        assert_eq!(
            Instant::from_micros(9).saturating_duration_since(t),
            Duration::ZERO
        );
    }
}
