//! naaice-rs extensions of the middleware API (not in the reference): per-call arguments,
//! per-call deadlines, the full 24-bit return code and cancellation, over [`naaice::Naa`]'s
//! `invoke_with`, `cancel` and `Call`.
//!
//! ```c
//! naa_call_args args = { .function_code = 7, .user_bytes = {1, 2, 3}, .timeout_ms = 500 };
//! naa_invoke_with(&handle, &args);          // this RPC: function 7, user bytes, 500 ms
//! ...
//! naa_cancel(&handle);                      // give up; the next invoke reconnects
//! uint32_t rc; naa_get_return_code(&handle, &rc);   // after a completed RPC: all 24 bits
//! ```

use std::ffi::c_int;
use std::sync::TryLockError;
use std::time::Duration;

use naaice::{Call, Naa};

use crate::ap2::{lookup, on_naa};
use crate::boundary::{FAILURE, SUCCESS, fail, guard};
use crate::error::Failure;
use crate::types::{naa_function_code_t, naa_handle};

/// naaice-rs extension (not in the reference), per-call arguments: the arguments of one RPC
/// beyond its parameters (`naa_invoke_with`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct naa_call_args {
    /// Function code of this RPC, 1-127: the handle's (`handle->function_code`) or another
    /// one the NAA serves (a code without a kernel is answered with SOCKET_UNAVAIL).
    pub function_code: naa_function_code_t,
    /// The three user bytes of the request immediate (spec section 3.2), passed to the
    /// kernel (`naa_swnaa_call.user_bytes` in a software NAA); `naa_invoke` sends zeros.
    pub user_bytes: [u8; 3],
    /// Deadline of this RPC in milliseconds, from the invoke (writes, kernel and reply);
    /// 0 means the default, `NAAICE_RPC_TIMEOUT`.
    pub timeout_ms: u64,
}

/// Runs `body` on the live `Naa` behind `handle` (serialised with the handle's other calls)
/// and remembers its state for `naa_test`.
///
/// # Safety
/// `handle` must be NULL or point to a readable `naa_handle`.
unsafe fn with_naa(
    name: &'static str,
    handle: *mut naa_handle,
    body: impl FnOnce(&mut Naa) -> c_int,
) -> c_int {
    // SAFETY: forwarded caller guarantee.
    guard(name, FAILURE, || unsafe { on_naa(name, handle, body) })
}

/// ==== naaice-rs extensions (not in the reference): per-call arguments and deadlines, the
/// full return code, cancellation ====
///
/// Starts one RPC like `naa_invoke`, with its own function code, user bytes and deadline.
/// Complete it with `naa_test` / `naa_wait` as usual; `naa_get_return_code` gives the full
/// return code afterwards. The arguments apply to this RPC only: a later `naa_invoke` sends
/// the handle's function code and zero user bytes again. After `naa_cancel` it first
/// reconnects (blocking, like `naa_create`).
///
/// Returns 0 if the RPC was started; -1 if `args` is NULL, the function code is not 1-127,
/// an RPC is in flight, the connection failed (call `naa_cancel` to recover) or the reconnect
/// failed.
///
/// # Safety
/// `handle` must be NULL or point to a readable `naa_handle`; `args` must be NULL or point to
/// a readable `naa_call_args`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naa_invoke_with(
    handle: *mut naa_handle,
    args: *const naa_call_args,
) -> c_int {
    const NAME: &str = "naa_invoke_with";
    if args.is_null() || !args.is_aligned() {
        return guard(NAME, FAILURE, || fail(NAME, "args is NULL or not aligned"));
    }
    // SAFETY: non-null and aligned; readable by the caller's guarantee; plain data.
    let args = unsafe { args.read() };
    let body = |naa: &mut Naa| {
        let call = match Call::new().function(args.function_code) {
            Ok(c) => c.user_bytes(args.user_bytes),
            Err(e) => return fail(NAME, e),
        };
        let call = match args.timeout_ms {
            0 => call,
            ms => call.timeout(Duration::from_millis(ms)),
        };
        match naa.invoke_with(&call) {
            Ok(()) => SUCCESS,
            Err(e) => fail(NAME, e),
        }
    };
    // SAFETY: forwarded caller guarantee.
    unsafe { with_naa(NAME, handle, body) }
}

