//! rdma_cm objects: the [`EventChannel`], the [`CmId`] and the [`CmEvent`]s read from a
//! channel (copied and acknowledged at once, so no event is ever left unacknowledged).

use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::sys::{
    rdma_ack_cm_event, rdma_cm_event, rdma_cm_event_type, rdma_cm_id, rdma_create_event_channel,
    rdma_create_id, rdma_destroy_event_channel, rdma_destroy_id, rdma_event_channel,
    rdma_get_cm_event, rdma_migrate_id, rdma_port_space,
};

use super::{Result, TransportError, os_error};

/// An rdma_cm event channel with a non-blocking file descriptor.
#[derive(Debug)]
pub(super) struct EventChannel {
    raw: NonNull<rdma_event_channel>,
}

// SAFETY: librdmacm's channel functions are thread-safe; the channel is only used through
// `&self` calls that librdmacm serialises, and destroyed once in `Drop`.
unsafe impl Send for EventChannel {}
// SAFETY: as above.
unsafe impl Sync for EventChannel {}

impl EventChannel {
    /// Creates a channel. Without RDMA support this fails with
    /// [`TransportError::Unavailable`].
    pub(super) fn new() -> Result<Arc<Self>> {
        // SAFETY: no arguments; returns null (errno set) or a channel we now own.
        let raw = unsafe { rdma_create_event_channel() };
        let raw = NonNull::new(raw).ok_or_else(|| os_error("rdma_create_event_channel"))?;
        let channel = Self { raw };
        set_nonblocking(channel.fd(), "fcntl(rdma_cm channel)")?;
        Ok(Arc::new(channel))
    }

    /// The channel's file descriptor (readable when an event is pending).
    pub(super) fn fd(&self) -> RawFd {
        // SAFETY: `raw` is live while `self` is.
        unsafe { (*self.raw.as_ptr()).fd }
    }

    /// The next event if one is pending. Never blocks.
    pub(super) fn try_next(&self) -> Result<Option<CmEvent>> {
        let mut event: *mut rdma_cm_event = std::ptr::null_mut();
        // SAFETY: the channel is live; `event` is a valid out-pointer. The fd is non-blocking,
        // so the call returns EAGAIN instead of waiting.
        if unsafe { rdma_get_cm_event(self.raw.as_ptr(), &mut event) } != 0 {
            let e = std::io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
                _ => Err(TransportError::Io {
                    call: "rdma_get_cm_event",
                    source: e,
                }),
            };
        }
        // SAFETY: on success `event` points to an event owned by librdmacm until acknowledged.
        let copy = unsafe { CmEvent::copy(&*event) };
        // SAFETY: `event` came from `rdma_get_cm_event` and is acknowledged exactly once; the
        // copy holds no pointer into it.
        if unsafe { rdma_ack_cm_event(event) } != 0 {
            tracing::warn!("rdma_ack_cm_event failed");
        }
        Ok(Some(copy))
    }

    /// Waits until an event is pending or `deadline` passes (`Ok(None)` then).
    pub(super) fn next(&self, deadline: Instant) -> Result<Option<CmEvent>> {
        loop {
            if let Some(e) = self.try_next()? {
                return Ok(Some(e));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            wait_readable(&[self.fd()], deadline - now)?;
        }
    }
}

impl Drop for EventChannel {
    fn drop(&mut self) {
        // SAFETY: created by `rdma_create_event_channel`, destroyed once; every id on it holds
        // an `Arc` to it, so none is left.
        unsafe { rdma_destroy_event_channel(self.raw.as_ptr()) };
    }
}

/// An rdma_cm identifier, destroyed when dropped. Holds its event channel.
#[derive(Debug)]
pub(super) struct CmId {
    raw: NonNull<rdma_cm_id>,
    channel: Arc<EventChannel>,
}

// SAFETY: librdmacm calls on an id are thread-safe; the id is destroyed once in `Drop`.
unsafe impl Send for CmId {}
// SAFETY: as above.
unsafe impl Sync for CmId {}

impl CmId {
    /// A new `RDMA_PS_TCP` id on `channel`.
    pub(super) fn new(channel: &Arc<EventChannel>) -> Result<Self> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: the channel is live; `raw` is a valid out-pointer.
        let rc = unsafe {
            rdma_create_id(
                channel.raw.as_ptr(),
                &mut raw,
                std::ptr::null_mut(),
                rdma_port_space::RDMA_PS_TCP,
            )
        };
        if rc != 0 {
            return Err(os_error("rdma_create_id"));
        }
        let raw = NonNull::new(raw).ok_or(TransportError::Protocol("rdma_create_id gave null"))?;
        Ok(Self {
            raw,
            channel: Arc::clone(channel),
        })
    }

    /// Takes ownership of the id of a CONNECT_REQUEST event that arrived on `channel`.
    ///
    /// # Safety
    /// `raw` must be the new id of a CONNECT_REQUEST event read from `channel` (already
    /// acknowledged), not owned by anything else.
    pub(super) unsafe fn from_request(
        raw: NonNull<rdma_cm_id>,
        channel: &Arc<EventChannel>,
    ) -> Self {
        Self {
            raw,
            channel: Arc::clone(channel),
        }
    }

    /// Moves the id to `channel`: its future events arrive there.
    pub(super) fn migrate(&mut self, channel: &Arc<EventChannel>) -> Result<()> {
        // SAFETY: both live; every event of this id read so far was acknowledged (events are
        // acknowledged as soon as they are read), so librdmacm does not wait.
        if unsafe { rdma_migrate_id(self.raw.as_ptr(), channel.raw.as_ptr()) } != 0 {
            return Err(os_error("rdma_migrate_id"));
        }
        self.channel = Arc::clone(channel);
        Ok(())
    }

    /// The raw id, for the rdma_cm calls of this module.
    pub(super) fn as_ptr(&self) -> *mut rdma_cm_id {
        self.raw.as_ptr()
    }

    /// The id's event channel.
    pub(super) fn channel(&self) -> &EventChannel {
        &self.channel
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        // SAFETY: owned id, destroyed once; its QP is destroyed first (the QP holds an `Arc` to
        // the id) and all its events were acknowledged when read.
        if unsafe { rdma_destroy_id(self.raw.as_ptr()) } != 0 {
            tracing::warn!(error = %std::io::Error::last_os_error(), "rdma_destroy_id failed");
        }
    }
}

