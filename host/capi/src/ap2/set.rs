//! naaice-rs extension (not in the reference): many AP2 handles progressed together, after
//! MPI's `MPI_Waitany` / `MPI_Waitall` / `MPI_Testany` / `MPI_Testall` ([`naaice::client::naa_set`]).
//!
//! One thread keeps RPCs on many NAAs (any function codes) in flight and sleeps in one
//! poll(2) over their connections until one has news. Handles are passed as an array of
//! `naa_handle` (the structs `naa_create` filled), like MPI's array of requests.

use std::ffi::c_int;
use std::sync::{Arc, MutexGuard, TryLockError};
use std::task::Poll;

use naaice::client::naa_set::{self, Finished};
use naaice::{Naa, Status};

use crate::ap2::{HANDLES, Handle};
use crate::boundary::{FAILURE, SUCCESS, check_ptr, fail, guard};
use crate::error::Failure;
use crate::handles::id_of;
use crate::types::{naa_handle, naa_status, naaice_communication_state};

/// `*index` of `naa_waitany` / `naa_testany` when no handle has an RPC in flight (MPI's
/// `MPI_UNDEFINED`).
pub const NAA_UNDEFINED: c_int = -1;

/// The handles of an array: `None` for a NULL handle (`comm_ctx` NULL: `naa_create` failed or
/// `naa_finalize` was called), which is inactive.
type Resolved = Vec<Option<Arc<Handle>>>;

/// Reads and checks the array `handles[0..count]`.
///
/// # Safety
/// If `count > 0` and `handles` is not NULL, it must point to `count` readable `naa_handle`.
unsafe fn resolve(
    name: &'static str,
    count: c_int,
    handles: *const naa_handle,
) -> Result<Resolved, c_int> {
    let n = usize::try_from(count).map_err(|_| fail(name, format!("count {count} < 0")))?;
    if n == 0 {
        return Ok(Vec::new());
    }
    if handles.is_null() {
        return Err(fail(name, format!("handles is NULL but count is {n}")));
    }
    if !handles.is_aligned() {
        return Err(fail(name, "handles is not aligned"));
    }
    // SAFETY: non-null, aligned, `n` readable elements by the caller's guarantee; plain data.
    let array = unsafe { std::slice::from_raw_parts(handles, n) };
    let mut resolved: Resolved = Vec::with_capacity(n);
    for (i, h) in array.iter().enumerate() {
        if h.comm_ctx.is_null() {
            resolved.push(None);
            continue;
        }
        let live = HANDLES.get(id_of(h.comm_ctx)).ok_or_else(|| {
            fail(
                name,
                format!("handle {i}: unknown handle (finalized, or never created)"),
            )
        })?;
        if let Some(j) = resolved
            .iter()
            .position(|r| r.as_ref().is_some_and(|r| Arc::ptr_eq(r, &live)))
        {
            return Err(fail(
                name,
                format!("handles {j} and {i} are the same handle (each may appear once)"),
            ));
        }
        resolved.push(Some(live));
    }
    Ok(resolved)
}

/// How the handles are locked.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Locking {
    /// Wait for calls on other threads (in one global order: no deadlock between sets).
    Block,
    /// Skip handles that another thread is using (test functions never wait).
    Try,
}

/// The locked handles of an array.
struct Locked<'a> {
    /// `(position, guard)` in lock order.
    guards: Vec<(usize, MutexGuard<'a, Option<Naa>>)>,
    /// Some handle was in use by another thread (only with [`Locking::Try`]).
    held_elsewhere: bool,
}

fn lock(resolved: &Resolved, locking: Locking) -> Locked<'_> {
    let mut order: Vec<(usize, &Arc<Handle>)> = resolved
        .iter()
        .enumerate()
        .filter_map(|(i, h)| h.as_ref().map(|h| (i, h)))
        .collect();
    order.sort_by_key(|(_, h)| Arc::as_ptr(h).addr());
    let mut locked = Locked {
        guards: Vec::with_capacity(order.len()),
        held_elsewhere: false,
    };
    for (i, h) in order {
        let g = match locking {
            Locking::Block => h.lock(),
            Locking::Try => match h.try_lock() {
                Ok(g) => g,
                Err(TryLockError::Poisoned(p)) => p.into_inner(),
                Err(TryLockError::WouldBlock) => {
                    locked.held_elsewhere = true;
                    continue;
                }
            },
        };
        locked.guards.push((i, g));
    }
    locked
}

