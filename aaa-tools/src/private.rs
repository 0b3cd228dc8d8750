//! Items the `#[tool]` macro's output names. Not a public API: no stability promise.

pub use ::core;
pub use ::schemars;
pub use ::serde;
pub use ::serde_json;
pub use ::std::boxed::Box;
pub use ::std::option::Option;
pub use ::std::result::Result;
pub use ::std::string::String;
pub use ::std::sync::{Arc, OnceLock};
pub use ::std::vec;
pub use ::std::vec::Vec;

pub use aaa_guard::{Delivery, GuardOverrides, LostLease};

pub use crate::args::decode;
pub use crate::error::{DefinitionError, ToolArgsError, ToolError};
pub use crate::schema::ParamSpec;
pub use crate::tool::{StateNeed, ToolAnnotations, ToolFuture, ToolSpec};
pub use crate::{State, Tool, ToolContext};

use serde_json::Value;

use crate::output::{ToolOutput, from_result};
pub use crate::tool::{Body, KeyFn, PrepareFn};

/// A tool parameter type must be `JsonSchema + DeserializeOwned`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool parameter",
    label = "tool parameters must implement `schemars::JsonSchema` and `serde::Deserialize`",
    note = "derive both on your type: `#[derive(serde::Deserialize, schemars::JsonSchema)]`; borrowed types such as `&str` cannot be decoded from a call, use `String`"
)]
pub trait ToolParam: schemars::JsonSchema + serde::de::DeserializeOwned {}

#[diagnostic::do_not_recommend]
impl<T: schemars::JsonSchema + serde::de::DeserializeOwned> ToolParam for T {}

/// Compile-time check that `T` can be a parameter (spanned at the user's type).
pub const fn assert_param<T: ToolParam>() {}

/// Compile-time check that `T` can be a result (spanned at the user's return type).
pub const fn assert_output<T: ToolOutput>() {}

/// The arguments object of a call, read parameter by parameter where it lies (nothing
/// is copied but what a parameter's type keeps).
pub struct ArgsMap<'a> {
    tool: &'a str,
    map: &'a serde_json::Map<String, Value>,
}

/// Opens checked arguments (an object: the schema was checked before).
pub fn args_map<'a>(tool: &'a str, value: &'a Value) -> Result<ArgsMap<'a>, ToolArgsError> {
    match value {
        Value::Object(map) => Ok(ArgsMap { tool, map }),
        other => Err(ToolArgsError::single(
            tool,
            crate::ArgProblem::ROOT,
            format!("expected a JSON object of named arguments; got {other}"),
        )),
    }
}

impl ArgsMap<'_> {
    /// Decodes the parameter `name` (absent counts as `null`, which an `Option` takes
    /// as `None`), naming its path on failure.
    pub fn get<T: ToolParam>(&self, name: &str) -> Result<T, ToolArgsError> {
        const NULL: &Value = &Value::Null;
        let value = self.map.get(name).unwrap_or(NULL);
        crate::args::decode_at(self.tool, name, value)
    }
}

/// A boxed prepare function.
pub fn prepare_fn<F>(f: F) -> Arc<PrepareFn>
where
    F: Fn(&str, &Value) -> Result<Body, ToolArgsError> + Send + Sync + 'static,
{
    Arc::new(f)
}

/// A boxed key function.
pub fn key_fn<F>(f: F) -> Option<Arc<KeyFn>>
where
    F: Fn(&str, &Value) -> Result<String, ToolArgsError> + Send + Sync + 'static,
{
    Some(Arc::new(f))
}

/// No key function.
pub fn no_key_fn() -> Option<Arc<KeyFn>> {
    None
}

/// An async body.
pub fn async_body<F>(f: F) -> Body
where
    F: FnOnce(ToolContext) -> ToolFuture + Send + 'static,
{
    Body::asynchronous(f)
}

/// A blocking body.
pub fn blocking_body<F>(f: F) -> Body
where
    F: FnOnce(ToolContext) -> Result<Value, ToolError> + Send + 'static,
{
    Body::blocking(f)
}

/// Boxes a tool future.
pub fn boxed<F>(f: F) -> ToolFuture
where
    F: core::future::Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    Box::pin(f)
}

/// Converts a `Result` a tool returned.
pub fn result_output<T: ToolOutput, E: Into<ToolError>>(
    result: Result<T, E>,
) -> Result<Value, ToolError> {
    from_result(result)
}

/// Converts a plain value a tool returned.
pub fn value_output<T: ToolOutput>(value: T) -> Result<Value, ToolError> {
    value.into_value()
}

/// Fetches the state a `State<T>` parameter needs.
pub fn state<T: Send + Sync + 'static>(ctx: &ToolContext) -> Result<State<T>, ToolError> {
    ctx.state::<T>().ok_or_else(|| {
        ToolError::internal(format!(
            "no state of type `{}` was registered for this tool",
            core::any::type_name::<T>()
        ))
    })
}

/// Builds a macro-described tool. The macro validated name and options at compile time;
/// a failure here is a bug in the macro, reported in the message.
pub fn build(spec: ToolSpec, prepare: Arc<PrepareFn>, key: Option<Arc<KeyFn>>) -> Tool {
    let name = spec.name;
    match Tool::__from_spec(spec, prepare, key) {
        Ok(tool) => tool,
        Err(error) => {
            panic!("#[tool] produced an invalid tool `{name}` (a bug in aaa-tools): {error}")
        }
    }
}
