//! Which NAA a handle connects to when many processes share a pool of NAAs, and what happens
//! when that NAA is not there.
//!
//! **Policy.** The `NAA_SPEC` entries that match a request (function code and parameter count),
//! in `NAA_SPEC` order, are `m` slots. A process of rank `r` among `n` ([`Rank`]; `n` = 1 when
//! the launcher does not tell) gives its `j`-th concurrent handle the global handle number
//! `g = r + j·n` and prefers slot `g mod m`: the ranks' first handles are dealt out round-robin
//! (rank 0 → slot 0, rank 1 → slot 1, …), further handles of a process continue the deal
//! where all ranks' previous handles ended, so the load per NAA differs by at most one handle
//! when every rank opens the same number of handles. A process uses each entry for one handle
//! at a time (as in the C reference, spec §6.3): `j` is the first number whose slot this
//! process does not use yet. For a lone process (`n` = 1, `r` = 0) this is the reference's
//! "first free entry". The other free slots follow as failover candidates, starting from a
//! rank-dependent offset (`g div m`), so that the ranks of a dead NAA spread over the others
//! instead of piling onto its neighbour.
//!
//! **Connecting** ([`connect`]): the candidates are tried in that order; an entry that refuses
//! the connection, rejects it (e.g. an NAA at its connection limit answers "overloaded") or
//! does not answer in its share of the connect deadline is left for the next candidate at once.
//! When every candidate failed, the round is repeated after a backoff (50 ms doubling to 1 s,
//! stretched by up to 2× depending on the rank so that ranks do not retry in lockstep) until
//! the connect deadline (`NAAICE_CONNECT_TIMEOUT`, default 10 s): an NAA that is still
//! starting is waited for. An entry whose name does not resolve is not retried; an error that
//! every entry would give (no RDMA device, an invalid argument) ends the search at once. The
//! final error lists every entry tried, how often and why it failed.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::discovery::environment::Rank;
use crate::discovery::spec::{self, Attempts, NaaEntry, SpecError};
use crate::error::{Error, Result};
use crate::transport::{TransportError, TransportKind};

/// A set of NAA entries shared out to the handles of one process: which entries this process
/// uses right now, and the rank-aware order in which a new handle tries them (see the
/// module documentation for the policy). The process-wide pool is [`Pool::global`] (`NAA_SPEC`,
/// read once); a pool of its own stands for another process (e.g. in a simulation).
#[derive(Debug)]
pub struct Pool {
    entries: Vec<NaaEntry>,
    used: Mutex<Vec<bool>>,
}

impl Pool {
    /// A pool over `entries`, none in use.
    pub fn new(entries: Vec<NaaEntry>) -> Arc<Self> {
        let used = Mutex::new(vec![false; entries.len()]);
        Arc::new(Self { entries, used })
    }

    /// The process's pool from `NAA_SPEC`, read on first use (spec §6.3).
    pub fn global() -> Result<Arc<Self>, SpecError> {
        static POOL: OnceLock<Result<Arc<Pool>, SpecError>> = OnceLock::new();
        POOL.get_or_init(|| {
            let spec = std::env::var("NAA_SPEC").map_err(|_| SpecError::Missing)?;
            Ok(Self::new(spec::parse(&spec)?))
        })
        .clone()
    }

    /// The entries.
    pub fn entries(&self) -> &[NaaEntry] {
        &self.entries
    }

    fn used(&self) -> std::sync::MutexGuard<'_, Vec<bool>> {
        self.used.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The entries a new handle for `fncode` with `n_inputs` inputs may use, free ones only,
    /// in the order [`order`] gives for `rank`: the first is the preferred
    /// one, the rest are failover candidates.
    pub fn candidates(
        &self,
        fncode: u32,
        n_inputs: usize,
        rank: &Rank,
    ) -> Result<Vec<usize>, SpecError> {
        let same_code: Vec<usize> = (0..self.entries.len())
            .filter(|&i| u32::from(self.entries[i].fncode) == fncode)
            .collect();
        let Some(&first) = same_code.first() else {
            return Err(SpecError::NoMatch(fncode));
        };
        let matching: Vec<usize> = same_code
            .into_iter()
            .filter(|&i| self.entries[i].param_count as usize == n_inputs)
            .collect();
        if matching.is_empty() {
            return Err(SpecError::ParamCount {
                fncode,
                expected: self.entries[first].param_count,
                got: n_inputs,
            });
        }
        let used = self.used();
        let free: Vec<bool> = matching.iter().map(|&i| !used[i]).collect();
        let order = order(&free, rank);
        if order.is_empty() {
            return Err(self.held(fncode, &matching));
        }
        Ok(order.into_iter().map(|k| matching[k]).collect())
    }

