//! NAA discovery from the environment (spec §6.3): `NAA_SPEC` and `NAA_LOCAL_IP`.
//!
//! `NAA_SPEC` is a comma-separated list of `address:port:fn_code:param_count` entries, e.g.
//! `10.0.0.5::3:1,10.0.0.6:12346:7:2` (an empty port means 12345). Differences from the C
//! reference, all in the direction of clearer errors: a malformed entry is an error naming
//! the entry and field (the C code skips it silently); ports must be 1–65535 and function
//! codes 1–127 (the C code wraps them); spaces around fields are ignored; an IPv6 literal may
//! be written in brackets (`[fe80::1]:12345:1:2`); empty entries (a trailing comma) are
//! skipped. Entries are handed out per process and returned when the handle is dropped.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Mutex, OnceLock};

use crate::transport::DEFAULT_PORT;

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
}

impl NaaEntry {
    /// Resolves the NAA's socket address (first result, like `getaddrinfo`).
    pub fn resolve(&self) -> Result<SocketAddr, SpecError> {
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
        let fields: Vec<&str> = rest.split(':').map(str::trim).collect();
        let [port, fncode, count] = fields[..] else {
            return Err(bad(format!(
                "expected address:port:fn_code:param_count, found {} fields",
                fields.len() + 1
            )));
        };
        if host.is_empty() {
            return Err(bad("empty address".into()));
        }
        let port = match port {
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

/// The process-wide table of `NAA_SPEC` entries, read once (spec §6.3).
struct Table {
    entries: Vec<NaaEntry>,
    used: Vec<bool>,
}

fn table() -> &'static Result<Mutex<Table>, SpecError> {
    static TABLE: OnceLock<Result<Mutex<Table>, SpecError>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let spec = std::env::var("NAA_SPEC").map_err(|_| SpecError::Missing)?;
        let entries = parse(&spec)?;
        let used = vec![false; entries.len()];
        Ok(Mutex::new(Table { entries, used }))
    })
}

/// A reserved `NAA_SPEC` entry; returned to the pool when dropped.
#[derive(Debug)]
pub struct Reservation {
    index: usize,
    entry: NaaEntry,
}

impl Reservation {
    /// The entry.
    pub fn entry(&self) -> &NaaEntry {
        &self.entry
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Ok(table) = table() {
            let mut t = table.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(u) = t.used.get_mut(self.index) {
                *u = false;
            }
        }
    }
}

/// Reserves the first free entry with `fncode` whose `param_count` equals `n_inputs`.
pub fn reserve(fncode: u32, n_inputs: usize) -> Result<Reservation, SpecError> {
    let table = table().as_ref().map_err(Clone::clone)?;
    let mut t = table.lock().unwrap_or_else(|p| p.into_inner());
    let Table { entries, used } = &mut *t;
    let index = entries
        .iter()
        .zip(used.iter())
        .position(|(e, &u)| !u && u32::from(e.fncode) == fncode)
        .ok_or(SpecError::NoMatch(fncode))?;
    let entry = entries[index].clone();
    if entry.param_count as usize != n_inputs {
        return Err(SpecError::ParamCount {
            fncode,
            expected: entry.param_count,
            got: n_inputs,
        });
    }
    used[index] = true;
    Ok(Reservation { index, entry })
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
    fn malformed_entries_are_clear_errors() {
        let cases = [
            ("a:1:1", "found 3 fields"),
            ("a:1:1:1:1", "found 5 fields"),
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
