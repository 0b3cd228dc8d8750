//! [`ArgumentsOrProblem`] and [`Arguments`]: a call's arguments as a codec read them,
//! one shared JSON object or a reason, in words for the model, why there is none.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A call's arguments: one JSON object, or a model-readable reason why there is none.
/// Both are shared, as the rest of a [`ProviderCall`](crate::ProviderCall) is: a copy
/// counts a reference.
///
/// A `Problem` call is still a call: the loop answers it (with a `bad_args` failure
/// carrying the message), so the model can send it again correctly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ArgumentsOrProblem {
    /// The arguments object.
    Arguments(Arguments),
    /// Why the arguments cannot be used, in words for the model.
    Problem(Arc<str>),
}

/// One JSON object of arguments, shared: a copy counts a reference, and the engine's
/// request takes the same allocation ([`shared`](Self::shared) into
/// [`ToolCall::arguments`](aaa_tools::ToolCall::arguments)), so the turn a loop records
/// and the call it requests hold one copy between them.
///
/// It reads as the object it is (`Deref` to a [`Map`]) and is written as that object.
///
/// ```
/// use std::sync::Arc;
///
/// use aaa_loop::Arguments;
/// use serde_json::{Map, json};
///
/// let arguments = Arguments::from(json!({"city": "Oslo"}).as_object().unwrap().clone());
/// assert_eq!(arguments["city"], "Oslo");
/// assert_eq!(*arguments.shared(), json!({"city": "Oslo"}));
/// assert!(Arc::ptr_eq(&arguments.shared(), &arguments.clone().shared()));
/// assert!(Arguments::from(Map::new()).is_empty());
/// ```
#[derive(Clone, PartialEq)]
pub struct Arguments(
    /// Always a `Value::Object`: every constructor takes a [`Map`].
    Arc<Value>,
);

impl Arguments {
    /// The arguments as the engine's request takes them: the same allocation.
    pub fn shared(&self) -> Arc<Value> {
        Arc::clone(&self.0)
    }
}

impl From<Map<String, Value>> for Arguments {
    fn from(map: Map<String, Value>) -> Self {
        Arguments(Arc::new(Value::Object(map)))
    }
}

impl std::ops::Deref for Arguments {
    type Target = Map<String, Value>;

    fn deref(&self) -> &Map<String, Value> {
        match &*self.0 {
            Value::Object(map) => map,
            _ => unreachable!("arguments are made from a map only"),
        }
    }
}

impl fmt::Debug for Arguments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl Serialize for Arguments {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Arguments {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Map::deserialize(deserializer).map(Arguments::from)
    }
}

impl ArgumentsOrProblem {
    /// Reads arguments sent as JSON text (OpenAI's `arguments` string): one object, or
    /// a problem saying what is wrong. Empty text counts as no arguments (`{}`).
    ///
    /// ```
    /// use aaa_loop::ArgumentsOrProblem;
    ///
    /// assert!(matches!(ArgumentsOrProblem::from_text(r#"{"a": 1}"#), ArgumentsOrProblem::Arguments(_)));
    /// let ArgumentsOrProblem::Problem(problem) = ArgumentsOrProblem::from_text(r#"{"a": "#) else { panic!() };
    /// assert_eq!(
    ///     &*problem,
    ///     "the arguments are cut off: the JSON ends early (EOF while parsing a value at line 1 column 6); send one complete JSON object"
    /// );
    /// ```
    pub fn from_text(text: &str) -> Self {
        if text.trim().is_empty() {
            return ArgumentsOrProblem::empty();
        }
        match serde_json::from_str::<Value>(text) {
            Ok(value) => ArgumentsOrProblem::from_value(value),
            Err(e) if e.is_eof() => ArgumentsOrProblem::Problem(
                format!(
                    "the arguments are cut off: the JSON ends early ({e}); send one complete JSON object"
                )
                .into(),
            ),
            Err(e) => ArgumentsOrProblem::Problem(
                format!("the arguments are not valid JSON ({e}); send one JSON object").into(),
            ),
        }
    }

