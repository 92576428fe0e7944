//! NAA discovery from the environment (spec §6.3): `NAA_SPEC` and `NAA_LOCAL_IP`.
//!
//! `NAA_SPEC` is a comma-separated list of `address:port:fn_code:param_count` entries, e.g.
//! `10.0.0.5::3:1,10.0.0.6:12346:7:2` (an empty port means 12345). An optional fifth field
//! names the entry's transport, for NAAs that `auto` cannot decide
//! (`10.0.0.5:12345:3:1:verbs`, `...:soft`; empty or `auto`: the program's transport). An entry
//! `local:fn_code:param_count` (no port) is the in-process NAA of local mode
//! ([`crate::local`]). Differences from the C
//! reference, all in the direction of clearer errors: a malformed entry is an error naming
//! the entry and field (the C code skips it silently); ports must be 1–65535 and function
//! codes 1–127 (the C code wraps them); spaces around fields are ignored; an IPv6 literal may
//! be written in brackets (`[fe80::1]:12345:1:2`); empty entries (a trailing comma) are
//! skipped. Entries are handed out per process and returned when the handle is dropped; which
//! entry a handle prefers depends on the process's rank ([`crate::select`]).

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex, OnceLock};

use crate::transport::{DEFAULT_PORT, TransportChoice, TransportKind};

/// Errors of NAA selection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// `NAA_SPEC` is not set (or empty).
    #[error("NAA_SPEC is not set")]
    Missing,
    /// An entry does not have the form `address:port:fn_code:param_count`.
    #[error("NAA_SPEC entry {index} ({entry:?}): {reason}")]
    Malformed {
        /// 1-based entry number.
        index: usize,
        /// The entry text.
        entry: String,
        /// What is wrong.
        reason: String,
    },
    /// No unused entry has this function code.
    #[error("no free NAA_SPEC entry with function code {0}")]
    NoMatch(u32),
    /// The entry's parameter count differs from the number of inputs.
    #[error("NAA_SPEC entry for function code {fncode} expects {expected} inputs, got {got}")]
    ParamCount {
        /// Function code.
        fncode: u32,
        /// `param_count` of the entry.
        expected: u32,
        /// Inputs passed.
        got: usize,
    },
    /// An environment variable is malformed.
    #[error("{name}={value:?}: {reason}")]
    Variable {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What is wrong.
        reason: String,
    },
    /// No matching entry accepted a connection before the connect deadline.
    #[error("no NAA for function code {fncode} accepted a connection within {waited:?}; tried {}", tried_list(.tried))]
    Unreachable {
        /// Function code.
        fncode: u32,
        /// Time spent trying.
        waited: std::time::Duration,
        /// Every entry tried: `host:port`, the number of attempts and the last failure.
        tried: Vec<Attempts>,
    },
    /// An address could not be resolved.
    #[error("cannot resolve {what} {addr:?}: {reason}")]
    Resolve {
        /// "NAA address" or "NAA_LOCAL_IP".
        what: &'static str,
        /// The address text.
        addr: String,
        /// Resolver message.
        reason: String,
    },
}

/// The attempts on one entry during a failed selection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempts {
    /// The entry, as `host:port` (its position in `NAA_SPEC` in brackets).
    pub entry: String,
    /// How often it was tried.
    pub count: u32,
    /// Why the last attempt failed.
    pub last_error: String,
}

fn tried_list(tried: &[Attempts]) -> String {
    tried
        .iter()
        .map(|a| format!("{} ({}x, last: {})", a.entry, a.count, a.last_error))
        .collect::<Vec<_>>()
        .join("; ")
}

/// One `NAA_SPEC` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NaaEntry {
    /// Host name or IP address of the NAA.
    pub host: String,
    /// Port (12345 when the field is empty).
    pub port: u16,
    /// Function code this NAA serves.
    pub fncode: u8,
    /// Number of input parameters.
    pub param_count: u32,
    /// True for a `local:fn_code:param_count` entry: the in-process NAA of local mode
    /// ([`crate::local`]); `host` is `local`, `port` 0.
    pub local: bool,
    /// The transport the entry names (fifth field); `None`: the program's transport.
    pub transport: Option<TransportKind>,
}

impl NaaEntry {
    /// Resolves the NAA's socket address (first result, like `getaddrinfo`); for a local
    /// entry, the in-process NAA's, which starts it if it is not running.
    pub fn resolve(&self) -> Result<SocketAddr, SpecError> {
        if self.local {
            return crate::local::address().map_err(|e| SpecError::Resolve {
                what: "the in-process NAA",
                addr: self.host.clone(),
                reason: e.to_string(),
            });
        }
        resolve("NAA address", &self.host, self.port)
    }
}