    /// The error for a request whose matching entries (`matching`, indices) are all held by
    /// this process.
    fn held(&self, fncode: u32, matching: &[usize]) -> SpecError {
        SpecError::Held {
            fncode,
            held: matching
                .iter()
                .map(|&i| {
                    let e = &self.entries[i];
                    if e.local {
                        format!("entry {} ({})", i + 1, e.host)
                    } else {
                        format!("entry {} ({}:{})", i + 1, e.host, e.port)
                    }
                })
                .collect(),
        }
    }

    /// [`Pool::held`] for `fncode` and `n_inputs`: every entry that matches.
    fn held_for(&self, fncode: u32, n_inputs: usize) -> SpecError {
        let matching: Vec<usize> = (0..self.entries.len())
            .filter(|&i| {
                u32::from(self.entries[i].fncode) == fncode
                    && self.entries[i].param_count as usize == n_inputs
            })
            .collect();
        self.held(fncode, &matching)
    }

    /// Reserves entry `index` if it is free.
    pub fn reserve(self: &Arc<Self>, index: usize) -> Option<Reservation> {
        let mut used = self.used();
        match used.get_mut(index) {
            Some(u) if !*u => *u = true,
            _ => return None,
        }
        Some(Reservation {
            pool: Arc::clone(self),
            index,
        })
    }
}

/// A reserved entry of a [`Pool`]; returned to the pool when dropped.
#[derive(Debug)]
pub struct Reservation {
    pool: Arc<Pool>,
    index: usize,
}

impl Reservation {
    /// The entry.
    pub fn entry(&self) -> &NaaEntry {
        &self.pool.entries[self.index]
    }

    /// The entry's position in its pool (0-based, in `NAA_SPEC` order).
    pub fn index(&self) -> usize {
        self.index
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(u) = self.pool.used().get_mut(self.index) {
            *u = false;
        }
    }
}

/// Reserves the entry a new handle for `fncode` with `n_inputs` inputs prefers in the
/// process's pool, for the process's rank (without connecting; [`connect`]
/// also fails over).
pub fn reserve(fncode: u32, n_inputs: usize) -> Result<Reservation, SpecError> {
    let pool = Pool::global()?;
    let rank = Rank::from_env()?;
    pool.candidates(fncode, n_inputs, &rank)?
        .into_iter()
        .find_map(|i| pool.reserve(i))
        .ok_or_else(|| pool.held_for(fncode, n_inputs))
}

/// The socket address of `entry`; for a local entry the in-process NAA's (the loopback one
/// for `local:…:soft`), which starts it if it is not running.
pub fn address(entry: &NaaEntry) -> Result<SocketAddr, SpecError> {
    if entry.local {
        let start = match entry.transport {
            Some(TransportKind::Soft) => crate::swnaa::local::loopback_address,
            _ => crate::swnaa::local::address,
        };
        return start().map_err(|e| SpecError::Resolve {
            what: "the in-process NAA",
            addr: entry.host.clone(),
            reason: e.to_string(),
        });
    }
    entry.resolve()
}

/// What [`connect`] chose: the attempt's result, the entry's address and transport, and its
/// reservation (hold it as long as the connection lives).
#[derive(Debug)]
pub struct Chosen<C> {
    /// What the successful attempt returned.
    pub connection: C,
    /// The address it connected to.
    pub address: SocketAddr,
    /// The transport the entry names (`None`: the program's).
    pub transport: Option<TransportKind>,
    /// The entry, reserved for this connection.
    pub reservation: Reservation,
}

/// First backoff between rounds of connection attempts.
const BACKOFF_START: Duration = Duration::from_millis(50);
/// Longest backoff between rounds.
const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Shortest time one connection attempt is given (when the deadline leaves it).
const MIN_ATTEMPT: Duration = Duration::from_secs(1);

