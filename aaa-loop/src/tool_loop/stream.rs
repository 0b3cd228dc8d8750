//! [`LoopStream`]: a loop's events as a `Stream`.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use tokio::sync::mpsc::UnboundedReceiver;

use super::{LoopError, LoopEvent, LoopResult};

type Driving = Pin<Box<dyn Future<Output = Result<LoopResult, LoopError>> + Send>>;

/// The events of a running loop ([`ToolLoop::run_stream`](crate::ToolLoop::run_stream)),
/// ending with [`LoopEvent::Ended`].
///
/// The loop runs as the stream is polled (it is not a task of its own), so a
/// consumer that stops polling pauses it, and dropping the stream stops it: what it
/// recorded stays on the run, and running the loop again resumes from there. Events
/// made by one step of the loop wait in the stream until read.
#[must_use = "a loop runs only while its stream is polled"]
pub struct LoopStream {
    driving: Option<Driving>,
    events: UnboundedReceiver<LoopEvent>,
    ended: Option<Result<LoopResult, LoopError>>,
}

impl LoopStream {
    pub(crate) fn new(driving: Driving, events: UnboundedReceiver<LoopEvent>) -> Self {
        LoopStream {
            driving: Some(driving),
            events,
            ended: None,
        }
    }
}

impl Stream for LoopStream {
    type Item = LoopEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<LoopEvent>> {
        let this = &mut *self;
        loop {
            match this.events.poll_recv(cx) {
                Poll::Ready(Some(event)) => return Poll::Ready(Some(event)),
                // Every sender is gone: the loop has finished, its events are read.
                Poll::Ready(None) => return Poll::Ready(this.ended.take().map(LoopEvent::Ended)),
                Poll::Pending => {}
            }
            let Some(driving) = this.driving.as_mut() else {
                return Poll::Ready(this.ended.take().map(LoopEvent::Ended));
            };
            match driving.as_mut().poll(cx) {
                Poll::Ready(result) => {
                    this.ended = Some(result);
                    // Drops the loop's sender: the receiver drains, then says so.
                    this.driving = None;
                }
                // Events the step just made, without waiting for a wake-up.
                Poll::Pending => {
                    return match this.events.poll_recv(cx) {
                        Poll::Ready(Some(event)) => Poll::Ready(Some(event)),
                        _ => Poll::Pending,
                    };
                }
            }
        }
    }
}

impl fmt::Debug for LoopStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoopStream")
            .field("running", &self.driving.is_some())
            .finish_non_exhaustive()
    }
}
