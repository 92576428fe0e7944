//! The RC queue pair of a connection (`rdma_create_qp` on its rdma_cm id).

use std::ptr::NonNull;
use std::sync::Arc;

use super::sys::{
    ibv_qp, ibv_qp_cap, ibv_qp_init_attr, ibv_qp_type, ibv_recv_wr, ibv_send_wr, rdma_create_qp,
    rdma_destroy_qp,
};

use super::cm::CmId;
use super::cq::CompletionQueue;
use super::pd::ProtectionDomain;
use super::{INLINE_SIZES, MAX_SGE, RECV_WR, Result, SEND_WR, TransportError, errno_error, ops};

/// An RC queue pair; destroyed (`rdma_destroy_qp`) when dropped. Holds its id, PD and CQ.
#[derive(Debug)]
pub(super) struct QueuePair {
    raw: NonNull<ibv_qp>,
    max_inline: u32,
    id: Arc<CmId>,
    _pd: Arc<ProtectionDomain>,
    _cq: Arc<CompletionQueue>,
}

// SAFETY: libibverbs QP calls are thread-safe; destroyed once in `Drop`, before the CQ, PD and
// id it holds.
unsafe impl Send for QueuePair {}

impl QueuePair {
    /// Creates the QP (the spec §1.1 parameters, with local queue depths of
    /// [`SEND_WR`] and [`RECV_WR`]), trying inline sizes 512 … 0.
    pub(super) fn new(
        id: &Arc<CmId>,
        pd: &Arc<ProtectionDomain>,
        cq: &Arc<CompletionQueue>,
    ) -> Result<Self> {
        let mut last = None;
        for inline in INLINE_SIZES {
            let mut attr = ibv_qp_init_attr {
                qp_context: std::ptr::null_mut(),
                send_cq: cq.as_ptr(),
                recv_cq: cq.as_ptr(),
                srq: std::ptr::null_mut(),
                cap: ibv_qp_cap {
                    max_send_wr: SEND_WR,
                    max_recv_wr: RECV_WR,
                    max_send_sge: MAX_SGE,
                    max_recv_sge: MAX_SGE,
                    max_inline_data: inline,
                },
                qp_type: ibv_qp_type::IBV_QPT_RC,
                // Only the requests posted with IBV_SEND_SIGNALED complete on the CQ (the last
                // of each list; `Outstanding` accounts for the others).
                sq_sig_all: 0,
            };
            // SAFETY: id, PD and CQ are live and on the same device; `attr` is valid and gets
            // the provider's actual capabilities written back.
            let rc = unsafe { rdma_create_qp(id.as_ptr(), pd.as_ptr(), &mut attr) };
            if rc == 0 {
                // SAFETY: on success librdmacm stored the QP in the id.
                let raw = unsafe { (*id.as_ptr()).qp };
                let raw = NonNull::new(raw)
                    .ok_or(TransportError::Protocol("rdma_create_qp left no QP"))?;
                tracing::debug!(
                    inline = attr.cap.max_inline_data,
                    "verbs: queue pair created"
                );
                return Ok(Self {
                    raw,
                    max_inline: attr.cap.max_inline_data,
                    id: Arc::clone(id),
                    _pd: Arc::clone(pd),
                    _cq: Arc::clone(cq),
                });
            }
            last = Some(std::io::Error::last_os_error());
        }
        Err(errno_error(
            "rdma_create_qp",
            last.unwrap_or_else(|| std::io::Error::from_raw_os_error(libc::EINVAL)),
        ))
    }

    /// The largest payload the provider takes inline.
    pub(super) fn max_inline(&self) -> u32 {
        self.max_inline
    }

    /// Posts a linked list of send work requests with one doorbell. On failure, `bad` is the
    /// request the provider refused (those before it were posted), or null.
    ///
    /// # Safety
    /// `wr` must be a valid null-terminated list whose SGEs lie in memory registered on this
    /// QP's PD that stays registered until the requests complete.
    pub(super) unsafe fn post_send(
        &self,
        wr: *mut ibv_send_wr,
        bad: &mut *mut ibv_send_wr,
    ) -> Result<()> {
        // SAFETY: the QP is live; the list as guaranteed by the caller.
        unsafe { ops::post_send(self.raw.as_ptr(), wr, bad) }.map_err(post_error)
    }

    /// Posts one receive work request.
    ///
    /// # Safety
    /// As [`QueuePair::post_send`].
    pub(super) unsafe fn post_recv(&self, wr: *mut ibv_recv_wr) -> Result<()> {
        // SAFETY: the QP is live; the request as guaranteed by the caller.
        unsafe { ops::post_recv(self.raw.as_ptr(), wr) }.map_err(post_error)
    }
}

/// Posting errors: a full queue is a local invalid request, a QP in the error or reset state
/// means the connection is gone.
fn post_error(e: std::io::Error) -> TransportError {
    match e.raw_os_error() {
        Some(libc::ENOMEM) => TransportError::InvalidRequest("work queue full"),
        Some(libc::EINVAL) => {
            TransportError::InvalidRequest("work request refused by the provider")
        }
        Some(libc::EBADF) | Some(libc::EPIPE) | Some(libc::ENOTCONN) => {
            TransportError::NotConnected
        }
        _ => errno_error("ibv_post", e),
    }
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        // SAFETY: created by `rdma_create_qp` on this id, destroyed once; the id is still
        // alive (held by `self.id`).
        unsafe { rdma_destroy_qp(self.id.as_ptr()) };
    }
}
