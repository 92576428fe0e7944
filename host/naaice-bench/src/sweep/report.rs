//! What a sweep writes: the reference's two CSV formats, the summary CSV and the table.

use std::fmt::Write as _;

use crate::base::stats::Samples;
use crate::sweep::compare::Reference;
use crate::sweep::measure::Measured;

/// Header of the reference's low-level CSV (spec §8.1).
pub(crate) const LOWLEVEL_HEADER: &str = "byte_length,setup_time,transfer_time";
/// Header of the reference's middleware CSV (spec §8.1).
pub(crate) const MIDDLEWARE_HEADER: &str = "byte_length,transfer_time";
/// Header of the summary CSV (times in µs; MB/s = 2·size / time; CPU time per steady RPC of
/// the client thread and of the process's other threads; the connect time of new connections;
/// last the raw stream of messages of the row's size).
pub(crate) const SUMMARY_HEADER: &str = "byte_length,steady_n,steady_rpc_us,steady_rpc_p90_us,\
steady_rpc_p99_us,steady_rpc_MBps,raw_rtt_us,raw_rtt_MBps,raw_stream_MBps,fresh_setup_us,\
fresh_register_us,fresh_mrsp_us,fresh_transfer_us,fresh_transfer_p90_us,fresh_transfer_p99_us,\
middleware_us,middleware_p90_us,middleware_p99_us,compare_transfer_us,fresh_vs_compare,\
steady_cpu_client_us,steady_cpu_others_us,fresh_connect_us,raw_stream_sized_MBps";

/// Bandwidth counting both directions: 2·size / time (bytes/s).
pub(crate) fn bandwidth(size: u64, seconds: f64) -> f64 {
    2.0 * size as f64 / seconds
}

/// The reference's low-level CSV: one row per new connection of the reference sizes
/// (seconds, 6 decimals, like the reference's `"%ld,%f,%f"`).
pub(crate) fn lowlevel_csv(rows: &[Measured]) -> String {
    let mut s = format!("{LOWLEVEL_HEADER}\n");
    for m in rows.iter().filter(|m| m.size.reference) {
        for (setup, first) in m.setup.as_slice().iter().zip(m.first.as_slice()) {
            let _ = writeln!(s, "{},{setup:.6},{first:.6}", m.size.bytes);
        }
    }
    s
}

/// The reference's middleware CSV: one row per `naa_create` of the reference sizes.
pub(crate) fn middleware_csv(rows: &[Measured]) -> String {
    let mut s = format!("{MIDDLEWARE_HEADER}\n");
    for m in rows.iter().filter(|m| m.size.reference) {
        for t in m.middleware.as_slice() {
            let _ = writeln!(s, "{},{t:.6}", m.size.bytes);
        }
    }
    s
}

fn cell(v: Option<f64>, scale: f64) -> String {
    v.filter(|v| v.is_finite())
        .map_or_else(String::new, |v| format!("{:.3}", v * scale))
}

fn us(samples: &Samples) -> [String; 3] {
    match samples.percentiles() {
        Some(p) => [p.p50, p.p90, p.p99].map(|v| cell(Some(v), 1e6)),
        None => Default::default(),
    }
}

/// The summary CSV after `#` comment lines (`comment`): medians and tails per size.
pub(crate) fn summary_csv(
    rows: &[Measured],
    reference: Option<&Reference>,
    comment: &str,
) -> String {
    let mut s = String::new();
    for line in comment.lines() {
        let _ = writeln!(s, "# {line}");
    }
    let _ = writeln!(s, "{SUMMARY_HEADER}");
    for m in rows {
        let bytes = m.size.bytes;
        let mbps = |t: Option<f64>| cell(t.map(|t| bandwidth(bytes, t)), 1e-6);
        let [steady, steady90, steady99] = us(&m.steady);
        let [first, first90, first99] = us(&m.first);
        let [mw, mw90, mw99] = us(&m.middleware);
        let compare = reference.and_then(|r| r.transfer.get(&bytes).copied());
        let ratio = m
            .first
            .p50()
            .zip(compare)
            .map(|(ours, theirs)| ours / theirs);
        let (cpu_client, cpu_others) = m.cpu.per_rpc();
        let _ = writeln!(
            s,
            "{bytes},{},{steady},{steady90},{steady99},{},{},{},{},{},{},{},{first},{first90},\
             {first99},{mw},{mw90},{mw99},{},{},{},{},{},{}",
            m.steady.len(),
            mbps(m.steady.p50()),
            cell(m.raw.p50(), 1e6),
            mbps(m.raw.p50()),
            cell(m.stream_bw, 1e-6),
            cell(m.setup.p50(), 1e6),
            cell(m.register.p50(), 1e6),
            cell(m.mrsp.p50(), 1e6),
            cell(compare, 1e6),
            cell(ratio, 1.0),
            cell(cpu_client, 1e6),
            cell(cpu_others, 1e6),
            cell(m.connect.p50(), 1e6),
            cell(m.stream_sized_bw, 1e-6),
        );
    }
    s
}

