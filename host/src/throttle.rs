//! [`LogThrottle`]: at most one log line per interval for an event that may repeat in a tight
//! loop (a peer can make `accept` fail hundreds of times a second), with the count it stands
//! for.

use std::time::{Duration, Instant};

/// Counts occurrences of one event and says when the next log line is due.
#[derive(Debug)]
pub(crate) struct LogThrottle {
    interval: Duration,
    next_line: Option<Instant>,
    count: u64,
}

impl LogThrottle {
    /// At most one line per `interval`.
    pub(crate) const fn new(interval: Duration) -> Self {
        Self {
            interval,
            next_line: None,
            count: 0,
        }
    }

    /// Counts one occurrence at `now`. Returns how many occurrences the line due now stands
    /// for (this one and those not logged since the last line), or `None` when no line is
    /// due yet.
    pub(crate) fn hit(&mut self, now: Instant) -> Option<u64> {
        self.count += 1;
        match self.next_line {
            Some(due) if now < due => None,
            _ => {
                self.next_line = Some(now + self.interval);
                Some(std::mem::take(&mut self.count))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_with_the_count() {
        let mut t = LogThrottle::new(Duration::from_secs(5));
        let t0 = Instant::now();
        assert_eq!(t.hit(t0), Some(1));
        for ms in 1..300 {
            assert_eq!(t.hit(t0 + Duration::from_millis(ms)), None);
        }
        assert_eq!(t.hit(t0 + Duration::from_secs(5)), Some(300));
        assert_eq!(t.hit(t0 + Duration::from_secs(6)), None);
        assert_eq!(t.hit(t0 + Duration::from_secs(11)), Some(2));
    }
}
