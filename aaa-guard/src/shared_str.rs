//! [`SharedStr`]: immutable text that many values hold at once without copying it.

use std::borrow::{Borrow, Cow};
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Immutable text, shared: a `&'static str` or an `Arc<str>`. Cloning it counts a
/// reference (or copies a pointer) instead of copying the text.
///
/// A call's tool name and its worker's id appear in every fact about the call and in
/// its guard record. The embedded engine keeps many thousands of recent facts; with
/// one shared copy per name, keeping them costs one allocation instead of one per
/// fact, and forgetting them one release instead of many.
///
/// It reads as a `str` ([`Deref`], [`AsRef`], [`Borrow`], [`Display`](fmt::Display)),
/// compares, orders and hashes as its text, and is written and read as a JSON string.
/// `From<&str>` copies the text once; [`SharedStr::from_static`] borrows a literal for
/// free.
///
/// ```
/// use aaa_guard::SharedStr;
///
/// let name = SharedStr::from("add");
/// let again = name.clone(); // the same text, not a copy of it
/// assert_eq!(again, "add");
/// assert_eq!(again.len(), 3);
/// assert_eq!(serde_json::to_string(&name).unwrap(), r#""add""#);
///
/// const KIND: SharedStr = SharedStr::from_static("aaa.tool.completed");
/// assert!(KIND.starts_with("aaa.tool."));
/// ```
#[derive(Clone)]
pub struct SharedStr(Repr);

#[derive(Clone)]
enum Repr {
    Static(&'static str),
    Shared(Arc<str>),
}

impl SharedStr {
    /// Text that lives for the whole program: held as a pointer, never allocated.
    pub const fn from_static(text: &'static str) -> Self {
        SharedStr(Repr::Static(text))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Static(text) => text,
            Repr::Shared(text) => text,
        }
    }
}

impl Default for SharedStr {
    /// The empty text.
    fn default() -> Self {
        SharedStr::from_static("")
    }
}

impl Deref for SharedStr {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for SharedStr {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for SharedStr {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for SharedStr {
    /// Copies `text` once.
    fn from(text: &str) -> Self {
        SharedStr(Repr::Shared(Arc::from(text)))
    }
}

impl From<&String> for SharedStr {
    /// Copies `text` once.
    fn from(text: &String) -> Self {
        SharedStr::from(text.as_str())
    }
}

impl From<String> for SharedStr {
    fn from(text: String) -> Self {
        SharedStr(Repr::Shared(Arc::from(text)))
    }
}

impl From<Box<str>> for SharedStr {
    fn from(text: Box<str>) -> Self {
        SharedStr(Repr::Shared(Arc::from(text)))
    }
}

impl From<&SharedStr> for SharedStr {
    /// Shares the text (no copy).
    fn from(text: &SharedStr) -> Self {
        text.clone()
    }
}

impl From<Arc<str>> for SharedStr {
    /// Shares `text` (no copy).
    fn from(text: Arc<str>) -> Self {
        SharedStr(Repr::Shared(text))
    }
}

impl From<SharedStr> for Cow<'static, str> {
    /// Borrows a literal; copies shared text.
    fn from(text: SharedStr) -> Self {
        match text.0 {
            Repr::Static(text) => Cow::Borrowed(text),
            Repr::Shared(text) => Cow::Owned(text.as_ref().to_owned()),
        }
    }
}

impl From<SharedStr> for String {
    fn from(text: SharedStr) -> Self {
        text.as_str().to_owned()
    }
}

impl fmt::Debug for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq for SharedStr {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for SharedStr {}

impl PartialOrd for SharedStr {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for SharedStr {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Hash for SharedStr {
    /// Hashes as the text does, as [`Borrow<str>`] requires.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

macro_rules! eq_text {
    ($($other:ty),*) => {$(
        impl PartialEq<$other> for SharedStr {
            fn eq(&self, other: &$other) -> bool {
                self.as_str() == AsRef::<str>::as_ref(other)
            }
        }

        impl PartialEq<SharedStr> for $other {
            fn eq(&self, other: &SharedStr) -> bool {
                AsRef::<str>::as_ref(self) == other.as_str()
            }
        }
    )*};
}

eq_text!(str, &str, String);

impl Serialize for SharedStr {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for SharedStr {
    /// Reads a JSON string: one allocation, whether the text is borrowed from the
    /// input or handed over as a `String`.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;

        impl serde::de::Visitor<'_> for Text {
            type Value = SharedStr;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<SharedStr, E> {
                Ok(SharedStr::from(text))
            }

            fn visit_string<E: serde::de::Error>(self, text: String) -> Result<SharedStr, E> {
                Ok(SharedStr::from(text))
            }
        }

        deserializer.deserialize_str(Text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn compares_hashes_and_reads_as_its_text_whatever_holds_it() {
        let owned = SharedStr::from(String::from("add"));
        let literal = SharedStr::from_static("add");
        assert_eq!(owned, literal);
        assert_eq!(owned, "add");
        assert_eq!("add", literal);
        assert_eq!(String::from("add"), owned);
        let (a, b) = (SharedStr::from("a"), SharedStr::from_static("b"));
        assert!(a < b);
        let set: HashSet<SharedStr> = [owned.clone()].into_iter().collect();
        assert!(set.contains("add"));
        assert_eq!(format!("{literal} {owned:?}"), r#"add "add""#);
        assert_eq!(SharedStr::default(), "");
    }

    #[test]
    fn a_clone_shares_the_text() {
        let name = SharedStr::from("tool");
        let copy = name.clone();
        assert!(std::ptr::eq(name.as_str(), copy.as_str()));
    }

    #[test]
    fn json_round_trip_keeps_escapes_and_rejects_what_is_not_a_string() {
        let odd = SharedStr::from("t\u{e9}\"\\\n\u{1}");
        let text = serde_json::to_string(&odd).unwrap();
        let back: SharedStr = serde_json::from_str(&text).unwrap();
        assert_eq!(back, odd);
        let error = serde_json::from_str::<SharedStr>("3").unwrap_err();
        assert!(error.to_string().contains("a string"), "{error}");
    }
}
