//! [`Payload`]: what a message holds, as bytes or as the value its bytes are written
//! from.

use std::any::Any;
use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

/// A value a [`Payload`] can carry unwritten: [`encode`](Self::encode) gives its bytes.
///
/// The bytes must depend on the value alone (the same value, the same bytes): they
/// may be written at any time after the payload was made, or never.
pub trait Encode: Any + Send + Sync {
    /// The value's bytes (for the engine's events: one CloudEvents JSON object).
    fn encode(&self) -> Vec<u8>;
}

/// The content of a message: bytes, or the value they are written from. Cloning
/// shares it.
///
/// A bus that leaves the process (JetStream) sends bytes, and every payload gives
/// them. An in-process bus ([`MemoryBus`](super::MemoryBus)) need not: a payload made
/// with [`Payload::deferred`] keeps the value it was made from, and writes it out only
/// when somebody asks for the bytes, once (later readers share them). A consumer in
/// the same process that knows the value's type reads it back with
/// [`Payload::value`] and parses nothing. That is how the engine's own requests and
/// outcomes travel on the embedded bus: an event is written to JSON only if something
/// reads its bytes (a replay of the run's facts, say), and what any reader sees is
/// exactly what [`Encode::encode`] writes for that value, whenever it is read.
///
/// It dereferences to its bytes, so `&payload` reads as `&[u8]`; a deferred payload
/// writes them on that first read.
///
/// ```
/// use aaa_tools::bus::{Encode, Payload};
///
/// struct Greeting(&'static str);
/// impl Encode for Greeting {
///     fn encode(&self) -> Vec<u8> {
///         format!("hello, {}", self.0).into_bytes()
///     }
/// }
///
/// let plain = Payload::from(b"hello, world".to_vec());
/// assert!(plain.value::<Greeting>().is_none());
///
/// let deferred = Payload::deferred(Greeting("world"));
/// assert_eq!(deferred.value::<Greeting>().map(|g| g.0), Some("world"));
/// assert!(!deferred.is_written());
/// assert_eq!(&deferred[..], b"hello, world");
/// assert!(deferred.is_written());
/// assert_eq!(deferred, plain);
/// ```
#[derive(Clone)]
pub struct Payload(Repr);

#[derive(Clone)]
enum Repr {
    Bytes(Bytes),
    Deferred(Arc<Deferred<dyn Encode>>),
}

/// A value and, once written, its bytes (one allocation: the value is stored inline).
struct Deferred<T: ?Sized> {
    bytes: OnceLock<Bytes>,
    value: T,
}

impl Payload {
    /// A payload carrying `value`, written with [`Encode::encode`] when its bytes are
    /// first read (by a bus that sends them, or by any reader).
    pub fn deferred<T: Encode>(value: T) -> Payload {
        let deferred: Arc<Deferred<dyn Encode>> = Arc::new(Deferred {
            bytes: OnceLock::new(),
            value,
        });
        Payload(Repr::Deferred(deferred))
    }

    /// The bytes (written now if they were deferred and nobody read them yet).
    pub fn bytes(&self) -> &Bytes {
        match &self.0 {
            Repr::Bytes(bytes) => bytes,
            Repr::Deferred(deferred) => deferred
                .bytes
                .get_or_init(|| Bytes::from(deferred.value.encode())),
        }
    }

    /// The bytes, as an owned buffer (shared, not copied).
    pub fn into_bytes(self) -> Bytes {
        match self.0 {
            Repr::Bytes(bytes) => bytes,
            Repr::Deferred(_) => self.bytes().clone(),
        }
    }

    /// The value this payload was made from with [`deferred`](Self::deferred), if it
    /// was, and it is a `T`. Payloads made from bytes (everything a bus received from
    /// outside the process) have none.
    pub fn value<T: Any>(&self) -> Option<&T> {
        match &self.0 {
            Repr::Bytes(_) => None,
            Repr::Deferred(deferred) => {
                let value: &dyn Any = &deferred.value;
                value.downcast_ref()
            }
        }
    }

    /// Whether the bytes exist: always for a payload made from bytes; for a deferred
    /// one, once somebody has read them.
    pub fn is_written(&self) -> bool {
        match &self.0 {
            Repr::Bytes(_) => true,
            Repr::Deferred(deferred) => deferred.bytes.get().is_some(),
        }
    }
}

impl Deref for Payload {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.bytes()
    }
}

impl AsRef<[u8]> for Payload {
    fn as_ref(&self) -> &[u8] {
        self.bytes()
    }
}

impl From<Bytes> for Payload {
    fn from(bytes: Bytes) -> Self {
        Payload(Repr::Bytes(bytes))
    }
}

impl From<Vec<u8>> for Payload {
    fn from(bytes: Vec<u8>) -> Self {
        Payload(Repr::Bytes(Bytes::from(bytes)))
    }
}

impl From<&'static [u8]> for Payload {
    fn from(bytes: &'static [u8]) -> Self {
        Payload(Repr::Bytes(Bytes::from_static(bytes)))
    }
}

impl From<String> for Payload {
    fn from(text: String) -> Self {
        Payload::from(text.into_bytes())
    }
}

/// Two payloads are equal when their bytes are (deferred ones are written to compare).
impl PartialEq for Payload {
    fn eq(&self, other: &Self) -> bool {
        self.bytes() == other.bytes()
    }
}

impl Eq for Payload {}

/// Shows the bytes, as [`Bytes`] does (a deferred payload is written to show them).
impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.bytes(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static WRITES: AtomicUsize = AtomicUsize::new(0);

    struct Counted(u32);
    impl Encode for Counted {
        fn encode(&self) -> Vec<u8> {
            WRITES.fetch_add(1, Ordering::SeqCst);
            self.0.to_string().into_bytes()
        }
    }

    #[test]
    fn a_deferred_payload_is_written_once_and_only_when_read() {
        let payload = Payload::deferred(Counted(42));
        let copy = payload.clone();
        assert_eq!(payload.value::<Counted>().map(|c| c.0), Some(42));
        assert!(payload.value::<u32>().is_none(), "another type is not it");
        assert_eq!(WRITES.load(Ordering::SeqCst), 0);
        assert!(!copy.is_written());
        assert_eq!(&copy[..], b"42");
        assert_eq!(payload.bytes(), &Bytes::from_static(b"42"));
        assert_eq!(copy.into_bytes(), Bytes::from_static(b"42"));
        assert_eq!(WRITES.load(Ordering::SeqCst), 1, "clones share one writing");
        assert!(payload.is_written());
        assert_eq!(format!("{payload:?}"), "b\"42\"");
    }
}
