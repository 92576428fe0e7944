//! Waiting for many connections in one thread: each connection's readiness descriptor
//! ([`Endpoint::ready_fd`]) and deadline, gathered for
//! one poll(2) ([`crate::client::naa_set`]) or for the reactor of [`crate::client::rpc_future`].

use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};

use crate::client::connection::Connection;
use crate::client::naa::Naa;
use crate::transport::Endpoint;

/// How long a waiter sleeps at most for a connection whose transport has no readiness
/// descriptor (or whose descriptor could not be prepared) before it polls again.
pub(crate) const NO_FD_INTERVAL: Duration = Duration::from_millis(1);

/// What a connection needs before its waiter may sleep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arming {
    /// Something is ready (or the connection broke): poll it now, do not sleep.
    Ready,
    /// Sleep on its descriptor until this time at most (`None`: no deadline).
    Fd(Option<Instant>),
    /// No descriptor: sleep [`NO_FD_INTERVAL`] at most (or until this earlier time).
    NoFd(Option<Instant>),
}

impl Arming {
    /// When the waiter must wake at the latest for this connection.
    pub(crate) fn until(self, now: Instant) -> Option<Instant> {
        match self {
            Self::Ready => Some(now),
            Self::Fd(until) => until,
            Self::NoFd(until) => {
                Some(until.map_or(now + NO_FD_INTERVAL, |t| t.min(now + NO_FD_INTERVAL)))
            }
        }
    }
}

/// Arms the readiness descriptor of `naa`'s connection after its last poll found nothing to
/// report (a handle without a connection, after a cancel, has nothing to wait for).
pub(crate) fn arm<E: Endpoint>(naa: &mut Naa<E>) -> Arming {
    let Some(conn) = naa.connection_mut() else {
        return Arming::Ready;
    };
    let until = conn.next_deadline();
    match conn.arm_ready() {
        Ok(true) => Arming::Ready,
        Ok(false) if conn.ready_fd().is_some() => Arming::Fd(until),
        Ok(false) => Arming::NoFd(until),
        Err(e) => {
            // Rare (e.g. no descriptor left for epoll): wait by polling instead.
            tracing::debug!(error = %e, "readiness descriptor unavailable; polling");
            Arming::NoFd(until)
        }
    }
}

/// The readiness descriptor of `naa`'s connection, if it has one.
pub(crate) fn ready_fd<E: Endpoint>(naa: &Naa<E>) -> Option<BorrowedFd<'_>> {
    naa.connection().and_then(Connection::ready_fd)
}

/// A poll(2) timeout for `until` (`None`: forever).
pub(crate) fn timespec(until: Option<Instant>, now: Instant) -> Option<Timespec> {
    until.map(|t| {
        let d = t.saturating_duration_since(now);
        Timespec {
            tv_sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(d.subsec_nanos()),
        }
    })
}

/// Sleeps until one of `fds` is readable or `until` passes. Returns which descriptors are
/// readable (all false on timeout). An interrupted or failed poll returns at once: the caller
/// polls its connections and comes back.
pub(crate) fn poll_fds(fds: &[BorrowedFd<'_>], until: Option<Instant>) -> Vec<bool> {
    let mut pfds: Vec<PollFd<'_>> = fds
        .iter()
        .map(|fd| PollFd::from_borrowed_fd(*fd, PollFlags::IN))
        .collect();
    let ts = timespec(until, Instant::now());
    match rustix::event::poll(&mut pfds, ts.as_ref()) {
        Ok(_) | Err(rustix::io::Errno::INTR) => {}
        Err(e) => {
            // Not expected (poll(2) fails only for lack of memory or descriptors): do not
            // spin, poll the connections again a little later.
            tracing::debug!(error = %e, "poll over readiness descriptors");
            std::thread::sleep(NO_FD_INTERVAL);
        }
    }
    pfds.iter().map(|p| !p.revents().is_empty()).collect()
}
