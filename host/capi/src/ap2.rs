//! The middleware API (AP2) for C: `naa_create`, `naa_invoke`, `naa_test`, `naa_wait`,
//! `naa_finalize` (spec section 6).
//!
//! Every function returns 0 on success and -1 on failure, like the reference; the reason for
//! a failure is logged on stderr (see `NAAICE_LOG`). The parameters' memory stays the
//! program's: the NAA's results are written straight into it, and inputs are read from it
//! while an RPC is in flight, so the program must not touch parameter memory between
//! `naa_invoke` and the completion reported by `naa_test` / `naa_wait` (as with RDMA memory
//! in the reference), and must keep it allocated until `naa_finalize`.
//!
//! All calls on one handle may come from different threads: they are serialised per handle
//! (`naa_test` never waits for another thread's call; it reports "not finished" instead).
//! Different handles are independent.

pub mod call;
pub mod set;
pub mod stats;

use std::ffi::c_int;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use naaice::client::naa::NaaOptions;
use naaice::core::Phase;
use naaice::{Buffer, Naa, Param};

use crate::boundary::{FAILURE, SUCCESS, check_ptr, fail, guard};
use crate::error::Failure;
use crate::handles::{Handles, as_ptr, id_of};
use crate::transport::transport_from_env;
use crate::types::{
    naa_function_code_t, naa_handle, naa_param_t, naa_status, naaice_communication_context,
    naaice_communication_state,
};

/// Most parameters (regions) of one handle (spec section 2.8).
const MAX_PARAMS: usize = 32;

/// One `naa_create` handle.
pub(crate) struct Handle {
    /// The connection; `None` once finalized.
    pub(crate) naa: Mutex<Option<Naa>>,
    /// Last known state, for `naa_test` while another thread holds `naa`.
    state: AtomicU8,
}

impl Handle {
    /// Waits for the handle (another thread's call on it).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Option<Naa>> {
        self.naa.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the handle if no other thread is using it.
    pub(crate) fn try_lock(
        &self,
    ) -> Result<MutexGuard<'_, Option<Naa>>, TryLockError<MutexGuard<'_, Option<Naa>>>> {
        self.naa.try_lock()
    }

    /// Records the handle's state for `naa_test` on other threads.
    pub(crate) fn remember(&self, naa: &Naa) {
        self.state.store(naa.state().value(), Ordering::Relaxed);
    }
}

pub(crate) static HANDLES: Handles<Handle> = Handles::new();

/// Number of live handles.
pub(crate) fn live_handles() -> usize {
    HANDLES.len()
}

/// `state` value for a numeric phase.
fn state_of(value: u8) -> naaice_communication_state {
    Phase::from_value(value).unwrap_or(Phase::Error).into()
}

/// Reads the parameter array `ptr[0..n]`.
///
/// # Safety
/// If `n > 0` and `ptr` is not NULL, `ptr` must point to `n` readable `naa_param_t`.
unsafe fn read_params(
    ptr: *const naa_param_t,
    n: std::ffi::c_uint,
    what: &str,
) -> Result<Vec<naa_param_t>, String> {
    let n = n as usize;
    if n == 0 {
        return Ok(Vec::new());
    }
    if n > MAX_PARAMS {
        return Err(format!("{n} {what} parameters (at most {MAX_PARAMS})"));
    }
    if ptr.is_null() {
        return Err(format!("{what}_params is NULL but {what}_amount is {n}"));
    }
    if !ptr.is_aligned() {
        return Err(format!("{what}_params is not aligned"));
    }
    // SAFETY: `ptr` is non-null and aligned, and the caller guarantees `n` readable elements;
    // `naa_param_t` is plain data valid for any bit pattern (the bool is read as a byte).
    Ok(unsafe { std::slice::from_raw_parts(ptr, n) }.to_vec())
}

/// One distinct piece of parameter memory: every parameter with this address shares it.
struct Memory {
    /// The program's pointer (first parameter with this address).
    ptr: *mut u8,
    addr: usize,
    size: usize,
    buffer: Option<Buffer>,
}