    /// Takes arguments sent as a JSON value (Anthropic's `input`, Gemini's `args`): an
    /// object, or a problem naming what arrived instead.
    ///
    /// ```
    /// use aaa_loop::ArgumentsOrProblem;
    ///
    /// let ArgumentsOrProblem::Problem(problem) = ArgumentsOrProblem::from_value(serde_json::json!([1, 2])) else { panic!() };
    /// assert!(problem.starts_with("the arguments are a JSON array, not an object"));
    /// ```
    pub fn from_value(value: Value) -> Self {
        let what = match value {
            Value::Object(map) => return ArgumentsOrProblem::Arguments(map.into()),
            Value::Null => "null",
            Value::Bool(_) => "a JSON boolean",
            Value::Number(_) => "a JSON number",
            Value::String(_) => "a JSON string",
            Value::Array(_) => "a JSON array",
        };
        ArgumentsOrProblem::Problem(
            format!(
                "the arguments are {what}, not an object; send one JSON object whose \
                 properties are the tool's arguments"
            )
            .into(),
        )
    }

    /// No arguments: the empty object `{}`.
    ///
    /// ```
    /// use aaa_loop::ArgumentsOrProblem;
    ///
    /// assert!(ArgumentsOrProblem::empty().arguments().is_some_and(|map| map.is_empty()));
    /// ```
    pub fn empty() -> Self {
        ArgumentsOrProblem::Arguments(Map::new().into())
    }

    /// The arguments, when they are usable.
    pub fn arguments(&self) -> Option<&Map<String, Value>> {
        match self {
            ArgumentsOrProblem::Arguments(map) => Some(map),
            ArgumentsOrProblem::Problem(_) => None,
        }
    }

    /// The problem, when there is one.
    pub fn problem(&self) -> Option<&str> {
        match self {
            ArgumentsOrProblem::Problem(problem) => Some(problem),
            ArgumentsOrProblem::Arguments(_) => None,
        }
    }
}

/// Arguments sent as JSON text (both OpenAI APIs): the text, or the object itself (as
/// some compatible servers send it); none at all counts as `{}`.
pub(crate) fn text_arguments(value: Option<&Value>) -> ArgumentsOrProblem {
    match value {
        None | Some(Value::Null) => ArgumentsOrProblem::empty(),
        Some(Value::String(text)) => ArgumentsOrProblem::from_text(text),
        Some(other) => ArgumentsOrProblem::from_value(other.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problem(a: ArgumentsOrProblem) -> String {
        a.problem().expect("a problem").to_owned()
    }

    #[test]
    fn arguments_text_is_one_object_or_a_problem() {
        assert_eq!(
            ArgumentsOrProblem::from_text(r#" {"city": "Oslo"} "#),
            ArgumentsOrProblem::Arguments(
                json!({"city": "Oslo"}).as_object().unwrap().clone().into()
            )
        );
        assert_eq!(
            ArgumentsOrProblem::from_text("  "),
            ArgumentsOrProblem::Arguments(Map::new().into())
        );
        assert_eq!(
            problem(ArgumentsOrProblem::from_text("{city: Oslo}")),
            "the arguments are not valid JSON (key must be a string at line 1 column 2); send one JSON object"
        );
        assert_eq!(
            problem(ArgumentsOrProblem::from_text(r#"{"city": "Os"#)),
            "the arguments are cut off: the JSON ends early (EOF while parsing a string at line 1 column 12); send one complete JSON object"
        );
        assert_eq!(
            problem(ArgumentsOrProblem::from_text(r#"{"a":1} x"#)),
            "the arguments are not valid JSON (trailing characters at line 1 column 9); send one JSON object"
        );
        assert_eq!(
            problem(ArgumentsOrProblem::from_text(r#""{\"a\":1}""#)),
            "the arguments are a JSON string, not an object; send one JSON object whose properties are the tool's arguments"
        );
        assert!(
            problem(ArgumentsOrProblem::from_text("null")).starts_with("the arguments are null,")
        );
    }
}