/// A table for people: p50/p99 of each measurement in µs, the ratios to the raw limit and
/// to the compared CSV; `others` says what the other side's CPU time counts.
pub(crate) fn table(rows: &[Measured], reference: Option<&Reference>, others: &str) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{:>10} {:>5} | {:>10} {:>10} {:>8} {:>8} {:>10} {:>6} | {:>10} {:>10} {:>9} {:>9} {:>10} | {:>10} {:>6}",
        "bytes",
        "n",
        "steady p50",
        "steady p99",
        "cpu cli",
        "cpu oth",
        "raw rtt",
        "ratio",
        "first p50",
        "first p99",
        "register",
        "mrsp",
        "middleware",
        "compared",
        "ratio"
    );
    let f = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{:.1}", v * 1e6));
    let r = |a: Option<f64>, b: Option<f64>| {
        a.zip(b)
            .map_or_else(|| "-".into(), |(a, b)| format!("{:.2}", a / b))
    };
    for m in rows {
        let steady = m.steady.percentiles();
        let first = m.first.percentiles();
        let compare = reference.and_then(|c| c.transfer.get(&m.size.bytes).copied());
        let (cpu_client, cpu_others) = m.cpu.per_rpc();
        let _ = writeln!(
            t,
            "{:>10} {:>5} | {:>10} {:>10} {:>8} {:>8} {:>10} {:>6} | {:>10} {:>10} {:>9} {:>9} {:>10} | {:>10} {:>6}",
            m.size.bytes,
            m.steady.len(),
            f(steady.map(|p| p.p50)),
            f(steady.map(|p| p.p99)),
            f(cpu_client),
            f(cpu_others),
            f(m.raw.p50()),
            r(m.steady.p50(), m.raw.p50()),
            f(first.map(|p| p.p50)),
            f(first.map(|p| p.p99)),
            f(m.register.p50()),
            f(m.mrsp.p50()),
            f(m.middleware.p50()),
            f(compare),
            r(m.first.p50(), compare),
        );
    }
    let _ = writeln!(
        t,
        "(µs; ratio = steady p50 / raw TCP round trip, and first RPC p50 / compared median;\n \
         cpu = CPU time per steady RPC of the client thread (cli) and of the other side (oth):\n \
         {others})"
    );
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::sizes::Size;

    /// Both stream limits land under their own headers, in MB/s.
    #[test]
    fn summary_has_both_stream_limits() {
        let mut m = Measured::new(Size {
            bytes: 2 << 20,
            reference: true,
        });
        m.steady.push(1e-3);
        m.stream_bw = Some(6e9);
        m.stream_sized_bw = Some(4.5e9);
        let csv = summary_csv(&[m], None, "");
        let mut lines = csv.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let row: Vec<&str> = lines.next().unwrap().split(',').collect();
        assert_eq!(header.len(), row.len());
        let col = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
        assert_eq!(col("raw_stream_MBps"), "6000.000");
        assert_eq!(col("raw_stream_sized_MBps"), "4500.000");
        // 2 · 2 MiB per 1 ms, within the histogram's precision.
        let rpc: f64 = col("steady_rpc_MBps").parse().unwrap();
        assert!((rpc / 4194.304 - 1.0).abs() < 1e-3, "{rpc}");
    }
}