/// The order in which a handle of `rank` tries `m = free.len()` matching slots, free ones
/// only (`free[k]`: slot `k` is not used by this process): preferred slot first, then the
/// failover candidates (see the module documentation).
pub fn order(free: &[bool], rank: &Rank) -> Vec<usize> {
    let m = free.len() as u64;
    if m == 0 {
        return Vec::new();
    }
    let n = u64::from(rank.size.unwrap_or(1).max(1));
    let r = u64::from(rank.rank);
    let g = (0..m)
        .map(|j| r + j * n)
        .find(|g| free[(g % m) as usize])
        .unwrap_or(r);
    let p = g % m;
    let spread = if m > 1 { (g / m) % (m - 1) } else { 0 };
    let others = (0..m.saturating_sub(1)).map(|i| (p + 1 + (spread + i) % (m - 1)) % m);
    std::iter::once(p)
        .chain(others)
        .map(|k| k as usize)
        .filter(|&k| free[k])
        .collect()
}

/// How a failed attempt counts.
#[derive(Debug, PartialEq, Eq)]
enum Failure {
    /// Try the next entry, and this one again in the next round.
    Transient,
    /// Try the next entry, but not this one again.
    Permanent,
    /// Every entry would fail alike: stop.
    Fatal,
}

fn classify(e: &Error) -> Failure {
    match e {
        Error::Transport(TransportError::Unavailable(_))
        | Error::InvalidArgument(_)
        | Error::Region(_) => Failure::Fatal,
        Error::Spec(SpecError::Resolve { .. }) => Failure::Permanent,
        _ => Failure::Transient,
    }
}

