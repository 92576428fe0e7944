//! The sizes of a sweep and how many samples each gets.

/// One KiB.
pub(crate) const KIB: u64 = 1024;
/// One MiB.
pub(crate) const MIB: u64 = 1024 * KIB;
/// One GiB.
pub(crate) const GIB: u64 = 1024 * MIB;

/// Payload per size the steady state aims at over the software transport.
const STEADY_BYTES: u64 = 256 * MIB;
/// The same over verbs (Soft-RoCE moves ~0.2 GB/s under emulation).
const STEADY_BYTES_VERBS: u64 = 32 * MIB;
/// Most steady-state RPCs per size.
const STEADY_MAX: u64 = 2000;
/// Fewest steady-state RPCs per size.
const STEADY_MIN: u64 = 3;

/// The 52 sizes of the reference driver (spec §8.1): `s(0) = 1`,
/// `s(k+1) = round_half_even(1.5 · s(k))` while below 1 GiB, then exactly 1 GiB.
pub(crate) fn reference_sizes() -> Vec<u64> {
    let mut sizes = vec![1u64];
    let mut s = 1u64;
    loop {
        // round_half_even(1.5 · s), exactly in integers.
        s = if s.is_multiple_of(2) {
            s / 2 * 3
        } else {
            let floor = (3 * s - 1) / 2;
            floor + floor % 2
        };
        if s >= GIB {
            break;
        }
        sizes.push(s);
    }
    sizes.push(GIB);
    sizes
}

/// A size of the sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Size {
    /// Bytes each way.
    pub bytes: u64,
    /// Part of the reference list (written to the reference-format CSVs).
    pub reference: bool,
}

/// The reference sizes up to `max` plus 64 B and 4 KiB (not in the reference CSVs), sorted.
pub(crate) fn sweep_sizes(max: u64) -> Vec<Size> {
    let mut sizes: Vec<Size> = reference_sizes()
        .into_iter()
        .filter(|&bytes| bytes <= max)
        .map(|bytes| Size {
            bytes,
            reference: true,
        })
        .collect();
    sizes.extend(
        [64, 4 * KIB]
            .into_iter()
            .filter(|&bytes| bytes <= max)
            .map(|bytes| Size {
                bytes,
                reference: false,
            }),
    );
    sizes.sort_unstable();
    sizes
}

/// Steady-state RPCs for `bytes`: `fixed`, or about a payload budget's worth.
pub(crate) fn steady_count(fixed: Option<usize>, verbs: bool, bytes: u64) -> usize {
    let budget = if verbs {
        STEADY_BYTES_VERBS
    } else {
        STEADY_BYTES
    };
    fixed.unwrap_or_else(|| {
        usize::try_from((budget / bytes.max(1)).clamp(STEADY_MIN, STEADY_MAX)).unwrap_or(3)
    })
}

/// New-connection samples for `bytes`: `fixed`, or 10 up to 1 MiB, 5 up to 64 MiB, 2 above.
pub(crate) fn fresh_reps(fixed: Option<usize>, bytes: u64) -> usize {
    fixed.unwrap_or(if bytes <= MIB {
        10
    } else if bytes <= 64 * MIB {
        5
    } else {
        2
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_list_has_52_sizes() {
        let s = reference_sizes();
        assert_eq!(s.len(), 52);
        assert_eq!(&s[..12], &[1, 2, 3, 4, 6, 9, 14, 21, 32, 48, 72, 108]);
        assert_eq!(s[34], 1209729);
        assert_eq!(s[50], 794599564);
        assert_eq!(s[51], GIB);
    }

    #[test]
    fn extra_sizes_are_not_reference_sizes() {
        let s = sweep_sizes(5000);
        assert!(s.contains(&Size {
            bytes: 4096,
            reference: false
        }));
        assert!(s.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(s.last().map(|s| s.bytes), Some(4144));
    }
}
