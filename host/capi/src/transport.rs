//! Which transport a handle or a software NAA uses: the library's
//! [`transport_from_env`](naaice::discovery::environment::transport_from_env) (`NAAICE_TRANSPORT`, `auto`
//! when unset, and `NAAICE_WAIT`), as for Rust programs and the binaries.

use naaice::transport::AnyTransport;

/// The transport `NAAICE_TRANSPORT` and `NAAICE_WAIT` select, or the error text for the
/// caller's last error.
pub fn transport_from_env() -> Result<AnyTransport, String> {
    naaice::discovery::environment::transport_from_env().map_err(|e| e.to_string())
}
