//! Validated identifiers: [`RunId`], [`CallId`], [`TenantId`].
//!
//! Ids travel in event attributes and, on NATS, inside subjects, so they are held to one
//! conservative alphabet that is safe everywhere: 1 to 128 characters from
//! `[A-Za-z0-9_-]`. Provider call ids (`call_abc`, `toolu_01A`), UUIDs and slugs fit.
//! Anything else is rejected with an error that names the id and the offending
//! character, rather than encoded: an id that silently changes on the way is harder to
//! trace than one refused at the door.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize};

/// The longest id accepted.
pub(crate) const MAX_ID_LEN: usize = 128;

/// An id that is empty, too long, or holds a character outside `[A-Za-z0-9_-]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {which} {value:?}: {reason}")]
pub struct IdError {
    which: &'static str,
    value: String,
    reason: String,
}

impl IdError {
    /// Which id was invalid: `"run id"`, `"call id"` or `"tenant id"`.
    pub fn which(&self) -> &'static str {
        self.which
    }
}

/// Whether a byte may appear in an id: `[A-Za-z0-9_-]`.
const ID_BYTE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || c == b'_' || c == b'-';
        b += 1;
    }
    table
};

fn check(which: &'static str, value: &str) -> Result<(), IdError> {
    let fail = |reason: String| {
        let mut shown: String = value.chars().take(40).collect();
        if shown.len() < value.len() {
            shown.push('…');
        }
        Err(IdError {
            which,
            value: shown,
            reason,
        })
    };
    if value.is_empty() {
        return fail("it is empty".into());
    }
    if value.len() > MAX_ID_LEN {
        return fail(format!(
            "it is {} bytes long; the limit is {MAX_ID_LEN}",
            value.len()
        ));
    }
    // Every id of every event is checked: one table lookup per byte, no early exit,
    // and a search for the culprit only when there is one.
    let valid = value
        .bytes()
        .fold(true, |ok, b| ok & ID_BYTE[usize::from(b)]);
    if valid {
        return Ok(());
    }
    if let Some((at, bad)) = value
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return fail(format!(
            "character {bad:?} at byte {at} is not allowed; ids use only A-Z, a-z, 0-9, '_' and '-'"
        ));
    }
    Ok(())
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $which:literal) => {
        $(#[$doc])*
        ///
        /// Shared text: cloning an id (every event and outcome of a call carries its
        /// ids) counts a reference instead of copying.
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(Arc<str>);

        impl $name {
            /// The longest id accepted, in bytes.
            pub const MAX_LEN: usize = MAX_ID_LEN;

            /// Validates `value`: 1 to 128 characters from `[A-Za-z0-9_-]`, safe in
            /// event attributes, bus subjects and store keys. Anything else is an
            /// [`IdError`] naming the id and the offending character.
            pub fn new(value: impl AsRef<str>) -> Result<Self, IdError> {
                let value = value.as_ref();
                check($which, value)?;
                Ok($name(Arc::from(value)))
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The id as a `String`.
            pub fn into_string(self) -> String {
                self.0.as_ref().to_owned()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        /// An id hashes and compares as its text, so maps keyed by ids are looked up
        /// by a `&str` (a subject's token) without making an id of it.
        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl std::str::FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, IdError> {
                $name::new(s)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = IdError;
            fn try_from(s: &str) -> Result<Self, IdError> {
                $name::new(s)
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;
            fn try_from(s: String) -> Result<Self, IdError> {
                $name::new(s)
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                // Read as borrowed text where the format allows: one allocation, the id's.
                struct Text;
                impl serde::de::Visitor<'_> for Text {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        write!(f, "a {} (text)", $which)
                    }
                    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<$name, E> {
                        $name::new(v).map_err(E::custom)
                    }
                }
                deserializer.deserialize_str(Text)
            }
        }
    };
}

id_type!(
    /// The id of a run: one agent conversation or job whose tool calls belong together.
    RunId,
    "run id"
);
id_type!(
    /// The id of one tool call, as the model (or program) named it.
    CallId,
    "call id"
);
id_type!(
    /// The tenant a run belongs to. Approvals and budgets never cross tenants.
    TenantId,
    "tenant id"
);

impl TenantId {
    /// The tenant used when none is given: `default`.
    pub fn default_tenant() -> Self {
        TenantId(Arc::from("default"))
    }
}

impl Default for TenantId {
    fn default() -> Self {
        TenantId::default_tenant()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_provider_ids_and_uuids() {
        for ok in [
            "call_abc123",
            "toolu_01A09q90qw90lq917835lq9",
            "0b9d2c1e-7c4f-4a3e-9f1d-1c2b3a4d5e6f",
        ] {
            CallId::new(ok).unwrap();
        }
    }

    #[test]
    fn rejects_odd_ids_naming_which_and_why() {
        let err = RunId::new("a.b").unwrap_err();
        assert_eq!(err.which(), "run id");
        assert!(err.to_string().contains("character '.' at byte 1"), "{err}");
        assert!(TenantId::new("").unwrap_err().to_string().contains("empty"));
        assert!(
            CallId::new("x".repeat(129))
                .unwrap_err()
                .to_string()
                .contains("limit is 128")
        );
        for bad in ["a*", "a>", "a b", "ü", "a/b", "a\n"] {
            assert!(CallId::new(bad).is_err(), "{bad:?} must be rejected");
        }
        let err = serde_json::from_str::<CallId>("\"x.y\"").unwrap_err();
        assert!(err.to_string().contains("invalid call id"), "{err}");
    }
}
