//! The attribute's options, as darling reads them.

use darling::util::SpannedValue;
use darling::{Error, FromMeta};
use syn::{Expr, Lit};

/// A number of seconds: an integer or float literal.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seconds(pub(crate) f64);

impl FromMeta for Seconds {
    fn from_value(value: &Lit) -> darling::Result<Self> {
        match value {
            Lit::Float(f) => f.base10_parse::<f64>().map(Seconds).map_err(Error::from),
            Lit::Int(i) => i
                .base10_parse::<u64>()
                .map(|n| Seconds(n as f64))
                .map_err(Error::from),
            _ => Err(Error::unexpected_lit_type(value)),
        }
    }

    fn from_expr(expr: &Expr) -> darling::Result<Self> {
        match expr {
            Expr::Lit(lit) => Self::from_value(&lit.lit),
            Expr::Unary(syn::ExprUnary {
                op: syn::UnOp::Neg(_),
                expr,
                ..
            }) => Self::from_expr(expr).map(|Seconds(s)| Seconds(-s)),
            Expr::Group(group) => Self::from_expr(&group.expr),
            _ => Err(Error::unexpected_expr_type(expr)),
        }
    }
}

/// One of a fixed set of names given as a string literal.
fn one_of(value: &str, choices: &[&str]) -> darling::Result<String> {
    if choices.contains(&value) {
        return Ok(value.to_owned());
    }
    let mut message = format!(
        "unknown value {value:?}; expected one of {}",
        choices
            .iter()
            .map(|c| format!("{c:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some(best) = choices
        .iter()
        .map(|c| (c, similarity(value, c)))
        .filter(|(_, score)| *score > 0.6)
        .max_by(|a, b| a.1.total_cmp(&b.1))
    {
        message.push_str(&format!(". Did you mean {:?}?", best.0));
    }
    Err(Error::custom(message))
}

/// A cheap similarity score in 0..=1 (shared-prefix and character overlap).
fn similarity(a: &str, b: &str) -> f64 {
    let a = a.to_lowercase();
    let b = b.to_lowercase();
    let common = a.chars().filter(|c| b.contains(*c)).count() as f64;
    let prefix = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count() as f64;
    let longest = a.chars().count().max(b.chars().count()).max(1) as f64;
    (common / longest) * 0.7 + (prefix / longest) * 0.3
}

/// `delivery = "at_least_once" | "at_most_once"`.
#[derive(Debug, Clone)]
pub(crate) struct DeliveryName(pub(crate) String);

impl FromMeta for DeliveryName {
    fn from_string(value: &str) -> darling::Result<Self> {
        one_of(value, &["at_least_once", "at_most_once"]).map(DeliveryName)
    }
}

/// `lost_lease = "cancel" | "finish"`.
#[derive(Debug, Clone)]
pub(crate) struct LostLeaseName(pub(crate) String);

impl FromMeta for LostLeaseName {
    fn from_string(value: &str) -> darling::Result<Self> {
        one_of(value, &["cancel", "finish"]).map(LostLeaseName)
    }
}

/// `guard(...)`: per-tool guard overrides.
#[derive(Debug, Default, FromMeta)]
#[darling(default)]
pub(crate) struct GuardArgs {
    pub(crate) enabled: Option<bool>,
    pub(crate) max_attempts: Option<SpannedValue<u32>>,
    pub(crate) lease_ttl_s: Option<SpannedValue<Seconds>>,
    pub(crate) heartbeat_s: Option<SpannedValue<Seconds>>,
    pub(crate) wait_poll_s: Option<SpannedValue<Seconds>>,
    pub(crate) fence_results: Option<bool>,
    pub(crate) lost_lease: Option<LostLeaseName>,
}

/// `annotations(...)`: MCP tool annotations.
#[derive(Debug, Default, FromMeta)]
#[darling(default)]
pub(crate) struct AnnotationArgs {
    pub(crate) title: Option<String>,
    pub(crate) read_only_hint: Option<bool>,
    pub(crate) destructive_hint: Option<bool>,
    pub(crate) idempotent_hint: Option<bool>,
    pub(crate) open_world_hint: Option<bool>,
}

/// Everything inside `#[tool(...)]`.
#[derive(Debug, Default, FromMeta)]
#[darling(default)]
pub(crate) struct ToolArgs {
    pub(crate) name: Option<SpannedValue<String>>,
    pub(crate) description: Option<String>,
    pub(crate) requires_approval: bool,
    pub(crate) timeout_s: Option<SpannedValue<Seconds>>,
    pub(crate) pool: Option<SpannedValue<String>>,
    pub(crate) delivery: Option<DeliveryName>,
    pub(crate) idempotency_key: Option<syn::Path>,
    pub(crate) guard: Option<GuardArgs>,
    pub(crate) annotations: Option<AnnotationArgs>,
    pub(crate) require_descriptions: bool,
    #[darling(rename = "crate")]
    pub(crate) krate: Option<syn::Path>,
}

/// `#[arg(...)]` on a parameter.
#[derive(Debug, Default, FromMeta)]
#[darling(default)]
pub(crate) struct ParamArgs {
    pub(crate) description: Option<String>,
}