/// Turns the C parameters into `Param`s over the program's own memory (no copy). Parameters
/// with the same address are one region (an in-place parameter) covering the largest size
/// given for it; otherwise parameters must not overlap.
fn to_params(
    inputs: &[naa_param_t],
    outputs: &[naa_param_t],
) -> Result<(Vec<Param>, Vec<Param>), String> {
    let mut memory: Vec<Memory> = Vec::new();
    let all = inputs
        .iter()
        .map(|p| ("input", p))
        .enumerate()
        .chain(outputs.iter().map(|p| ("output", p)).enumerate());
    for (i, (what, p)) in all {
        if p.addr.is_null() {
            return Err(format!("{what} parameter {i}: addr is NULL"));
        }
        if p.size == 0 {
            return Err(format!("{what} parameter {i}: size is 0"));
        }
        if u32::try_from(p.size).is_err() {
            return Err(format!(
                "{what} parameter {i}: size {} is over 4 GiB - 1 (the protocol's limit)",
                p.size
            ));
        }
        let addr = p.addr.addr();
        if addr.checked_add(p.size).is_none() {
            return Err(format!("{what} parameter {i}: memory wraps around"));
        }
        match memory.iter_mut().find(|m| m.addr == addr) {
            Some(m) => m.size = m.size.max(p.size),
            None => memory.push(Memory {
                ptr: p.addr.cast(),
                addr,
                size: p.size,
                buffer: None,
            }),
        }
    }
    // Counted after merging: an in-place parameter (the same addr as input and output) is
    // one region.
    if memory.len() > MAX_PARAMS {
        return Err(format!(
            "{} distinct parameter regions (at most {MAX_PARAMS}; a parameter passed as input \
             and output with the same addr counts once)",
            memory.len()
        ));
    }
    memory.sort_by_key(|m| m.addr);
    for pair in memory.windows(2) {
        if pair[0].addr + pair[0].size > pair[1].addr {
            return Err(format!(
                "parameters at {:#x} ({} bytes) and {:#x} overlap (only identical addresses may \
                 be shared, as an in-place parameter)",
                pair[0].addr, pair[0].size, pair[1].addr
            ));
        }
    }
    for m in &mut memory {
        let ptr = NonNull::new(m.ptr).ok_or("NULL parameter")?;
        // SAFETY: the C caller of `naa_create` guarantees (documented contract, as for RDMA
        // registration in the reference) that each parameter's `size` bytes at `addr` are
        // valid, stay allocated until `naa_finalize`, and are not touched while an RPC is in
        // flight, nor written while another handle sharing them has one in flight. The
        // buffers of one handle do not overlap (checked above); every parameter with the same
        // address shares this one buffer, which covers the largest size given for it.
        m.buffer = Some(unsafe { Buffer::from_raw_parts(ptr, m.size) });
    }
    let param = |p: &naa_param_t| -> Param {
        let addr = p.addr.addr();
        let buffer = memory
            .iter()
            .find(|m| m.addr == addr)
            .and_then(|m| m.buffer.clone())
            .unwrap_or_else(|| Buffer::zeroed(0));
        Param::new(buffer)
    };
    let ins = inputs
        .iter()
        .map(|p| {
            let param = param(p);
            if p.single_send.get() {
                param.single_send()
            } else {
                param
            }
        })
        .collect();
    let outs = outputs.iter().map(param).collect();
    Ok((ins, outs))
}

