//! The completion channel and the completion queue of a connection.

use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::Arc;

use super::sys::{
    ibv_ack_cq_events, ibv_comp_channel, ibv_cq, ibv_create_comp_channel, ibv_create_cq,
    ibv_destroy_comp_channel, ibv_destroy_cq, ibv_get_cq_event, ibv_wc,
};

use super::cm::set_nonblocking;
use super::pd::ProtectionDomain;
use super::{CQ_ENTRIES, Result, TransportError, errno_error, ops, os_error};

/// A completion channel with a non-blocking file descriptor.
#[derive(Debug)]
pub(super) struct CompletionChannel {
    raw: NonNull<ibv_comp_channel>,
    _pd: Arc<ProtectionDomain>,
}

// SAFETY: libibverbs objects are thread-safe; destroyed once in `Drop`, after the CQ bound to
// it (the CQ holds an `Arc` to the channel).
unsafe impl Send for CompletionChannel {}
// SAFETY: as above.
unsafe impl Sync for CompletionChannel {}

impl CompletionChannel {
    /// A channel on the PD's device (the PD keeps the device context alive).
    pub(super) fn new(pd: &Arc<ProtectionDomain>) -> Result<Arc<Self>> {
        let context = pd.context()?;
        // SAFETY: `context` is a live device context.
        let raw = unsafe { ibv_create_comp_channel(context.as_ptr()) };
        let raw = NonNull::new(raw).ok_or_else(|| os_error("ibv_create_comp_channel"))?;
        let channel = Self {
            raw,
            _pd: Arc::clone(pd),
        };
        set_nonblocking(channel.fd(), "fcntl(completion channel)")?;
        Ok(Arc::new(channel))
    }

    /// The channel's file descriptor (readable when a CQ event is pending).
    pub(super) fn fd(&self) -> RawFd {
        // SAFETY: `raw` is live while `self` is.
        unsafe { (*self.raw.as_ptr()).fd }
    }
}

impl Drop for CompletionChannel {
    fn drop(&mut self) {
        // SAFETY: created by `ibv_create_comp_channel`, destroyed once, no CQ left on it.
        if unsafe { ibv_destroy_comp_channel(self.raw.as_ptr()) } != 0 {
            tracing::warn!("ibv_destroy_comp_channel failed");
        }
    }
}

/// A completion queue bound to a [`CompletionChannel`]. Every CQ event is acknowledged as
/// soon as it is read.
#[derive(Debug)]
pub(super) struct CompletionQueue {
    raw: NonNull<ibv_cq>,
    channel: Arc<CompletionChannel>,
}

// SAFETY: libibverbs CQ calls are thread-safe; destroyed once in `Drop`, after the QP using it
// (the QP holds an `Arc` to it).
unsafe impl Send for CompletionQueue {}
// SAFETY: as above.
unsafe impl Sync for CompletionQueue {}

impl CompletionQueue {
    /// A CQ of [`CQ_ENTRIES`] entries on `channel`, armed solicited-only (spec §1.1).
    pub(super) fn new(channel: &Arc<CompletionChannel>) -> Result<Arc<Self>> {
        // SAFETY: the channel is live; its context is the one the PD was allocated on.
        let context = unsafe { (*channel.raw.as_ptr()).context };
        // SAFETY: live context and channel; no CQ context pointer.
        let raw = unsafe {
            ibv_create_cq(
                context,
                CQ_ENTRIES,
                std::ptr::null_mut(),
                channel.raw.as_ptr(),
                0,
            )
        };
        let raw = NonNull::new(raw).ok_or_else(|| os_error("ibv_create_cq"))?;
        let cq = Arc::new(Self {
            raw,
            channel: Arc::clone(channel),
        });
        cq.arm(true)?;
        Ok(cq)
    }

    /// The raw CQ.
    pub(super) fn as_ptr(&self) -> *mut ibv_cq {
        self.raw.as_ptr()
    }

    /// The channel's file descriptor.
    pub(super) fn channel_fd(&self) -> RawFd {
        self.channel.fd()
    }

    /// Polls up to `wcs.len()` completions. Never blocks.
    pub(super) fn poll(&self, wcs: &mut [ibv_wc]) -> Result<usize> {
        // SAFETY: the CQ is live.
        unsafe { ops::poll_cq(self.raw.as_ptr(), wcs) }.map_err(|e| errno_error("ibv_poll_cq", e))
    }

    /// Requests an event on the channel for the next completion (or the next solicited one).
    pub(super) fn arm(&self, solicited_only: bool) -> Result<()> {
        // SAFETY: the CQ is live.
        unsafe { ops::req_notify_cq(self.raw.as_ptr(), solicited_only) }
            .map_err(|e| errno_error("ibv_req_notify_cq", e))
    }

    /// Reads and acknowledges one pending CQ event; false if none is pending. Never blocks.
    pub(super) fn take_event(&self) -> Result<bool> {
        let mut cq: *mut ibv_cq = std::ptr::null_mut();
        let mut ctx = std::ptr::null_mut();
        // SAFETY: the channel is live and non-blocking; out-pointers are valid.
        if unsafe { ibv_get_cq_event(self.channel.raw.as_ptr(), &mut cq, &mut ctx) } != 0 {
            let e = std::io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(false),
                _ => Err(TransportError::Io {
                    call: "ibv_get_cq_event",
                    source: e,
                }),
            };
        }
        // SAFETY: the event is for the only CQ on this channel (`cq == self.raw`); acknowledged
        // once.
        unsafe { ibv_ack_cq_events(cq, 1) };
        Ok(true)
    }
}

impl Drop for CompletionQueue {
    fn drop(&mut self) {
        // SAFETY: created by `ibv_create_cq`, destroyed once, after its QP; all its events were
        // acknowledged in `take_event`.
        if unsafe { ibv_destroy_cq(self.raw.as_ptr()) } != 0 {
            tracing::warn!("ibv_destroy_cq failed");
        }
    }
}
