//! Turning what a tool returns into the JSON value recorded as its result.

use serde::Serialize;
use serde_json::Value;

use crate::error::ToolError;

/// A value a tool can return: anything `Serialize`. A `String` becomes a JSON string,
/// which the engine hands to the model as plain text.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool's result",
    label = "this type does not implement `serde::Serialize`",
    note = "a tool returns `T` or `Result<T, E>` where `T: serde::Serialize` and `E: Into<aaa_tools::ToolError>`"
)]
pub trait ToolOutput {
    /// The JSON form of the result.
    fn into_value(self) -> Result<Value, ToolError>;
}

#[diagnostic::do_not_recommend]
impl<T: Serialize> ToolOutput for T {
    fn into_value(self) -> Result<Value, ToolError> {
        serde_json::to_value(self).map_err(|e| {
            ToolError::internal(format!("the tool's result could not be serialized: {e}"))
        })
    }
}

/// Converts a `Result<T, E>` a tool returned.
pub(crate) fn from_result<T: ToolOutput, E: Into<ToolError>>(
    result: Result<T, E>,
) -> Result<Value, ToolError> {
    match result {
        Ok(value) => value.into_value(),
        Err(error) => Err(error.into()),
    }
}
