//! [`StoreFuture`]: the future of a store operation, which is its answer itself when
//! the store has it at once.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::written::StoreError;

/// The future of a [`GuardStore`](crate::GuardStore) (or [`OutcomeLog`](crate::OutcomeLog))
/// operation: either the answer itself, when the store had it when called, or a boxed
/// future.
///
/// The traits that return it stay object safe, as with a boxed future, and a store that
/// answers at once (the in-process [`MemoryStore`](crate::MemoryStore), which takes
/// every call of a tool through several operations) allocates nothing for it: a store
/// that answers at once returns [`StoreFuture::ready`], one that has to wait
/// [`StoreFuture::new`].
///
/// A store may do its work when the operation is called, before the future is polled:
/// the in-process one does. So call an operation only to have it done; dropping its
/// future does not undo it (nor, for a remote store, does it stop a request already
/// sent).
///
/// ```
/// use aaa_guard::{StoreError, StoreFuture};
///
/// # block_on(async {
/// let at_once: StoreFuture<'_, u32> = StoreFuture::ready(Ok(1));
/// let later: StoreFuture<'_, u32> = StoreFuture::new(async { Ok(2) });
/// assert_eq!(at_once.await.unwrap() + later.await.unwrap(), 3);
/// let refused: StoreFuture<'_, u32> = StoreFuture::ready(Err(StoreError::InvalidKey("a..b".into())));
/// assert!(refused.await.is_err());
/// # });
/// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     use std::task::{Context, Poll, Waker};
/// #     let mut f = std::pin::pin!(f);
/// #     let mut cx = Context::from_waker(Waker::noop());
/// #     loop { if let Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
/// # }
/// ```
#[must_use = "an operation's answer is in its future"]
pub struct StoreFuture<'a, T>(Repr<'a, Result<T, StoreError>>);

enum Repr<'a, T> {
    /// The answer, until it is taken.
    Ready(Option<T>),
    /// A store that has to wait for it.
    Boxed(Pin<Box<dyn Future<Output = T> + Send + 'a>>),
}

impl<'a, T> StoreFuture<'a, T> {
    /// An operation that is done: its future resolves to `answer` at its first poll.
    pub fn ready(answer: Result<T, StoreError>) -> Self {
        StoreFuture(Repr::Ready(Some(answer)))
    }

    /// An operation that has to wait: `future`, boxed.
    pub fn new(future: impl Future<Output = Result<T, StoreError>> + Send + 'a) -> Self {
        StoreFuture(Repr::Boxed(Box::pin(future)))
    }

    /// Whether the answer is here without waiting (a future of [`ready`](Self::ready)
    /// not yet polled to its end).
    pub fn is_ready(&self) -> bool {
        matches!(self.0, Repr::Ready(Some(_)))
    }
}

// The answer is moved out, never pinned, and the boxed future is pinned in its box.
impl<T> Unpin for StoreFuture<'_, T> {}

impl<T> Future for StoreFuture<'_, T> {
    type Output = Result<T, StoreError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.get_mut().0 {
            Repr::Ready(answer) => Poll::Ready(
                answer
                    .take()
                    .expect("a StoreFuture polled after it resolved"),
            ),
            Repr::Boxed(future) => future.as_mut().poll(cx),
        }
    }
}

impl<T> fmt::Debug for StoreFuture<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.0 {
            Repr::Ready(Some(_)) => "ready",
            Repr::Ready(None) => "taken",
            Repr::Boxed(_) => "pending",
        };
        f.debug_tuple("StoreFuture").field(&state).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    #[test]
    fn a_ready_answer_is_given_once_and_a_boxed_future_is_polled() {
        let mut cx = Context::from_waker(Waker::noop());
        let mut ready = StoreFuture::ready(Ok(7));
        assert!(ready.is_ready());
        assert_eq!(Pin::new(&mut ready).poll(&mut cx), Poll::Ready(Ok(7)));
        assert!(!ready.is_ready());
        assert_eq!(format!("{ready:?}"), "StoreFuture(\"taken\")");

        let mut boxed = StoreFuture::<()>::new(std::future::pending());
        assert!(!boxed.is_ready());
        assert_eq!(Pin::new(&mut boxed).poll(&mut cx), Poll::Pending);
    }

    #[test]
    #[should_panic(expected = "polled after it resolved")]
    fn polling_a_taken_answer_again_is_a_bug() {
        let mut cx = Context::from_waker(Waker::noop());
        let mut ready = StoreFuture::ready(Ok(()));
        let _ = Pin::new(&mut ready).poll(&mut cx);
        let _ = Pin::new(&mut ready).poll(&mut cx);
    }
}
