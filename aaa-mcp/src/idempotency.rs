//! Re-sent `tools/call` requests: the idempotency key a client puts in
//! `params._meta["aaa-tools/idempotencyKey"]` names one engine call, so the same
//! request sent again (after a dropped connection, under a new JSON-RPC id, to another
//! server of the same engine) finds that call instead of running the tool again.
//!
//! The key, the tool's name and its arguments (in canonical JSON) are hashed into the
//! call's run and call ids. The engine's guard runs a call id once however often it
//! is requested, and the run keeps its outcome, so a repeat gets the first request's
//! outcome (waiting for it while it runs) and the tool runs once. Being derived, not
//! stored, the ids survive a restart of the server: what the engine remembers (on NATS,
//! the stream and the guard's records) is all that is needed.
//!
//! The key names one request, not one key's worth of anything: the same key sent with
//! another tool or other arguments is another call, and runs. (A client that reuses a
//! key by mistake never receives the outcome of arguments it did not send.)

use aaa_tools::{CallId, RunId, TenantId};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The `_meta` key of a `tools/call` request that carries its idempotency key: a
/// string of 1 to 256 characters.
pub const IDEMPOTENCY_KEY: &str = "aaa-tools/idempotencyKey";

/// The longest idempotency key accepted, in bytes.
pub(crate) const MAX_KEY_LEN: usize = 256;

/// The run and call of a keyed request.
pub(crate) fn keyed_ids(
    tenant: &TenantId,
    key: &str,
    tool: &str,
    arguments: &Value,
) -> (RunId, CallId) {
    let digest = hex(&digest(&[
        tenant.as_str(),
        key,
        tool,
        &canonical(arguments),
    ]));
    let run = RunId::new(format!("mcp-{}", &digest[..32])).expect("hex digits are a valid id");
    let call = CallId::new(format!("mcp-{}", &digest[32..])).expect("hex digits are a valid id");
    (run, call)
}

/// The key of one round of a keyed `tools/call`: a later round of an `input_required`
/// exchange is another call, so its key adds what makes it one (the round's
/// `requestState` and the answers).
pub(crate) fn round_key(key: &str, request: &rmcp::model::CallToolRequestParams) -> String {
    let round = request.request_state.as_deref().unwrap_or_default();
    let answers = request
        .input_responses
        .as_ref()
        .map(|r| canonical(&serde_json::json!(r)))
        .unwrap_or_default();
    [key, round, &answers].concat()
}

/// The key of a request's `_meta`, checked: `Ok(None)` when there is none.
pub(crate) fn key_of(meta: &serde_json::Map<String, Value>) -> Result<Option<&str>, String> {
    match meta.get(IDEMPOTENCY_KEY) {
        None => Ok(None),
        Some(Value::String(key)) if !key.is_empty() && key.len() <= MAX_KEY_LEN => Ok(Some(key)),
        Some(other) => Err(format!(
            "`_meta[\"{IDEMPOTENCY_KEY}\"]` must be a string of 1 to {MAX_KEY_LEN} bytes; got {}",
            short(other)
        )),
    }
}

/// SHA-256 over length-prefixed parts (no two lists of parts hash alike).
pub(crate) fn digest(parts: &[&str]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    hasher.finalize().into()
}

/// Lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `value` in canonical JSON: object keys sorted, no spaces (the engine's own, which
/// approval fingerprints hash).
pub(crate) fn canonical(value: &Value) -> String {
    aaa_tools::event::canonical_json(value)
}

/// A value shown in a message, cut short.
fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(40) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_request_one_call() {
        let tenant = TenantId::default();
        let a = keyed_ids(&tenant, "k1", "pay", &json!({"to": "x", "cents": 5}));
        let same = keyed_ids(&tenant, "k1", "pay", &json!({"cents": 5, "to": "x"}));
        assert_eq!(a, same, "key order does not matter");
        assert_ne!(
            a,
            keyed_ids(&tenant, "k1", "pay", &json!({"to": "x", "cents": 6}))
        );
        assert_ne!(
            a,
            keyed_ids(&tenant, "k2", "pay", &json!({"to": "x", "cents": 5}))
        );
        assert_ne!(
            a,
            keyed_ids(&tenant, "k1", "refund", &json!({"to": "x", "cents": 5}))
        );
        let other = TenantId::new("acme").unwrap();
        assert_ne!(
            a,
            keyed_ids(&other, "k1", "pay", &json!({"to": "x", "cents": 5}))
        );
        assert!(a.0.as_str().starts_with("mcp-") && a.1.as_str().starts_with("mcp-"));
    }

    #[test]
    fn keys_are_checked() {
        let meta = |v: Value| json!({ IDEMPOTENCY_KEY: v }).as_object().unwrap().clone();
        assert_eq!(key_of(&serde_json::Map::new()), Ok(None));
        assert_eq!(key_of(&meta(json!("abc"))), Ok(Some("abc")));
        assert!(key_of(&meta(json!(""))).unwrap_err().contains("1 to 256"));
        assert!(key_of(&meta(json!(7))).unwrap_err().contains("got 7"));
        assert!(key_of(&meta(json!("x".repeat(257)))).is_err());
    }
}
