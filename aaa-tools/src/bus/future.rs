//! [`BusFuture`]: the future of a bus operation, which is its answer itself when the bus
//! has it at once.
//!
//! The same shape as the guard store's `StoreFuture`, kept apart so that each trait
//! speaks its own vocabulary (a bus answers with [`BusError`], a store with a store
//! error) and a backend author reads the bus's future next to the bus.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::BusError;

/// The future of a [`Bus`](super::Bus) operation (or of a
/// [`Subscription`](super::Subscription)'s or [`Acker`](super::Acker)'s): either the
/// answer itself, when the bus had it when called, or a boxed future.
///
/// The traits that return it stay object safe, as with a boxed future, and a bus that
/// answers at once (the embedded [`MemoryBus`](super::MemoryBus), which stores and
/// settles as it is called) allocates nothing for it: such a bus returns
/// [`BusFuture::ready`], one that has to wait [`BusFuture::new`].
///
/// A bus may do its work when the operation is called, before the future is polled:
/// the embedded one does. So call an operation only to have it done; dropping its
/// future does not undo it (nor, for a remote bus, does it stop a request already
/// sent).
///
/// ```
/// use aaa_tools::bus::{BusError, BusFuture};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let at_once: BusFuture<'_, u32> = BusFuture::ready(Ok(1));
/// let later: BusFuture<'_, u32> = BusFuture::new(async { Ok(2) });
/// assert_eq!(at_once.await.unwrap() + later.await.unwrap(), 3);
/// let closed: BusFuture<'_, u32> = BusFuture::ready(Err(BusError::Closed));
/// assert_eq!(closed.await, Err(BusError::Closed));
/// # }
/// ```
#[must_use = "an operation's answer is in its future"]
pub struct BusFuture<'a, T>(Repr<'a, Result<T, BusError>>);

enum Repr<'a, T> {
    /// The answer, until it is taken.
    Ready(Option<T>),
    /// A bus that has to wait for it.
    Boxed(Pin<Box<dyn Future<Output = T> + Send + 'a>>),
}

impl<'a, T> BusFuture<'a, T> {
    /// An operation that is done: its future resolves to `answer` at its first poll.
    pub fn ready(answer: Result<T, BusError>) -> Self {
        BusFuture(Repr::Ready(Some(answer)))
    }

    /// An operation that has to wait: `future`, boxed.
    pub fn new(future: impl Future<Output = Result<T, BusError>> + Send + 'a) -> Self {
        BusFuture(Repr::Boxed(Box::pin(future)))
    }
}

// The answer is moved out, never pinned, and the boxed future is pinned in its box.
impl<T> Unpin for BusFuture<'_, T> {}

impl<T> Future for BusFuture<'_, T> {
    type Output = Result<T, BusError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.get_mut().0 {
            Repr::Ready(answer) => {
                Poll::Ready(answer.take().expect("a BusFuture polled after it resolved"))
            }
            Repr::Boxed(future) => future.as_mut().poll(cx),
        }
    }
}

impl<T> fmt::Debug for BusFuture<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.0 {
            Repr::Ready(Some(_)) => "ready",
            Repr::Ready(None) => "taken",
            Repr::Boxed(_) => "pending",
        };
        f.debug_tuple("BusFuture").field(&state).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    #[test]
    fn a_ready_answer_is_given_once_and_a_boxed_future_is_polled() {
        let mut cx = Context::from_waker(Waker::noop());
        let mut ready = BusFuture::ready(Ok(7));
        assert_eq!(format!("{ready:?}"), "BusFuture(\"ready\")");
        assert_eq!(Pin::new(&mut ready).poll(&mut cx), Poll::Ready(Ok(7)));
        assert_eq!(format!("{ready:?}"), "BusFuture(\"taken\")");

        let mut boxed = BusFuture::<()>::new(std::future::pending());
        assert_eq!(format!("{boxed:?}"), "BusFuture(\"pending\")");
        assert_eq!(Pin::new(&mut boxed).poll(&mut cx), Poll::Pending);
    }

    #[test]
    #[should_panic(expected = "polled after it resolved")]
    fn polling_a_taken_answer_again_is_a_bug() {
        let mut cx = Context::from_waker(Waker::noop());
        let mut ready = BusFuture::ready(Ok(()));
        let _ = Pin::new(&mut ready).poll(&mut cx);
        let _ = Pin::new(&mut ready).poll(&mut cx);
    }
}
