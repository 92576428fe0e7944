//! NAA discovery from the environment (spec §6.3): `NAA_SPEC` and `NAA_LOCAL_IP`.
//!
//! `NAA_SPEC` is a comma-separated list of `address:port:fn_code:param_count` entries, e.g.
//! `10.0.0.5::3:1,10.0.0.6:12346:7:2` (an empty port means 12345). An optional fifth field
//! names the entry's transport, for NAAs that `auto` cannot decide
//! (`10.0.0.5:12345:3:1:verbs`, `...:soft`; empty or `auto`: the program's transport). An entry
//! `local:fn_code:param_count` (no port) is the in-process NAA of local mode
//! ([`crate::swnaa::local`]). Differences from the C
//! reference, all in the direction of clearer errors: a malformed entry is an error naming
//! the entry and field (the C code skips it silently); ports must be 1–65535 and function
//! codes 1–127 (the C code wraps them); spaces around fields are ignored; an IPv6 literal may
//! be written in brackets (`[fe80::1]:12345:1:2`); empty entries (a trailing comma) are
//! skipped. This module is the syntax; handing the entries out to handles, per process and
//! by rank, is [`crate::discovery::select`]'s.

use std::net::{SocketAddr, ToSocketAddrs};

use crate::discovery::environment::VariableError;
use crate::transport::{DEFAULT_PORT, TransportChoice, TransportKind};

/// The address field of a local entry (`local:FN_CODE:PARAM_COUNT`).
pub const LOCAL_HOST: &str = "local";

