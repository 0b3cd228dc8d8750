//! Reading a provider's JSON with errors that name the path: `choices[0].message` is
//! missing, `content[2].id` is a number, expected a string.
//!
//! The codecs walk `serde_json::Value`s rather than deriving structs: each provider's
//! format has fields that take two shapes (a string or an object), fields that some
//! compatible servers leave out, and unknown variants to skip, and every error must
//! say where it happened.

use serde_json::Value;

use crate::error::CodecError;
use crate::provider::Provider;

/// A value inside a body, with its path for error messages.
#[derive(Debug, Clone)]
pub(crate) struct Node<'a> {
    provider: Provider,
    value: &'a Value,
    path: String,
}

/// The words for a value's type, in "is {kind}, expected ..." messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl<'a> Node<'a> {
    /// The body; it must be an object.
    pub(crate) fn root(provider: Provider, value: &'a Value) -> Result<Self, CodecError> {
        Node::named(provider, value, "(body)")
    }

    /// A stream event or chunk, its paths starting at `name`; it must be an object.
    pub(crate) fn named(
        provider: Provider,
        value: &'a Value,
        name: &str,
    ) -> Result<Self, CodecError> {
        let node = Node {
            provider,
            value,
            path: name.to_owned(),
        };
        node.expect_object()?;
        Ok(Node {
            path: if name == "(body)" {
                String::new()
            } else {
                name.to_owned()
            },
            ..node
        })
    }

    pub(crate) fn value(&self) -> &'a Value {
        self.value
    }

    /// An error at this node.
    pub(crate) fn error(&self, problem: impl Into<String>) -> CodecError {
        CodecError::Shape {
            provider: self.provider,
            path: if self.path.is_empty() {
                "(body)".to_owned()
            } else {
                self.path.clone()
            },
            problem: problem.into(),
        }
    }

    fn wrong(&self, expected: &str) -> CodecError {
        self.error(format!("is {}, expected {expected}", kind(self.value)))
    }

    fn child(&self, key: &str, value: &'a Value) -> Node<'a> {
        let path = if self.path.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.path)
        };
        Node {
            provider: self.provider,
            value,
            path,
        }
    }

    fn expect_object(&self) -> Result<(), CodecError> {
        match self.value {
            Value::Object(_) => Ok(()),
            _ => Err(self.wrong("an object")),
        }
    }

    /// The field `key`, `None` when missing or null.
    pub(crate) fn get(&self, key: &str) -> Option<Node<'a>> {
        match self.value.get(key) {
            None | Some(Value::Null) => None,
            Some(value) => Some(self.child(key, value)),
        }
    }

    /// The field `key`, which must be there and not null.
    pub(crate) fn field(&self, key: &str) -> Result<Node<'a>, CodecError> {
        self.get(key)
            .ok_or_else(|| self.child(key, &Value::Null).error("is missing"))
    }

    /// The field `key`, which must be an object when present.
    pub(crate) fn object(&self, key: &str) -> Result<Option<Node<'a>>, CodecError> {
        self.get(key)
            .map(|node| node.expect_object().map(|()| node))
            .transpose()
    }

    /// The field `key`, which must be there and an object.
    pub(crate) fn req_object(&self, key: &str) -> Result<Node<'a>, CodecError> {
        let node = self.field(key)?;
        node.expect_object()?;
        Ok(node)
    }

    /// This node as text.
    pub(crate) fn as_str(&self) -> Result<&'a str, CodecError> {
        self.value.as_str().ok_or_else(|| self.wrong("a string"))
    }

    /// The text field `key`, `None` when missing or null.
    pub(crate) fn str(&self, key: &str) -> Result<Option<&'a str>, CodecError> {
        self.get(key).map(|node| node.as_str()).transpose()
    }

    /// The text field `key`, which must be there.
    pub(crate) fn req_str(&self, key: &str) -> Result<&'a str, CodecError> {
        self.field(key)?.as_str()
    }

    /// The array field `key`'s items (none when the field is missing or null).
    pub(crate) fn items(&self, key: &str) -> Result<Vec<Node<'a>>, CodecError> {
        let Some(node) = self.get(key) else {
            return Ok(Vec::new());
        };
        let Value::Array(items) = node.value else {
            return Err(node.wrong("an array"));
        };
        Ok(items
            .iter()
            .enumerate()
            .map(|(i, value)| Node {
                provider: self.provider,
                value,
                path: format!("{}[{i}]", node.path),
            })
            .collect())
    }

    /// The index field `key` (a non-negative integer), which must be there.
    pub(crate) fn index(&self, key: &str) -> Result<usize, CodecError> {
        let node = self.field(key)?;
        node.value
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| node.wrong("an index (a non-negative integer)"))
    }

    /// The count at `keys` (a path of fields); 0 when absent or not a count. Token
    /// counts are bookkeeping: a missing one must not cost the turn.
    pub(crate) fn count(&self, keys: &[&str]) -> u64 {
        keys.iter()
            .try_fold(self.value, |value, key| value.get(key))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    }
}

