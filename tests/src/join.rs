//! Joining futures without a runtime (for tests that run RPC futures on one thread with a
//! minimal executor such as `pollster`).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Polls every future of `futures` until all completed (a join without a runtime).
pub struct JoinAll<F: Future> {
    futures: Vec<Pin<Box<F>>>,
    outputs: Vec<Option<F::Output>>,
}

impl<F: Future> Future for JoinAll<F>
where
    F::Output: Unpin,
{
    type Output = Vec<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        for (f, out) in this.futures.iter_mut().zip(&mut this.outputs) {
            if out.is_none()
                && let Poll::Ready(v) = f.as_mut().poll(cx)
            {
                *out = Some(v);
            }
        }
        if this.outputs.iter().all(Option::is_some) {
            Poll::Ready(this.outputs.iter_mut().filter_map(Option::take).collect())
        } else {
            Poll::Pending
        }
    }
}

/// A future that completes with the outputs of all `futures`, in order.
pub fn join_all<F: Future>(futures: impl IntoIterator<Item = F>) -> JoinAll<F> {
    let futures: Vec<_> = futures.into_iter().map(Box::pin).collect();
    let outputs = futures.iter().map(|_| None).collect();
    JoinAll { futures, outputs }
}
