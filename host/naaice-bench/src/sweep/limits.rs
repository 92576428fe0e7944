//! The software transport's targets against the raw TCP limit of the same run: every size up
//! to 1 MiB within 1.5 times the raw round trip of its size, and from 1 MiB a bandwidth of at
//! least 0.9 times the raw stream (against the stream of messages of the RPC's size, which
//! moves as much memory as the RPC does, and, for information, the stream of cache-resident
//! 1 MiB messages).

use std::fmt::Write as _;

use crate::sweep::measure::Measured;
use crate::sweep::report::bandwidth;

/// Sizes up to this are judged by their latency, larger ones by their bandwidth.
const SMALL_UP_TO: u64 = 1 << 20;
/// Most steady RPC time per raw round trip of the same size (sizes up to 1 MiB).
const MAX_RTT_RATIO: f64 = 1.5;
/// Least RPC bandwidth per raw stream bandwidth (sizes from 1 MiB).
const MIN_STREAM_RATIO: f64 = 0.9;

/// The worst ratio of `ratios` by `worse` (the size it was at), if there is one.
fn worst(ratios: &[(u64, f64)], worse: fn(f64, f64) -> bool) -> Option<(u64, f64)> {
    ratios
        .iter()
        .copied()
        .reduce(|w, (size, r)| if worse(r, w.1) { (size, r) } else { w })
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}

/// The lines that say how the run compares with the targets (`None` without raw TCP figures,
/// i.e. over verbs or against a remote NAA).
pub(crate) fn summary(rows: &[Measured]) -> Option<String> {
    let mut rtt = Vec::new();
    let mut sized = Vec::new();
    let mut cached = Vec::new();
    for m in rows {
        let Some(steady) = m.steady.p50().filter(|t| *t > 0.0) else {
            continue;
        };
        let size = m.size.bytes;
        if size <= SMALL_UP_TO
            && let Some(raw) = m.raw.p50().filter(|t| *t > 0.0)
        {
            rtt.push((size, steady / raw));
        }
        if size >= SMALL_UP_TO {
            let rpc = bandwidth(size, steady);
            if let Some(s) = m.stream_sized_bw.filter(|s| *s > 0.0) {
                sized.push((size, rpc / s));
            }
            if let Some(s) = m.stream_bw.filter(|s| *s > 0.0) {
                cached.push((size, rpc / s));
            }
        }
    }
    if rtt.is_empty() && sized.is_empty() {
        return None;
    }
    let mut s = String::from("software transport against the raw TCP limit of this run:\n");
    if let Some((size, r)) = worst(&rtt, |a, b| a > b) {
        let _ = writeln!(
            s,
            "  up to 1 MiB, steady RPC / raw round trip: worst {r:.2}x at {size} B over {} \
             sizes (target <= {MAX_RTT_RATIO}x: {})",
            rtt.len(),
            verdict(r <= MAX_RTT_RATIO)
        );
    }
    if let Some((size, r)) = worst(&sized, |a, b| a < b) {
        let _ = writeln!(
            s,
            "  from 1 MiB, bandwidth / stream of messages of the size: worst {r:.2}x at {size} \
             B over {} sizes (target >= {MIN_STREAM_RATIO}x: {})",
            sized.len(),
            verdict(r >= MIN_STREAM_RATIO)
        );
    }
    if let Some((size, r)) = worst(&cached, |a, b| a < b) {
        let _ = writeln!(
            s,
            "  from 1 MiB, bandwidth / stream of 1 MiB messages (cache-resident): worst {r:.2}x \
             at {size} B (for information)"
        );
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::sizes::Size;

    fn row(bytes: u64, steady: f64, raw: Option<f64>, streams: Option<(f64, f64)>) -> Measured {
        let mut m = Measured::new(Size {
            bytes,
            reference: true,
        });
        m.steady.push(steady);
        if let Some(raw) = raw {
            m.raw.push(raw);
        }
        if let Some((cached, sized)) = streams {
            m.stream_bw = Some(cached);
            m.stream_sized_bw = Some(sized);
        }
        m
    }

    /// The worst size of each kind is named and judged against its target.
    #[test]
    fn names_the_worst_size_and_judges_it() {
        let rows = [
            row(64, 30e-6, Some(25e-6), None),
            row(100_000, 80e-6, Some(50e-6), None),
            // 2 · 2 MiB in 1 ms: 4194 MB/s, against 4000 (sized) and 6000 (cached).
            row(2 << 20, 1e-3, None, Some((6e9, 4e9))),
            // 2 · 4 MiB in 2.5 ms: 3355 MB/s, against 4000 and 5000.
            row(4 << 20, 2.5e-3, None, Some((5e9, 4e9))),
        ];
        let s = summary(&rows).unwrap();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 4, "{s}");
        assert!(
            lines[1].contains("worst 1.60x at 100000 B over 2 sizes"),
            "{s}"
        );
        assert!(lines[1].ends_with("MISSED)"), "{s}");
        assert!(
            lines[2].contains("worst 0.84x at 4194304 B over 2 sizes"),
            "{s}"
        );
        assert!(lines[2].ends_with("MISSED)"), "{s}");
        assert!(lines[3].contains("worst 0.67x at 4194304 B"), "{s}");
    }

    /// Within the targets, both say met; without raw figures (verbs), nothing is said.
    #[test]
    fn met_targets_and_runs_without_raw_figures() {
        let rows = [
            row(64, 30e-6, Some(25e-6), None),
            row(2 << 20, 1e-3, None, Some((4.2e9, 4.2e9))),
        ];
        let s = summary(&rows).unwrap();
        assert!(
            s.contains("worst 1.20x at 64 B") && s.contains("<= 1.5x: met)"),
            "{s}"
        );
        assert!(
            s.contains("worst 1.00x at 2097152 B") && s.contains(">= 0.9x: met)"),
            "{s}"
        );
        assert!(summary(&[row(64, 30e-6, None, None)]).is_none());
    }
}