/// `{"error": {...}}` (or `{"error": "text"}`) as a [`CodecError::Provider`], if
/// `body` is one: the error bodies of all four APIs, and OpenAI's and Anthropic's
/// `error` stream events.
pub(crate) fn provider_error(provider: Provider, body: &Value) -> Option<CodecError> {
    let error = body.get("error")?;
    let (message, code) = match error {
        Value::String(text) => (text.clone(), None),
        Value::Object(fields) => {
            let text = fields.get("message").and_then(Value::as_str);
            let code = ["type", "status", "code"]
                .iter()
                .find_map(|key| match fields.get(*key) {
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(Value::Number(n)) => Some(n.to_string()),
                    _ => None,
                });
            let message = match (&code, text) {
                (Some(code), Some(text)) => format!("{code}: {text}"),
                (Some(code), None) => code.clone(),
                (None, Some(text)) => text.to_owned(),
                (None, None) => error.to_string(),
            };
            (message, code)
        }
        Value::Null => return None,
        other => (other.to_string(), None),
    };
    Some(CodecError::Provider {
        provider,
        message,
        code,
    })
}

/// Reads one JSON body or event from bytes.
pub(crate) fn from_slice(provider: Provider, bytes: &[u8]) -> Result<Value, CodecError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(CodecError::Empty { provider });
    }
    serde_json::from_slice(bytes).map_err(|e| CodecError::Json {
        provider,
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn errors_name_the_path_and_the_type() {
        let body = json!({"choices": [{"message": {"tool_calls": [{"id": 7}]}}]});
        let root = Node::root(Provider::OpenAiChat, &body).unwrap();
        let call = &root.items("choices").unwrap()[0]
            .field("message")
            .unwrap()
            .items("tool_calls")
            .unwrap()[0];
        assert_eq!(
            call.req_str("id").unwrap_err().to_string(),
            "unexpected OpenAI Chat Completions response: `choices[0].message.tool_calls[0].id` is a number, expected a string"
        );
        assert_eq!(
            call.field("function").unwrap_err().to_string(),
            "unexpected OpenAI Chat Completions response: `choices[0].message.tool_calls[0].function` is missing"
        );
        assert_eq!(
            Node::root(Provider::Gemini, &json!([1]))
                .err()
                .unwrap()
                .to_string(),
            "unexpected Gemini generateContent response: `(body)` is an array, expected an object"
        );
        assert_eq!(root.count(&["usage", "prompt_tokens"]), 0);
    }

    #[test]
    fn error_bodies_become_provider_errors() {
        let anthropic = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
        assert_eq!(
            provider_error(Provider::Anthropic, &anthropic)
                .unwrap()
                .to_string(),
            "Anthropic Messages reported an error: overloaded_error: Overloaded"
        );
        let gemini = json!({"error": {"code": 400, "message": "API key not valid", "status": "INVALID_ARGUMENT"}});
        assert_eq!(
            provider_error(Provider::Gemini, &gemini).unwrap(),
            CodecError::Provider {
                provider: Provider::Gemini,
                message: "INVALID_ARGUMENT: API key not valid".into(),
                code: Some("INVALID_ARGUMENT".into()),
            }
        );
        assert!(provider_error(Provider::OpenAiChat, &json!({"error": null})).is_none());
        assert_eq!(
            from_slice(Provider::OpenAiChat, b" \n"),
            Err(CodecError::Empty {
                provider: Provider::OpenAiChat
            })
        );
    }
}