/// What this transport keeps of an rdma_cm event.
#[derive(Debug)]
pub(super) struct CmEvent {
    /// `rdma_cm_event_type`.
    pub(super) kind: rdma_cm_event_type::Type,
    /// The event's status (an errno or a CM reject reason).
    pub(super) status: i32,
    /// The id the event is about (the new id for CONNECT_REQUEST).
    pub(super) id: *mut rdma_cm_id,
    /// The listening id (CONNECT_REQUEST only).
    pub(super) listen_id: *mut rdma_cm_id,
    /// The private data of a REJECTED event (the peer's reason).
    pub(super) private_data: Vec<u8>,
}

impl CmEvent {
    /// Copies what is needed out of an unacknowledged event.
    ///
    /// # Safety
    /// `e` must be a live event from `rdma_get_cm_event`.
    unsafe fn copy(e: &rdma_cm_event) -> Self {
        let private_data = if e.event == rdma_cm_event_type::RDMA_CM_EVENT_REJECTED {
            // SAFETY: connected-mode events carry `param.conn`; its private data (if any) is
            // valid for `private_data_len` bytes until the event is acknowledged.
            unsafe {
                let conn = &e.param.conn;
                if conn.private_data.is_null() {
                    Vec::new()
                } else {
                    std::slice::from_raw_parts(
                        conn.private_data.cast::<u8>(),
                        usize::from(conn.private_data_len),
                    )
                    .to_vec()
                }
            }
        } else {
            Vec::new()
        };
        Self {
            kind: e.event,
            status: e.status,
            id: e.id,
            listen_id: e.listen_id,
            private_data,
        }
    }

    /// The event's name (`rdma_event_str`).
    pub(super) fn name(&self) -> &'static str {
        event_name(self.kind)
    }
}

/// The name of an event type.
pub(super) fn event_name(kind: rdma_cm_event_type::Type) -> &'static str {
    use rdma_cm_event_type::*;
    match kind {
        RDMA_CM_EVENT_ADDR_RESOLVED => "ADDR_RESOLVED",
        RDMA_CM_EVENT_ADDR_ERROR => "ADDR_ERROR",
        RDMA_CM_EVENT_ROUTE_RESOLVED => "ROUTE_RESOLVED",
        RDMA_CM_EVENT_ROUTE_ERROR => "ROUTE_ERROR",
        RDMA_CM_EVENT_CONNECT_REQUEST => "CONNECT_REQUEST",
        RDMA_CM_EVENT_CONNECT_RESPONSE => "CONNECT_RESPONSE",
        RDMA_CM_EVENT_CONNECT_ERROR => "CONNECT_ERROR",
        RDMA_CM_EVENT_UNREACHABLE => "UNREACHABLE",
        RDMA_CM_EVENT_REJECTED => "REJECTED",
        RDMA_CM_EVENT_ESTABLISHED => "ESTABLISHED",
        RDMA_CM_EVENT_DISCONNECTED => "DISCONNECTED",
        RDMA_CM_EVENT_DEVICE_REMOVAL => "DEVICE_REMOVAL",
        RDMA_CM_EVENT_ADDR_CHANGE => "ADDR_CHANGE",
        RDMA_CM_EVENT_TIMEWAIT_EXIT => "TIMEWAIT_EXIT",
        _ => "other",
    }
}

/// Sets `O_NONBLOCK` on `fd`.
pub(super) fn set_nonblocking(fd: RawFd, call: &'static str) -> Result<()> {
    // SAFETY: fcntl on a descriptor we own; F_GETFL/F_SETFL take no pointers.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(TransportError::Io {
            call,
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Sleeps until one of `fds` is readable or `timeout` passes (`ppoll`, nanosecond timeout,
/// no signal mask change). Returns which descriptors are readable.
pub(super) fn wait_readable<const N: usize>(
    fds: &[RawFd; N],
    timeout: Duration,
) -> Result<[bool; N]> {
    let mut pfds = fds.map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    let ts = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: `pfds` is valid for `N` entries, `ts` is a valid timespec, null sigmask.
    let rc = unsafe { libc::ppoll(pfds.as_mut_ptr(), N as libc::nfds_t, &ts, std::ptr::null()) };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(TransportError::Io {
                call: "ppoll",
                source: e,
            });
        }
    }
    Ok(pfds.map(|p| p.revents != 0))
}
