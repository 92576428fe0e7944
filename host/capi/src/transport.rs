//! Which transport a handle or a software NAA uses, chosen at run time by `NAAICE_TRANSPORT`
//! (the library's [`AnyTransport`]).

use naaice::environment::{WAIT_VAR, wait_policy};
use naaice::transport::{AnyTransport, ParseTransportError};

/// Environment variable that selects the transport.
pub const TRANSPORT_VAR: &str = "NAAICE_TRANSPORT";

/// The transport for a `NAAICE_TRANSPORT` value; empty means the default (verbs).
pub fn parse_transport(value: &str) -> Result<AnyTransport, String> {
    let name = if value.trim().is_empty() {
        "verbs"
    } else {
        value
    };
    name.parse().map_err(|e| match e {
        ParseTransportError::VerbsNotBuilt => format!(
            "{e}: this libnaaice_ap2 has no verbs transport; set {TRANSPORT_VAR}=soft for the \
             software transport, or rebuild with the cargo feature `verbs`"
        ),
        ParseTransportError::Unknown(_) => format!("{TRANSPORT_VAR}: {e}"),
    })
}

/// The transport selected by `NAAICE_TRANSPORT` (verbs when unset), waiting for completions
/// as `NAAICE_WAIT` says (adaptive when unset).
pub fn transport_from_env() -> Result<AnyTransport, String> {
    let var = |name: &str| match std::env::var(name) {
        Ok(v) => Ok(v),
        Err(std::env::VarError::NotPresent) => Ok(String::new()),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!("{name} is not valid UTF-8")),
    };
    transport_with_wait(&var(TRANSPORT_VAR)?, &var(WAIT_VAR)?)
}

/// The transport for a `NAAICE_TRANSPORT` value, waiting as the `NAAICE_WAIT` value says
/// (empty: the defaults).
fn transport_with_wait(transport: &str, wait: &str) -> Result<AnyTransport, String> {
    let mut transport = parse_transport(transport)?;
    if let Some(policy) = wait_policy(Some(wait)).map_err(|e| e.to_string())? {
        transport.set_wait(policy);
    }
    Ok(transport)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_names() {
        for soft in ["soft", " Soft ", "tcp"] {
            assert_eq!(parse_transport(soft).map(|t| t.name()), Ok("soft"));
        }
        let err = parse_transport("carrier-pigeon").unwrap_err();
        assert!(
            err.contains("NAAICE_TRANSPORT") && err.contains("soft"),
            "{err}"
        );
    }

    #[test]
    #[cfg(feature = "verbs")]
    fn naaice_wait_sets_the_verbs_wait_policy() {
        use naaice::waiting::WaitPolicy;
        let wait = |t: AnyTransport| match t {
            AnyTransport::Verbs(v) => v.config().wait,
            other => panic!("not verbs: {other:?}"),
        };
        assert_eq!(
            wait(transport_with_wait("", "").unwrap()),
            WaitPolicy::default()
        );
        assert_eq!(
            wait(transport_with_wait("verbs", "poll").unwrap()),
            WaitPolicy::Poll
        );
        assert_eq!(
            wait(transport_with_wait("", " Sleep ").unwrap()),
            WaitPolicy::Sleep
        );
        let err = transport_with_wait("verbs", "hurry").unwrap_err();
        assert!(
            err.contains("NAAICE_WAIT") && err.contains("hurry"),
            "{err}"
        );
        // The software transport takes any valid policy (it always blocks in its reads).
        assert!(transport_with_wait("soft", "poll").is_ok());
    }

    #[test]
    #[cfg(feature = "verbs")]
    fn verbs_is_the_default() {
        for verbs in ["", "verbs", "RDMA"] {
            assert_eq!(parse_transport(verbs).map(|t| t.name()), Ok("verbs"));
        }
    }

    #[test]
    #[cfg(not(feature = "verbs"))]
    fn verbs_names_the_fix_when_not_built() {
        for verbs in ["", "verbs"] {
            let msg = parse_transport(verbs).map(|t| t.name()).unwrap_err();
            assert!(
                msg.contains("NAAICE_TRANSPORT=soft") && msg.contains("`verbs`"),
                "{msg}"
            );
        }
    }
}
