//! The data-path verbs that `verbs.h` defines `static inline`: they dispatch through the
//! provider's `ibv_context_ops`. rdma-mummy-sys `unwrap()`s those function pointers; these versions
//! return `EOPNOTSUPP` for a missing operation instead of panicking.

use std::io;

use super::sys::{ibv_cq, ibv_qp, ibv_recv_wr, ibv_send_wr, ibv_wc};

/// `ibv_poll_cq`: up to `wcs.len()` completions into `wcs`; returns how many.
///
/// # Safety
/// `cq` must point to a live CQ created by libibverbs.
pub(super) unsafe fn poll_cq(cq: *mut ibv_cq, wcs: &mut [ibv_wc]) -> io::Result<usize> {
    // SAFETY: the caller guarantees `cq` is live, so `context` points to its live context.
    let op = unsafe { (*(*cq).context).ops.poll_cq };
    let op = op.ok_or_else(unsupported)?;
    let n = i32::try_from(wcs.len()).unwrap_or(i32::MAX);
    // SAFETY: `cq` is live and `wcs` is valid for `n` writable entries.
    let got = unsafe { op(cq, n, wcs.as_mut_ptr()) };
    match usize::try_from(got) {
        Ok(got) => Ok(got.min(wcs.len())),
        Err(_) => Err(io::Error::other(format!("ibv_poll_cq returned {got}"))),
    }
}

/// `ibv_req_notify_cq`: arms the CQ's completion channel for the next (solicited) completion.
///
/// # Safety
/// `cq` must point to a live CQ created by libibverbs.
pub(super) unsafe fn req_notify_cq(cq: *mut ibv_cq, solicited_only: bool) -> io::Result<()> {
    // SAFETY: the caller guarantees `cq` is live.
    let op = unsafe { (*(*cq).context).ops.req_notify_cq };
    let op = op.ok_or_else(unsupported)?;
    // SAFETY: `cq` is live.
    errno(unsafe { op(cq, i32::from(solicited_only)) })
}

/// `ibv_post_send` of the linked list starting at `wr`. On failure, `bad` is the request the
/// provider refused (those before it were posted), or null.
///
/// # Safety
/// `qp` must point to a live QP; `wr` must be a valid, null-terminated list whose SGEs name
/// registered memory that stays registered until the work requests complete.
pub(super) unsafe fn post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad: &mut *mut ibv_send_wr,
) -> io::Result<()> {
    // SAFETY: the caller guarantees `qp` is live.
    let op = unsafe { (*(*qp).context).ops.post_send };
    let op = op.ok_or_else(unsupported)?;
    *bad = std::ptr::null_mut();
    // SAFETY: arguments as guaranteed by the caller; `bad` is a valid out-pointer.
    errno(unsafe { op(qp, wr, bad) })
}

/// `ibv_post_recv` of the linked list starting at `wr`.
///
/// # Safety
/// As [`post_send`].
pub(super) unsafe fn post_recv(qp: *mut ibv_qp, wr: *mut ibv_recv_wr) -> io::Result<()> {
    // SAFETY: the caller guarantees `qp` is live.
    let op = unsafe { (*(*qp).context).ops.post_recv };
    let op = op.ok_or_else(unsupported)?;
    let mut bad = std::ptr::null_mut();
    // SAFETY: arguments as guaranteed by the caller; `bad` is a valid out-pointer.
    errno(unsafe { op(qp, wr, &mut bad) })
}

/// The provider lacks the operation (what the C inline would return).
fn unsupported() -> io::Error {
    io::Error::from_raw_os_error(libc::EOPNOTSUPP)
}

/// Data-path verbs return 0 or a positive error number (not -1 + errno).
fn errno(rc: i32) -> io::Result<()> {
    match rc {
        0 => Ok(()),
        rc if rc > 0 => Err(io::Error::from_raw_os_error(rc)),
        _ => Err(io::Error::last_os_error()),
    }
}