/// Parses a `NAA_SPEC` value.
pub fn parse(spec: &str) -> Result<Vec<NaaEntry>, SpecError> {
    let mut entries = Vec::new();
    for (i, raw) in spec.split(',').enumerate() {
        let entry = raw.trim();
        if entry.is_empty() {
            continue;
        }
        let bad = |reason: String| SpecError::Malformed {
            index: i + 1,
            entry: entry.to_owned(),
            reason,
        };
        let (host, rest) = split_host(entry).map_err(|r| bad(r.into()))?;
        let mut fields: Vec<&str> = rest.split(':').map(str::trim).collect();
        let local = host == crate::local::LOCAL_HOST && fields.len() == 2;
        if local {
            fields.insert(0, "0");
        }
        let (port, fncode, count, transport) = match fields[..] {
            [port, fncode, count] => (port, fncode, count, ""),
            [port, fncode, count, transport] => (port, fncode, count, transport),
            _ => {
                return Err(bad(format!(
                    "expected address:port:fn_code:param_count[:transport] (or \
                     local:fn_code:param_count), found {} fields",
                    fields.len() + 1
                )));
            }
        };
        let transport = match transport.parse::<TransportChoice>() {
            Ok(TransportChoice::Auto) => None,
            Ok(TransportChoice::Only(kind)) => Some(kind),
            Err(e) => return Err(bad(format!("transport: {e}"))),
        };
        if host.is_empty() {
            return Err(bad("empty address".into()));
        }
        let port = match port {
            _ if local => 0,
            "" => DEFAULT_PORT,
            p => p
                .parse::<u16>()
                .ok()
                .filter(|&p| p != 0)
                .ok_or_else(|| bad(format!("port {p:?} is not a number in 1..=65535")))?,
        };
        let fncode = fncode
            .parse::<u8>()
            .ok()
            .filter(|f| (1..=127).contains(f))
            .ok_or_else(|| {
                bad(format!(
                    "function code {fncode:?} is not a number in 1..=127"
                ))
            })?;
        let param_count = count
            .parse::<u32>()
            .map_err(|_| bad(format!("param_count {count:?} is not a number")))?;
        entries.push(NaaEntry {
            host: host.to_owned(),
            port,
            fncode,
            param_count,
            local,
            transport,
        });
    }
    if entries.is_empty() {
        return Err(SpecError::Missing);
    }
    Ok(entries)
}

/// Splits `host:rest`, accepting `[v6]:rest`.
fn split_host(entry: &str) -> Result<(&str, &str), &'static str> {
    if let Some(bracketed) = entry.strip_prefix('[') {
        let (host, rest) = bracketed.split_once(']').ok_or("unclosed '[' in address")?;
        let rest = rest.strip_prefix(':').ok_or("expected ':' after ']'")?;
        return Ok((host, rest));
    }
    entry
        .split_once(':')
        .map(|(h, r)| (h.trim(), r))
        .ok_or("expected address:port:fn_code:param_count")
}

fn resolve(what: &'static str, host: &str, port: u16) -> Result<SocketAddr, SpecError> {
    let err = |reason: String| SpecError::Resolve {
        what,
        addr: host.to_owned(),
        reason,
    };
    (host, port)
        .to_socket_addrs()
        .map_err(|e| err(e.to_string()))?
        .next()
        .ok_or_else(|| err("no address found".into()))
}

/// Reads `NAA_LOCAL_IP`: the local source address, if set and non-empty.
pub fn local_ip_from_env() -> Result<Option<SocketAddr>, SpecError> {
    match std::env::var("NAA_LOCAL_IP") {
        Ok(v) if !v.trim().is_empty() => {
            let host = v.trim().trim_start_matches('[').trim_end_matches(']');
            resolve("NAA_LOCAL_IP", host, 0).map(Some)
        }
        _ => Ok(None),
    }
}

