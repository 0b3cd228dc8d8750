//! The errors a tool call can end with, in words a model can act on.
//!
//! - [`ToolError`]: what a tool returns when it fails. Its message is shown to the
//!   model; its detail is for logs only.
//! - [`ToolArgsError`]: the arguments the model sent do not fit the tool's schema. It
//!   names each argument path, what was expected and what arrived.
//! - [`CallError`]: everything a single call can end with before any engine is involved
//!   (bad arguments, the tool's own error, a panic).
//! - [`DefinitionError`]: a tool or registry that cannot be built (bad name, duplicate,
//!   missing state, missing descriptions).

use std::fmt;

/// The failure of a tool, as the model will read it.
///
/// The [`message`](Self::message) is written for the model: say what went wrong and,
/// when it helps, what to do instead. The optional [`detail`](Self::detail) is for
/// operators and logs and is never shown to the model.
///
/// Any `std::error::Error` converts into a `ToolError` with `?`; such an error is not
/// written for a model, so the model sees a generic message and the error's text goes
/// into `detail` (and the logs). Use [`ToolError::new`] for messages meant for the model.
///
/// `ToolError` itself does not implement `std::error::Error`: that is what lets every
/// other error convert into it (the same trade-off `anyhow::Error` makes).
///
/// ```
/// use aaa_tools::ToolError;
///
/// let err = ToolError::new("no city named 'Pariss'; did you mean 'Paris'?").retryable(true);
/// assert!(err.is_retryable());
///
/// fn parse(n: &str) -> Result<i32, ToolError> {
///     Ok(n.parse::<i32>()?)
/// }
/// let err = parse("x").unwrap_err();
/// assert_eq!(err.message(), ToolError::INTERNAL_MESSAGE);
/// assert_eq!(err.detail(), Some("invalid digit found in string"));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct ToolError {
    message: String,
    detail: Option<String>,
    retryable: bool,
    /// Set when the error is a [`ToolArgsError`]: the model reads it as `bad_args`.
    bad_args: Option<Box<ToolArgsError>>,
}

impl ToolError {
    /// What the model sees for an error that was not written for it.
    pub const INTERNAL_MESSAGE: &'static str = "the tool failed with an internal error";

    /// An error whose message the model reads.
    pub fn new(message: impl Into<String>) -> Self {
        ToolError {
            message: message.into(),
            detail: None,
            retryable: false,
            bad_args: None,
        }
    }

    /// An error not meant for the model: it sees [`INTERNAL_MESSAGE`](Self::INTERNAL_MESSAGE),
    /// and `error`'s text is kept as the detail for logs.
    pub fn internal(error: impl fmt::Display) -> Self {
        ToolError {
            message: Self::INTERNAL_MESSAGE.to_owned(),
            detail: Some(error.to_string()),
            retryable: false,
            bad_args: None,
        }
    }

    /// Attaches operator-facing detail (never shown to the model).
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// Marks whether trying the same call again may succeed.
    pub fn retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        self
    }

    /// The model-readable message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The operator-facing detail, if any.
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }

    /// Whether trying again may succeed.
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }

    /// The argument problem this error is, when a tool returned a [`ToolArgsError`]:
    /// the engine reports it as `bad_args`, in the tool's own words and with the path
    /// it named.
    pub fn args_error(&self) -> Option<&ToolArgsError> {
        self.bad_args.as_deref()
    }
}

/// A [`ToolArgsError`] is a kind of `ToolError` (as in the seed's
/// `ToolArgsError(ToolError)`): a tool that finds its arguments wrong after the schema
/// check (a date in the past, an unknown account) returns one with `?`, and the model
/// reads it as `bad_args` with the path and the words the tool gave.
///
/// ```
/// use aaa_tools::{ToolArgsError, ToolError};
///
/// fn check(day: &str) -> Result<(), ToolError> {
///     if day < "2026-01-01" {
///         Err(ToolArgsError::single("book", "day", "must not be in the past"))?;
///     }
///     Ok(())
/// }
/// let err = check("2025-05-01").unwrap_err();
/// assert_eq!(err.args_error().unwrap().problems()[0].path, "day");
/// assert_eq!(err.message(), "invalid arguments for `book`: day: must not be in the past");
/// ```
impl From<ToolArgsError> for ToolError {
    fn from(error: ToolArgsError) -> Self {
        ToolError {
            message: error.to_string(),
            detail: None,
            retryable: false,
            bad_args: Some(Box::new(error)),
        }
    }
}

impl fmt::Debug for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolError")
            .field("message", &self.message)
            .field("detail", &self.detail)
            .field("retryable", &self.retryable)
            .finish()
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for ToolError {
    fn from(error: E) -> Self {
        let mut detail = error.to_string();
        let mut source = error.source();
        while let Some(cause) = source {
            detail.push_str(": ");
            detail.push_str(&cause.to_string());
            source = cause.source();
        }
        ToolError::internal(detail)
    }
}

