//! The core's caller-supplied time, and its conversion from and to `std::time::Instant`.
//!
//! Core instants are microseconds since a process-wide epoch. [`now`] reads them straight
//! from the monotonic clock on Linux (the clock `std::time::Instant` reads there): one clock
//! read and integer arithmetic, where `Instant::now` and the conversion of its result cost
//! twice that under emulation (measured under qemu's TCG: 170 against 90 ns), and the RPC's
//! path reads the clock a few times. Elsewhere [`now`] converts `Instant::now`.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The epoch: one moment on both clocks.
struct Epoch {
    instant: Instant,
    /// The monotonic clock at `instant`, in microseconds (within [`EPOCH_SKEW_US`]).
    #[cfg(target_os = "linux")]
    micros: u64,
}

/// Largest gap between the two readings that make up the epoch.
#[cfg(target_os = "linux")]
const EPOCH_SKEW_US: u64 = 20;

fn epoch() -> &'static Epoch {
    static EPOCH: OnceLock<Epoch> = OnceLock::new();
    EPOCH.get_or_init(|| {
        #[cfg(target_os = "linux")]
        {
            // Read the raw clock on both sides of `Instant::now`, until the two readings are
            // close (a preemption between them would make them disagree for good).
            let mut tries = 0;
            loop {
                let before = monotonic_micros();
                let instant = Instant::now();
                let after = monotonic_micros();
                tries += 1;
                if after.saturating_sub(before) <= EPOCH_SKEW_US || tries >= 100 {
                    return Epoch {
                        instant,
                        micros: before,
                    };
                }
            }
        }
        #[cfg(not(target_os = "linux"))]
        Epoch {
            instant: Instant::now(),
        }
    })
}

/// Clock `id` in nanoseconds (one `clock_gettime`).
pub(crate) fn nanos(id: rustix::time::ClockId) -> u64 {
    let t = rustix::time::clock_gettime(id);
    // The monotonic clocks are never negative and their nanoseconds are below 10^9.
    u64::try_from(t.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(t.tv_nsec).unwrap_or(0))
}

/// `CLOCK_MONOTONIC` in microseconds: what `std::time::Instant` reads on Linux.
#[cfg(target_os = "linux")]
fn monotonic_micros() -> u64 {
    nanos(rustix::time::ClockId::Monotonic) / 1_000
}

/// The core instant for a std instant (microseconds since a process-wide epoch).
pub(crate) fn to_core(t: Instant) -> naaice_core::Instant {
    let micros = t.saturating_duration_since(epoch().instant).as_micros();
    naaice_core::Instant::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
}

/// The std instant for a core instant.
pub(crate) fn from_core(t: naaice_core::Instant) -> Instant {
    epoch()
        .instant
        .checked_add(Duration::from_micros(t.as_micros()))
        .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365))
}

/// Now, as a core instant.
#[cfg(target_os = "linux")]
pub(crate) fn now() -> naaice_core::Instant {
    let epoch = epoch();
    naaice_core::Instant::from_micros(monotonic_micros().saturating_sub(epoch.micros))
}

/// Now, as a core instant.
#[cfg(not(target_os = "linux"))]
pub(crate) fn now() -> naaice_core::Instant {
    to_core(Instant::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_agrees_with_std_instants() {
        for _ in 0..1000 {
            let before = to_core(Instant::now()).as_micros();
            let now = now().as_micros();
            let after = to_core(Instant::now()).as_micros();
            // Both clocks are one clock; the epoch's two readings differ by at most its skew.
            assert!(now + 21 >= before, "{before} {now} {after}");
            assert!(now <= after + 21, "{before} {now} {after}");
        }
    }

    #[test]
    fn conversions_round_trip_to_the_microsecond() {
        let t = Instant::now() + Duration::from_millis(5);
        let back = from_core(to_core(t));
        let diff = if back > t { back - t } else { t - back };
        assert!(diff < Duration::from_micros(1), "{diff:?}");
    }
}