/// `naa_invoke` with a deadline of `timeout_ms` milliseconds for this RPC (instead of
/// `NAAICE_RPC_TIMEOUT`): when it passes, `naa_test` / `naa_wait` report the failure
/// (state ERROR, `naa_last_error_kind()` NAA_ERRKIND_TIMEOUT); `naa_cancel` then makes the
/// handle usable again.
///
/// Returns 0 if the RPC was started; -1 if `timeout_ms` is 0 or as `naa_invoke_with`.
///
/// # Safety
/// `handle` must be NULL or point to a readable `naa_handle`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naa_invoke_timeout(handle: *mut naa_handle, timeout_ms: u64) -> c_int {
    const NAME: &str = "naa_invoke_timeout";
    if timeout_ms == 0 {
        return guard(NAME, FAILURE, || fail(NAME, "timeout_ms is 0"));
    }
    let body = |naa: &mut Naa| match naa.invoke_with_timeout(Duration::from_millis(timeout_ms)) {
        Ok(()) => SUCCESS,
        Err(e) => fail(NAME, e),
    };
    // SAFETY: forwarded caller guarantee.
    unsafe { with_naa(NAME, handle, body) }
}

/// Cancels the RPC in flight without waiting for the NAA. The protocol has no cancel
/// message, so the handle's connection is torn down: the NAA sees the client leave and drops
/// the RPC (its kernel runs to its end, the results are not sent; the NAA keeps serving
/// others). Before it returns, the library has released the parameter memory: neither the
/// NAA nor the library touches it any more. Inputs are unchanged; outputs are undefined
/// (their previous contents, or part of the cancelled RPC's results).
///
/// The handle stays valid: `naa_test` / `naa_wait` fail (NAA_ERRKIND_STATE, "cancelled")
/// and the state is DISCONNECTED until the next `naa_invoke` / `naa_invoke_with` /
/// `naa_invoke_timeout`, which reconnects to the same NAA and redoes the memory-region
/// exchange (blocking) before starting its RPC. It also recovers a handle whose RPC failed
/// (deadline passed, connection lost). With nothing in flight it does nothing.
///
/// It never waits for another thread: if one is inside a call on this handle (a blocking
/// `naa_wait`, which cannot be interrupted), it fails at once. Cancel from the thread that
/// completes the RPC with `naa_test`, or bound `naa_wait` with a per-call deadline
/// (`naa_invoke_timeout`, `naa_invoke_with`).
///
/// Returns 0 (also when there was nothing to cancel); -1 for an invalid handle, or when
/// another thread is inside a call on the handle (NAA_ERRKIND_STATE; nothing was cancelled).
///
/// # Safety
/// `handle` must be NULL or point to a readable `naa_handle`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naa_cancel(handle: *mut naa_handle) -> c_int {
    const NAME: &str = "naa_cancel";
    guard(NAME, FAILURE, || {
        // SAFETY: forwarded caller guarantee.
        let h = match unsafe { lookup(NAME, handle) } {
            Ok(h) => h,
            Err(rc) => return rc,
        };
        // Never wait for another thread's call: that may be a `naa_wait` on the very RPC
        // being cancelled, which would make `naa_cancel` wait for the RPC's deadline.
        let mut guard = match h.naa.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => {
                return fail(
                    NAME,
                    Failure::state(
                        "another thread is inside a call on this handle (naa_wait?); cancel \
                         from the thread that completes the RPC with naa_test, or bound the \
                         wait with a per-call deadline (naa_invoke_timeout)",
                    ),
                );
            }
        };
        let Some(naa) = guard.as_mut() else {
            return fail(NAME, Failure::state("the handle was finalized"));
        };
        naa.cancel();
        h.remember(naa);
        SUCCESS
    })
}

