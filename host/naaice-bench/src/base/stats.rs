//! Latency samples and their percentiles (HdrHistogram).

use hdrhistogram::Histogram;

/// Latency samples of one kind for one size, in seconds.
#[derive(Debug, Default, Clone)]
pub(crate) struct Samples(Vec<f64>);

/// p50/p90/p99 of some samples, in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
}

impl Samples {
    /// Adds one sample (seconds).
    pub(crate) fn push(&mut self, seconds: f64) {
        self.0.push(seconds);
    }

    /// Number of samples.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// The samples in the order they were taken.
    pub(crate) fn as_slice(&self) -> &[f64] {
        &self.0
    }

    /// p50/p90/p99 at nanosecond resolution, 3 significant digits; `None` without samples.
    pub(crate) fn percentiles(&self) -> Option<Percentiles> {
        let mut h = Histogram::<u64>::new(3).ok()?;
        for &s in &self.0 {
            let ns = (s * 1e9).round().max(1.0) as u64;
            h.record(ns).ok()?;
        }
        if h.is_empty() {
            return None;
        }
        let at = |q: f64| h.value_at_quantile(q) as f64 / 1e9;
        Some(Percentiles {
            p50: at(0.5),
            p90: at(0.9),
            p99: at(0.99),
        })
    }

    /// The median (p50), if any.
    pub(crate) fn p50(&self) -> Option<f64> {
        self.percentiles().map(|p| p.p50)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_ramp() {
        let mut s = Samples::default();
        for i in 1..=1000 {
            s.push(f64::from(i) * 1e-6);
        }
        let p = s.percentiles().expect("samples");
        assert!((p.p50 - 500e-6).abs() < 1e-6, "{p:?}");
        assert!((p.p90 - 900e-6).abs() < 1e-6, "{p:?}");
        assert!((p.p99 - 990e-6).abs() < 1e-6, "{p:?}");
        assert_eq!(Samples::default().percentiles(), None);
    }
}
