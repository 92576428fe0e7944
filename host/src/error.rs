//! The error type of the host library.

use naaice_core::machine;
use naaice_core::region::RegionError;

use crate::transport::TransportError;

/// Errors of the host APIs.
///
/// `Debug` prints the message, as `Display` does: a program whose `main` returns
/// `Result<(), Box<dyn std::error::Error>>` fails with `Error: NAA selection: NAA_SPEC is not
/// set`, not with the variant's structure (`Spec(Missing)`). Match on the variants to tell
/// errors apart.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The transport failed (connect, register, post, wait).
    #[error("transport: {0}")]
    Transport(#[from] TransportError),
    /// The protocol failed: the peer misbehaved, a work request failed, a phase timed out.
    /// An RPC's timeout names the variable that sets its deadline.
    #[error("protocol: {0}{hint}", hint = rpc_deadline_hint(.0))]
    Protocol(machine::Error),
    /// An RPC got no answer within its deadline (`phase`: where it stood); the deadline
    /// comes from `NAAICE_RPC_TIMEOUT` ([`crate::NaaOptions::rpc_timeout`]) or the call's own.
    #[error(
        "RPC timed out in phase {phase}: no answer within its deadline of {} ({} or the \
         call's own timeout)",
        humantime::format_duration(*deadline),
        crate::discovery::environment::RPC_TIMEOUT_VAR
    )]
    RpcTimeout {
        /// The RPC's phase when its deadline passed.
        phase: naaice_core::Phase,
        /// The deadline it had.
        deadline: std::time::Duration,
    },
    /// A region-table operation failed.
    #[error("regions: {0}")]
    Region(#[from] RegionError),
    /// The operation did not finish before its deadline.
    #[error("timed out after {0:?}")]
    Timeout(std::time::Duration),
    /// An RPC is in flight: its buffers may not be touched and no new one may start.
    #[error("an RPC is in flight on this handle")]
    Busy,
    /// The call is not valid in the current state.
    #[error("invalid state: {0}")]
    State(&'static str),
    /// An argument is invalid.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// `NAA_SPEC` / `NAA_LOCAL_IP` are missing or malformed, or no NAA matches.
    #[error("NAA selection: {0}")]
    Spec(#[from] crate::discovery::spec::SpecError),
    /// The connection is closed.
    #[error("connection closed")]
    Closed,
    /// The RPC was cancelled ([`crate::Naa::cancel`]); the handle reconnects on its next
    /// invoke.
    #[error("the RPC was cancelled; the next invoke reconnects")]
    Cancelled,
}

impl From<crate::discovery::environment::VariableError> for Error {
    /// A wrong environment variable, as the handle's creation reports it
    /// ([`SpecError::Variable`](crate::discovery::spec::SpecError::Variable)).
    fn from(e: crate::discovery::environment::VariableError) -> Self {
        Self::Spec(e.into())
    }
}

impl std::fmt::Debug for Error {
    /// The message ([`Error`]'s `Display`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl From<machine::Error> for Error {
    fn from(e: machine::Error) -> Self {
        Self::Protocol(e)
    }
}

/// For an RPC that timed out, what set its deadline (the machine's error does not carry it).
fn rpc_deadline_hint(e: &machine::Error) -> String {
    use naaice_core::machine::Phase;
    match e {
        machine::Error::Timeout {
            phase: Phase::DataSending | Phase::Calculating | Phase::DataReceiving,
        } => format!(
            ": no answer within the RPC's deadline ({} (default {}), or the call's own \
             timeout)",
            crate::discovery::environment::RPC_TIMEOUT_VAR,
            humantime::format_duration(crate::discovery::environment::DEFAULT_RPC_TIMEOUT)
        ),
        _ => String::new(),
    }
}

/// Result type of the host APIs.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use naaice_core::machine::Phase;

    /// What `fn main() -> Result<(), Box<dyn std::error::Error>>` prints is the message, for
    /// the library's errors and the selection errors `transport_from_env` returns alike.
    #[test]
    fn debug_is_the_message() {
        use crate::discovery::spec::SpecError;
        let boxed: Box<dyn std::error::Error> = Error::Spec(SpecError::Missing).into();
        assert_eq!(format!("{boxed:?}"), "NAA selection: NAA_SPEC is not set");
        let boxed: Box<dyn std::error::Error> = SpecError::Missing.into();
        assert_eq!(format!("{boxed:?}"), "NAA_SPEC is not set");
        assert_eq!(
            format!("{:?}", Error::State("no RPC was invoked")),
            "invalid state: no RPC was invoked"
        );
    }

    /// An RPC's timeout names its deadline and `NAAICE_RPC_TIMEOUT`.
    #[test]
    fn an_rpc_timeout_names_its_deadline_and_variable() {
        let e = Error::RpcTimeout {
            phase: Phase::DataReceiving,
            deadline: std::time::Duration::from_millis(1500),
        };
        assert_eq!(
            e.to_string(),
            "RPC timed out in phase DATA_RECEIVING: no answer within its deadline of 1s 500ms \
             (NAAICE_RPC_TIMEOUT or the call's own timeout)"
        );
    }

    /// Without a known deadline an RPC's timeout still names `NAAICE_RPC_TIMEOUT`; other
    /// protocol errors are unchanged.
    #[test]
    fn an_rpc_timeout_names_its_variable() {
        let rpc = Error::Protocol(machine::Error::Timeout {
            phase: Phase::DataReceiving,
        })
        .to_string();
        assert_eq!(
            rpc,
            "protocol: timed out in phase DATA_RECEIVING: no answer within the RPC's deadline \
             (NAAICE_RPC_TIMEOUT (default 1h), or the call's own timeout)"
        );
        let mrsp = Error::Protocol(machine::Error::Timeout {
            phase: Phase::MrspReceiving,
        })
        .to_string();
        assert_eq!(mrsp, "protocol: timed out in phase MRSP_RECEIVING");
    }
}
