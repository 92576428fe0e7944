//! Which transport a handle or a software NAA uses, chosen at run time by `NAAICE_TRANSPORT`,
//! and the per-transport AP2 handle.
//!
//! Adding a transport (the verbs one) is one [`Backend`] variant, one arm in [`with_naa!`],
//! one arm in [`Backend::create`] and one in [`crate::swnaa`]'s `start` (each marked
//! "transport:").

use naaice::core::Phase;
use naaice::naa::NaaOptions;
use naaice::transport::soft::{SoftEndpoint, SoftTransport};
use naaice::{Naa, Param, Status};

use crate::error::Failure;

/// Environment variable that selects the transport.
pub const TRANSPORT_VAR: &str = "NAAICE_TRANSPORT";
pub use naaice::environment::{DEFAULT_RPC_TIMEOUT, RPC_TIMEOUT_VAR};

/// The transports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportKind {
    /// RDMA over verbs / rdma_cm (RoCEv2): `NAAICE_TRANSPORT=verbs`, the default.
    Verbs,
    /// The software transport (RC semantics over TCP): `NAAICE_TRANSPORT=soft`.
    Soft,
}

impl TransportKind {
    /// Parses a `NAAICE_TRANSPORT` value; empty means the default (verbs).
    pub fn parse(value: &str) -> Result<Self, String> {
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "verbs" | "rdma" => Ok(Self::Verbs),
            "soft" | "software" | "tcp" => Ok(Self::Soft),
            other => Err(format!(
                "{TRANSPORT_VAR}={other:?} is not a transport (use \"verbs\" or \"soft\")"
            )),
        }
    }

    /// The transport selected by `NAAICE_TRANSPORT` (verbs when unset).
    pub fn from_env() -> Result<Self, String> {
        match std::env::var(TRANSPORT_VAR) {
            Ok(v) => Self::parse(&v),
            Err(std::env::VarError::NotPresent) => Ok(Self::Verbs),
            Err(std::env::VarError::NotUnicode(_)) => {
                Err(format!("{TRANSPORT_VAR} is not valid UTF-8"))
            }
        }
    }
}

/// The error for a transport that this build does not contain.
#[cfg_attr(feature = "verbs", allow(dead_code))]
pub(crate) fn not_built(kind: TransportKind) -> String {
    format!(
        "the {kind:?} transport is not part of this build of libnaaice_ap2; \
         set {TRANSPORT_VAR}=soft for the software transport, or rebuild with the transport enabled (cargo feature `verbs`)"
    )
}

/// An AP2 handle on one of the transports.
pub(crate) enum Backend {
    /// On the software transport.
    Soft(Box<Naa<SoftEndpoint>>),
    /// Over the verbs transport (RoCEv2 / InfiniBand through libibverbs and librdmacm).
    #[cfg(feature = "verbs")]
    Verbs(Box<Naa<naaice::transport::verbs::VerbsEndpoint>>),
}

/// Runs `$body` with `$naa` bound to the handle of whichever transport `$backend` uses.
macro_rules! with_naa {
    ($backend:expr, $naa:ident => $body:expr) => {
        match $backend {
            Backend::Soft($naa) => $body,
            #[cfg(feature = "verbs")]
            Backend::Verbs($naa) => $body,
        }
    };
}

impl Backend {
    /// `naa_create` on the transport `kind`: NAA from `NAA_SPEC`, connect, MRSP.
    pub(crate) fn create(
        kind: TransportKind,
        fncode: u32,
        inputs: Vec<Param>,
        outputs: Vec<Param>,
    ) -> Result<Self, Failure> {
        // The same variables, parsed by the same code, as `Naa::create` in Rust.
        let options = NaaOptions::from_env().map_err(|e| Failure::config(e.to_string()))?;
        match kind {
            TransportKind::Soft => {
                Naa::create_with(&SoftTransport::default(), fncode, inputs, outputs, &options)
                    .map(|naa| Self::Soft(Box::new(naa)))
                    .map_err(Failure::from)
            }
            #[cfg(feature = "verbs")]
            TransportKind::Verbs => Naa::create_with(
                &naaice::transport::verbs::VerbsTransport::default(),
                fncode,
                inputs,
                outputs,
                &options,
            )
            .map(|naa| Self::Verbs(Box::new(naa)))
            .map_err(Failure::from),
            #[cfg(not(feature = "verbs"))]
            TransportKind::Verbs => Err(Failure::config(not_built(kind))),
        }
    }

    /// `naa_invoke`.
    pub(crate) fn invoke(&mut self) -> naaice::Result<()> {
        with_naa!(self, naa => naa.invoke())
    }

    /// `naa_test`.
    pub(crate) fn test(&mut self) -> naaice::Result<Option<Status>> {
        with_naa!(self, naa => naa.test())
    }

    /// `naa_wait`.
    pub(crate) fn wait(&mut self) -> naaice::Result<Status> {
        with_naa!(self, naa => naa.wait())
    }

    /// The connection's phase.
    pub(crate) fn state(&self) -> Phase {
        with_naa!(self, naa => naa.state())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_names() {
        assert_eq!(TransportKind::parse(""), Ok(TransportKind::Verbs));
        assert_eq!(TransportKind::parse("verbs"), Ok(TransportKind::Verbs));
        assert_eq!(TransportKind::parse(" Soft "), Ok(TransportKind::Soft));
        let err = TransportKind::parse("carrier-pigeon").unwrap_err();
        assert!(
            err.contains("NAAICE_TRANSPORT") && err.contains("soft"),
            "{err}"
        );
    }

    #[test]
    #[cfg(not(feature = "verbs"))]
    fn verbs_names_the_fix_when_not_built() {
        let msg = not_built(TransportKind::Verbs);
        assert!(msg.contains("NAAICE_TRANSPORT=soft"), "{msg}");
    }
}
