//! What every codec's `render_outcomes` shares: pairing outcomes with the turn's calls.

use std::collections::HashMap;

use aaa_tools::{CallId, Outcome};

use crate::error::CodecError;
use crate::turn::ProviderCall;

/// Each call with its outcome, in the calls' order (the provider's), whatever order the
/// outcomes come in. Every call needs exactly one outcome, and every outcome a call.
pub(crate) fn pair<'c, 'o>(
    calls: &'c [ProviderCall],
    outcomes: &'o [Outcome],
) -> Result<Vec<(&'c ProviderCall, &'o Outcome)>, CodecError> {
    let mut by_id: HashMap<&CallId, &Outcome> = HashMap::with_capacity(outcomes.len());
    for outcome in outcomes {
        if by_id.insert(outcome.call_id(), outcome).is_some() {
            return Err(CodecError::UnexpectedOutcome(outcome.call_id().clone()));
        }
    }
    let pairs = calls
        .iter()
        .map(|call| {
            by_id
                .remove(&call.call_id)
                .map(|outcome| (call, outcome))
                .ok_or_else(|| CodecError::MissingOutcome(call.call_id.clone()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    // Report the first stray outcome in the caller's order, not the map's.
    if let Some(stray) = outcomes.iter().find(|o| by_id.contains_key(o.call_id())) {
        return Err(CodecError::UnexpectedOutcome(stray.call_id().clone()));
    }
    Ok(pairs)
}

/// Outcomes built the way the engine publishes them, for the codecs' unit tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use aaa_tools::Outcome;
    use serde_json::{Value, json};

    /// `aaa.tool.completed` for `call_id`.
    pub(crate) fn completed(call_id: &str, name: &str, result: Value) -> Outcome {
        Outcome::Completed(
            serde_json::from_value(
                json!({"call_id": call_id, "name": name, "result": result, "attempt": 1}),
            )
            .unwrap(),
        )
    }

    /// `aaa.tool.failed` for `call_id`.
    pub(crate) fn failed(call_id: &str, name: &str, kind: &str, message: &str) -> Outcome {
        Outcome::Failed(
            serde_json::from_value(json!({
                "call_id": call_id, "name": name, "kind": kind, "message": message, "attempt": 1
            }))
            .unwrap(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{completed, failed};
    use super::*;
    use crate::turn::ArgumentsOrProblem;
    use serde_json::json;

    fn call(id: &str) -> ProviderCall {
        ProviderCall::new(id, "t", ArgumentsOrProblem::from_text("{}"))
    }

    #[test]
    fn pairs_in_call_order_and_refuses_gaps_and_strays() {
        let calls = [call("a"), call("b")];
        let outcomes = [
            failed("b", "t", "timeout", "late"),
            completed("a", "t", json!(1)),
        ];
        let pairs = pair(&calls, &outcomes).unwrap();
        assert_eq!(pairs[0].1.call_id().as_str(), "a");
        assert_eq!(pairs[1].1.call_id().as_str(), "b");

        assert_eq!(
            pair(&calls, &outcomes[1..]).unwrap_err().to_string(),
            "call b has no outcome to render"
        );
        let extra = [
            outcomes[0].clone(),
            outcomes[1].clone(),
            completed("c", "t", json!(0)),
        ];
        assert_eq!(
            pair(&calls, &extra).unwrap_err(),
            CodecError::UnexpectedOutcome(CallId::new("c").unwrap())
        );
        let twice = [outcomes[1].clone(), outcomes[1].clone()];
        assert_eq!(
            pair(&calls[..1], &twice).unwrap_err(),
            CodecError::UnexpectedOutcome(CallId::new("a").unwrap())
        );
    }
}
