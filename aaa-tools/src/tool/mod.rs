//! [`Tool`]: one callable tool, with everything a provider and an executor need to know.
//!
//! - this module: the tool, how it is built (from a `#[tool]` fn, a closure, or a
//!   JSON schema and a closure) and how its arguments are checked;
//! - `annotations`: [`ToolAnnotations`], the hints MCP clients read;
//! - `spec`: what `#[tool]` fills in ([`ToolSpec`], [`StateNeed`]);
//! - `body`: how a call runs once its arguments are decoded, a panic caught.

mod annotations;
mod body;
mod spec;

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use aaa_guard::{Delivery, GuardOverrides};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::args::{self, ArgsChecker};
use crate::context::ToolContext;
use crate::error::{CallError, DefinitionError, ToolArgsError, ToolError};
use crate::output::{ToolOutput, from_result};
use crate::schema;

pub use annotations::ToolAnnotations;
pub(crate) use body::PreparedCall;
pub use body::{Body, KeyFn, PrepareFn, ToolFuture};
pub use spec::{StateNeed, ToolSpec};

/// The default timeout of a tool: 60 seconds.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The default pool: `"default"`.
pub(crate) const DEFAULT_POOL: &str = "default";

/// A tool: name, description, parameters schema, execution settings and the function
/// that runs it. Cheap to clone.
///
/// Get one from a `#[tool]` fn with `my_fn::tool()`, or build one by hand when the shape
/// is only known at run time (an MCP proxy, a search index):
///
/// ```
/// use aaa_tools::{Tool, ToolContext, ToolError};
/// use schemars::JsonSchema;
/// use serde::Deserialize;
///
/// /// Two numbers to add.
/// #[derive(Deserialize, JsonSchema)]
/// struct AddArgs {
///     /// The first addend.
///     a: i64,
///     /// The second addend.
///     b: i64,
/// }
///
/// let add = Tool::from_fn("add", "Add two integers.", |_ctx: ToolContext, args: AddArgs| async move {
///     Ok::<_, ToolError>(args.a + args.b)
/// })
/// .unwrap();
/// assert_eq!(add.parameters()["required"], serde_json::json!(["a", "b"]));
///
/// let raw = Tool::from_json_fn(
///     "echo",
///     "Repeat the text.",
///     serde_json::json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
///     |_ctx, args| async move { Ok::<_, ToolError>(args["text"].clone()) },
/// )
/// .unwrap();
/// assert_eq!(raw.name(), "echo");
/// ```
#[derive(Clone)]
pub struct Tool {
    inner: Arc<ToolInner>,
}

#[derive(Clone)]
struct ToolInner {
    /// Shared: every call's context holds it.
    name: Arc<str>,
    description: String,
    parameters: Value,
    requires_approval: bool,
    timeout: Duration,
    pool: String,
    delivery: Option<Delivery>,
    guard: GuardOverrides,
    idempotency_key: Option<Arc<KeyFn>>,
    blocking: bool,
    prepare: Arc<PrepareFn>,
    checker: Arc<ArgsChecker>,
    state: Vec<StateNeed>,
    undescribed_params: Vec<String>,
    require_descriptions: bool,
    annotations: Option<ToolAnnotations>,
}