/// A set of NAA entries shared out to the handles of one process: which entries this process
/// uses right now, and the rank-aware order in which a new handle tries them (see
/// [`crate::select`] for the policy). The process-wide pool is [`Pool::global`] (`NAA_SPEC`,
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
            Ok(Self::new(parse(&spec)?))
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
    /// in the order [`crate::select::order`] gives for `rank`: the first is the preferred
    /// one, the rest are failover candidates.
    pub fn candidates(
        &self,
        fncode: u32,
        n_inputs: usize,
        rank: &crate::environment::Rank,
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
        let order = crate::select::order(&free, rank);
        if order.is_empty() {
            return Err(SpecError::NoMatch(fncode));
        }
        Ok(order.into_iter().map(|k| matching[k]).collect())
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
/// process's pool, for the process's rank (without connecting; [`crate::select::connect`]
/// also fails over).
pub fn reserve(fncode: u32, n_inputs: usize) -> Result<Reservation, SpecError> {
    let pool = Pool::global()?;
    let rank = crate::environment::Rank::from_env()?;
    pool.candidates(fncode, n_inputs, &rank)?
        .into_iter()
        .find_map(|i| pool.reserve(i))
        .ok_or(SpecError::NoMatch(fncode))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(host: &str, port: u16, fncode: u8, n: u32) -> NaaEntry {
        NaaEntry {
            host: host.into(),
            port,
            fncode,
            param_count: n,
            local: false,
            transport: None,
        }
    }

    #[test]
    fn parses_spec_examples() {
        assert_eq!(
            parse("10.3.10.42:12345:1:4").unwrap(),
            vec![entry("10.3.10.42", 12345, 1, 4)]
        );
        assert_eq!(
            parse("10.0.0.5::3:1,10.0.0.6:12346:7:2").unwrap(),
            vec![
                entry("10.0.0.5", 12345, 3, 1),
                entry("10.0.0.6", 12346, 7, 2)
            ]
        );
        assert_eq!(
            parse(" host.example : 99 : 5 : 0 ,").unwrap(),
            vec![entry("host.example", 99, 5, 0)]
        );
        assert_eq!(parse("[::1]:7:1:1").unwrap(), vec![entry("::1", 7, 1, 1)]);
    }

    #[test]
    fn an_entry_may_name_its_transport() {
        let soft = NaaEntry {
            transport: Some(TransportKind::Soft),
            ..entry("10.0.0.5", 12345, 3, 1)
        };
        assert_eq!(
            parse("10.0.0.5::3:1:soft, 10.0.0.6:7:3:1:auto, 10.0.0.7:7:3:1:").unwrap(),
            vec![soft, entry("10.0.0.6", 7, 3, 1), entry("10.0.0.7", 7, 3, 1)]
        );
        let verbs = parse("[::1]:7:1:1: RDMA ");
        if cfg!(feature = "verbs") {
            assert_eq!(verbs.unwrap()[0].transport, Some(TransportKind::Verbs));
        } else {
            let err = verbs.unwrap_err().to_string();
            assert!(
                err.contains("transport") && err.contains("`verbs`"),
                "{err}"
            );
        }
        let err = parse("a:1:1:1:pigeon").unwrap_err().to_string();
        assert!(
            err.contains("transport") && err.contains("\"pigeon\""),
            "{err}"
        );
    }

    #[test]
    fn local_entries() {
        let local = NaaEntry {
            port: 0,
            local: true,
            ..entry("local", 0, 7, 2)
        };
        assert_eq!(
            parse("local:7:2, 10.0.0.5::3:1").unwrap(),
            vec![local, entry("10.0.0.5", 12345, 3, 1)]
        );
        // With a port field, "local" is a host name like any other.
        assert_eq!(
            parse("local:99:7:2").unwrap(),
            vec![entry("local", 99, 7, 2)]
        );
        for (spec, needle) in [
            ("local:0:2", "function code \"0\""),
            ("local:128:2", "function code \"128\""),
            ("local:1:x", "param_count \"x\""),
            ("local:1", "found 2 fields"),
        ] {
            let err = parse(spec).unwrap_err().to_string();
            assert!(err.contains(needle), "{spec}: {err}");
        }
    }

    #[test]
    fn malformed_entries_are_clear_errors() {
        let cases = [
            ("a:1:1", "found 3 fields"),
            ("a:1:1:1:soft:1", "found 6 fields"),
            ("a:abc:1:1", "port \"abc\""),
            ("a:70000:1:1", "port \"70000\""),
            ("a:0:1:1", "port \"0\""),
            ("a:1:0x10:1", "function code \"0x10\""),
            ("a:1:0:1", "function code \"0\""),
            ("a:1:128:1", "function code \"128\""),
            ("a:1:1:-1", "param_count \"-1\""),
            (":1:1:1", "empty address"),
            ("[::1:1:1:1", "unclosed"),
            ("noseparator", "expected address"),
        ];
        for (spec, needle) in cases {
            let err = parse(spec).unwrap_err().to_string();
            assert!(err.contains(needle), "{spec}: {err}");
            assert!(err.contains("entry 1"), "{spec}: {err}");
        }
        let err = parse("a:1:1:1,b:x:1:1").unwrap_err().to_string();
        assert!(
            err.contains("entry 2") && err.contains("\"b:x:1:1\""),
            "{err}"
        );
        assert_eq!(parse(""), Err(SpecError::Missing));
        assert_eq!(parse(" , ,"), Err(SpecError::Missing));
    }

    #[test]
    fn resolves_numeric_addresses() {
        assert_eq!(
            entry("127.0.0.1", 5, 1, 1).resolve().unwrap(),
            "127.0.0.1:5".parse().unwrap()
        );
        assert!(matches!(
            entry("no such host.invalid", 5, 1, 1).resolve(),
            Err(SpecError::Resolve { .. })
        ));
    }
}
