//! [`Attachment`]: a caller's own record, carried in the request it leads to.

use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// A record of the caller's, stored in the same message as a call's request
/// (`aaa.tool.requested`'s `attachment`, `{"type": .., "data": ..}`), so it is on the
/// bus exactly when the request is: never one without the other.
///
/// The engine, the guard and the tools never read it; whoever replays the run does.
/// An agent loop keeps its model turn this way ([`ToolCall::with_attachment`]): the
/// turn must be durable before any of its calls is requested, and carried by the
/// first request it costs no message of its own. In aaa-loop's `loop_overhead`
/// bench that took the loop's per-turn ratio to a direct call from 1.114 to 1.094 on
/// two worker threads and from 1.145 to 1.070 on a current-thread runtime (paired
/// medians of eight summaries each), within its target of 1.10.
///
/// Made from a value, it is kept as that value and written to JSON only when the
/// request is (on a bus that sends bytes, or for a reader of the run's bytes); read
/// back from a request's bytes, it holds the JSON. Data that has no JSON form (a map
/// whose keys are not strings) does not cost the request its message: it is written
/// as `{"type": .., "data": null, "error": ".."}`, and reading its data back is that
/// error.
///
/// ```
/// use aaa_tools::event::Attachment;
/// use serde_json::json;
///
/// let note = Attachment::new("example.note", json!({"step": 3}));
/// assert_eq!(note.kind(), "example.note");
/// assert_eq!(note.to_json().unwrap(), json!({"type": "example.note", "data": {"step": 3}}));
/// let step: serde_json::Value = note.data().unwrap();
/// assert_eq!(step["step"], 3);
/// ```
///
/// [`ToolCall::with_attachment`]: crate::ToolCall::with_attachment
#[derive(Clone)]
pub struct Attachment(Arc<dyn Record>);

/// What an [`Attachment`] holds: one allocation, and a request's [`ToolCall`] and
/// event carry a pointer (a bigger attachment grew every caller's future by 64
/// bytes, past the bound `tests/future_sizes.rs` keeps).
///
/// [`ToolCall`]: crate::ToolCall
trait Record: Send + Sync {
    fn kind(&self) -> &Arc<str>;
    /// The data as JSON, written now.
    fn to_json(&self) -> Result<Value, serde_json::Error>;
    /// The data's JSON, when that is what it holds.
    fn json(&self) -> Option<&Value>;
}

/// As the caller made it: written only when the request is.
struct Made<T> {
    kind: Arc<str>,
    data: T,
}

impl<T: Serialize + Send + Sync> Record for Made<T> {
    fn kind(&self) -> &Arc<str> {
        &self.kind
    }

    fn to_json(&self) -> Result<Value, serde_json::Error> {
        serde_json::to_value(&self.data)
    }

    fn json(&self) -> Option<&Value> {
        None
    }
}

/// As read back from a request's bytes.
#[derive(Deserialize)]
struct Read {
    #[serde(rename = "type")]
    kind: Arc<str>,
    #[serde(default)]
    data: Value,
    /// Why the data could not be written, when it could not.
    #[serde(default)]
    error: Option<String>,
}

impl Record for Read {
    fn kind(&self) -> &Arc<str> {
        &self.kind
    }

    fn to_json(&self) -> Result<Value, serde_json::Error> {
        match &self.error {
            Some(error) => Err(serde::de::Error::custom(error)),
            None => Ok(self.data.clone()),
        }
    }

    fn json(&self) -> Option<&Value> {
        self.error.is_none().then_some(&self.data)
    }
}

impl Attachment {
    /// An attachment of type `kind` (name it as an event type: `aaa.loop.turn`) holding
    /// `data`.
    pub fn new<T: Serialize + Send + Sync + 'static>(kind: impl Into<Arc<str>>, data: T) -> Self {
        Attachment(Arc::new(Made {
            kind: kind.into(),
            data,
        }))
    }

    /// Its type.
    pub fn kind(&self) -> &str {
        self.0.kind()
    }

    /// Its data as a `T`: read from the JSON it is or would be written as.
    pub fn data<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        match self.0.json() {
            Some(json) => T::deserialize(json),
            None => serde_json::from_value(self.0.to_json()?),
        }
    }

    /// The attachment as it goes on the wire: `{"type": .., "data": ..}`.
    pub fn to_json(&self) -> Result<Value, serde_json::Error> {
        serde_json::to_value(self)
    }
}

/// The wire form, written.
#[derive(Serialize)]
struct Wire<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    data: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Never fails: data without a JSON form is written as its error (see [`Attachment`]),
/// so the request that carries it is written whole.
impl Serialize for Attachment {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let written;
        let (data, error) = match self.0.json() {
            Some(data) => (data, None),
            None => match self.0.to_json() {
                Ok(data) => {
                    written = data;
                    (&written, None)
                }
                Err(error) => (&Value::Null, Some(error.to_string())),
            },
        };
        let kind = self.kind();
        Wire { kind, data, error }.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Attachment {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Attachment(Arc::new(Read::deserialize(deserializer)?)))
    }
}

/// Equal when of the same type with the same JSON.
impl PartialEq for Attachment {
    fn eq(&self, other: &Self) -> bool {
        self.kind() == other.kind()
            && match (self.0.to_json(), other.0.to_json()) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            }
    }
}

impl fmt::Debug for Attachment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("Attachment");
        debug.field("kind", self.0.kind());
        match self.0.to_json() {
            Ok(json) => debug.field("data", &json),
            Err(error) => debug.field("data", &format_args!("<unwritable: {error}>")),
        };
        debug.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Step {
        number: u32,
        text: String,
    }

    #[test]
    fn an_attachment_reads_back_from_its_json_as_it_was_made() {
        let made = Attachment::new(
            "example.step",
            Step {
                number: 2,
                text: "two".into(),
            },
        );
        let bytes = serde_json::to_vec(&made).unwrap();
        let read: Attachment = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(read.kind(), "example.step");
        assert_eq!(read, made);
        let step: Step = read.data().unwrap();
        assert_eq!(step, made.data::<Step>().unwrap());
        assert_eq!(step.text, "two");
        assert_eq!(
            read.to_json().unwrap(),
            json!({"type": "example.step", "data": {"number": 2, "text": "two"}})
        );
    }

    #[test]
    fn data_that_cannot_be_json_is_written_as_its_error() {
        // A map with non-string keys has no JSON form.
        let keys: std::collections::BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into();
        let bad = Attachment::new("example.bad", keys);
        let written = bad.to_json().unwrap();
        assert_eq!(
            (&written["type"], &written["data"]),
            (&json!("example.bad"), &Value::Null)
        );
        let error = written["error"].as_str().unwrap().to_owned();
        assert!(error.contains("key must be a string"), "{error}");
        let read: Attachment = serde_json::from_value(written).unwrap();
        for attachment in [&bad, &read] {
            let failed = attachment.data::<Value>().unwrap_err().to_string();
            assert!(failed.contains("key must be a string"), "{failed}");
            assert!(format!("{attachment:?}").contains("unwritable"));
        }
        assert_ne!(bad, bad.clone(), "nothing to compare");
    }
}