/// Connects to the NAA serving `function_code` and prepares the parameters for RPCs.
///
/// The NAA is the first unused `NAA_SPEC` entry with this function code whose
/// `param_count` equals `input_amount` (spec section 6.3; `NAA_SPEC` is read once per process);
/// `NAA_LOCAL_IP` selects the local address, `NAAICE_TRANSPORT` the transport. Inputs are
/// written to the NAA with every RPC (single-send inputs only with the first); outputs are
/// written back by the NAA. A parameter given as input and output with the same `addr` is one
/// in-place region. Connection setup and the memory-region exchange (MRSP) happen here,
/// blocking.
///
/// Returns 0 and fills `*handle` (`function_code` and `comm_ctx`) on success; -1 on failure,
/// with `*handle` zeroed (so `naa_finalize` on it is a harmless no-op).
///
/// Differences from the reference, all fixes of spec section 9: a malformed `NAA_SPEC` is an error
/// naming the entry; function codes must be 1-127 (the reference truncates to 8 bits, D-19);
/// `handle->function_code` is filled in (D-19); the `NAA_SPEC` entry is released by
/// `naa_finalize` (D-19); a single-send flag on an *output* has no effect (the reference turns
/// such an output into a single-send input, quirk Q-4 / D-26); same-address parameters use the
/// larger size, and partly overlapping parameters, NULL addresses, zero sizes and sizes of
/// 4 GiB or more are errors.
///
/// # Safety
/// `handle` must be NULL or point to a writable `naa_handle`. `input_params` (`output_params`)
/// must be NULL or point to `input_amount` (`output_amount`) readable `naa_param_t`. Each
/// parameter's memory must stay valid until `naa_finalize` and must not be accessed while an
/// RPC is in flight (memory shared with another handle's parameters must not be written while
/// either handle has an RPC in flight).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naa_create(
    function_code: naa_function_code_t,
    input_params: *mut naa_param_t,
    input_amount: std::ffi::c_uint,
    output_params: *mut naa_param_t,
    output_amount: std::ffi::c_uint,
    handle: *mut naa_handle,
) -> c_int {
    const NAME: &str = "naa_create";
    guard(NAME, FAILURE, || {
        if let Err(rc) = check_ptr(NAME, "handle", handle) {
            return rc;
        }
        // SAFETY: non-null and aligned; the caller guarantees it is writable.
        unsafe {
            handle.write(naa_handle {
                function_code: 0,
                comm_ctx: std::ptr::null_mut(),
            });
        }
        // SAFETY: the caller guarantees the arrays hold the given numbers of parameters.
        let read = unsafe {
            read_params(input_params, input_amount, "input")
                .and_then(|i| read_params(output_params, output_amount, "output").map(|o| (i, o)))
        };
        let result = read
            .and_then(|(i, o)| to_params(&i, &o))
            .map_err(Failure::from)
            .and_then(|(ins, outs)| {
                let transport = transport_from_env().map_err(Failure::config)?;
                // The same variables, parsed by the same code, as `Naa::create` in Rust.
                let options = NaaOptions::from_env().map_err(|e| Failure::config(e.to_string()))?;
                Naa::create_with(&transport, function_code, ins, outs, &options)
                    .map_err(Failure::from)
            });
        let naa = match result {
            Ok(b) => b,
            Err(e) => {
                return fail(
                    NAME,
                    e.context(format_args!("function code {function_code}")),
                );
            }
        };
        let state = AtomicU8::new(naa.state().value());
        let id = HANDLES.insert(Handle {
            naa: Mutex::new(Some(naa)),
            state,
        });
        // SAFETY: as above.
        unsafe {
            handle.write(naa_handle {
                function_code,
                comm_ctx: as_ptr::<naaice_communication_context>(id),
            });
        }
        tracing::debug!(function_code, id, "naa_create: connected");
        SUCCESS
    })
}

/// A C handle for a connected `naa` (what `naa_create` hands out), for unit tests.
#[cfg(test)]
pub(crate) fn adopt(naa: Naa, function_code: naa_function_code_t) -> naa_handle {
    let state = AtomicU8::new(naa.state().value());
    let id = HANDLES.insert(Handle {
        naa: Mutex::new(Some(naa)),
        state,
    });
    naa_handle {
        function_code,
        comm_ctx: as_ptr::<naaice_communication_context>(id),
    }
}

/// The live handle `*handle` refers to.
///
/// # Safety
/// `handle` must be NULL or point to a readable `naa_handle`.
pub(crate) unsafe fn lookup(
    name: &'static str,
    handle: *const naa_handle,
) -> Result<Arc<Handle>, c_int> {
    check_ptr(name, "handle", handle)?;
    // SAFETY: non-null, aligned, readable by the caller's guarantee; plain data.
    let h = unsafe { handle.read() };
    if h.comm_ctx.is_null() {
        return Err(fail(
            name,
            Failure::state(
                "the handle is not connected (naa_create failed or naa_finalize was called)",
            ),
        ));
    }
    HANDLES
        .get(id_of(h.comm_ctx))
        .ok_or_else(|| fail(name, "unknown handle (finalized, or never created)"))
}

/// Runs `body` on the live `Naa` behind `handle` (serialised with the handle's other calls),
/// then remembers its state for `naa_test`; `body`'s value, or -1 (and the last error) if the
/// handle refers to no live connection. Call it inside `guard`.
///
/// # Safety
/// `handle` must be NULL or point to a readable `naa_handle`.
pub(crate) unsafe fn on_naa(
    name: &'static str,
    handle: *const naa_handle,
    body: impl FnOnce(&mut Naa) -> c_int,
) -> c_int {
    // SAFETY: forwarded caller guarantee.
    let h = match unsafe { lookup(name, handle) } {
        Ok(h) => h,
        Err(rc) => return rc,
    };
    let mut guard = h.lock();
    let Some(naa) = guard.as_mut() else {
        return fail(name, Failure::state("the handle was finalized"));
    };
    let rc = body(naa);
    h.remember(naa);
    rc
}

