//! The RPC as a [`Future`], for any executor (tokio, async-std, smol, `pollster`,
//! `futures::executor`): no runtime is forced on the program.
//!
//! ```no_run
//! # use naaice::Naa;
//! # async fn run(naa: &mut Naa) -> naaice::Result<()> {
//! let status = naa.call().await?; // invoke, then complete without blocking the executor
//! println!("return code {}", status.naa_error);
//! # Ok(()) }
//! ```
//!
//! **How it waits.** Polled, the future progresses its connection without blocking (as
//! [`Naa::test`] does). When the RPC is still running it arms the connection's readiness
//! descriptor ([`Endpoint::ready_fd`]) and hands a duplicate of it, the RPC's deadline and the
//! task's [`Waker`] to the reactor: one small thread per process that sleeps in poll(2)
//! over every registered descriptor and wakes a task when its descriptor becomes readable or
//! its deadline passes. Many RPCs on many NAAs thus wait concurrently at the cost of one
//! thread, whatever the executor; a transport without a descriptor is looked at every
//! millisecond.
//!
//! Dropping the future before it completed leaves the RPC in flight: finish it with
//! [`Naa::wait`], [`Naa::test`] or [`Naa::wait_async`], or abandon it with [`Naa::cancel`]
//! (a timeout around the future, e.g. `tokio::time::timeout`, then `cancel`).

pub(crate) mod reactor;

use std::future::Future;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use super::arming::{self, Arming};
use crate::client::naa::{Naa, Status};
use crate::error::{Error, Result};
use crate::transport::{Endpoint, TransportError};

impl<E: Endpoint> Naa<E> {
    /// The whole RPC as a future: invokes when first polled (like [`Naa::invoke`]), then
    /// completes with the RPC's status (like [`Naa::wait`]) without blocking the executor.
    pub fn call(&mut self) -> RpcFuture<'_, E> {
        RpcFuture::new(self, true)
    }

    /// A future for the RPC in flight (started with [`Naa::invoke`]): completes like
    /// [`Naa::wait`] without blocking the executor (at once if the RPC already finished).
    pub fn wait_async(&mut self) -> RpcFuture<'_, E> {
        RpcFuture::new(self, false)
    }
}

/// The future of [`Naa::call`] and [`Naa::wait_async`]. It borrows the handle: neither the
/// handle nor its buffers can be used until it completes or is dropped.
#[must_use = "futures do nothing unless polled"]
pub struct RpcFuture<'a, E: Endpoint> {
    naa: &'a mut Naa<E>,
    /// Invoke at the first poll.
    start: bool,
    /// A duplicate of the connection's readiness descriptor, for the reactor.
    fd: Option<std::sync::Arc<OwnedFd>>,
    /// The reactor entry while registered.
    entry: Option<reactor::Entry>,
}

impl<E: Endpoint> std::fmt::Debug for RpcFuture<'_, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcFuture")
            .field("naa", &self.naa)
            .field("start", &self.start)
            .finish_non_exhaustive()
    }
}

impl<'a, E: Endpoint> RpcFuture<'a, E> {
    fn new(naa: &'a mut Naa<E>, start: bool) -> Self {
        Self {
            naa,
            start,
            fd: None,
            entry: None,
        }
    }

    /// Registers with the reactor until the connection may have news.
    fn register(&mut self, arming: Arming, waker: &Waker) -> Result<()> {
        let until = arming.until(Instant::now());
        let fd = match arming {
            Arming::Fd(_) => {
                if self.fd.is_none() {
                    let fd = arming::ready_fd(self.naa)
                        .map(|fd| fd.try_clone_to_owned())
                        .transpose()
                        .map_err(|source| {
                            Error::Transport(TransportError::Io {
                                call: "dup(readiness descriptor)",
                                source,
                            })
                        })?;
                    self.fd = fd.map(std::sync::Arc::new);
                }
                self.fd.clone()
            }
            _ => None,
        };
        let reactor = reactor::Reactor::global().map_err(|source| {
            Error::Transport(TransportError::Io {
                call: "start the reactor thread",
                source,
            })
        })?;
        self.entry = Some(reactor.register(fd, until, waker.clone()));
        Ok(())
    }
}

impl<E: Endpoint> Future for RpcFuture<'_, E> {
    type Output = Result<Status>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<Status>> {
        let this = self.get_mut();
        // A previous registration is over (woken, or replaced now).
        drop(this.entry.take());
        if std::mem::take(&mut this.start)
            && let Err(e) = this.naa.invoke()
        {
            return Poll::Ready(Err(e));
        }
        if !this.naa.is_busy() {
            return Poll::Ready(this.naa.wait());
        }
        match this.naa.test() {
            Ok(Some(status)) => return Poll::Ready(Ok(status)),
            Ok(None) => {}
            Err(e) => return Poll::Ready(Err(e)),
        }
        let arming = arming::arm(this.naa);
        if arming == Arming::Ready {
            // News already: be polled again soon, after other tasks had their turn.
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if let Err(e) = this.register(arming, cx.waker()) {
            return Poll::Ready(Err(e));
        }
        Poll::Pending
    }
}
