//! Errors a C program can read: the last failure of the calling thread, as text and kind
//! (`naa_last_error`, `naa_last_error_kind`, `naa_clear_last_error`), for the AP1 and AP2
//! functions alike.
//!
//! Like `errno`, the record is per thread and only a failing call writes it: a successful
//! call leaves it as it was, and the drop-in functions keep returning 0 / -1.

use std::cell::RefCell;
use std::ffi::{CString, c_char};

use naaice::core::machine;

/// What kind of failure the last failing call of this thread had.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum naa_error_kind {
    /// No failure recorded on this thread (none yet, or cleared).
    NAA_ERRKIND_NONE = 0,
    /// An argument was invalid: NULL, out of range, unknown or stale handle, bad sizes.
    NAA_ERRKIND_ARGUMENT = 1,
    /// The call is not valid now: wrong order, an RPC in flight, a finished connection.
    NAA_ERRKIND_STATE = 2,
    /// The environment or configuration: `NAA_SPEC`, `NAA_LOCAL_IP`, `NAAICE_TRANSPORT`,
    /// `NAAICE_RPC_TIMEOUT`, no matching NAA, a transport not built in.
    NAA_ERRKIND_CONFIG = 3,
    /// The transport: connecting, registering memory, posting, or the connection was lost.
    NAA_ERRKIND_TRANSPORT = 4,
    /// The protocol: the NAA misbehaved, refused the memory regions, or a transfer failed.
    NAA_ERRKIND_PROTOCOL = 5,
    /// A deadline passed (connection setup, MRSP, RPC).
    NAA_ERRKIND_TIMEOUT = 6,
    /// An internal error of the library (a bug; reported instead of crashing).
    NAA_ERRKIND_INTERNAL = 7,
}

/// A failure on its way to the C caller: kind and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// What kind of failure.
    pub(crate) kind: naa_error_kind,
    /// Why, for people.
    pub(crate) message: String,
}

