//! Value parsers the binaries' options share (clap's `value_parser`): a bad value is a
//! command-line error (exit status 2) worded alike in every binary.

use std::time::Duration;

use naaice::transport::{AnyTransport, ParseTransportError};
use naaice::units::parse_duration;

/// A count of at least 1.
pub fn at_least_one(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("not a count ({e})")),
    }
}

/// A duration (`500ms`, `10s`; a bare number is seconds).
pub fn seconds(s: &str) -> Result<Duration, String> {
    parse_duration(s, Duration::from_secs(1))
}

/// A duration longer than zero (`500ms`; a bare number is seconds).
pub fn positive_seconds(s: &str) -> Result<Duration, String> {
    let d = seconds(s)?;
    if d.is_zero() {
        return Err("must be longer than zero".to_owned());
    }
    Ok(d)
}

/// A duration whose bare number is microseconds.
pub fn micros(s: &str) -> Result<Duration, String> {
    parse_duration(s, Duration::from_micros(1))
}

/// A transport name (`auto`, `soft`, `verbs`); where `binary` (its package name) was built
/// without the verbs transport, the message says how to rebuild it with it.
pub fn transport(binary: &str, s: &str) -> Result<AnyTransport, String> {
    s.parse().map_err(|e| match e {
        ParseTransportError::VerbsNotBuilt => format!(
            "this {binary} was built without the verbs transport: rebuild it with `cargo build \
             --release -p {binary} --features verbs` (or host/capi/install.sh on a machine with \
             the rdma-core development files)"
        ),
        ParseTransportError::Unknown(_) => e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_durations() {
        assert_eq!(at_least_one(" 3 "), Ok(3));
        assert_eq!(at_least_one("0"), Err("must be at least 1".to_owned()));
        assert!(at_least_one("x").unwrap_err().starts_with("not a count"));
        assert_eq!(seconds("2"), Ok(Duration::from_secs(2)));
        assert_eq!(seconds("0"), Ok(Duration::ZERO));
        assert_eq!(positive_seconds("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(
            positive_seconds("0"),
            Err("must be longer than zero".to_owned())
        );
        assert_eq!(micros("50"), Ok(Duration::from_micros(50)));
        assert!(seconds("soon").is_err());
        assert_eq!(positive_seconds("3s"), Ok(Duration::from_secs(3)));
        assert_eq!(positive_seconds(" 1.5 "), Ok(Duration::from_millis(1500)));
        assert_eq!(positive_seconds("1m"), Ok(Duration::from_secs(60)));
        for bad in ["", "0", "-1s", "abc", "inf", "0ms"] {
            assert!(positive_seconds(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn transports() {
        assert!(transport("naaice-swnaa", "soft").is_ok());
        assert!(transport("naaice-swnaa", "auto").is_ok());
        let e = transport("naaice-swnaa", "carrier-pigeon").unwrap_err();
        assert!(e.contains("carrier-pigeon"), "{e}");
    }
}
