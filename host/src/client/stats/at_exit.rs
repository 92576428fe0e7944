//! `NAAICE_STATS=1`: the process's statistics in one line on stderr when it exits (registered
//! with the C library's `atexit` when the first handle is created).

use std::io::Write;
use std::sync::Once;

/// Registers the summary at exit if `NAAICE_STATS` is `1` (once per process).
pub(super) fn arm_from_env() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        match std::env::var(super::STATS_VAR).as_deref() {
            Ok("1") => {}
            Ok("0" | "") | Err(_) => return,
            Ok(other) => {
                tracing::warn!(
                    value = other,
                    "{} takes 1 (print statistics at exit) or 0; ignored",
                    super::STATS_VAR
                );
                return;
            }
        }
        // SAFETY: `print_at_exit` is an `extern "C" fn()` that never unwinds (it catches
        // panics); atexit only stores the pointer, which stays valid for the process's life.
        if unsafe { libc::atexit(print_at_exit) } != 0 {
            tracing::warn!("{}: cannot register the summary at exit", super::STATS_VAR);
        }
    });
}

/// Prints [`super::summary`] on stderr; run by `exit`.
extern "C" fn print_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        let _ = writeln!(std::io::stderr(), "{}", super::summary());
    });
}