impl Locked<'_> {
    /// The live handles in array order, with their positions.
    fn participants(&mut self) -> (Vec<usize>, Vec<&mut Naa>) {
        let mut live: Vec<(usize, &mut Naa)> = self
            .guards
            .iter_mut()
            .filter_map(|(i, g)| g.as_mut().map(|naa| (*i, naa)))
            .collect();
        live.sort_by_key(|(i, _)| *i);
        live.into_iter().unzip()
    }

    /// Records each handle's state for `naa_test` on other threads.
    fn remember(&self, resolved: &Resolved) {
        for (i, g) in &self.guards {
            if let (Some(naa), Some(h)) = (g.as_ref(), &resolved[*i]) {
                h.remember(naa);
            }
        }
    }

    /// The state of the handle at `position` (DISCONNECTED if finalized meanwhile).
    fn state(&self, position: usize) -> naaice_communication_state {
        self.guards
            .iter()
            .find(|(i, _)| *i == position)
            .and_then(|(_, g)| g.as_ref())
            .map_or(naaice_communication_state::DISCONNECTED, |naa| {
                naa.state().into()
            })
    }
}

/// What a call over the array gives: the body's result and each position's state after it.
struct SetCall<R> {
    result: R,
    states: Vec<naaice_communication_state>,
}

/// Resolves and locks `handles[0..count]`, runs `body` on the live handles (their positions,
/// the handles, and whether another thread held one), and records the handles' states.
///
/// # Safety
/// As [`resolve`].
unsafe fn on_set<R>(
    name: &'static str,
    count: c_int,
    handles: *const naa_handle,
    locking: Locking,
    body: impl FnOnce(&[usize], Vec<&mut Naa>, bool) -> R,
) -> Result<SetCall<R>, c_int> {
    // SAFETY: forwarded caller guarantee.
    let resolved = unsafe { resolve(name, count, handles) }?;
    let mut locked = lock(&resolved, locking);
    let held_elsewhere = locked.held_elsewhere;
    let (positions, naas) = locked.participants();
    let result = body(&positions, naas, held_elsewhere);
    locked.remember(&resolved);
    let states = (0..resolved.len()).map(|i| locked.state(i)).collect();
    Ok(SetCall { result, states })
}

/// One set export: resolves and locks `handles[0..count]`, runs `run` on the live handles
/// (their positions, the handles, whether another thread held one) and, once it has an
/// outcome, reports it with `report` (given each position's state); the call's return value.
/// A test call passes its `flag` (and the `index` it sets to `NAA_UNDEFINED` while RPCs still
/// run, or null): `*flag` tells whether `run` had an outcome; a wait call passes `None`.
///
/// # Safety
/// As [`resolve`]; `test`'s pointers non-null (the index may be null), aligned and writable.
unsafe fn set_export<R>(
    name: &'static str,
    count: c_int,
    handles: *const naa_handle,
    locking: Locking,
    test: Option<(*mut bool, *mut c_int)>,
    run: impl FnOnce(&[usize], Vec<&mut Naa>, bool) -> Poll<R>,
    report: impl FnOnce(&[naaice_communication_state], R) -> c_int,
) -> c_int {
    // SAFETY: forwarded caller guarantee.
    let call = match unsafe { on_set(name, count, handles, locking, run) } {
        Ok(call) => call,
        Err(rc) => return rc,
    };
    let ready = call.result.is_ready();
    if let Some((flag, index)) = test {
        // SAFETY: guaranteed by the caller.
        unsafe {
            flag.write(ready);
            if !ready && !index.is_null() {
                index.write(NAA_UNDEFINED);
            }
        }
    }
    match call.result {
        Poll::Ready(outcome) => report(&call.states, outcome),
        Poll::Pending => SUCCESS,
    }
}

/// A zeroed status (state INIT, no code, no bytes): MPI's empty status.
fn empty() -> naa_status {
    naa_status::in_state(naaice_communication_state::INIT)
}

/// The RPC a `*any` call found finished, if any: its position in the array and its result.
type AnyOutcome = Option<(usize, naaice::Result<Status>)>;

/// The finished RPC of the participants at `positions`, by its position in the array.
fn any(positions: &[usize], finished: Option<Finished>) -> AnyOutcome {
    finished.map(|Finished { index, result }| (positions[index], result))
}

/// Writes the finished RPC (or none: `NAA_UNDEFINED` and a zeroed status) to `index` /
/// `status`; the return value of the call.
///
/// # Safety
/// `index` and `status` must be non-null, aligned and writable.
unsafe fn report_one(
    name: &'static str,
    finished: AnyOutcome,
    index: *mut c_int,
    status: *mut naa_status,
) -> c_int {
    let idx = finished
        .as_ref()
        .map_or(NAA_UNDEFINED, |(p, _)| *p as c_int);
    let (rc, st) = match finished.map(|(_, r)| r) {
        None => (SUCCESS, empty()),
        Some(Ok(s)) => (SUCCESS, (&s).into()),
        Some(Err(e)) => (
            fail(name, Failure::from(e).context(format_args!("handle {idx}"))),
            naa_status::in_state(naaice_communication_state::ERROR),
        ),
    };
    // SAFETY: guaranteed by the caller.
    unsafe {
        index.write(idx);
        status.write(st);
    }
    rc
}

