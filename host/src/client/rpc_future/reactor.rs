//! The reactor of [`RpcFuture`](super::RpcFuture)s: one thread per process, started when the
//! first future waits, that sleeps in poll(2) over the registered readiness descriptors and
//! wakes each registered task once, when its descriptor becomes readable or its deadline
//! passes. Registrations are one-shot; a woken future registers again if it still waits.

use std::collections::HashSet;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::task::Waker;
use std::time::Instant;

use rustix::event::{EventfdFlags, PollFd, PollFlags, eventfd};

use crate::client::arming::timespec;

/// One registration.
struct Registration {
    token: u64,
    fd: Option<Arc<OwnedFd>>,
    until: Option<Instant>,
    waker: Waker,
}

#[derive(Default)]
struct Registrations {
    next: u64,
    list: Vec<Registration>,
}

/// The reactor: registrations and the bell that makes its thread look at them again.
pub(crate) struct Reactor {
    registrations: Mutex<Registrations>,
    bell: OwnedFd,
}

/// A registration, removed when dropped (the future completed, was dropped, or polls anew).
pub(crate) struct Entry {
    reactor: &'static Reactor,
    token: u64,
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.reactor.lock().list.retain(|r| r.token != self.token);
    }
}

/// The reactor, or why its thread could not be started (then every future fails with it).
static REACTOR: OnceLock<Result<&'static Reactor, String>> = OnceLock::new();

impl Reactor {
    /// The process's reactor, its thread started on first use.
    pub(crate) fn global() -> io::Result<&'static Self> {
        REACTOR
            .get_or_init(|| Self::start().map_err(|e| e.to_string()))
            .clone()
            .map_err(io::Error::other)
    }

    fn start() -> io::Result<&'static Self> {
        let reactor: &'static Self = Box::leak(Box::new(Self {
            registrations: Mutex::new(Registrations::default()),
            bell: eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?,
        }));
        std::thread::Builder::new()
            .name("naaice-reactor".into())
            .spawn(move || reactor.run())?;
        Ok(reactor)
    }

    fn lock(&self) -> MutexGuard<'_, Registrations> {
        self.registrations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes `waker` once `fd` is readable or `until` passes (`None`, `None`: never, until
    /// the entry is dropped).
    pub(crate) fn register(
        &'static self,
        fd: Option<Arc<OwnedFd>>,
        until: Option<Instant>,
        waker: Waker,
    ) -> Entry {
        let token = {
            let mut regs = self.lock();
            regs.next += 1;
            let token = regs.next;
            regs.list.push(Registration {
                token,
                fd,
                until,
                waker,
            });
            token
        };
        self.ring();
        Entry {
            reactor: self,
            token,
        }
    }

    fn ring(&self) {
        if let Err(e) = rustix::io::write(&self.bell, &1u64.to_ne_bytes()) {
            tracing::trace!(error = %e, "reactor bell");
        }
    }

    /// The reactor thread: poll(2) over the bell and the registered descriptors.
    fn run(&self) {
        loop {
            let (fds, until) = {
                let regs = self.lock();
                let fds: Vec<(u64, Arc<OwnedFd>)> = regs
                    .list
                    .iter()
                    .filter_map(|r| r.fd.clone().map(|fd| (r.token, fd)))
                    .collect();
                let until = regs.list.iter().filter_map(|r| r.until).min();
                (fds, until)
            };
            let mut pfds = Vec::with_capacity(fds.len() + 1);
            pfds.push(PollFd::new(&self.bell, PollFlags::IN));
            pfds.extend(
                fds.iter()
                    .map(|(_, fd)| PollFd::from_borrowed_fd(fd.as_fd(), PollFlags::IN)),
            );
            let ts = timespec(until, Instant::now());
            if let Err(e) = rustix::event::poll(&mut pfds, ts.as_ref())
                && e != rustix::io::Errno::INTR
            {
                tracing::debug!(error = %e, "reactor poll");
                std::thread::sleep(crate::client::arming::NO_FD_INTERVAL);
            }
            if !pfds[0].revents().is_empty() {
                let mut count = [0u8; 8];
                let _ = rustix::io::read(&self.bell, &mut count);
            }
            let ready: HashSet<u64> = fds
                .iter()
                .zip(&pfds[1..])
                .filter(|(_, p)| !p.revents().is_empty())
                .map(|((token, _), _)| *token)
                .collect();
            drop(pfds);
            let now = Instant::now();
            let mut wake = Vec::new();
            self.lock().list.retain_mut(|r| {
                let due = ready.contains(&r.token) || r.until.is_some_and(|t| t <= now);
                if due {
                    wake.push(r.waker.clone());
                }
                !due
            });
            // Outside the lock: a waker may run the task right here (some executors do).
            for w in wake {
                w.wake();
            }
        }
    }
}
