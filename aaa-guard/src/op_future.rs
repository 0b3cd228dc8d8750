//! [`OpFuture`]: the future of a store (or bus) operation, which is its answer itself
//! when the backend has it at once.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The future of an operation on a store (or, in `aaa-tools`, on a bus): either the
/// answer itself, when the backend had it when called, or a boxed future.
///
/// The traits that return it stay object safe, as with a boxed future, and a backend
/// that answers at once (the in-process [`MemoryStore`](crate::MemoryStore), which
/// takes every call of a tool through several operations) allocates nothing for it.
///
/// A backend may do its work when the operation is called, before the future is
/// polled: the in-process ones do. So call an operation only to have it done; dropping
/// its future does not undo it (nor, for a remote backend, does it stop a request
/// already sent).
///
/// ```
/// use aaa_guard::OpFuture;
///
/// # block_on(async {
/// let at_once: OpFuture<'_, u32> = OpFuture::ready(1);
/// let later: OpFuture<'_, u32> = OpFuture::new(async { 2 });
/// assert_eq!(at_once.await + later.await, 3);
/// # });
/// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     use std::task::{Context, Poll, Waker};
/// #     let mut f = std::pin::pin!(f);
/// #     let mut cx = Context::from_waker(Waker::noop());
/// #     loop { if let Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
/// # }
/// ```
#[must_use = "an operation's answer is in its future"]
pub struct OpFuture<'a, T>(Repr<'a, T>);

enum Repr<'a, T> {
    /// The answer, until it is taken.
    Ready(Option<T>),
    /// A backend that has to wait for it.
    Boxed(Pin<Box<dyn Future<Output = T> + Send + 'a>>),
}

impl<'a, T> OpFuture<'a, T> {
    /// An operation that is done: its future resolves to `answer` at its first poll.
    pub fn ready(answer: T) -> Self {
        OpFuture(Repr::Ready(Some(answer)))
    }

    /// An operation that has to wait: `future`, boxed.
    pub fn new(future: impl Future<Output = T> + Send + 'a) -> Self {
        OpFuture(Repr::Boxed(Box::pin(future)))
    }

    /// Whether the answer is here without waiting (a future of [`ready`](Self::ready)
    /// not yet polled to its end).
    pub fn is_ready(&self) -> bool {
        matches!(self.0, Repr::Ready(Some(_)))
    }
}

// The answer is moved out, never pinned, and the boxed future is pinned in its box.
impl<T> Unpin for OpFuture<'_, T> {}

impl<T> Future for OpFuture<'_, T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        match &mut self.get_mut().0 {
            Repr::Ready(answer) => {
                Poll::Ready(answer.take().expect("an OpFuture polled after it resolved"))
            }
            Repr::Boxed(future) => future.as_mut().poll(cx),
        }
    }
}

impl<T> fmt::Debug for OpFuture<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.0 {
            Repr::Ready(Some(_)) => "ready",
            Repr::Ready(None) => "taken",
            Repr::Boxed(_) => "pending",
        };
        f.debug_tuple("OpFuture").field(&state).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    #[test]
    fn a_ready_answer_is_given_once_and_a_boxed_future_is_polled() {
        let mut cx = Context::from_waker(Waker::noop());
        let mut ready = OpFuture::ready(7);
        assert!(ready.is_ready());
        assert_eq!(Pin::new(&mut ready).poll(&mut cx), Poll::Ready(7));
        assert!(!ready.is_ready());
        assert_eq!(format!("{ready:?}"), "OpFuture(\"taken\")");

        let mut boxed = OpFuture::new(std::future::pending::<()>());
        assert!(!boxed.is_ready());
        assert_eq!(Pin::new(&mut boxed).poll(&mut cx), Poll::Pending);
    }

    #[test]
    #[should_panic(expected = "polled after it resolved")]
    fn polling_a_taken_answer_again_is_a_bug() {
        let mut cx = Context::from_waker(Waker::noop());
        let mut ready = OpFuture::ready(());
        let _ = Pin::new(&mut ready).poll(&mut cx);
        let _ = Pin::new(&mut ready).poll(&mut cx);
    }
}
