//! The ABI boundary: logging setup, catching panics and reporting failures (stderr and the
//! thread's last error), shared by every export.

use std::ffi::c_int;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;

use crate::error::{Failure, naa_error_kind, record};

/// Return value of a failed call (the reference's convention).
pub(crate) const FAILURE: c_int = -1;
/// Return value of a successful call.
pub(crate) const SUCCESS: c_int = 0;

/// Installs a stderr logger filtered by `NAAICE_LOG` (default `warn`), once per process. If
/// the program already has a `tracing` subscriber (a Rust program linking the rlib), that one
/// is kept. An invalid `NAAICE_LOG` (a typo such as `degub`, which `tracing` alone would
/// take for a target and so log nothing) gives `warn`, and one line on stderr says so
/// ([`naaice::discovery::environment::log_filter_from_env`]). Then it warns once about variables named
/// like the library's that it does not know ([`naaice::discovery::environment::warn_unknown_variables`]).
pub(crate) fn init_logging() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let filter = tracing_subscriber::EnvFilter::try_new(
            naaice::discovery::environment::log_filter_from_env(),
        )
        .unwrap_or_else(|e| {
            // A span filter the library's check lets through but `tracing` refuses.
            eprintln!("naaice: NAAICE_LOG: {e}; logging at warn instead");
            tracing_subscriber::EnvFilter::new(naaice::discovery::environment::DEFAULT_LOG_FILTER)
        });
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(ansi)
            .with_target(false)
            .try_init();
        naaice::discovery::environment::warn_unknown_variables();
    });
}

/// Runs the body of export `name`: a panic becomes `on_panic` (logged), never an unwind
/// across the C boundary.
pub(crate) fn guard<R>(name: &'static str, on_panic: R, body: impl FnOnce() -> R) -> R {
    init_logging();
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(r) => r,
        Err(_) => {
            let failure = Failure::new(
                naa_error_kind::NAA_ERRKIND_INTERNAL,
                "internal error (panic caught at the C boundary)",
            );
            tracing::error!("{name}: {}", failure.message);
            record(name, &failure);
            on_panic
        }
    }
}

/// Logs `failure` as the reason export `name` fails, records it as the thread's last error
/// and returns [`FAILURE`]. Plain text counts as an invalid argument.
pub(crate) fn fail(name: &'static str, failure: impl Into<Failure>) -> c_int {
    let failure = failure.into();
    tracing::error!("{name}: {}", failure.message);
    record(name, &failure);
    FAILURE
}

/// Checks that the pointer argument `what` of `name` is non-NULL and aligned; otherwise
/// records the failure (`WHAT is NULL` / `WHAT is not aligned`) and gives its return code.
pub(crate) fn check_ptr<T>(name: &'static str, what: &str, p: *const T) -> Result<(), c_int> {
    if p.is_null() {
        return Err(fail(name, format!("{what} is NULL")));
    }
    if !p.is_aligned() {
        return Err(fail(name, format!("{what} is not aligned")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_the_failure_value() {
        assert_eq!(guard("t", FAILURE, || SUCCESS), SUCCESS);
        let r = guard("t", FAILURE, || -> c_int { panic!("boom") });
        assert_eq!(r, FAILURE);
    }
}