/// Writes `status` to `out`.
///
/// # Safety
/// `out` must be non-null, aligned and writable.
unsafe fn put_status(out: *mut naa_status, status: naa_status) {
    // SAFETY: guaranteed by the caller.
    unsafe { out.write(status) }
}

/// Starts one RPC: writes the inputs to the NAA (the last write carries the function code)
/// and returns at once; the NAA computes and writes the outputs back. Complete it with
/// `naa_test` or `naa_wait` before the next `naa_invoke`.
///
/// Returns 0 if the RPC was started, -1 if not (no connection, an RPC already in flight, or
/// posting failed; the reference returns 0 even when posting fails, D-16).
///
/// # Safety
/// `handle` must be NULL or point to a readable `naa_handle`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naa_invoke(handle: *mut naa_handle) -> c_int {
    const NAME: &str = "naa_invoke";
    // SAFETY: forwarded caller guarantee.
    guard(NAME, FAILURE, || unsafe {
        on_naa(NAME, handle, |naa| match naa.invoke() {
            Ok(()) => SUCCESS,
            Err(e) => fail(NAME, e),
        })
    })
}

/// Checks without blocking whether the RPC finished. Sets `*flag` to true once it did (or
/// failed), and always fills `*status`: `state` (FINISHED after a completed RPC), `naa_error`
/// (the NAA's return code: NAA_SUCCESS, SOCKET_UNAVAIL, KERNEL_TIMEOUT or an application
/// code) and `bytes_received`. After completion it keeps reporting the last RPC's status.
///
/// Returns 0, or -1 if the RPC failed locally (connection lost, deadline passed; then
/// `*flag` is true and `status->state` is ERROR), or if no RPC was ever invoked, or on invalid
/// arguments. Unlike the reference it never waits (the reference waits up to 500 ms, D-14).
/// If another thread is inside a call on the same handle, it returns 0 with `*flag` false.
///
/// # Safety
/// `handle` must be NULL or point to a readable `naa_handle`; `flag` and `status` must be
/// NULL or point to writable objects.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naa_test(
    handle: *mut naa_handle,
    flag: *mut bool,
    status: *mut naa_status,
) -> c_int {
    const NAME: &str = "naa_test";
    guard(NAME, FAILURE, || {
        if flag.is_null() || status.is_null() {
            return fail(NAME, "flag or status is NULL");
        }
        if !status.is_aligned() {
            return fail(NAME, "status is not aligned");
        }
        // SAFETY: forwarded caller guarantee.
        let h = match unsafe { lookup(NAME, handle) } {
            Ok(h) => h,
            Err(rc) => return rc,
        };
        let report = |done: bool, st: naa_status| {
            // SAFETY: both non-null (checked above) and writable by the caller's guarantee;
            // `bool` has alignment 1 and `status` was checked for alignment.
            unsafe {
                flag.write(done);
                put_status(status, st);
            }
        };
        let mut guard = match h.naa.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => {
                let state = state_of(h.state.load(Ordering::Relaxed));
                report(false, naa_status::in_state(state));
                return SUCCESS;
            }
        };
        let Some(naa) = guard.as_mut() else {
            return fail(NAME, Failure::state("the handle was finalized"));
        };
        let result = naa.test();
        h.remember(naa);
        match result {
            Ok(Some(s)) => {
                report(true, (&s).into());
                SUCCESS
            }
            Ok(None) => {
                report(false, naa_status::in_state(naa.state().into()));
                SUCCESS
            }
            Err(e) => {
                report(
                    true,
                    naa_status::in_state(naaice_communication_state::ERROR),
                );
                fail(NAME, e)
            }
        }
    })
}

