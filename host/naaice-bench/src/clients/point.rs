//! One measured point (N clients of one size) boiled down: aggregate rate and bandwidth,
//! latency percentiles, fairness, and CPU time and context switches per RPC on each side.

use crate::Error;
use crate::base::usage::Usage;
use crate::clients::process::Outcome;
use crate::clients::result::{ClientResult, histogram};

/// The figures of a point.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Point {
    /// Clients.
    pub clients: usize,
    /// RPCs completed by all clients.
    pub rpcs: u64,
    /// Aggregate RPCs per second: the sum of each client's rate.
    pub rate: f64,
    /// Aggregate bandwidth in bytes per second, both directions (2 · size · rate).
    pub bandwidth: f64,
    /// Median latency in seconds, over every RPC of every client.
    pub p50: Option<f64>,
    /// 99th percentile latency in seconds.
    pub p99: Option<f64>,
    /// The slowest client's rate over the mean rate (1 = fair; `None` for no client).
    pub fairness: Option<f64>,
    /// Per RPC on the client side: (CPU seconds, voluntary, involuntary switches).
    pub client: Option<(f64, f64, f64)>,
    /// The same on the serving side, if its process is known.
    pub server: Option<(f64, f64, f64)>,
}

impl Point {
    /// The figures of the clients of `size` in `outcome`; the usage per RPC counts every
    /// RPC of the point.
    pub(crate) fn of(outcome: &Outcome, size: u64) -> Result<Self, Error> {
        let mine: Vec<&ClientResult> = outcome.clients.iter().filter(|c| c.size == size).collect();
        let total: u64 = outcome.clients.iter().map(|c| c.rpcs).sum();
        let mut p = Self::of_clients(&mine, size)?;
        p.client = outcome.client_usage.per_rpc(total);
        p.server = outcome
            .server_usage
            .as_ref()
            .and_then(|u: &Usage| u.per_rpc(total));
        Ok(p)
    }

    /// Rates, latencies and fairness of some clients of `size`.
    pub(crate) fn of_clients(clients: &[&ClientResult], size: u64) -> Result<Self, Error> {
        let mut latency = histogram()?;
        for c in clients {
            latency.add(&c.latency)?;
        }
        let rates: Vec<f64> = clients.iter().map(|c| c.rate()).collect();
        let rate: f64 = rates.iter().sum();
        let mean = rate / rates.len().max(1) as f64;
        let slowest = rates.iter().copied().reduce(f64::min);
        let at = |q: f64| (!latency.is_empty()).then(|| latency.value_at_quantile(q) as f64 / 1e9);
        Ok(Self {
            clients: clients.len(),
            rpcs: clients.iter().map(|c| c.rpcs).sum(),
            rate,
            bandwidth: 2.0 * size as f64 * rate,
            p50: at(0.5),
            p99: at(0.99),
            fairness: slowest.filter(|_| mean > 0.0).map(|s| s / mean),
            client: None,
            server: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn client(size: u64, rpcs: u64, micros: u64) -> ClientResult {
        let mut latency = histogram().unwrap();
        latency.record_n(micros * 1000, rpcs).unwrap();
        ClientResult {
            size,
            rpcs,
            elapsed: Duration::from_secs(1),
            latency,
        }
    }

    /// Rates add up, the slowest client is compared with the mean, usage is per RPC of the
    /// whole point, and clients of another size are left out of the rates.
    #[test]
    fn aggregates_rates_fairness_and_usage() {
        let outcome = Outcome {
            clients: vec![
                client(64, 300, 10),
                client(64, 100, 30),
                client(1 << 24, 100, 500),
            ],
            client_usage: Usage {
                cpu: Duration::from_millis(10),
                voluntary: 1000,
                involuntary: 50,
            },
            server_usage: None,
        };
        let p = Point::of(&outcome, 64).unwrap();
        assert_eq!((p.clients, p.rpcs), (2, 400));
        assert!((p.rate - 400.0).abs() < 1e-9);
        assert!((p.bandwidth - 2.0 * 64.0 * 400.0).abs() < 1e-6);
        assert!((p.fairness.unwrap() - 0.5).abs() < 1e-9, "{p:?}");
        let p50 = p.p50.unwrap();
        assert!((p50 - 10e-6).abs() < 1e-7, "{p50}");
        assert!((p.p99.unwrap() - 30e-6).abs() < 1e-7, "{p:?}");
        let (cpu, vol, invol) = p.client.unwrap();
        assert!((cpu - 10e-3 / 500.0).abs() < 1e-12 && vol == 2.0 && invol == 0.1);
        assert!(p.server.is_none());
        let none = Point::of_clients(&[], 64).unwrap();
        assert_eq!((none.rpcs, none.p50, none.fairness), (0, None, None));
    }
}
