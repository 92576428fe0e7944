//! Conversion between `std::time::Instant` and the core's caller-supplied time.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// The core instant for a std instant (microseconds since a process-wide epoch).
pub(crate) fn to_core(t: Instant) -> naaice_core::Instant {
    let micros = t.saturating_duration_since(epoch()).as_micros();
    naaice_core::Instant::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
}

/// The std instant for a core instant.
pub(crate) fn from_core(t: naaice_core::Instant) -> Instant {
    epoch()
        .checked_add(Duration::from_micros(t.as_micros()))
        .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365))
}

/// Now, as a core instant.
pub(crate) fn now() -> naaice_core::Instant {
    to_core(Instant::now())
}