/// Blocks until the RPC finished (or failed, or its deadline, `NAAICE_RPC_TIMEOUT`, passed)
/// and fills `*status` like `naa_test`. If the last RPC already finished, returns its status
/// at once.
///
/// Returns 0 when the RPC completed (check `status->naa_error` for the NAA's return code);
/// -1 if it failed locally (then `status->state` is ERROR), if no RPC was ever invoked, or on
/// invalid arguments. Unlike the reference it installs no SIGALRM handler and no alarm
/// (D-13), and never tears the connection down behind the caller's back (D-09).
///
/// # Safety
/// `handle` must be NULL or point to a readable `naa_handle`; `status` must be NULL or point
/// to a writable `naa_status`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naa_wait(handle: *mut naa_handle, status: *mut naa_status) -> c_int {
    const NAME: &str = "naa_wait";
    guard(NAME, FAILURE, || {
        if let Err(rc) = check_ptr(NAME, "status", status) {
            return rc;
        }
        let body = |naa: &mut Naa| {
            let (rc, st) = match naa.wait() {
                Ok(s) => (SUCCESS, (&s).into()),
                Err(e) => (
                    fail(NAME, e),
                    naa_status::in_state(naaice_communication_state::ERROR),
                ),
            };
            // SAFETY: non-null and aligned (checked above), writable by the caller's
            // guarantee.
            unsafe { put_status(status, st) };
            rc
        };
        // SAFETY: forwarded caller guarantee.
        unsafe { on_naa(NAME, handle, body) }
    })
}

/// Disconnects from the NAA and frees everything the handle holds; the parameters' memory
/// may be freed afterwards. Clears `*handle` (so a second `naa_finalize` on it is a no-op).
/// If another thread is inside a call on this handle, waits for that call to return.
///
/// Returns 0 on success, also for a handle whose `naa_create` failed (it is zeroed, nothing
/// to free); -1 if `handle` is NULL or refers to no live connection (for example a copy of a
/// handle that was already finalized).
///
/// # Safety
/// `handle` must be NULL or point to a readable and writable `naa_handle`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naa_finalize(handle: *mut naa_handle) -> c_int {
    const NAME: &str = "naa_finalize";
    guard(NAME, FAILURE, || {
        if let Err(rc) = check_ptr(NAME, "handle", handle) {
            return rc;
        }
        // SAFETY: non-null, aligned, readable by the caller's guarantee.
        let h = unsafe { handle.read() };
        if h.comm_ctx.is_null() {
            return SUCCESS;
        }
        let Some(live) = HANDLES.remove(id_of(h.comm_ctx)) else {
            return fail(NAME, "unknown handle (already finalized, or never created)");
        };
        // Disconnect now; waits for a call in progress on another thread.
        let naa = live.lock().take();
        drop(naa);
        // SAFETY: as above, and writable by the caller's guarantee.
        unsafe {
            handle.write(naa_handle {
                function_code: 0,
                comm_ctx: std::ptr::null_mut(),
            });
        }
        SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(addr: usize, size: usize, single_send: bool) -> naa_param_t {
        naa_param_t {
            addr: std::ptr::without_provenance_mut(addr),
            size,
            single_send: crate::types::CBool(u8::from(single_send)),
        }
    }

    #[test]
    fn parameter_memory_rules() {
        let mut mem = vec![0u8; 4096];
        let start = mem.as_mut_ptr();
        let base = start.addr();
        let real = |off: usize, size: usize| naa_param_t {
            addr: start.wrapping_add(off).cast(),
            size,
            single_send: crate::types::CBool(0),
        };
        // In place: same address, larger size wins, one buffer.
        let (ins, outs) = to_params(&[real(0, 100)], &[real(0, 200)]).unwrap();
        assert_eq!(ins[0].buffer().addr(), base as u64);
        assert_eq!(ins[0].buffer().len(), 200);
        assert_eq!(outs[0].buffer().addr(), ins[0].buffer().addr());
        // Separate, adjacent: fine.
        assert!(to_params(&[real(0, 100), real(100, 100)], &[real(200, 8)]).is_ok());
        // Partial overlap: error.
        let e = to_params(&[real(0, 100)], &[real(50, 100)]).err().unwrap();
        assert!(e.contains("overlap"), "{e}");
        // NULL, zero size, too big.
        assert!(
            to_params(&[p(0, 8, false)], &[])
                .err()
                .unwrap()
                .contains("NULL")
        );
        assert!(
            to_params(&[real(0, 0)], &[])
                .err()
                .unwrap()
                .contains("size is 0")
        );
        let big = to_params(&[], &[p(base, 1 << 32, false)]).err().unwrap();
        assert!(big.contains("4 GiB"), "{big}");
        assert!(
            to_params(&[p(usize::MAX - 4, 16, false)], &[])
                .err()
                .unwrap()
                .contains("wraps")
        );
    }

    #[test]
    fn unknown_state_values_read_as_error() {
        assert_eq!(state_of(30), naaice_communication_state::FINISHED);
        assert_eq!(state_of(12), naaice_communication_state::MRSP_DONE);
        assert_eq!(state_of(99), naaice_communication_state::ERROR);
    }
}
