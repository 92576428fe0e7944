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
    let mut transport = parse_transport(&var(TRANSPORT_VAR)?)?;
    let wait = var(WAIT_VAR)?;
    if let Some(policy) = wait_policy(Some(&wait)).map_err(|e| e.to_string())? {
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
