//! A stream's cut signal: set once by its cell (the window ended, admission failed, the gate
//! was cancelled), checked by the stream on every wake-up.
//!
//! Why not the cell's `CancellationToken` itself: `is_cancelled` and every poll of
//! `cancelled()` lock the token's tree node, so a stream checking it once per arriving chunk
//! took two mutexes per token read — 4.6% of the client's CPU at C=64 in a profile of
//! `infergate bench` on the simulated engine. A cut is one atomic flag and one `AtomicWaker`
//! per stream; the token still decides when (a child of the gate's token, so a signal reaches
//! the streams through [`forward`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use futures::task::AtomicWaker;
use tokio_util::sync::CancellationToken;

/// One stream's cut: cheap to check, wakes the stream when set.
#[derive(Clone, Default)]
pub(super) struct StreamCut(Arc<Inner>);

#[derive(Default)]
struct Inner {
    cut: AtomicBool,
    waker: AtomicWaker,
}

impl StreamCut {
    /// Whether the stream has been cut.
    pub(super) fn is_cut(&self) -> bool {
        self.0.cut.load(Ordering::Acquire)
    }

    /// Cuts the stream and wakes it if it waits.
    pub(super) fn cut(&self) {
        self.0.cut.store(true, Ordering::Release);
        self.0.waker.wake();
    }

    /// Resolves once the stream is cut.
    pub(super) fn wait(&self) -> Wait<'_> {
        Wait(self)
    }
}

/// The future of [`StreamCut::wait`].
pub(super) struct Wait<'a>(&'a StreamCut);

impl Future for Wait<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.is_cut() {
            return Poll::Ready(());
        }
        self.0.0.waker.register(cx.waker());
        // Checked again after registering: a cut between the two would otherwise be missed.
        if self.0.is_cut() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// Cuts every stream of `cuts` once `token` is cancelled.
pub(super) async fn forward(token: CancellationToken, cuts: Vec<StreamCut>) {
    token.cancelled().await;
    for c in &cuts {
        c.cut();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_waiting_stream_wakes_when_its_cell_cancels() {
        let token = CancellationToken::new();
        let cuts: Vec<StreamCut> = (0..3).map(|_| StreamCut::default()).collect();
        let forwarder = tokio::spawn(forward(token.clone(), cuts.clone()));
        let waiter = {
            let cut = cuts[1].clone();
            tokio::spawn(async move { cut.wait().await })
        };
        tokio::task::yield_now().await;
        assert!(cuts.iter().all(|c| !c.is_cut()));
        token.cancel();
        // A lost wake-up fails the test instead of hanging it.
        let ends = std::time::Duration::from_secs(30);
        tokio::time::timeout(ends, waiter)
            .await
            .expect("the waiting stream is woken")
            .expect("the waiting stream ends");
        tokio::time::timeout(ends, forwarder)
            .await
            .expect("the forwarder is woken")
            .expect("the forwarder ends");
        assert!(cuts.iter().all(StreamCut::is_cut));
        // Already cut: resolves at once.
        cuts[0].wait().await;
    }
}