/// One thing wrong with a call's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ArgProblem {
    /// Where: an argument path such as `unit`, `stops[2].city`, or `(arguments)` for the
    /// arguments object as a whole.
    pub path: String,
    /// What was expected and what arrived, e.g. `expected one of "celsius",
    /// "fahrenheit"; got "kelvin"`.
    pub message: String,
}

impl ArgProblem {
    /// The path used for problems with the arguments object as a whole.
    pub const ROOT: &'static str = "(arguments)";

    /// A problem at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        ArgProblem {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ArgProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

fn join_problems(problems: &[ArgProblem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The arguments sent for a tool do not fit its schema (see [`ArgProblem`]), or the
/// tool itself found them wrong: a kind of [`ToolError`] (it converts into one with
/// `?`), reported to the model as `bad_args`.
///
/// Its display form is written for the model:
/// ``invalid arguments for `get_weather`: unit: expected one of "celsius", "fahrenheit"; got "kelvin"``.
///
/// Like `ToolError` it does not implement `std::error::Error`: that is what lets it
/// convert into a `ToolError` that keeps its kind, where every other error becomes an
/// internal one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolArgsError {
    tool: String,
    problems: Vec<ArgProblem>,
}

impl ToolArgsError {
    /// An error for `tool` with at least one problem.
    pub fn new(tool: impl Into<String>, problems: Vec<ArgProblem>) -> Self {
        let mut problems = problems;
        if problems.is_empty() {
            problems.push(ArgProblem::new(ArgProblem::ROOT, "invalid"));
        }
        ToolArgsError {
            tool: tool.into(),
            problems,
        }
    }

    /// An error with a single problem.
    pub fn single(
        tool: impl Into<String>,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        ToolArgsError::new(tool, vec![ArgProblem::new(path, message)])
    }

    /// The tool the arguments were sent to.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// Every problem found, in the order of the arguments.
    pub fn problems(&self) -> &[ArgProblem] {
        &self.problems
    }
}

impl fmt::Display for ToolArgsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid arguments for `{}`: {}",
            self.tool,
            join_problems(&self.problems)
        )
    }
}

/// How one call of a tool ended when it did not succeed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The arguments did not fit the schema; the tool did not run.
    #[error("{0}")]
    BadArgs(ToolArgsError),
    /// The tool ran and returned an error.
    #[error("{0}")]
    Tool(ToolError),
    /// The tool panicked. The message is the panic's payload when it was a string.
    #[error("the tool panicked: {0}")]
    Panic(String),
}

/// A tool's error: [`CallError::BadArgs`] when it is a [`ToolArgsError`], else
/// [`CallError::Tool`].
impl From<ToolError> for CallError {
    fn from(error: ToolError) -> Self {
        match error.bad_args {
            Some(args) => CallError::BadArgs(*args),
            None => CallError::Tool(error),
        }
    }
}

impl From<ToolArgsError> for CallError {
    fn from(error: ToolArgsError) -> Self {
        CallError::BadArgs(error)
    }
}

/// A tool or registry that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DefinitionError {
    /// A tool name providers would reject.
    #[error("invalid tool name {name:?}: providers accept 1 to 64 characters from [a-zA-Z0-9_-]")]
    InvalidName {
        /// The rejected name.
        name: String,
    },
    /// Two tools with one name.
    #[error("two tools are named `{name}` (registered at positions {first} and {second})")]
    DuplicateName {
        /// The shared name.
        name: String,
        /// Position of the first tool in registration order.
        first: usize,
        /// Position of the second.
        second: usize,
    },
    /// A parameter schema that is not a JSON object schema.
    #[error(
        "tool `{tool}`: the parameters schema must be a JSON object schema with \"type\": \"object\": {reason}"
    )]
    InvalidSchema {
        /// The tool.
        tool: String,
        /// What is wrong.
        reason: String,
    },
    /// A tool takes `State<T>` and no `T` was registered.
    #[error(
        "tool `{tool}` takes `State<{state}>` but no such state was registered; add it with `ToolRegistry::builder().state(..)`"
    )]
    MissingState {
        /// The tool.
        tool: String,
        /// The state's type name.
        state: String,
    },
    /// Descriptions are required and some are missing.
    #[error("tool `{tool}` lacks a description for {}: providers choose tools and fill arguments by these words", .missing.join(", "))]
    MissingDescriptions {
        /// The tool.
        tool: String,
        /// `the tool` and/or `parameter `x`` entries.
        missing: Vec<String>,
    },
    /// A setting outside its bounds.
    #[error("tool `{tool}`: {reason}")]
    InvalidOption {
        /// The tool.
        tool: String,
        /// What is wrong.
        reason: String,
    },
}
