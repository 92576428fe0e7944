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