/// Errors of NAA selection. `Debug` prints the message, as `Display` does (see
/// [`crate::Error`]).
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
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
    /// No entry has this function code.
    #[error("no free NAA_SPEC entry with function code {0}: no entry has that function code")]
    NoMatch(u32),
    /// Every entry with this function code (and parameter count) is held by another handle of
    /// this process: a process uses each entry for one handle at a time.
    #[error(
        "no free NAA_SPEC entry with function code {fncode}: this process already holds {} \
         with another handle (a process uses each entry for one handle at a time: finalize \
         that handle first, or list the NAA once more in NAA_SPEC)",
        held_list(.held)
    )]
    Held {
        /// Function code.
        fncode: u32,
        /// The matching entries, each as `entry N (host:port)`, all in use by this process.
        held: Vec<String>,
    },
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
    #[error(transparent)]
    Variable(#[from] VariableError),
    /// No matching entry accepted a connection before the connect deadline, or none that
    /// failed can recover (e.g. no address resolves).
    #[error(
        "no NAA for function code {fncode} accepted a connection {}; tried {}",
        waited_text(*.waited, *.timeout),
        tried_list(.tried)
    )]
    Unreachable {
        /// Function code.
        fncode: u32,
        /// Time spent trying.
        waited: std::time::Duration,
        /// The connect deadline (`NAAICE_CONNECT_TIMEOUT` or the program's).
        timeout: std::time::Duration,
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

impl std::fmt::Debug for SpecError {
    /// The message ([`SpecError`]'s `Display`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
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

/// The held entries of [`SpecError::Held`]: `entry 1 (a:1)` or `entries 1 (a:1) and 2 (b:1)`.
fn held_list(held: &[String]) -> String {
    match held {
        [] => "every matching entry".to_owned(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// A duration for people, to the millisecond (`10s`, `1h`, `250ms`, `0s`).
fn human(d: std::time::Duration) -> String {
    let ms = std::time::Duration::from_millis(d.as_millis().try_into().unwrap_or(u64::MAX));
    if ms.is_zero() {
        return "0s".into();
    }
    humantime::format_duration(ms).to_string()
}

/// How long [`SpecError::Unreachable`] tried, against the connect deadline.
fn waited_text(waited: std::time::Duration, timeout: std::time::Duration) -> String {
    if waited >= timeout {
        format!(
            "within the connect deadline of {} (NAAICE_CONNECT_TIMEOUT)",
            human(timeout)
        )
    } else {
        format!(
            "(gave up after {} of the connect deadline of {} (NAAICE_CONNECT_TIMEOUT): no \
             entry that failed can succeed on a retry)",
            human(waited),
            human(timeout)
        )
    }
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
    /// ([`crate::swnaa::local`]); `host` is `local`, `port` 0. `local:fn_code:param_count:soft`
    /// (`transport` [`TransportKind::Soft`]) reaches it over the software transport on the
    /// loopback interface.
    pub local: bool,
    /// The transport the entry names (fifth field); `None`: the program's transport.
    pub transport: Option<TransportKind>,
}

impl NaaEntry {
    /// The entry's socket address, resolved like `getaddrinfo` (first result). A local
    /// entry has none of its own: [`crate::discovery::select`] starts the in-process NAA for it.
    pub fn resolve(&self) -> Result<SocketAddr, SpecError> {
        if self.local {
            return Err(SpecError::Resolve {
                what: "NAA address",
                addr: self.host.clone(),
                reason:
                    "a local entry names the in-process NAA, which has no address until it starts"
                        .into(),
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
        // `local:FN:N`, or `local:FN:N:soft` (a transport name, not a number, last).
        let local = host == LOCAL_HOST
            && (fields.len() == 2
                || (fields.len() == 3 && fields[2].parse::<TransportChoice>().is_ok()));
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
        if local && transport == Some(TransportKind::Verbs) {
            return Err(bad(
                "a local entry is reached in process, or over the software transport \
                 (local:fn_code:param_count:soft); verbs has no loopback"
                    .into(),
            ));
        }
        if !local {
            check_host(host, entry.starts_with('[')).map_err(bad)?;
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

/// Checks that `host` can be an address: an IPv6 literal (in brackets), an IPv4 address, or a
/// host name (labels of letters, digits, `-` and `_` separated by dots, at most 253
/// characters); a dotted number such as `256.1.1.1` or `10.0.0` is an IPv4 address that does
/// not parse, not a name to hand to the resolver.
fn check_host(host: &str, bracketed: bool) -> Result<(), String> {
    use std::net::{Ipv4Addr, Ipv6Addr};
    if bracketed {
        // A zone (`fe80::1%eth0`) is the resolver's to check.
        let addr = host.split('%').next().unwrap_or(host);
        return addr
            .parse::<Ipv6Addr>()
            .map(drop)
            .map_err(|_| format!("address [{host}] is not an IPv6 address"));
    }
    let numeric = host
        .split('.')
        .all(|l| l.bytes().all(|b| b.is_ascii_digit()));
    if numeric {
        return host.parse::<Ipv4Addr>().map(drop).map_err(|_| {
            format!(
                "address {host:?} is not a valid IPv4 address (four numbers 0-255, e.g. 10.0.0.5)"
            )
        });
    }
    let label_ok = |l: &str| {
        (1..=63).contains(&l.len())
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let name = host.strip_suffix('.').unwrap_or(host);
    if host.len() <= 253 && name.split('.').all(label_ok) {
        Ok(())
    } else {
        Err(format!(
            "address {host:?} is neither an IP address nor a host name (letters, digits, '-' \
             and '.'; an IPv6 address goes in brackets)"
        ))
    }
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
        // A transport name last: the loopback NAA over the software transport.
        assert_eq!(
            parse("local:7:2:soft").unwrap(),
            vec![NaaEntry {
                port: 0,
                local: true,
                transport: Some(TransportKind::Soft),
                ..entry("local", 0, 7, 2)
            }]
        );
        for (spec, needle) in [
            ("local:7:2:verbs", "verbs has no loopback"),
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
            (
                "256.1.1.1:1:1:1",
                "\"256.1.1.1\" is not a valid IPv4 address",
            ),
            ("10.0.0:1:1:1", "\"10.0.0\" is not a valid IPv4 address"),
            (
                "no such host:1:1:1",
                "neither an IP address nor a host name",
            ),
            ("-a.example:1:1:1", "neither an IP address nor a host name"),
            ("[10.0.0.1]:1:1:1", "is not an IPv6 address"),
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
    fn addresses_that_may_resolve_parse() {
        for host in [
            "10.0.0.5",
            "node-1",
            "node_1.cluster.example.",
            "fpga01.site.example",
        ] {
            let entries = parse(&format!("{host}:1:1:1")).unwrap();
            assert_eq!(entries[0].host, host);
        }
        assert_eq!(
            parse("[fe80::1%eth0]:1:1:1").unwrap()[0].host,
            "fe80::1%eth0"
        );
    }

    /// The connect error names the deadline and its variable, never "within 0ns".
    #[test]
    fn unreachable_names_the_connect_deadline() {
        let tried = vec![Attempts {
            entry: "a:1 [entry 1]".into(),
            count: 1,
            last_error: "refused".into(),
        }];
        let early = SpecError::Unreachable {
            fncode: 1,
            waited: std::time::Duration::ZERO,
            timeout: std::time::Duration::from_secs(10),
            tried: tried.clone(),
        }
        .to_string();
        assert!(
            early.contains(
                "gave up after 0s of the connect deadline of 10s (NAAICE_CONNECT_TIMEOUT)"
            ) && early.ends_with("tried a:1 [entry 1] (1x, last: refused)"),
            "{early}"
        );
        let over = SpecError::Unreachable {
            fncode: 1,
            waited: std::time::Duration::from_millis(10_003),
            timeout: std::time::Duration::from_secs(10),
            tried,
        }
        .to_string();
        assert!(
            over.contains(
                "accepted a connection within the connect deadline of 10s (NAAICE_CONNECT_TIMEOUT)"
            ),
            "{over}"
        );
        let held = SpecError::Held {
            fncode: 3,
            held: vec!["entry 1 (10.0.0.5:12345)".into()],
        }
        .to_string();
        assert!(
            held.starts_with(
                "no free NAA_SPEC entry with function code 3: this process already holds \
                 entry 1 (10.0.0.5:12345) with another handle"
            ),
            "{held}"
        );
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