impl Failure {
    /// A failure of `kind`.
    pub(crate) fn new(kind: naa_error_kind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// The call is not valid in the current state.
    pub(crate) fn state(message: impl Into<String>) -> Self {
        Self::new(naa_error_kind::NAA_ERRKIND_STATE, message)
    }

    /// The environment or configuration is wrong.
    pub(crate) fn config(message: impl Into<String>) -> Self {
        Self::new(naa_error_kind::NAA_ERRKIND_CONFIG, message)
    }

    /// The same failure, its text prefixed with `context`.
    pub(crate) fn context(self, context: impl std::fmt::Display) -> Self {
        Self {
            kind: self.kind,
            message: format!("{context}: {}", self.message),
        }
    }
}

/// Text alone: an invalid argument (the library's own checks of what the caller passed).
impl From<String> for Failure {
    fn from(message: String) -> Self {
        Self::new(naa_error_kind::NAA_ERRKIND_ARGUMENT, message)
    }
}

impl From<&str> for Failure {
    fn from(message: &str) -> Self {
        Self::from(message.to_owned())
    }
}

impl From<naaice::Error> for Failure {
    fn from(e: naaice::Error) -> Self {
        use naa_error_kind::*;
        let kind = match &e {
            naaice::Error::Transport(_) | naaice::Error::Closed => NAA_ERRKIND_TRANSPORT,
            naaice::Error::Protocol(p) => match p {
                machine::Error::Timeout { .. } => NAA_ERRKIND_TIMEOUT,
                machine::Error::PeerDisconnected { .. } | machine::Error::PostFailed(_) => {
                    NAA_ERRKIND_TRANSPORT
                }
                machine::Error::WrongPhase { .. } => NAA_ERRKIND_STATE,
                machine::Error::Region(_) => NAA_ERRKIND_ARGUMENT,
                _ => NAA_ERRKIND_PROTOCOL,
            },
            naaice::Error::Region(_) | naaice::Error::InvalidArgument(_) => NAA_ERRKIND_ARGUMENT,
            naaice::Error::Timeout(_) | naaice::Error::RpcTimeout { .. } => NAA_ERRKIND_TIMEOUT,
            naaice::Error::Busy | naaice::Error::State(_) | naaice::Error::Cancelled => {
                NAA_ERRKIND_STATE
            }
            naaice::Error::Spec(_) => NAA_ERRKIND_CONFIG,
            _ => NAA_ERRKIND_PROTOCOL,
        };
        Self::new(kind, e.to_string())
    }
}

/// The last failure of this thread.
struct Last {
    kind: naa_error_kind,
    text: CString,
}

thread_local! {
    static LAST: RefCell<Last> = RefCell::new(Last {
        kind: naa_error_kind::NAA_ERRKIND_NONE,
        text: CString::default(),
    });
}

/// Records `failure` of export `name` as this thread's last error.
pub(crate) fn record(name: &str, failure: &Failure) {
    let text = format!("{name}: {}", failure.message).replace('\0', " ");
    let text = CString::new(text).unwrap_or_default();
    LAST.with(|l| {
        *l.borrow_mut() = Last {
            kind: failure.kind,
            text,
        };
    });
}

/// The text of this thread's last failure, for example
/// `"naa_create: function code 10: NAA selection: no free NAA_SPEC entry ..."`; an empty string
/// if there was none (or after `naa_clear_last_error`). Never NULL.
///
/// The string belongs to the library and stays valid until this thread's next failing call
/// or `naa_clear_last_error`; copy it to keep it longer. Successful calls leave it unchanged,
/// so check the return value first, as with `errno`.
#[unsafe(no_mangle)]
pub extern "C" fn naa_last_error() -> *const c_char {
    // The pointer stays valid while the CString is in the thread-local slot: it is replaced
    // only by this thread's next `record` or `naa_clear_last_error`.
    LAST.try_with(|l| l.borrow().text.as_ptr())
        .unwrap_or(c"".as_ptr())
}

/// The kind of this thread's last failure (`NAA_ERRKIND_NONE` if none).
#[unsafe(no_mangle)]
pub extern "C" fn naa_last_error_kind() -> naa_error_kind {
    LAST.try_with(|l| l.borrow().kind)
        .unwrap_or(naa_error_kind::NAA_ERRKIND_NONE)
}

/// Forgets this thread's last failure: `naa_last_error` returns "" and `naa_last_error_kind`
/// `NAA_ERRKIND_NONE` until the next failing call.
#[unsafe(no_mangle)]
pub extern "C" fn naa_clear_last_error() {
    let _ = LAST.try_with(|l| {
        *l.borrow_mut() = Last {
            kind: naa_error_kind::NAA_ERRKIND_NONE,
            text: CString::default(),
        };
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn last() -> (naa_error_kind, String) {
        // SAFETY: `naa_last_error` never returns NULL and the string lives until the next
        // record on this thread.
        let text = unsafe { CStr::from_ptr(naa_last_error()) };
        (naa_last_error_kind(), text.to_string_lossy().into_owned())
    }

    #[test]
    fn records_per_thread_and_clears() {
        naa_clear_last_error();
        assert_eq!(last(), (naa_error_kind::NAA_ERRKIND_NONE, String::new()));
        record("f", &Failure::state("not now"));
        assert_eq!(
            last(),
            (naa_error_kind::NAA_ERRKIND_STATE, "f: not now".into())
        );
        std::thread::spawn(|| assert_eq!(last().0, naa_error_kind::NAA_ERRKIND_NONE))
            .join()
            .unwrap();
        record("g", &Failure::from("bad\0arg").context("ctx"));
        assert_eq!(
            last(),
            (
                naa_error_kind::NAA_ERRKIND_ARGUMENT,
                "g: ctx: bad arg".into()
            )
        );
        naa_clear_last_error();
        assert_eq!(last().0, naa_error_kind::NAA_ERRKIND_NONE);
    }

    #[test]
    fn library_errors_are_classified() {
        let timeout = Failure::from(naaice::Error::Timeout(std::time::Duration::from_secs(1)));
        assert_eq!(timeout.kind, naa_error_kind::NAA_ERRKIND_TIMEOUT);
        let busy = Failure::from(naaice::Error::Busy);
        assert_eq!(busy.kind, naa_error_kind::NAA_ERRKIND_STATE);
        let proto = Failure::from(naaice::Error::Protocol(machine::Error::Timeout {
            phase: naaice::core::Phase::MrspReceiving,
        }));
        assert_eq!(proto.kind, naa_error_kind::NAA_ERRKIND_TIMEOUT);
    }
}
