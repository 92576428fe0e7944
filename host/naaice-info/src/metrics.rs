//! `naaice-info --metrics ADDR:PORT`: reads a running software NAA's metrics endpoint
//! (`naaice-swnaa --metrics`) and sums it up for people: RPCs served and their errors, the
//! server-side RPC time's p50 and p99, connections, MRSPs, memory and workers.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use prometheus_parse::{HistogramCount, Sample, Scrape, Value};

/// Fetches `http://ADDR/metrics` within `timeout` and returns the summary, or why not.
pub(crate) fn summary(addr: SocketAddr, timeout: Duration) -> Result<String, String> {
    let url = format!("http://{addr}{}", naaice::swnaa::METRICS_PATH);
    let agent = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .build(),
    );
    let body = agent
        .get(&url)
        .call()
        .and_then(|mut r| r.body_mut().read_to_string())
        .map_err(|e| format!("cannot read {url}: {e}"))?;
    let scrape = Scrape::parse(body.lines().map(|l| Ok(l.to_owned())))
        .map_err(|e| format!("{url}: not the Prometheus text format: {e}"))?;
    if !scrape
        .samples
        .iter()
        .any(|s| s.metric.starts_with("naaice_naa_"))
    {
        return Err(format!(
            "{url}: no naaice_naa_ metrics there (not a naaice-swnaa?)"
        ));
    }
    Ok(render(&url, &scrape))
}

/// The value of a counter or gauge sample.
fn scalar(s: &Sample) -> f64 {
    match &s.value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
        _ => 0.0,
    }
}

/// The sum of the samples of `metric` whose label `key` (if given) is `value`.
fn total(scrape: &Scrape, metric: &str, filter: impl Fn(&Sample) -> bool) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == metric && filter(s))
        .map(scalar)
        .sum()
}

/// The quantile `q` of histogram `metric` over all its label sets, interpolated within the
/// bucket as Prometheus's `histogram_quantile` does; `None` without observations.
fn quantile(scrape: &Scrape, metric: &str, q: f64) -> Option<f64> {
    let mut buckets: Vec<(f64, f64)> = Vec::new();
    for s in scrape.samples.iter().filter(|s| s.metric == metric) {
        if let Value::Histogram(hs) = &s.value {
            for HistogramCount { less_than, count } in hs {
                match buckets.iter_mut().find(|(le, _)| le == less_than) {
                    Some((_, c)) => *c += count,
                    None => buckets.push((*less_than, *count)),
                }
            }
        }
    }
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let count = buckets.last()?.1;
    if count <= 0.0 {
        return None;
    }
    let rank = q * count;
    let (mut low, mut below) = (0.0, 0.0);
    for &(le, c) in &buckets {
        if c >= rank {
            if le.is_infinite() {
                return Some(low);
            }
            let within = c - below;
            let frac = if within > 0.0 {
                (rank - below) / within
            } else {
                1.0
            };
            return Some(low + (le - low) * frac);
        }
        (low, below) = (le, c);
    }
    Some(low)
}

/// Seconds for people.
fn time(s: f64) -> String {
    if s < 1e-3 {
        format!("{:.1} µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

fn render(url: &str, s: &Scrape) -> String {
    let label = |x: &Sample, k: &str| x.labels.get(k).map(str::to_owned).unwrap_or_default();
    let served = total(s, "naaice_naa_rpcs_total", |_| true);
    let errors = total(s, "naaice_naa_rpcs_total", |x| label(x, "rc") != "0");
    let mut text = format!("NAA metrics at {url}\n");
    let _ = writeln!(
        text,
        "  {served} RPCs served, {errors} answered with an error code"
    );
    let mut by_kernel: Vec<(String, f64)> = Vec::new();
    for x in s
        .samples
        .iter()
        .filter(|x| x.metric == "naaice_naa_rpcs_total")
    {
        let code = label(x, "fncode");
        match by_kernel.iter_mut().find(|(c, _)| *c == code) {
            Some((_, n)) => *n += scalar(x),
            None => by_kernel.push((code, scalar(x))),
        }
    }
    let kernels: Vec<String> = by_kernel
        .iter()
        .filter(|(_, n)| *n > 0.0)
        .map(|(c, n)| format!("{c}: {n}"))
        .collect();
    if !kernels.is_empty() {
        let _ = writeln!(text, "  by function code: {}", kernels.join(", "));
    }
    match (
        quantile(s, "naaice_naa_rpc_seconds", 0.5),
        quantile(s, "naaice_naa_rpc_seconds", 0.99),
    ) {
        (Some(p50), Some(p99)) => {
            let _ = writeln!(
                text,
                "  RPC time at the NAA: p50 {}, p99 {} (from the histogram buckets)",
                time(p50),
                time(p99)
            );
        }
        _ => text.push_str("  RPC time at the NAA: no RPC yet\n"),
    }
    let rejected = |reason: &str| {
        total(s, "naaice_naa_connections_rejected_total", |x| {
            label(x, "reason") == reason
        })
    };
    let _ = writeln!(
        text,
        "  connections: {} open, {} accepted, rejected: limit {}, allow {}, memory budget {}, \
         evicted idle {}",
        total(s, "naaice_naa_connections_open", |_| true),
        total(s, "naaice_naa_connections_accepted_total", |_| true),
        rejected("limit"),
        rejected("allow"),
        rejected("memory_budget"),
        rejected("evicted_idle"),
    );
    let mrsp = |r: &str| total(s, "naaice_naa_mrsp_total", |x| label(x, "result") == r);
    let _ = writeln!(text, "  MRSP: {} ok, {} failed", mrsp("ok"), mrsp("failed"));
    let bytes = |m: &str| naaice::units::size(total(s, m, |_| true) as u64).to_string();
    let _ = writeln!(
        text,
        "  memory budget: {} used, {} free; workers: {} busy of {}",
        bytes("naaice_naa_memory_budget_used_bytes"),
        bytes("naaice_naa_memory_budget_free_bytes"),
        total(s, "naaice_naa_workers_busy", |_| true),
        total(s, "naaice_naa_workers", |_| true),
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_within_their_bucket() {
        let text = "# TYPE t histogram\n\
            t_bucket{le=\"1\"} 0\nt_bucket{le=\"2\"} 50\nt_bucket{le=\"4\"} 100\n\
            t_bucket{le=\"+Inf\"} 100\nt_sum 250\nt_count 100\n";
        let s = Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap();
        assert_eq!(quantile(&s, "t", 0.5), Some(2.0));
        assert_eq!(quantile(&s, "t", 0.75), Some(3.0));
        assert_eq!(quantile(&s, "none", 0.5), None);
    }
}
