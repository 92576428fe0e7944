//! The transports by name: what `NAAICE_TRANSPORT`, `--transport` and a `NAA_SPEC` entry's
//! fifth field say.

use std::fmt;
use std::str::FromStr;

/// One concrete transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransportKind {
    /// The software transport: RC semantics over TCP, no RDMA hardware needed.
    Soft,
    /// The verbs transport: RDMA (RoCEv2, InfiniBand, Soft-RoCE) through rdma-core.
    Verbs,
}

/// What a program asked for: one transport, or `auto` (verbs where an RDMA device can reach
/// the NAA, else the software transport; a software NAA serves both).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum TransportChoice {
    /// Decide per connection (the default).
    #[default]
    Auto,
    /// Always this transport.
    Only(TransportKind),
}

/// Names accepted for the software transport.
const SOFT_NAMES: [&str; 3] = ["soft", "software", "tcp"];
/// Names accepted for the verbs transport.
const VERBS_NAMES: [&str; 2] = ["verbs", "rdma"];

/// Why a transport name could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseTransportError {
    /// Not the name of a transport.
    #[error("{0:?} is not a transport (use \"auto\", \"soft\" or \"verbs\")")]
    Unknown(String),
    /// The verbs transport, in a build without it.
    #[error(
        "the verbs transport is not part of this build (build naaice with the cargo feature \
         `verbs`, or use the software transport: \"soft\" or \"auto\")"
    )]
    VerbsNotBuilt,
}

impl TransportKind {
    /// The transport's canonical name (`"soft"`, `"verbs"`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Soft => "soft",
            Self::Verbs => "verbs",
        }
    }

    /// Whether this build has the transport.
    pub const fn is_built(self) -> bool {
        match self {
            Self::Soft => true,
            Self::Verbs => cfg!(feature = "verbs"),
        }
    }
}

impl fmt::Display for TransportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TransportKind {
    type Err = ParseTransportError;

    /// `soft` (also `software`, `tcp`) or `verbs` (also `rdma`), any case; a name this build
    /// lacks is [`ParseTransportError::VerbsNotBuilt`].
    fn from_str(s: &str) -> Result<Self, ParseTransportError> {
        let name = s.trim().to_ascii_lowercase();
        let kind = if SOFT_NAMES.contains(&name.as_str()) {
            Self::Soft
        } else if VERBS_NAMES.contains(&name.as_str()) {
            Self::Verbs
        } else {
            return Err(ParseTransportError::Unknown(s.to_owned()));
        };
        if kind.is_built() {
            Ok(kind)
        } else {
            Err(ParseTransportError::VerbsNotBuilt)
        }
    }
}

impl TransportChoice {
    /// The name, as [`TransportChoice::from_str`] accepts it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Only(k) => k.name(),
        }
    }
}

impl fmt::Display for TransportChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TransportChoice {
    type Err = ParseTransportError;

    /// `auto` (or empty), or a [`TransportKind`] name.
    fn from_str(s: &str) -> Result<Self, ParseTransportError> {
        let name = s.trim();
        if name.is_empty() || name.eq_ignore_ascii_case("auto") {
            return Ok(Self::Auto);
        }
        name.parse().map(Self::Only)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for choice in [
            TransportChoice::Auto,
            TransportChoice::Only(TransportKind::Soft),
        ] {
            assert_eq!(choice.name().parse::<TransportChoice>(), Ok(choice));
        }
        assert_eq!("".parse::<TransportChoice>(), Ok(TransportChoice::Auto));
        assert_eq!(
            " AUTO ".parse::<TransportChoice>(),
            Ok(TransportChoice::Auto)
        );
        assert_eq!(" Tcp ".parse::<TransportKind>(), Ok(TransportKind::Soft));
        let err = "pigeon".parse::<TransportChoice>().unwrap_err();
        assert!(err.to_string().contains("\"auto\""), "{err}");
    }

    #[test]
    fn verbs_parses_only_when_built() {
        let parsed = "RDMA".parse::<TransportKind>();
        if cfg!(feature = "verbs") {
            assert_eq!(parsed, Ok(TransportKind::Verbs));
        } else {
            assert_eq!(parsed, Err(ParseTransportError::VerbsNotBuilt));
        }
    }
}