/// Fills `statuses` from the per-handle outcomes of a `*all` call; the call's return value.
///
/// # Safety
/// `statuses` must be non-null, aligned and writable for `outcomes.len()` elements.
unsafe fn report_all(
    name: &'static str,
    states: &[naaice_communication_state],
    outcomes: Vec<Option<Option<naaice::Result<Status>>>>,
    statuses: *mut naa_status,
) -> c_int {
    let mut failures: Vec<Failure> = Vec::new();
    for (i, outcome) in outcomes.into_iter().enumerate() {
        let st = match outcome {
            // A NULL handle.
            None => empty(),
            // Inactive: never invoked, or its outcome was reported before.
            Some(None) => naa_status::in_state(states[i]),
            Some(Some(Ok(s))) => (&s).into(),
            Some(Some(Err(e))) => {
                failures.push(Failure::from(e).context(format_args!("handle {i}")));
                naa_status::in_state(naaice_communication_state::ERROR)
            }
        };
        // SAFETY: `i` < the array's length, guaranteed writable by the caller.
        unsafe { statuses.add(i).write(st) };
    }
    let Some(first) = failures.first() else {
        return SUCCESS;
    };
    let message = failures
        .iter()
        .map(|f| f.message.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    fail(name, Failure::new(first.kind, message))
}

/// Spreads the outcomes of the participants over the array's positions (`None` for NULL
/// handles).
fn by_position(
    n: usize,
    positions: &[usize],
    outcomes: Vec<Option<naaice::Result<Status>>>,
) -> Vec<Option<Option<naaice::Result<Status>>>> {
    let mut all: Vec<_> = (0..n).map(|_| None).collect();
    for (p, o) in positions.iter().zip(outcomes) {
        all[*p] = Some(o);
    }
    all
}

/// ==== naaice-rs extensions (not in the reference): many handles together, MPI-like
/// (naa_waitany, naa_testany, naa_waitall, naa_testall) ====
///
/// **Extension.** Blocks until the RPC of one of the handles `handles[0..count]` finishes or
/// fails, like `MPI_Waitany`, and reports it: `*index` is its position and `*status` its
/// status (as `naa_wait` gives it). Each RPC is reported once; afterwards its handle is
/// inactive and may be invoked again.
///
/// Handles without an RPC in flight (never invoked, already reported, or NULL: `comm_ctx`
/// NULL after a failed `naa_create` or `naa_finalize`) are skipped; if no handle has an RPC
/// in flight, returns 0 at once with `*index` = `NAA_UNDEFINED` and a zeroed `*status`.
/// Waits for calls on other threads using the same handles.
///
/// Returns 0, or -1 if the reported RPC failed (connection lost, its deadline passed; then
/// `*index` names it and `status->state` is ERROR), or on invalid arguments (`count` < 0,
/// NULL arrays or out-pointers, an unknown handle, a handle twice in the array; then
/// nothing is waited for).
///
/// # Safety
/// `handles` must be NULL or point to `count` readable `naa_handle`; `index` and `status`
/// must be NULL or point to writable objects.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naa_waitany(
    count: c_int,
    handles: *mut naa_handle,
    index: *mut c_int,
    status: *mut naa_status,
) -> c_int {
    const NAME: &str = "naa_waitany";
    guard(NAME, FAILURE, || {
        if let Err(rc) = check_ptr(NAME, "index", index).and(check_ptr(NAME, "status", status)) {
            return rc;
        }
        // SAFETY: forwarded caller guarantee; `index` and `status` checked above.
        unsafe {
            set_export(
                NAME,
                count,
                handles,
                Locking::Block,
                None,
                |positions, naas, _| Poll::Ready(any(positions, naa_set::wait_any(naas))),
                |_, finished| report_one(NAME, finished, index, status),
            )
        }
    })
}

