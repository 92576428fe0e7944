//! The endpoint's readiness descriptor ([`Endpoint::arm_ready`](crate::transport::Endpoint)),
//! for an application thread that sleeps on it (in poll(2) beside other endpoints'
//! descriptors, or in an async reactor) instead of in [`Endpoint::wait`](crate::transport::Endpoint):
//!
//! * an eventfd that the threads producing completions ring while the waiter is armed;
//! * an epoll instance over that eventfd and the socket, for a waiter that keeps the reader
//!   (see `ReadSlot::AppIdle`): it then wakes as soon as input arrives and reads it itself in
//!   its next poll, instead of the NIC thread reading it first and ringing (one thread
//!   woken per message instead of two). If it sleeps beyond the hand-over time, the NIC
//!   thread takes the reader as from any idle application thread, and rings.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rustix::event::epoll;
use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec, eventfd};

/// The eventfd, the epoll instance over it and the socket, and how the waiter is armed.
#[derive(Debug)]
pub(crate) struct ReadyBell {
    fd: OwnedFd,
    /// Readable once the bell rang or input arrived on the socket.
    bell_or_input: OwnedFd,
    /// Set by `arm`, cleared by the ring: only an armed waiter costs a system call per ring.
    armed: AtomicBool,
    /// The waiter armed last keeps the reader: it sleeps on `bell_or_input`.
    on_input: AtomicBool,
}

impl ReadyBell {
    /// A silent bell for the connection on `socket`.
    pub(crate) fn new(socket: BorrowedFd<'_>) -> io::Result<Self> {
        let fd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        let bell_or_input = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        for source in [fd.as_fd(), socket] {
            epoll::add(
                &bell_or_input,
                source,
                epoll::EventData::new_u64(0),
                epoll::EventFlags::IN,
            )?;
        }
        Ok(Self {
            fd,
            bell_or_input,
            armed: AtomicBool::new(false),
            on_input: AtomicBool::new(false),
        })
    }

    /// Silences the bell and arms it; a waiter that keeps the reader (`on_input`) wakes on
    /// input too. The caller holds the queue pair's lock and checks for ready completions
    /// after this, so a ring between its last look and its sleep is kept.
    pub(crate) fn arm(&self, on_input: bool) {
        let mut count = [0u8; 8];
        // Non-blocking: an error only means it was silent already.
        let _ = rustix::io::read(&self.fd, &mut count);
        self.on_input.store(on_input, Ordering::Relaxed);
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

    /// Rings whether a waiter is armed or not (a [`Waker`](crate::transport::Waker)): the
    /// descriptor stays readable until the next `arm`.
    pub(crate) fn wake(&self) {
        self.armed.store(false, Ordering::Relaxed);
        if let Err(e) = rustix::io::write(&self.fd, &1u64.to_ne_bytes()) {
            tracing::trace!(error = %e, "soft transport: readiness bell");
        }
    }

    /// Sleeps on the descriptor the last `arm` chose until it is readable or `timeout`
    /// passes (an application thread that keeps the reader and has found nothing for a
    /// while: it wakes on input, a completion rung in, or a [`ReadyBell::wake`]).
    pub(crate) fn sleep(&self, timeout: Duration) {
        // (A timeout beyond `Timespec`'s range is no different from none.)
        let ts = Timespec::try_from(timeout).ok();
        let fd = self.fd();
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        // EINTR or readable: the caller looks again either way.
        let _ = rustix::event::poll(&mut fds, ts.as_ref());
    }

    /// The descriptor to sleep on after the last `arm`: readable once rung (until the next
    /// `arm`), and for a waiter that keeps the reader also while input waits in the socket.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        if self.on_input.load(Ordering::Relaxed) {
            self.bell_or_input.as_fd()
        } else {
            self.fd.as_fd()
        }
    }
}
