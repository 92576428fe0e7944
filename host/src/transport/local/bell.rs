//! The descriptor a sleeping in-process endpoint waits on: an eventfd rung only while a
//! waiter is armed, so completions handed to a running (or spinning) thread cost no system
//! call.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec, eventfd};

/// An eventfd and whether a waiter sleeps on it.
#[derive(Debug)]
pub(super) struct Bell {
    fd: OwnedFd,
    armed: AtomicBool,
}

impl Bell {
    /// A silent bell.
    pub(super) fn new() -> io::Result<Self> {
        Ok(Self {
            fd: eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?,
            armed: AtomicBool::new(false),
        })
    }

    /// Silences the bell and arms it. The caller holds its side's queue lock and looks for
    /// ready work after this, so a ring between that look and its sleep is kept.
    pub(super) fn arm(&self) {
        let mut count = [0u8; 8];
        // Non-blocking: an error only means it was silent already.
        let _ = rustix::io::read(&self.fd, &mut count);
        self.armed.store(true, Ordering::Relaxed);
    }

    /// Rings if a waiter is armed (called under the side's queue lock).
    pub(super) fn ring(&self) {
        if self.armed.swap(false, Ordering::Relaxed) {
            self.wake();
        }
    }

    /// Rings whether a waiter is armed or not: readable until the next `arm`.
    pub(super) fn wake(&self) {
        if let Err(e) = rustix::io::write(&self.fd, &1u64.to_ne_bytes()) {
            tracing::trace!(error = %e, "in-process transport: bell");
        }
    }

    /// Sleeps until the bell rang or `timeout` passed (`None`: no limit).
    pub(super) fn sleep(&self, timeout: Option<Duration>) {
        // (A timeout beyond `Timespec`'s range is no different from none.)
        let ts = timeout.and_then(|t| Timespec::try_from(t).ok());
        let mut fds = [PollFd::new(&self.fd, PollFlags::IN)];
        // EINTR or readable: the caller looks again either way.
        let _ = rustix::event::poll(&mut fds, ts.as_ref());
    }

    /// The descriptor (readable once rung, until the next `arm`).
    pub(super) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
