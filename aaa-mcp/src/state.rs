//! The `requestState` of an `input_required` result (protocol `2026-07-28`): what the
//! server needs to carry on when the client calls again, sealed so the client can
//! neither read nor change it, and bound to the tool and the arguments it was issued
//! for.
//!
//! Sealing is rmcp's `RequestStateCodec` (HMAC-SHA256 over the payload, an expiry and
//! associated data): the associated data is a digest of the tenant, the tool and its
//! arguments, so a state issued for one call opens for no other. Every failure to
//! open (forged, changed, expired, issued for other arguments, sealed under another
//! key) is one JSON-RPC `-32602`, as the protocol asks.

use std::time::Duration;

use aaa_tools::{CallId, RunId, TenantId};
use rmcp::ErrorData;
use rmcp::model::{RequestStateCodec, SealOptions};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::idempotency::{canonical, digest};

/// How long a sealed state stays valid: a day, so a human has time to answer.
const STATE_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// What a state holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Sealed {
    /// An engine call that waits for the user's approval.
    Approval {
        run: RunId,
        call: CallId,
        fingerprint: String,
    },
    /// A tool's own state between rounds.
    Tool {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        state: Option<Value>,
    },
}

/// Seals and opens states under one key.
#[derive(Clone)]
pub(crate) struct StateSeal {
    codec: RequestStateCodec,
}

impl StateSeal {
    /// A seal under `key` (at least 32 bytes; checked by the builder).
    pub(crate) fn new(key: Vec<u8>) -> StateSeal {
        StateSeal {
            codec: RequestStateCodec::new_unchecked(key),
        }
    }

    /// The sealed text of `sealed`, bound to `tool` called with `arguments`.
    pub(crate) fn seal(
        &self,
        sealed: &Sealed,
        tenant: &TenantId,
        tool: &str,
        arguments: &Value,
    ) -> Result<String, ErrorData> {
        let bound = binding(tenant, tool, arguments);
        let options = SealOptions::new().associated_data(&bound).ttl(STATE_TTL);
        self.codec
            .seal_json_with(sealed, &options)
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }

    /// Opens `text`, which must have been sealed for `tool` called with `arguments`.
    pub(crate) fn open(
        &self,
        text: &str,
        tenant: &TenantId,
        tool: &str,
        arguments: &Value,
    ) -> Result<Sealed, ErrorData> {
        let bound = binding(tenant, tool, arguments);
        self.codec.open_json_with(text, &bound).map_err(|error| {
            tracing::debug!(%error, tool, "requestState refused");
            ErrorData::invalid_params(
                "requestState failed integrity verification: send back the requestState \
                 this server issued for this tool and these arguments, unchanged, or \
                 call the tool again without one",
                None,
            )
        })
    }
}

fn binding(tenant: &TenantId, tool: &str, arguments: &Value) -> [u8; 32] {
    digest(&[tenant.as_str(), tool, &canonical(arguments)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_state_opens_only_for_its_tool_and_arguments() {
        let seal = StateSeal::new(vec![7; 32]);
        let tenant = TenantId::default();
        let state = Sealed::Approval {
            run: RunId::new("r").unwrap(),
            call: CallId::new("c").unwrap(),
            fingerprint: "f".into(),
        };
        let args = json!({"to": "x", "cents": 5});
        let text = seal.seal(&state, &tenant, "pay", &args).unwrap();
        let reordered = json!({"cents": 5, "to": "x"});
        assert_eq!(seal.open(&text, &tenant, "pay", &reordered).unwrap(), state);

        for (tool, args) in [
            ("pay", json!({"to": "x", "cents": 6})),
            ("refund", args.clone()),
        ] {
            let error = seal.open(&text, &tenant, tool, &args).unwrap_err();
            assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        }
        let mut tampered = text.clone();
        tampered.pop();
        assert!(seal.open(&tampered, &tenant, "pay", &args).is_err());
        let other_key = StateSeal::new(vec![8; 32]);
        assert!(other_key.open(&text, &tenant, "pay", &args).is_err());
        let other_tenant = TenantId::new("acme").unwrap();
        assert!(seal.open(&text, &other_tenant, "pay", &args).is_err());
    }
}
