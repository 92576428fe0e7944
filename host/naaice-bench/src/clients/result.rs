//! What one client measured, and how a client process reports it to the benchmark on its
//! standard output: a line per client (`client SIZE RPCS ELAPSED_NS HISTOGRAM`), a line with
//! the process's usage (`usage CPU_NS VOLUNTARY INVOLUNTARY`), then `end`.

use std::fmt::Write as _;
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::Error;
use crate::base::usage::Usage;

/// Significant digits of the latency histograms (nanoseconds).
const DIGITS: u8 = 3;

/// An empty latency histogram (nanoseconds, 3 significant digits, growing as needed).
pub(crate) fn histogram() -> Result<Histogram<u64>, Error> {
    Ok(Histogram::new(DIGITS)?)
}

/// The steady RPCs of one client during a measurement.
#[derive(Debug, Clone)]
pub(crate) struct ClientResult {
    /// Bytes each way per RPC.
    pub size: u64,
    /// RPCs completed.
    pub rpcs: u64,
    /// From the start of the measurement to the end of its last RPC.
    pub elapsed: Duration,
    /// Latency of each RPC in nanoseconds.
    pub latency: Histogram<u64>,
}

impl ClientResult {
    /// No RPC yet, of `size` bytes each way.
    pub(crate) fn empty(size: u64) -> Result<Self, Error> {
        Ok(Self {
            size,
            rpcs: 0,
            elapsed: Duration::ZERO,
            latency: histogram()?,
        })
    }

    /// Counts one RPC that took `latency` and ended `elapsed` after the start of the
    /// measurement (latencies are recorded in nanoseconds, at least 1).
    pub(crate) fn count(&mut self, latency: Duration, elapsed: Duration) -> Result<(), Error> {
        let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.latency.record(ns.max(1))?;
        self.rpcs += 1;
        self.elapsed = elapsed;
        Ok(())
    }

    /// RPCs per second of this client; 0 without RPCs.
    pub(crate) fn rate(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if self.rpcs == 0 || secs <= 0.0 {
            0.0
        } else {
            self.rpcs as f64 / secs
        }
    }

    /// The report line.
    pub(crate) fn line(&self) -> String {
        let mut hist = String::new();
        for v in self.latency.iter_recorded() {
            let sep = if hist.is_empty() { "" } else { "," };
            let _ = write!(
                hist,
                "{sep}{}:{}",
                v.value_iterated_to(),
                v.count_at_value()
            );
        }
        if hist.is_empty() {
            hist.push('-');
        }
        format!(
            "client {} {} {} {hist}",
            self.size,
            self.rpcs,
            self.elapsed.as_nanos()
        )
    }

    /// Parses a report line.
    pub(crate) fn parse(line: &str) -> Result<Self, Error> {
        let bad = || format!("a client process reported {line:?}");
        let mut f = line.split(' ');
        if f.next() != Some("client") {
            return Err(bad().into());
        }
        let mut number =
            || -> Result<u64, Error> { Ok(f.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?) };
        let (size, rpcs, nanos) = (number()?, number()?, number()?);
        let mut latency = histogram()?;
        match f.next() {
            Some("-") => {}
            Some(hist) => {
                for pair in hist.split(',') {
                    let (v, c) = pair.split_once(':').ok_or_else(bad)?;
                    let v: u64 = v.parse().map_err(|_| bad())?;
                    let c: u64 = c.parse().map_err(|_| bad())?;
                    latency.record_n(v, c).map_err(|_| bad())?;
                }
            }
            None => return Err(bad().into()),
        }
        if f.next().is_some() {
            return Err(bad().into());
        }
        Ok(Self {
            size,
            rpcs,
            elapsed: Duration::from_nanos(nanos),
            latency,
        })
    }
}

/// The usage line of a client process.
pub(crate) fn usage_line(u: &Usage) -> String {
    format!(
        "usage {} {} {}",
        u.cpu.as_nanos(),
        u.voluntary,
        u.involuntary
    )
}

/// Parses a usage line.
pub(crate) fn parse_usage(line: &str) -> Result<Usage, Error> {
    let bad = || format!("a client process reported {line:?}");
    let f: Vec<&str> = line.split(' ').collect();
    let [tag, cpu, voluntary, involuntary] = f[..] else {
        return Err(bad().into());
    };
    let n = |v: &str| v.parse::<u64>().map_err(|_| bad());
    if tag != "usage" {
        return Err(bad().into());
    }
    Ok(Usage {
        cpu: Duration::from_nanos(n(cpu)?),
        voluntary: n(voluntary)?,
        involuntary: n(involuntary)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_line_round_trips() {
        let mut latency = histogram().unwrap();
        for ns in [20_000u64, 21_000, 21_000, 900_000, 5_000_000_000] {
            latency.record(ns).unwrap();
        }
        let r = ClientResult {
            size: 64,
            rpcs: 5,
            elapsed: Duration::from_millis(1500),
            latency,
        };
        let back = ClientResult::parse(&r.line()).unwrap();
        assert_eq!((back.size, back.rpcs, back.elapsed), (64, 5, r.elapsed));
        assert_eq!(back.latency.len(), 5);
        for q in [0.5, 0.99] {
            let (a, b) = (
                r.latency.value_at_quantile(q),
                back.latency.value_at_quantile(q),
            );
            assert!(a.abs_diff(b) <= a / 500, "{q}: {a} vs {b}");
        }
        assert!((back.rate() - 5.0 / 1.5).abs() < 1e-9);
        let empty = ClientResult {
            rpcs: 0,
            latency: histogram().unwrap(),
            ..r
        };
        let back = ClientResult::parse(&empty.line()).unwrap();
        assert_eq!((back.rpcs, back.latency.len(), back.rate()), (0, 0, 0.0));
    }

    #[test]
    fn bad_lines_are_errors() {
        for line in [
            "",
            "client",
            "client 1 2",
            "client 1 2 3",
            "client x 2 3 -",
            "client 1 2 3 5:x",
            "client 1 2 3 5",
            "client 1 2 3 - extra",
            "clients 1 2 3 -",
        ] {
            assert!(ClientResult::parse(line).is_err(), "{line:?}");
        }
        let u = Usage {
            cpu: Duration::from_micros(1500),
            voluntary: 7,
            involuntary: 2,
        };
        assert_eq!(parse_usage(&usage_line(&u)).unwrap(), u);
        assert!(parse_usage("usage 1 2").is_err());
        assert!(parse_usage("usage 1 2 x").is_err());
    }
}