/// **Extension (not in the reference).** Like `naa_waitany` without blocking, like
/// `MPI_Testany`: progresses the handles' RPCs and sets `*flag`. If an RPC finished or
/// failed, `*flag` is true and `*index` / `*status` report it (as `naa_waitany` does). If
/// none did yet, `*flag` is false, `*index` is `NAA_UNDEFINED` and `*status` is not written.
/// If no handle has an RPC in flight, `*flag` is true, `*index` is `NAA_UNDEFINED` and
/// `*status` is zeroed. Never waits: a handle that another thread is using counts as still
/// running.
///
/// Returns 0, or -1 if the reported RPC failed or on invalid arguments (as `naa_waitany`).
///
/// # Safety
/// `handles` must be NULL or point to `count` readable `naa_handle`; `index`, `flag` and
/// `status` must be NULL or point to writable objects.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naa_testany(
    count: c_int,
    handles: *mut naa_handle,
    index: *mut c_int,
    flag: *mut bool,
    status: *mut naa_status,
) -> c_int {
    const NAME: &str = "naa_testany";
    guard(NAME, FAILURE, || {
        if let Err(rc) = check_ptr(NAME, "index", index)
            .and(check_ptr(NAME, "flag", flag))
            .and(check_ptr(NAME, "status", status))
        {
            return rc;
        }
        // SAFETY: forwarded caller guarantee; `index`, `flag` and `status` checked above.
        unsafe {
            set_export(
                NAME,
                count,
                handles,
                Locking::Try,
                Some((flag, index)),
                |positions: &[usize], naas, held| match naa_set::test_any(naas) {
                    // Not known: a handle another thread uses may still run.
                    Poll::Ready(None) if held => Poll::Pending,
                    done => done.map(|f| any(positions, f)),
                },
                |_, finished| report_one(NAME, finished, index, status),
            )
        }
    })
}

/// **Extension (not in the reference).** Blocks until the RPCs of all handles
/// `handles[0..count]` finished or failed, like `MPI_Waitall`, and fills `statuses[i]` for
/// every position: the RPC's status (as `naa_wait` gives it); for a handle without an RPC in
/// flight (never invoked, or its outcome already reported) a status in its current state
/// with no return code and no bytes; for a NULL handle (`comm_ctx` NULL) a zeroed status; for
/// a failed RPC, or a handle whose connection failed earlier, state ERROR. Waits for calls on
/// other threads using the same handles.
///
/// Returns 0 if every RPC completed (check each `naa_error`), -1 if any failed (every
/// failure, by position, is in `naa_last_error()`) or on invalid arguments (`count` < 0, NULL
/// arrays, an unknown handle, a handle twice; then nothing is waited for). `statuses` may be
/// NULL only if `count` is 0.
///
/// # Safety
/// `handles` must be NULL or point to `count` readable `naa_handle`; `statuses` must be NULL
/// or point to `count` writable `naa_status`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naa_waitall(
    count: c_int,
    handles: *mut naa_handle,
    statuses: *mut naa_status,
) -> c_int {
    const NAME: &str = "naa_waitall";
    guard(NAME, FAILURE, || {
        if count > 0
            && let Err(rc) = check_ptr(NAME, "statuses", statuses)
        {
            return rc;
        }
        let n = count.max(0) as usize;
        // SAFETY: forwarded caller guarantee; `statuses` checked above when count > 0.
        unsafe {
            set_export(
                NAME,
                count,
                handles,
                Locking::Block,
                None,
                |positions: &[usize], naas, _| {
                    Poll::Ready(by_position(n, positions, naa_set::wait_all(naas)))
                },
                |states, all| report_all(NAME, states, all, statuses),
            )
        }
    })
}

/// **Extension (not in the reference).** Like `naa_waitall` without blocking, like
/// `MPI_Testall`: progresses every handle's RPC; if none is still running, sets `*flag` true
/// and fills `statuses` as `naa_waitall` does (and returns as it does). Otherwise `*flag` is
/// false, `statuses` are not written and nothing is reported: RPCs that finished stay to be
/// reported by a later call. Never waits: if another thread is using one of the handles,
/// `*flag` is false.
///
/// # Safety
/// `handles` must be NULL or point to `count` readable `naa_handle`; `flag` must be NULL or
/// point to a writable `bool`; `statuses` must be NULL or point to `count` writable
/// `naa_status`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn naa_testall(
    count: c_int,
    handles: *mut naa_handle,
    flag: *mut bool,
    statuses: *mut naa_status,
) -> c_int {
    const NAME: &str = "naa_testall";
    guard(NAME, FAILURE, || {
        if let Err(rc) = check_ptr(NAME, "flag", flag) {
            return rc;
        }
        if count > 0
            && let Err(rc) = check_ptr(NAME, "statuses", statuses)
        {
            return rc;
        }
        let n = count.max(0) as usize;
        // SAFETY: forwarded caller guarantee; `flag` and `statuses` checked above.
        unsafe {
            set_export(
                NAME,
                count,
                handles,
                Locking::Try,
                Some((flag, std::ptr::null_mut())),
                |positions: &[usize], naas, held| {
                    if held {
                        // Not known: a handle another thread uses may still run.
                        return Poll::Pending;
                    }
                    naa_set::test_all(naas).map(|o| by_position(n, positions, o))
                },
                |states, all| report_all(NAME, states, all, statuses),
            )
        }
    })
}
