//! Waiting by other means than [`Driver::wait`]: the endpoint's readiness descriptor and the
//! machine's next deadline, for a thread that waits on many connections at once
//! ([`crate::client::naa_set`]) or an async reactor ([`crate::client::rpc_future`]).

use std::os::fd::BorrowedFd;
use std::time::Instant;

use super::{Driver, Role};
use crate::clock;
use crate::transport::{Endpoint, Result, TransportError};

impl<E: Endpoint, M: Role> Driver<E, M> {
    /// Arms the endpoint's readiness descriptor ([`Endpoint::arm_ready`]): `Ok(true)` if the
    /// caller must poll instead of sleeping (a broken connection counts as ready: polling
    /// reports it).
    pub(crate) fn arm_ready(&mut self) -> Result<bool> {
        match self.ep.arm_ready() {
            Err(TransportError::NotConnected) => Ok(true),
            other => other,
        }
    }

    /// The endpoint's readiness descriptor, if its transport has one.
    pub(crate) fn ready_fd(&self) -> Option<BorrowedFd<'_>> {
        self.ep.ready_fd()
    }

    /// When the machine must next be polled even if the transport stays silent (its
    /// deadline).
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.machine.poll_timeout().map(clock::from_core)
    }
}