/// Providers accept tool names of 1 to 64 characters from `[a-zA-Z0-9_-]`.
pub fn is_valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl Tool {
    /// How long a tool may run when it sets no `timeout_s`: 60 s.
    pub const DEFAULT_TIMEOUT: Duration = DEFAULT_TIMEOUT;
    /// The pool a tool runs in when it names none: `default`.
    pub const DEFAULT_POOL: &'static str = DEFAULT_POOL;

    fn assemble(
        name: String,
        description: String,
        parameters: Value,
        blocking: bool,
        prepare: Arc<PrepareFn>,
    ) -> Result<Tool, DefinitionError> {
        if !is_valid_tool_name(&name) {
            return Err(DefinitionError::InvalidName { name });
        }
        let parameters = schema::normalize(&name, parameters)?;
        let checker =
            ArgsChecker::compile(&parameters).map_err(|reason| DefinitionError::InvalidSchema {
                tool: name.clone(),
                reason,
            })?;
        let undescribed_params = parameters["properties"]
            .as_object()
            .map(|props| {
                props
                    .iter()
                    .filter(|(_, schema)| {
                        schema
                            .get("description")
                            .is_none_or(|d| d.as_str().is_none_or(str::is_empty))
                    })
                    .map(|(name, _)| name.clone())
                    .collect()
            })
            .unwrap_or_default();
        Ok(Tool {
            inner: Arc::new(ToolInner {
                name: Arc::from(name),
                description: description.trim().to_owned(),
                parameters,
                requires_approval: false,
                timeout: DEFAULT_TIMEOUT,
                pool: DEFAULT_POOL.to_owned(),
                delivery: None,
                guard: GuardOverrides::default(),
                idempotency_key: None,
                blocking,
                prepare,
                checker: Arc::new(checker),
                state: Vec::new(),
                undescribed_params,
                require_descriptions: false,
                annotations: None,
            }),
        })
    }

    /// Builds the tool `#[tool]` describes. The macro has checked the name and options
    /// at compile time.
    #[doc(hidden)]
    pub fn __from_spec(
        spec: ToolSpec,
        prepare: Arc<PrepareFn>,
        idempotency_key: Option<Arc<KeyFn>>,
    ) -> Result<Tool, DefinitionError> {
        let parameters = schema::object_schema(&spec.params);
        let mut tool = Tool::assemble(
            spec.name.to_owned(),
            spec.description.to_owned(),
            parameters,
            spec.blocking,
            prepare,
        )?;
        let timeout = Duration::try_from_secs_f64(spec.timeout_s).map_err(|_| {
            DefinitionError::InvalidOption {
                tool: spec.name.to_owned(),
                reason: format!("`timeout_s` must be > 0 (got {})", spec.timeout_s),
            }
        })?;
        let inner = Arc::make_mut(&mut tool.inner);
        inner.requires_approval = spec.requires_approval;
        inner.timeout = timeout;
        inner.pool = spec.pool.to_owned();
        inner.delivery = spec.delivery;
        inner.guard = spec.guard;
        inner.idempotency_key = idempotency_key;
        inner.state = spec.state;
        inner.require_descriptions = spec.require_descriptions;
        inner.annotations = spec.annotations;
        Ok(tool)
    }

    /// A tool from an async closure taking the context and a typed arguments struct.
    ///
    /// The schema is `A`'s (it must be a struct, i.e. an object schema); unknown
    /// arguments are rejected even if `A` does not say `deny_unknown_fields`.
    pub fn from_fn<A, F, Fut, R, E>(
        name: impl Into<String>,
        description: impl Into<String>,
        f: F,
    ) -> Result<Tool, DefinitionError>
    where
        A: JsonSchema + DeserializeOwned + Send + 'static,
        F: Fn(ToolContext, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, E>> + Send + 'static,
        R: ToolOutput,
        E: Into<ToolError>,
    {
        let name = name.into();
        let parameters = schema::schema_of_args::<A>(&name)?;
        let f = Arc::new(f);
        let prepare = move |tool: &str, args: &Value| -> Result<Body, ToolArgsError> {
            let decoded: A = args::decode(tool, args)?;
            let f = f.clone();
            Ok(Body::asynchronous(move |ctx| {
                Box::pin(async move { from_result(f(ctx, decoded).await) })
            }))
        };
        Tool::assemble(
            name,
            description.into(),
            parameters,
            false,
            Arc::new(prepare),
        )
    }

    /// A tool from a blocking closure; calls run on the blocking thread pool.
    pub fn from_blocking_fn<A, F, R, E>(
        name: impl Into<String>,
        description: impl Into<String>,
        f: F,
    ) -> Result<Tool, DefinitionError>
    where
        A: JsonSchema + DeserializeOwned + Send + 'static,
        F: Fn(ToolContext, A) -> Result<R, E> + Send + Sync + 'static,
        R: ToolOutput,
        E: Into<ToolError>,
    {
        let name = name.into();
        let parameters = schema::schema_of_args::<A>(&name)?;
        let f = Arc::new(f);
        let prepare = move |tool: &str, args: &Value| -> Result<Body, ToolArgsError> {
            let decoded: A = args::decode(tool, args)?;
            let f = f.clone();
            Ok(Body::blocking(move |ctx| from_result(f(ctx, decoded))))
        };
        Tool::assemble(
            name,
            description.into(),
            parameters,
            true,
            Arc::new(prepare),
        )
    }

    /// A tool from a raw JSON schema and an async closure over the checked arguments.
    /// The schema must be an object schema; it is enforced before the closure runs.
    pub fn from_json_fn<F, Fut, R, E>(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        f: F,
    ) -> Result<Tool, DefinitionError>
    where
        F: Fn(ToolContext, Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, E>> + Send + 'static,
        R: ToolOutput,
        E: Into<ToolError>,
    {
        let f = Arc::new(f);
        let prepare = move |_tool: &str, args: &Value| -> Result<Body, ToolArgsError> {
            let (f, args) = (f.clone(), args.clone());
            Ok(Body::asynchronous(move |ctx| {
                Box::pin(async move { from_result(f(ctx, args).await) })
            }))
        };
        Tool::assemble(
            name.into(),
            description.into(),
            parameters,
            false,
            Arc::new(prepare),
        )
    }

    fn edit(mut self, change: impl FnOnce(&mut ToolInner)) -> Self {
        change(Arc::make_mut(&mut self.inner));
        self
    }

    /// Requires human approval before each call runs.
    pub fn with_requires_approval(self, requires_approval: bool) -> Self {
        self.edit(|t| t.requires_approval = requires_approval)
    }

    /// Sets the timeout of one execution.
    pub fn with_timeout(self, timeout: Duration) -> Self {
        self.edit(|t| t.timeout = timeout)
    }

    /// Runs the tool in the named pool.
    pub fn with_pool(self, pool: impl Into<String>) -> Self {
        let pool = pool.into();
        self.edit(|t| t.pool = pool)
    }

    /// Overrides the handler's delivery policy for this tool.
    pub fn with_delivery(self, delivery: Delivery) -> Self {
        self.edit(|t| t.delivery = Some(delivery))
    }

    /// Overrides guard settings for this tool.
    pub fn with_guard(self, guard: GuardOverrides) -> Self {
        self.edit(|t| t.guard = guard)
    }

    /// Derives the idempotency key from the (checked) arguments instead of
    /// `<tenant>/<run>/<call id>`.
    pub fn with_idempotency_key<F>(self, key: F) -> Self
    where
        F: Fn(&Value) -> String + Send + Sync + 'static,
    {
        let key: Arc<KeyFn> = Arc::new(move |_tool: &str, args: &Value| Ok(key(args)));
        self.edit(|t| t.idempotency_key = Some(key))
    }

    /// Sets the MCP annotations.
    pub fn with_annotations(self, annotations: ToolAnnotations) -> Self {
        self.edit(|t| t.annotations = Some(annotations))
    }

    /// Requires a description for the tool and for every parameter; a registry refuses
    /// the tool otherwise.
    pub fn with_require_descriptions(self, require: bool) -> Self {
        self.edit(|t| t.require_descriptions = require)
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The name, shared (a reference count, no copy).
    pub(crate) fn shared_name(&self) -> Arc<str> {
        self.inner.name.clone()
    }

    /// What the tool does, as the model reads it.
    pub fn description(&self) -> &str {
        &self.inner.description
    }

    /// The parameters schema (an object schema, JSON Schema 2020-12).
    pub fn parameters(&self) -> &Value {
        &self.inner.parameters
    }

    /// Whether each call waits for a human's approval.
    pub fn requires_approval(&self) -> bool {
        self.inner.requires_approval
    }

    /// The timeout of one execution.
    pub fn timeout(&self) -> Duration {
        self.inner.timeout
    }

    /// The pool the tool runs in.
    pub fn pool(&self) -> &str {
        &self.inner.pool
    }

    /// The tool's own delivery policy; `None` inherits the handler's.
    pub fn delivery(&self) -> Option<Delivery> {
        self.inner.delivery
    }

    /// The tool's guard overrides.
    pub fn guard_overrides(&self) -> &GuardOverrides {
        &self.inner.guard
    }

    /// Whether the tool runs on the blocking thread pool.
    pub fn is_blocking(&self) -> bool {
        self.inner.blocking
    }

    /// The MCP annotations, when set.
    pub fn annotations(&self) -> Option<&ToolAnnotations> {
        self.inner.annotations.as_ref()
    }

    /// The shared state types the tool takes.
    pub(crate) fn state_needs(&self) -> &[StateNeed] {
        &self.inner.state
    }

    /// Parameters without a description.
    pub fn undescribed_params(&self) -> &[String] {
        &self.inner.undescribed_params
    }

    /// Whether the tool demands descriptions for itself and every parameter.
    pub fn requires_descriptions(&self) -> bool {
        self.inner.require_descriptions
    }

    /// Whether the tool derives its idempotency key from its arguments.
    pub fn has_idempotency_key_fn(&self) -> bool {
        self.inner.idempotency_key.is_some()
    }

    /// Checks `args` against the schema without running anything.
    ///
    /// A `null` sent for an optional argument whose type does not take `null` counts as
    /// leaving it out (that is how OpenAI strict mode omits arguments).
    pub fn check_args(&self, args: &Value) -> Result<(), ToolArgsError> {
        self.normalize_and_check(Cow::Borrowed(args)).map(drop)
    }

    /// Normalizes `args` (see [`check_args`](Self::check_args)) and checks them: what
    /// the handler does once, at admission. Most arguments hold no `null` at all: they
    /// come back as they were, borrowed, without a schema walk.
    pub(crate) fn normalize_and_check<'a>(
        &self,
        mut args: Cow<'a, Value>,
    ) -> Result<Cow<'a, Value>, ToolArgsError> {
        if args::has_null(&args) {
            let schema = &self.inner.parameters;
            args::drop_optional_nulls(schema, schema, args.to_mut(), 0);
        }
        self.inner
            .checker
            .check(&self.inner.name, &self.inner.parameters, &args)?;
        Ok(args)
    }

    /// Decodes arguments that [`normalize_and_check`](Self::normalize_and_check)
    /// accepted, without checking them again.
    pub(crate) fn prepare_checked(&self, args: &Value) -> Result<PreparedCall, ToolArgsError> {
        let body = (self.inner.prepare)(&self.inner.name, args)?;
        Ok(PreparedCall { body })
    }

    /// The idempotency key of a call: the tool's key function of the (checked)
    /// arguments, or `default` when the tool has none.
    pub fn idempotency_key(
        &self,
        args: &Value,
        default: impl FnOnce() -> String,
    ) -> Result<String, ToolArgsError> {
        if self.inner.idempotency_key.is_none() {
            return Ok(default());
        }
        let normalized = self.normalize_and_check(Cow::Borrowed(args))?;
        Ok(self
            .custom_idempotency_key(&normalized)?
            .unwrap_or_else(default))
    }

    /// The key of the tool's own key function for arguments that
    /// [`normalize_and_check`](Self::normalize_and_check) accepted; `None` when it has
    /// none (the default key is then the context's to make, if a tool asks for it).
    pub(crate) fn custom_idempotency_key(
        &self,
        args: &Value,
    ) -> Result<Option<String>, ToolArgsError> {
        match &self.inner.idempotency_key {
            Some(key) => key(&self.inner.name, args).map(Some),
            None => Ok(None),
        }
    }

    /// Checks and decodes `args`: a call that is ready to run.
    pub(crate) fn prepare(&self, args: Value) -> Result<PreparedCall, ToolArgsError> {
        let args = self.normalize_and_check(Cow::Owned(args))?;
        self.prepare_checked(&args)
    }

    /// Checks the size of the arguments' JSON text, then prepares the call.
    pub(crate) fn prepare_with_limit(
        &self,
        args: Value,
        max_bytes: usize,
    ) -> Result<PreparedCall, ToolArgsError> {
        args::check_size(&self.inner.name, args::json_len(&args), max_bytes)?;
        self.prepare(args)
    }

    /// Checks, decodes and runs the tool once, without an engine: no timeout, approval
    /// or guard applies. For tests and direct use; production calls go through a
    /// `ToolHandler`.
    pub async fn call(&self, ctx: ToolContext, args: Value) -> Result<Value, CallError> {
        let prepared = self.prepare_with_limit(args, args::DEFAULT_MAX_ARGS_BYTES)?;
        prepared.run(ctx).await
    }
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.inner.name)
            .field("description", &self.inner.description)
            .field("parameters", &self.inner.parameters)
            .field("requires_approval", &self.inner.requires_approval)
            .field("timeout", &self.inner.timeout)
            .field("pool", &self.inner.pool)
            .field("delivery", &self.inner.delivery)
            .field("blocking", &self.inner.blocking)
            .finish_non_exhaustive()
    }
}
