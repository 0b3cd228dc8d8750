//! Checks of option values that can be decided at compile time.

use darling::util::SpannedValue;

use crate::attr::{GuardArgs, Seconds, ToolArgs};
use crate::model::{ParamKind, ToolFn};

/// Providers accept `^[a-zA-Z0-9_-]{1,64}$`.
pub(crate) fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn positive(field: &str, value: &SpannedValue<Seconds>, errors: &mut darling::error::Accumulator) {
    let Seconds(s) = **value;
    if !(s.is_finite() && s > 0.0) {
        errors.push(
            darling::Error::custom(format!("`{field}` must be > 0 (got {s})"))
                .with_span(&value.span()),
        );
    }
}

pub(crate) fn check_options(
    args: &ToolArgs,
    name: &str,
    name_span: proc_macro2::Span,
    errors: &mut darling::error::Accumulator,
) {
    if !valid_tool_name(name) {
        errors.push(
            darling::Error::custom(format!(
                "invalid tool name {name:?}: providers accept 1 to 64 characters from [a-zA-Z0-9_-]"
            ))
            .with_span(&name_span),
        );
    }
    if let Some(timeout) = &args.timeout_s {
        positive("timeout_s", timeout, errors);
    }
    if let Some(pool) = &args.pool
        && pool.trim().is_empty()
    {
        errors.push(darling::Error::custom("`pool` must not be empty").with_span(&pool.span()));
    }
    if let Some(guard) = &args.guard {
        check_guard(guard, errors);
    }
}

fn check_guard(guard: &GuardArgs, errors: &mut darling::error::Accumulator) {
    if let Some(max) = &guard.max_attempts
        && **max < 1
    {
        errors.push(
            darling::Error::custom("`max_attempts` must be >= 1 (got 0)").with_span(&max.span()),
        );
    }
    for (field, value) in [
        ("lease_ttl_s", &guard.lease_ttl_s),
        ("heartbeat_s", &guard.heartbeat_s),
        ("wait_poll_s", &guard.wait_poll_s),
    ] {
        if let Some(value) = value {
            positive(field, value, errors);
        }
    }
    if let (Some(heartbeat), Some(ttl)) = (&guard.heartbeat_s, &guard.lease_ttl_s)
        && heartbeat.0 >= ttl.0
    {
        errors.push(
            darling::Error::custom(format!("`heartbeat_s` must be < lease_ttl_s ({})", ttl.0))
                .with_span(&heartbeat.span()),
        );
    }
}

/// With `require_descriptions`, the tool and every model-visible parameter need words.
pub(crate) fn check_descriptions(
    tool: &ToolFn,
    description: &str,
    span: proc_macro2::Span,
    errors: &mut darling::error::Accumulator,
) {
    if description.trim().is_empty() {
        errors.push(darling::Error::custom("`require_descriptions`: the tool has no description; add a doc comment or `description = \"...\"`").with_span(&span));
    }
    for param in &tool.params {
        if matches!(param.kind, ParamKind::Arg { .. })
            && param
                .description
                .as_deref()
                .is_none_or(|d| d.trim().is_empty())
        {
            errors.push(
                darling::Error::custom(format!(
                    "`require_descriptions`: parameter `{}` has no description; document it under `# Arguments` or with `#[arg(description = \"...\")]`",
                    param.name
                ))
                .with_span(&param.ident),
            );
        }
    }
}
