//! Isolation under load (`--isolation`): N − 1 clients of a small size alone, then beside
//! one client of a big size (16 MiB by default). The small clients' p99 should not rise by
//! more than twice the big client's own transfer time.

use crate::Error;
use crate::base::usage::Process;
use crate::cli::Args;
use crate::clients::point::Point;
use crate::clients::process::{groups, run_point};

/// Most a big client may raise the small clients' p99, in its own transfer times.
pub(crate) const MAX_RISE: f64 = 2.0;

/// One isolation measurement at N clients.
#[derive(Debug, Clone)]
pub(crate) struct Isolation {
    /// `threads` or `processes`.
    pub mode: &'static str,
    /// `rust` or `c`.
    pub api: &'static str,
    /// N: the small clients and the big one.
    pub clients: usize,
    /// Bytes of the small clients' RPCs.
    pub small_size: u64,
    /// Bytes of the big client's RPCs.
    pub big_size: u64,
    /// The N − 1 small clients alone.
    pub alone: Point,
    /// The small clients beside the big one.
    pub with_big: Point,
    /// The big client.
    pub big: Point,
}

impl Isolation {
    /// How much the small clients' p99 rose, in big-client transfer times (p50).
    pub(crate) fn rise_over_big(&self) -> Option<f64> {
        let (alone, with, big) = (self.alone.p99?, self.with_big.p99?, self.big.p50?);
        (big > 0.0).then(|| (with - alone).max(0.0) / big)
    }

    /// A line for people.
    pub(crate) fn line(&self) -> String {
        let us = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{:.1}", v * 1e6));
        let rise = self.rise_over_big();
        format!(
            "isolation, {} {}: {} small clients of {} B, p99 {} µs alone, {} µs beside a client of {} B \
             (its transfer {} µs p50, {} RPCs): rise {} transfer times (target <= {MAX_RISE}: {})",
            self.mode,
            self.api,
            self.clients - 1,
            self.small_size,
            us(self.alone.p99),
            us(self.with_big.p99),
            self.big_size,
            us(self.big.p50),
            self.big.rpcs,
            rise.map_or_else(|| "-".into(), |r| format!("{r:.2}")),
            match rise {
                Some(r) if r <= MAX_RISE => "met",
                Some(_) => "MISSED",
                None => "unknown",
            }
        )
    }
}

/// Measures isolation at `n` clients (n >= 2) against `target`.
pub(crate) fn measure(
    args: &Args,
    n: usize,
    target: std::net::SocketAddr,
    server: Option<&Process>,
) -> Result<Isolation, Error> {
    let small = args.size[0];
    let big = args.big_size;
    let kind = crate::base::kind::WorkerKind::of(args.api);
    let processes = args.client_processes;
    let alone = run_point(
        args,
        &groups(processes, kind, target, &vec![small; n - 1]),
        server,
    )?;
    let mut sizes = vec![small; n - 1];
    sizes.push(big);
    let with = run_point(args, &groups(processes, kind, target, &sizes), server)?;
    Ok(Isolation {
        mode: super::mode_name(processes),
        api: super::api_name(args.api),
        clients: n,
        small_size: small,
        big_size: big,
        alone: Point::of(&alone, small)?,
        with_big: Point::of(&with, small)?,
        big: Point::of(&with, big)?,
    })
}