/// Connects a new handle for `fncode` with `n_inputs` inputs to an entry of `pool`, choosing
/// and failing over as the module documentation describes. `attempt(address, transport,
/// until)` makes one connection attempt over the transport the entry names (`None`: the
/// program's) that must end by `until`. Returns what it chose.
pub fn connect<C>(
    pool: &Arc<Pool>,
    fncode: u32,
    n_inputs: usize,
    rank: &Rank,
    timeout: Duration,
    mut attempt: impl FnMut(SocketAddr, Option<TransportKind>, Instant) -> Result<C>,
) -> Result<Chosen<C>> {
    let start = Instant::now();
    let deadline = start + timeout;
    let mut backoff = BACKOFF_START;
    let mut tried: Tried = Vec::new();
    loop {
        let candidates: Vec<usize> = pool
            .candidates(fncode, n_inputs, rank)?
            .into_iter()
            .filter(|i| {
                !tried
                    .iter()
                    .any(|(t, _, f)| t == i && *f == Failure::Permanent)
            })
            .collect();
        let per_attempt = (timeout / candidates.len().max(1) as u32).max(MIN_ATTEMPT);
        for index in candidates {
            let now = Instant::now();
            if now >= deadline && !tried.is_empty() {
                break;
            }
            let Some(reservation) = pool.reserve(index) else {
                continue; // another handle of this process took it meanwhile
            };
            let entry = reservation.entry();
            let until = deadline.min(now + per_attempt);
            let result = address(entry)
                .map_err(Error::from)
                .and_then(|addr| Ok((attempt(addr, entry.transport, until)?, addr)));
            let e = match result {
                Ok((connection, address)) => {
                    if !tried.is_empty() {
                        tracing::info!(
                            rank = rank.rank,
                            entry = %format_args!("{}:{}", entry.host, entry.port),
                            after = ?start.elapsed(),
                            "connected after failover or retry"
                        );
                    }
                    return Ok(Chosen {
                        connection,
                        address,
                        transport: entry.transport,
                        reservation,
                    });
                }
                Err(e) => e,
            };
            let failure = classify(&e);
            tracing::debug!(rank = rank.rank, index, error = %e, ?failure, "NAA attempt failed");
            if failure == Failure::Fatal {
                return Err(e);
            }
            note(&mut tried, index, entry, &e, failure);
        }
        let now = Instant::now();
        if tried.is_empty() {
            // Every candidate was taken by other handles of this process meanwhile.
            return Err(pool.held_for(fncode, n_inputs).into());
        }
        if let Some(e) = give_up(&mut tried, fncode, start, timeout, now >= deadline) {
            return Err(e);
        }
        // Stretch by 1 to 2x depending on the rank, so ranks do not retry in lockstep.
        let stretch = backoff * (rank.rank % 8) / 8;
        std::thread::sleep((backoff + stretch).min(deadline - now));
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// The failed attempts of one [`connect`] so far: entry index, the attempts, the last
/// failure's kind.
type Tried = Vec<(usize, Attempts, Failure)>;

/// Notes a failed attempt on entry `index`.
fn note(tried: &mut Tried, index: usize, entry: &NaaEntry, e: &Error, failure: Failure) {
    match tried.iter_mut().find(|(t, _, _)| *t == index) {
        Some((_, a, f)) => {
            a.count += 1;
            a.last_error = e.to_string();
            *f = failure;
        }
        None => tried.push((
            index,
            Attempts {
                entry: format!("{}:{} [entry {}]", entry.host, entry.port, index + 1),
                count: 1,
                last_error: e.to_string(),
            },
            failure,
        )),
    }
}

/// After a round of attempts (at least one made): the error to return if there is no point
/// in another round (nothing can recover, or the deadline `timeout` is `over`), naming every
/// entry tried.
fn give_up(
    tried: &mut Tried,
    fncode: u32,
    start: Instant,
    timeout: Duration,
    over: bool,
) -> Option<Error> {
    let retryable = tried.iter().any(|(_, _, f)| *f == Failure::Transient);
    if !over && retryable {
        return None;
    }
    Some(
        SpecError::Unreachable {
            fncode,
            // Whole milliseconds: the error is read by people.
            waited: Duration::from_millis(start.elapsed().as_millis() as u64),
            timeout,
            tried: std::mem::take(tried)
                .into_iter()
                .map(|(_, a, _)| a)
                .collect(),
        }
        .into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::spec::NaaEntry;

    fn rank(rank: u32, size: u32) -> Rank {
        Rank {
            rank,
            size: Some(size),
            local: None,
            source: "test",
        }
    }

    #[test]
    fn lone_process_takes_the_first_free_entry() {
        let single = Rank::SINGLE;
        assert_eq!(order(&[true, true, true], &single), [0, 1, 2]);
        assert_eq!(order(&[false, true, true], &single), [1, 2]);
        assert_eq!(order(&[false, false, true], &single), [2]);
        assert_eq!(order(&[true, false, true], &single), [0, 2]);
        assert!(order(&[false, false], &single).is_empty());
        assert!(order(&[], &single).is_empty());
    }

    #[test]
    fn ranks_are_dealt_round_robin_and_failover_spreads() {
        let free = vec![true; 16];
        let mut load = [0u32; 16];
        for r in 0..256 {
            let o = order(&free, &rank(r, 256));
            assert_eq!(o.len(), 16);
            assert_eq!(o[0], (r % 16) as usize);
            load[o[0]] += 1;
        }
        assert!(load.iter().all(|&l| l == 16), "{load:?}");
        // The 16 ranks of NAA 3 fail over to 15 different NAAs.
        let mut targets: Vec<usize> = (0..16)
            .map(|q| order(&free, &rank(3 + 16 * q, 256))[1])
            .collect();
        targets.sort_unstable();
        targets.dedup();
        assert_eq!(targets.len(), 15);
        assert!(!targets.contains(&3));
        // A process's second handle continues the deal: 4 ranks x 2 handles over 8 slots.
        let mut seen = Vec::new();
        for r in 0..4 {
            let mut free = vec![true; 8];
            for _ in 0..2 {
                let p = order(&free, &rank(r, 4))[0];
                free[p] = false;
                seen.push(p);
            }
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..8).collect::<Vec<_>>());
    }

    fn pool(hosts: &[(&str, u16)]) -> Arc<Pool> {
        Pool::new(
            hosts
                .iter()
                .map(|&(host, port)| NaaEntry {
                    host: host.into(),
                    port,
                    fncode: 1,
                    param_count: 1,
                    local: false,
                    transport: None,
                })
                .collect(),
        )
    }

    /// [`connect`] for function code 1 with one input, as a single process.
    fn connect_one<C>(
        p: &Arc<Pool>,
        timeout: Duration,
        attempt: impl FnMut(SocketAddr, Option<TransportKind>, Instant) -> Result<C>,
    ) -> Result<Chosen<C>> {
        connect(p, 1, 1, &Rank::SINGLE, timeout, attempt)
    }

    #[test]
    fn fails_over_and_names_every_entry_tried() {
        let p = pool(&[("127.0.0.1", 1), ("127.0.0.1", 2), ("127.0.0.1", 3)]);
        let mut seen = Vec::new();
        let chosen = connect(&p, 1, 1, &rank(1, 3), Duration::from_secs(5), |a, _, _| {
            seen.push(a.port());
            match a.port() {
                2 => Err(TransportError::Rejected("NAA overloaded".into()).into()),
                1 => Err(Error::Timeout(Duration::from_secs(1))),
                port => Ok(port),
            }
        })
        .unwrap();
        let r = chosen.reservation;
        assert_eq!(
            (chosen.connection, chosen.address.port(), r.index()),
            (3, 3, 2)
        );
        assert_eq!(seen, [2, 3]);
        // Entry 3 is in use by this process now: the next handle tries 1 and 2 until the
        // deadline, then reports both.
        let err = connect(
            &p,
            1,
            1,
            &rank(1, 3),
            Duration::from_millis(300),
            |a, _, _| {
                Err::<(), _>(match a.port() {
                    2 => TransportError::Rejected("NAA overloaded".into()).into(),
                    _ => Error::Timeout(Duration::from_secs(1)),
                })
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("127.0.0.1:1 [entry 1]")
                && err.contains("127.0.0.1:2 [entry 2]")
                && err.contains("overloaded")
                && err.contains("timed out"),
            "{err}"
        );
        drop(r);
    }

    /// A request whose only entry this process holds says so, naming the entry; one for a
    /// function code no entry has says that.
    #[test]
    fn a_held_entry_is_named() {
        let p = pool(&[("10.0.0.5", 12345)]);
        let held = p.reserve(0).unwrap();
        assert_eq!(
            p.candidates(1, 1, &Rank::SINGLE).unwrap_err(),
            SpecError::Held {
                fncode: 1,
                held: vec!["entry 1 (10.0.0.5:12345)".into()]
            }
        );
        let err = connect_one(&p, Duration::from_secs(1), |_, _, _| Ok(()))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("this process already holds entry 1 (10.0.0.5:12345) with another handle"),
            "{err}"
        );
        drop(held);
        let err = p.candidates(9, 1, &Rank::SINGLE).unwrap_err();
        assert_eq!(err, SpecError::NoMatch(9));
        assert!(
            err.to_string().contains("no entry has that function code"),
            "{err}"
        );
    }

    #[test]
    fn waits_for_a_starting_naa_and_stops_on_fatal_errors() {
        let p = pool(&[("127.0.0.1", 1)]);
        let mut calls = 0;
        let calls_needed = connect_one(&p, Duration::from_secs(5), |_, _, _| {
            calls += 1;
            if calls < 3 {
                Err(Error::Closed)
            } else {
                Ok(calls)
            }
        })
        .unwrap()
        .connection;
        assert_eq!(calls_needed, 3);
        let p = pool(&[("127.0.0.1", 1), ("127.0.0.1", 2)]);
        let mut calls = 0;
        let err = connect_one(&p, Duration::from_secs(5), |_, _, _| {
            calls += 1;
            Err::<(), _>(TransportError::Unavailable("no RDMA device".into()).into())
        })
        .unwrap_err();
        assert_eq!(calls, 1);
        assert!(err.to_string().contains("no RDMA device"));
        let p = pool(&[("no-such-host.invalid", 1)]);
        let started = Instant::now();
        let err = connect_one(&p, Duration::from_secs(30), |_, _, _| Ok(()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot resolve NAA address"), "{err}");
        // It gives up at once, and says against which deadline.
        assert!(
            err.contains("of the connect deadline of 30s (NAAICE_CONNECT_TIMEOUT)")
                && !err.contains("0ns"),
            "{err}"
        );
        assert!(started.elapsed() < Duration::from_secs(30));
    }
}
