//! [`LogThrottle`]: at most one log line per interval for an event that may repeat in a tight
//! loop (a peer can make `accept` fail hundreds of times a second), with the count it stands
//! for. Events within a line's window are counted, not dropped: the owner reports them in one
//! summary line when the window ends ([`LogThrottle::expired`]) or when it stops
//! ([`LogThrottle::flush`]); an owner that does neither has them counted into its next line.

use std::time::{Duration, Instant};

/// Counts occurrences of one event and says when the next log line is due.
#[derive(Debug)]
pub(crate) struct LogThrottle {
    interval: Duration,
    /// The end of the window of the last line (`None`: no line yet, or the window was closed
    /// by a summary).
    window_end: Option<Instant>,
    /// Occurrences since the last line that no line reported yet.
    count: u64,
}

impl LogThrottle {
    /// At most one line per `interval`.
    pub(crate) const fn new(interval: Duration) -> Self {
        Self {
            interval,
            window_end: None,
            count: 0,
        }
    }

    /// Counts one occurrence at `now`. Returns how many occurrences the line due now stands
    /// for (this one and those not reported since the last line), or `None` when no line is
    /// due yet (the occurrence is counted for the window's summary).
    pub(crate) fn hit(&mut self, now: Instant) -> Option<u64> {
        self.count += 1;
        match self.window_end {
            Some(end) if now < end => None,
            _ => {
                self.window_end = Some(now + self.interval);
                Some(std::mem::take(&mut self.count))
            }
        }
    }

    /// The window of the last line has ended by `now`: returns how many occurrences it
    /// suppressed (`None` when none, or when it has not ended), for one summary line. The
    /// next occurrence starts a new window and is logged at once.
    pub(crate) fn expired(&mut self, now: Instant) -> Option<u64> {
        match self.window_end {
            Some(end) if now >= end => {
                self.window_end = None;
                self.flush()
            }
            _ => None,
        }
    }

    /// The occurrences no line has reported yet (`None` when there are none), for a last
    /// summary line when the owner stops.
    pub(crate) fn flush(&mut self) -> Option<u64> {
        (self.count > 0).then(|| std::mem::take(&mut self.count))
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

    #[test]
    fn a_window_that_ends_with_suppressed_events_reports_them() {
        let mut t = LogThrottle::new(Duration::from_secs(5));
        let t0 = Instant::now();
        assert_eq!(t.expired(t0), None, "no line yet");
        assert_eq!(t.hit(t0), Some(1));
        for ms in 1..500 {
            assert_eq!(t.hit(t0 + Duration::from_millis(ms)), None);
        }
        assert_eq!(
            t.expired(t0 + Duration::from_millis(4999)),
            None,
            "window open"
        );
        assert_eq!(t.expired(t0 + Duration::from_secs(5)), Some(499));
        assert_eq!(
            t.expired(t0 + Duration::from_secs(6)),
            None,
            "reported once"
        );
        // The window was closed by the summary: the next occurrence is a line of its own.
        assert_eq!(t.hit(t0 + Duration::from_secs(7)), Some(1));
        // A window that ends without suppressed occurrences has nothing to report.
        assert_eq!(t.expired(t0 + Duration::from_secs(13)), None);
    }

    #[test]
    fn flush_reports_what_no_line_reported() {
        let mut t = LogThrottle::new(Duration::from_secs(5));
        let t0 = Instant::now();
        assert_eq!(t.flush(), None);
        assert_eq!(t.hit(t0), Some(1));
        assert_eq!(t.flush(), None, "the line reported it");
        for ms in 1..=299 {
            assert_eq!(t.hit(t0 + Duration::from_millis(ms)), None);
        }
        assert_eq!(t.flush(), Some(299));
        assert_eq!(t.flush(), None);
        // Flushed occurrences are not counted again by the next line.
        assert_eq!(t.hit(t0 + Duration::from_secs(5)), Some(1));
    }
}
