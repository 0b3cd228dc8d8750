//! Approvals over MCP: a call that waits for a human's approval is never approved by
//! the model or by the server. Who can decide:
//!
//! - the user of the MCP client, when the client can ask them: an elicitation form
//!   (`elicitation/create`, protocols before `2026-07-28`) or an `input_required`
//!   result with an elicitation request (protocol `2026-07-28`). The form shows the
//!   tool and its arguments; the answer becomes a grant or a denial bound to that call
//!   and those arguments (the approval request's fingerprint), signalled into the run
//!   through the engine as any program's decision would be. Declining, dismissing the
//!   form, or answering anything but an explicit "approve" is a denial;
//! - otherwise an operator, on the bus (`RunHandle::grant`, e.g. from a console):
//!   the `tools/call` waits for the decision, tells the client so in a progress
//!   notification when it gave a progress token, and its result's `_meta` says who
//!   decided.
//!
//! [`Approvals::OperatorOnly`] keeps the decision with operators even when the client
//! could ask its user.

use aaa_tools::event::{ApprovalDecision, ApprovalRequested};
use aaa_tools::{EngineError, RunHandle};
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest,
};
use serde_json::{Value, json};

/// The key of the approval's input request in an `input_required` result.
pub(crate) const APPROVAL_INPUT: &str = "aaa-tools/approval";

/// Who may decide on a call that waits for approval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Approvals {
    /// The client's user when the client can ask them (elicitation), else an operator
    /// on the bus. The default.
    #[default]
    ClientThenOperator,
    /// Only an operator on the bus, whatever the client can do.
    OperatorOnly,
}

/// The form that asks the user to approve `request`.
pub(crate) fn form(request: &ApprovalRequested) -> ElicitRequestParams {
    let arguments =
        serde_json::to_string_pretty(&request.arguments).unwrap_or_else(|_| "{}".into());
    let mut message = format!(
        "Allow the tool `{}` to run with these arguments?\n{arguments}\n(call {})",
        request.name, request.call_id
    );
    if let Some(reason) = &request.reason {
        message.push_str(&format!("\nWhy approval is needed: {reason}"));
    }
    let schema: ElicitationSchema = serde_json::from_value(json!({
        "type": "object",
        "properties": {
            "approve": {
                "type": "boolean",
                "title": "Approve",
                "description": "Run the tool with exactly these arguments"
            }
        },
        "required": ["approve"]
    }))
    .expect("the approval form is a valid elicitation schema");
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    }
}

/// The form as the input request of an `input_required` result.
pub(crate) fn input_request(request: &ApprovalRequested) -> InputRequest {
    InputRequest::Elicitation(ElicitRequest::new(form(request)))
}

/// What the user answered: `Some(true)` to approve, `Some(false)` to deny, `None` when
/// the answer is not an elicitation result at all (ask again).
pub(crate) fn answer(response: &Value) -> Option<bool> {
    let result: ElicitResult = serde_json::from_value(response.clone()).ok()?;
    Some(approves(&result))
}

/// Whether an elicitation result approves: accepted, with `approve: true`.
pub(crate) fn approves(result: &ElicitResult) -> bool {
    result.action == ElicitationAction::Accept
        && result
            .content
            .as_ref()
            .and_then(|content| content.get("approve"))
            .and_then(Value::as_bool)
            == Some(true)
}

/// Signals the user's decision on the call `fingerprint` names into `run`. A call
/// that is no longer pending (decided meanwhile, or finished) is left as it is.
pub(crate) async fn decide(
    run: &RunHandle,
    call: &aaa_tools::CallId,
    fingerprint: &str,
    approve: bool,
    client: &str,
) -> Result<(), EngineError> {
    let decision = ApprovalDecision::new(call.clone())
        .with_fingerprint(fingerprint)
        .with_approver(format!("mcp client user ({client})"));
    let sent = if approve {
        run.grant(decision).await
    } else {
        run.deny(decision.with_reason("the user did not approve the call in the MCP client"))
            .await
    };
    match sent {
        Err(EngineError::NotPending(_)) => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_explicit_approval_approves() {
        let accept = |content: Value| json!({"action": "accept", "content": content});
        assert_eq!(answer(&accept(json!({"approve": true}))), Some(true));
        assert_eq!(answer(&accept(json!({"approve": false}))), Some(false));
        assert_eq!(answer(&accept(json!({"approve": "yes"}))), Some(false));
        assert_eq!(answer(&accept(json!({}))), Some(false));
        assert_eq!(answer(&json!({"action": "decline"})), Some(false));
        assert_eq!(answer(&json!({"action": "cancel"})), Some(false));
        assert_eq!(answer(&json!(42)), None);
        assert_eq!(answer(&json!({"nothing": 1})), None);
    }

    #[test]
    fn the_form_shows_the_tool_and_its_arguments() {
        let request: ApprovalRequested = serde_json::from_value(json!({
            "call_id": "c-1", "name": "send_payment",
            "arguments": {"to": "bob", "amount_cents": 500}, "fingerprint": "f"
        }))
        .unwrap();
        let ElicitRequestParams::FormElicitationParams { message, .. } = form(&request) else {
            panic!("a form");
        };
        assert!(message.contains("`send_payment`"));
        assert!(message.contains("\"amount_cents\": 500"));
        assert!(message.contains("c-1"));
    }
}