/// The full 24-bit return code of the last completed RPC into `*code` (`naa_status.naa_error`
/// carries the same value as an `enum naa_error`; this reads it as a plain integer, with
/// application codes above 0x7F). Returns 0; -1 if `code` is NULL, no RPC completed since
/// the last invoke (one is in flight, or none was invoked, or it failed or was cancelled).
///
/// # Safety
/// `handle` must be NULL or point to a readable `naa_handle`; `code` must be NULL or point to
/// a writable `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naa_get_return_code(handle: *mut naa_handle, code: *mut u32) -> c_int {
    const NAME: &str = "naa_get_return_code";
    if code.is_null() || !code.is_aligned() {
        return guard(NAME, FAILURE, || fail(NAME, "code is NULL or not aligned"));
    }
    let body = |naa: &mut Naa| {
        if naa.is_busy() {
            return fail(NAME, Failure::state("an RPC is in flight"));
        }
        match naa.test() {
            Ok(Some(status)) => {
                // SAFETY: non-null and aligned (checked above), writable by the caller's
                // guarantee.
                unsafe { code.write(status.naa_error.get()) };
                SUCCESS
            }
            Ok(None) => fail(NAME, Failure::state("an RPC is in flight")),
            Err(e) => fail(NAME, e),
        }
    };
    // SAFETY: forwarded caller guarantee.
    unsafe { with_naa(NAME, handle, body) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use naaice::Param;
    use naaice::client::naa::NaaOptions;
    use naaice::swnaa::{KernelRegistry, SoftNaa, SoftNaaConfig};
    use naaice::transport::AnyTransport;
    use naaice::transport::soft::SoftTransport;

    use crate::ap2::{adopt, naa_finalize};
    use crate::error::naa_error_kind::NAA_ERRKIND_STATE;
    use crate::error::naa_last_error_kind;

    #[test]
    fn cancel_never_waits_for_another_call_on_the_handle() {
        let server = SoftNaa::bind(
            SoftTransport::default(),
            "127.0.0.1:0".parse().unwrap(),
            SoftNaaConfig::default(),
            KernelRegistry::builtin(),
        )
        .and_then(SoftNaa::spawn)
        .unwrap();
        let transport: AnyTransport = SoftTransport::default().into();
        let p = Param::zeroed(8);
        let options = NaaOptions::at(server.local_addr());
        let naa = Naa::create_with(&transport, 1, vec![p.clone()], vec![p], &options).unwrap();
        let mut handle = adopt(naa, 1);
        let live = lookup_for_test(&handle);
        // Stands in for another thread blocked in `naa_wait` (the mutex is not reentrant:
        // `try_lock` from this thread fails just the same).
        let held = live.lock();
        // SAFETY: `handle` is a valid handle.
        assert_eq!(unsafe { naa_cancel(&mut handle) }, FAILURE);
        assert_eq!(naa_last_error_kind(), NAA_ERRKIND_STATE);
        drop(held);
        // SAFETY: as above.
        assert_eq!(unsafe { naa_cancel(&mut handle) }, SUCCESS);
        // SAFETY: as above.
        assert_eq!(unsafe { naa_finalize(&mut handle) }, SUCCESS);
        server.shutdown();
    }

    #[test]
    fn call_args_layout() {
        use std::mem::{offset_of, size_of};
        assert_eq!(size_of::<naa_call_args>(), 16);
        assert_eq!(offset_of!(naa_call_args, function_code), 0);
        assert_eq!(offset_of!(naa_call_args, user_bytes), 4);
        assert_eq!(offset_of!(naa_call_args, timeout_ms), 8);
    }

    fn lookup_for_test(handle: &naa_handle) -> std::sync::Arc<crate::ap2::Handle> {
        // SAFETY: `handle` is a valid reference.
        unsafe { lookup("test", handle) }.unwrap_or_else(|_| panic!("live handle"))
    }
}
