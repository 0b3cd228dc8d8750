//! Provider call ids to [`CallId`]s and back.
//!
//! A [`CallId`] is 1 to 128 characters of `[A-Za-z0-9_-]`; providers promise nothing
//! of the kind (OpenAI-compatible servers send `functions.get_weather:0`, proxies send
//! UUIDs with braces). The mapping is deterministic, so a loop that re-reads a turn
//! after a crash asks the engine for the same calls, and injective, so two provider
//! ids never share a call. The forms are listed on [`call_id_for`].

use aaa_tools::CallId;
use sha2::{Digest, Sha256};

/// The prefix of every [`CallId`] this crate encodes or makes up.
pub const ESCAPE_PREFIX: &str = "x--";

/// The longest [`CallId`] (`aaa_tools` checks it; the limit is part of its contract).
const MAX_ID_LEN: usize = CallId::MAX_LEN;

const BASE64: &str = "x--b";
const HASHED: &str = "x--s";
pub(crate) const POSITIONAL: &str = "x--g";

/// The longest provider id that is encoded reversibly: its base64 fits in an id.
const MAX_ENCODED_BYTES: usize = (MAX_ID_LEN - BASE64.len()) / 4 * 3;

/// The [`CallId`] of a provider's call id: the id itself when it is a valid
/// [`CallId`] (and does not start with [`ESCAPE_PREFIX`]), else an encoding of it.
/// Deterministic, and different provider ids always give different call ids.
///
/// | provider id | [`CallId`] |
/// |---|---|
/// | a valid [`CallId`] not starting with `x--` | itself |
/// | anything else, up to 93 bytes | `x--b` + base64url (no padding) of its bytes |
/// | anything else, longer | `x--s` + SHA-256 of its bytes, in hex |
/// | (a Gemini call without an id) | `x--g<turn>-<position>` ([`positional_call_id`](crate::gemini::positional_call_id)) |
///
/// The forms can never meet: the escape prefix `x--` is claimed by the encoded forms,
/// and each has its own tag letter. The hashed form cannot be reversed, which is why
/// a [`ProviderCall`](crate::ProviderCall) keeps the provider's id too.
///
/// ```
/// use aaa_loop::{call_id_for, provider_id_for};
///
/// assert_eq!(call_id_for("call_abc123").as_str(), "call_abc123");
/// let odd = call_id_for("functions.get_weather:0");
/// assert_eq!(odd.as_str(), "x--bZnVuY3Rpb25zLmdldF93ZWF0aGVyOjA");
/// assert_eq!(provider_id_for(&odd).as_deref(), Some("functions.get_weather:0"));
/// ```
pub fn call_id_for(provider_id: &str) -> CallId {
    if !provider_id.starts_with(ESCAPE_PREFIX)
        && let Ok(id) = CallId::new(provider_id)
    {
        return id;
    }
    let text = if provider_id.len() <= MAX_ENCODED_BYTES {
        let mut text = String::from(BASE64);
        encode(provider_id.as_bytes(), &mut text);
        text
    } else {
        let digest = Sha256::digest(provider_id.as_bytes());
        let mut text = String::from(HASHED);
        for byte in digest {
            text.push(char::from(b"0123456789abcdef"[usize::from(byte >> 4)]));
            text.push(char::from(b"0123456789abcdef"[usize::from(byte & 15)]));
        }
        text
    };
    CallId::new(text).expect("an encoded id is a valid call id")
}

/// The provider's call id behind `call_id`, when [`call_id_for`] can be reversed:
/// always, except for ids longer than 93 bytes (hashed) and Gemini's positional ids
/// (the provider sent none). Those are `None`: read
/// [`ProviderCall::provider_id`](crate::ProviderCall::provider_id) instead.
///
/// ```
/// use aaa_loop::{call_id_for, provider_id_for};
///
/// let long = "id.".repeat(50);
/// assert_eq!(provider_id_for(&call_id_for("toolu_01A")).as_deref(), Some("toolu_01A"));
/// assert_eq!(provider_id_for(&call_id_for(&long)), None);
/// ```
pub fn provider_id_for(call_id: &CallId) -> Option<String> {
    let text = call_id.as_str();
    if !text.starts_with(ESCAPE_PREFIX) {
        return Some(text.to_owned());
    }
    let bytes = decode(text.strip_prefix(BASE64)?)?;
    String::from_utf8(bytes).ok()
}

/// base64url without padding (RFC 4648 §5): ids must stay within `[A-Za-z0-9_-]`.
/// The `base64` crate (already in the tree through async-nats) does the encoding; its
/// decoder refuses non-canonical text, so only ids this crate made decode.
fn encode(bytes: &[u8], out: &mut String) {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode_string(bytes, out);
}

fn decode(text: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_ids_map_to_themselves_others_are_encoded() {
        for id in [
            "call_abc",
            "toolu_01A09q90qw90lq917835lq9",
            "a",
            &"z".repeat(128),
        ] {
            assert_eq!(call_id_for(id).as_str(), id);
            assert_eq!(provider_id_for(&call_id_for(id)).as_deref(), Some(id));
        }
        for id in [
            "",
            "x--bAA",
            "x--",
            "a.b",
            "call 1",
            "ü",
            "{uuid}",
            &"é".repeat(46),
        ] {
            let call = call_id_for(id);
            assert!(call.as_str().starts_with("x--b"), "{id:?} -> {call}");
            assert_eq!(provider_id_for(&call).as_deref(), Some(id));
        }
        assert_eq!(call_id_for("").as_str(), "x--b");
        assert_eq!(call_id_for("a.b").as_str(), "x--bYS5i");
    }

    #[test]
    fn long_ids_are_hashed_and_deterministic() {
        let long = "p.".repeat(47); // 94 bytes: one past the reversible limit
        assert_eq!(MAX_ENCODED_BYTES, 93);
        assert!(call_id_for(&"p.".repeat(46)).as_str().starts_with("x--b"));
        let call = call_id_for(&long);
        assert!(call.as_str().starts_with("x--s"));
        assert_eq!(call.as_str().len(), 4 + 64);
        assert_eq!(call, call_id_for(&long));
        assert_ne!(call, call_id_for(&"p.".repeat(48)));
        assert_eq!(provider_id_for(&call), None);
    }

    #[test]
    fn foreign_escaped_ids_do_not_decode() {
        for id in ["x--bA", "x--b____", "x--bAB", "x--g0-1", "x--s00"] {
            let call = CallId::new(id).unwrap();
            assert_eq!(provider_id_for(&call), None, "{id}");
        }
        // Non-UTF-8 bytes are not a provider id.
        assert_eq!(provider_id_for(&CallId::new("x--b_w").unwrap()), None);
    }

    proptest::proptest! {
        #[test]
        fn every_string_round_trips_or_hashes(id in "\\PC{0,120}") {
            let call = call_id_for(&id);
            proptest::prop_assert_eq!(&call, &call_id_for(&id));
            match provider_id_for(&call) {
                Some(back) => proptest::prop_assert_eq!(back, id),
                None => proptest::prop_assert!(call.as_str().starts_with("x--s") && id.len() > 93),
            }
        }

        #[test]
        fn distinct_ids_get_distinct_call_ids(a in "[a-z.x-]{0,8}", b in "[a-z.x-]{0,8}") {
            proptest::prop_assume!(a != b);
            proptest::prop_assert_ne!(call_id_for(&a), call_id_for(&b));
        }
    }
}
