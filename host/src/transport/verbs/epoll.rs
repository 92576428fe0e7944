//! The endpoint's readiness descriptor ([`Endpoint::ready_fd`](crate::transport::Endpoint)):
//! one epoll instance over the completion channel and the rdma_cm event channel, readable
//! when either is, so that a thread waiting on many connections polls one descriptor each.

use std::os::fd::{BorrowedFd, OwnedFd, RawFd};

use rustix::event::epoll;

use super::{Result, errno_error};

/// An epoll descriptor watching `fds` for input (level-triggered).
pub(super) fn epoll_over(fds: &[RawFd]) -> Result<OwnedFd> {
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC)
        .map_err(|e| errno_error("epoll_create1", e.into()))?;
    for (i, &fd) in fds.iter().enumerate() {
        // SAFETY: `fd` is a channel descriptor of the endpoint that owns the epoll instance;
        // the channels outlive it (the endpoint drops the epoll descriptor first), and the
        // kernel drops a closed descriptor from the interest list anyway.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        epoll::add(
            &ep,
            fd,
            epoll::EventData::new_u64(i as u64),
            epoll::EventFlags::IN,
        )
        .map_err(|e| errno_error("epoll_ctl", e.into()))?;
    }
    Ok(ep)
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;

    use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec, eventfd};

    use super::*;

    fn readable(fd: &OwnedFd) -> bool {
        let mut fds = [PollFd::new(fd, PollFlags::IN)];
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        rustix::event::poll(&mut fds, Some(&zero)).expect("poll") == 1
    }

    #[test]
    fn the_epoll_descriptor_is_readable_while_either_channel_is() {
        let a = eventfd(0, EventfdFlags::NONBLOCK).expect("eventfd");
        let b = eventfd(0, EventfdFlags::NONBLOCK).expect("eventfd");
        let ep = epoll_over(&[a.as_raw_fd(), b.as_raw_fd()]).expect("epoll");
        assert!(!readable(&ep));
        for fd in [&a, &b] {
            rustix::io::write(fd, &1u64.to_ne_bytes()).expect("ring");
            assert!(
                readable(&ep),
                "level-triggered: readable while the channel is"
            );
            assert!(readable(&ep));
            let mut count = [0u8; 8];
            rustix::io::read(fd, &mut count).expect("clear");
            assert!(!readable(&ep));
        }
    }
}
