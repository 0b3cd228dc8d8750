//! How a call runs: its [`Body`] (a future, or a closure for the blocking pool), made
//! from checked arguments, and [`PreparedCall`], which runs it and turns a panic into
//! a failure.

use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;

use futures::FutureExt;
use serde_json::Value;

use crate::context::ToolContext;
use crate::error::{CallError, ToolArgsError, ToolError};

/// The future a running tool is.
pub type ToolFuture = Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send + 'static>>;

/// A call whose arguments were decoded, ready to run: either a future or a closure for
/// the blocking pool.
#[doc(hidden)]
pub enum Body {
    Async(Box<dyn FnOnce(ToolContext) -> ToolFuture + Send>),
    Blocking(Box<dyn FnOnce(ToolContext) -> Result<Value, ToolError> + Send>),
}

impl Body {
    /// An async body.
    pub(crate) fn asynchronous<F>(f: F) -> Self
    where
        F: FnOnce(ToolContext) -> ToolFuture + Send + 'static,
    {
        Body::Async(Box::new(f))
    }

    /// A blocking body.
    pub(crate) fn blocking<F>(f: F) -> Self
    where
        F: FnOnce(ToolContext) -> Result<Value, ToolError> + Send + 'static,
    {
        Body::Blocking(Box::new(f))
    }
}

/// Decodes checked arguments into a runnable body.
#[doc(hidden)]
pub type PrepareFn = dyn Fn(&str, &Value) -> Result<Body, ToolArgsError> + Send + Sync;

/// Derives an idempotency key from checked arguments.
#[doc(hidden)]
pub type KeyFn = dyn Fn(&str, &Value) -> Result<String, ToolArgsError> + Send + Sync;

/// A call whose arguments were checked and decoded.
pub(crate) struct PreparedCall {
    pub(super) body: Body,
}

impl PreparedCall {
    /// Whether it runs on the blocking pool.
    pub(crate) fn is_blocking(&self) -> bool {
        matches!(self.body, Body::Blocking(_))
    }

    /// Runs the call. A panic in the tool becomes [`CallError::Panic`]; a blocking tool
    /// runs on tokio's blocking pool (so this needs a tokio runtime).
    ///
    /// Dropping the future cancels an async tool. A blocking tool cannot be
    /// interrupted: dropping the future discards its result when it ends.
    pub(crate) async fn run(self, ctx: ToolContext) -> Result<Value, CallError> {
        match self.body {
            Body::Async(start) => {
                let started = std::panic::catch_unwind(AssertUnwindSafe(move || start(ctx)));
                let future = started.map_err(|p| CallError::Panic(panic_message(&*p)))?;
                match AssertUnwindSafe(future).catch_unwind().await {
                    Ok(result) => result.map_err(CallError::from),
                    Err(payload) => Err(CallError::Panic(panic_message(&*payload))),
                }
            }
            Body::Blocking(run) => match tokio::task::spawn_blocking(move || run(ctx)).await {
                Ok(result) => result.map_err(CallError::from),
                Err(join) if join.is_panic() => {
                    Err(CallError::Panic(panic_message(&*join.into_panic())))
                }
                Err(join) => Err(CallError::Tool(ToolError::internal(join))),
            },
        }
    }
}

impl fmt::Debug for PreparedCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PreparedCall")
            .field("blocking", &self.is_blocking())
            .finish()
    }
}

/// The text of a panic payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a panic payload that is not a string)".to_owned()
    }
}
