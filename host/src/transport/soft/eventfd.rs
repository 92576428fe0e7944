//! The endpoint's readiness descriptor ([`Endpoint::arm_ready`](crate::transport::Endpoint)):
//! an eventfd that the threads producing completions ring while an application thread is
//! armed to sleep on it (in poll(2) beside other endpoints' descriptors, or in an async
//! reactor) instead of in [`Endpoint::wait`](crate::transport::Endpoint).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::event::{EventfdFlags, eventfd};

/// The eventfd plus whether a waiter is armed on it.
#[derive(Debug)]
pub(crate) struct ReadyBell {
    fd: OwnedFd,
    /// Set by `arm`, cleared by the ring: only an armed waiter costs a system call per ring.
    armed: AtomicBool,
}

impl ReadyBell {
    /// A silent bell.
    pub(crate) fn new() -> io::Result<Self> {
        Ok(Self {
            fd: eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?,
            armed: AtomicBool::new(false),
        })
    }

    /// Silences the bell and arms it. The caller holds the queue pair's lock and checks for
    /// ready completions after this, so a ring between its last look and its sleep is kept.
    pub(crate) fn arm(&self) {
        let mut count = [0u8; 8];
        // Non-blocking: an error only means it was silent already.
        let _ = rustix::io::read(&self.fd, &mut count);
        self.armed.store(true, Ordering::Relaxed);
    }

    /// Rings if a waiter is armed (called under the queue pair's lock when a completion or
    /// event is ready or the connection is gone).
    pub(crate) fn ring(&self) {
        if self.armed.swap(false, Ordering::Relaxed)
            && let Err(e) = rustix::io::write(&self.fd, &1u64.to_ne_bytes())
        {
            tracing::trace!(error = %e, "soft transport: readiness bell");
        }
    }

    /// The descriptor (readable once rung, until the next `arm`).
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
