//! `tools/list`: the registry's tools as MCP tool entries, computed once, served in
//! pages.
//!
//! An entry has the tool's name, description, input schema (the schema the engine
//! checks arguments against, as is), annotations and title, and an `outputSchema`
//! when one was declared for the tool
//! ([`McpServerBuilder::output_schema`](crate::McpServerBuilder::output_schema)). Its
//! `_meta` says what a client may want to show before calling: whether the call waits
//! for a human's approval (`aaa-tools/requiresApproval`) and whether it runs at most
//! once (`aaa-tools/delivery`).
//!
//! Pages keep the registry's order (the same on every request, as protocol
//! `2026-07-28` asks). A cursor is the opaque text `p<offset>` in base64url; a cursor
//! this server did not hand out is a `-32602` error.

use std::collections::HashMap;
use std::sync::Arc;

use aaa_tools::{Delivery, Tool as AaaTool, ToolRegistry};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rmcp::ErrorData;
use rmcp::model::{JsonObject, ListToolsResult, Tool, ToolAnnotations};
use serde_json::Value;

/// The `_meta` key of a listed tool that needs a human's approval.
pub const REQUIRES_APPROVAL_META: &str = "aaa-tools/requiresApproval";
/// The `_meta` key of a listed tool's delivery (`at_least_once` or `at_most_once`).
pub const DELIVERY_META: &str = "aaa-tools/delivery";

/// The MCP entries of a registry, in its order.
pub(crate) struct Listing {
    tools: Vec<Tool>,
    by_name: HashMap<String, usize>,
    page_size: usize,
}

impl Listing {
    pub(crate) fn new(
        registry: &ToolRegistry,
        output_schemas: &HashMap<String, Arc<JsonObject>>,
        page_size: usize,
    ) -> Listing {
        let tools: Vec<Tool> = registry
            .iter()
            .map(|tool| entry(tool, output_schemas.get(tool.name()).cloned()))
            .collect();
        let by_name = tools
            .iter()
            .enumerate()
            .map(|(i, tool)| (tool.name.to_string(), i))
            .collect();
        Listing {
            tools,
            by_name,
            page_size: page_size.max(1),
        }
    }

    /// The entry of `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Tool> {
        self.by_name.get(name).map(|&i| &self.tools[i])
    }

    /// The page that starts at `cursor` (the first without one).
    pub(crate) fn page(&self, cursor: Option<&str>) -> Result<ListToolsResult, ErrorData> {
        let start = match cursor {
            None => 0,
            Some(cursor) => decode_cursor(cursor)
                .filter(|&offset| offset > 0 && offset < self.tools.len())
                .ok_or_else(|| {
                    ErrorData::invalid_params(
                        format!("invalid cursor {cursor:?}: pass a nextCursor this server sent"),
                        None,
                    )
                })?,
        };
        let end = (start + self.page_size).min(self.tools.len());
        let mut result = ListToolsResult::with_all_items(self.tools[start..end].to_vec());
        if end < self.tools.len() {
            result.next_cursor = Some(encode_cursor(end));
        }
        Ok(result)
    }
}

/// The MCP entry of one tool.
fn entry(tool: &AaaTool, output_schema: Option<Arc<JsonObject>>) -> Tool {
    let schema = match tool.parameters() {
        Value::Object(object) => object.clone(),
        // The engine normalizes every schema to an object; keep the entry valid anyway.
        _ => JsonObject::from_iter([("type".to_owned(), Value::from("object"))]),
    };
    let mut entry = Tool::new(
        tool.name().to_owned(),
        tool.description().to_owned(),
        Arc::new(schema),
    );
    if let Some(annotations) = tool.annotations() {
        if let Some(title) = &annotations.title {
            entry = entry.with_title(title.clone());
        }
        entry = entry.with_annotations(ToolAnnotations::from_raw(
            annotations.title.clone(),
            annotations.read_only_hint,
            annotations.destructive_hint,
            annotations.idempotent_hint,
            annotations.open_world_hint,
        ));
    }
    if let Some(schema) = output_schema {
        entry = entry.with_raw_output_schema(schema);
    }
    let mut meta = rmcp::model::MetaObject::new();
    if tool.requires_approval() {
        meta.insert(REQUIRES_APPROVAL_META.to_owned(), Value::Bool(true));
    }
    if let Some(delivery) = tool.delivery() {
        let name = match delivery {
            Delivery::AtMostOnce => "at_most_once",
            _ => "at_least_once",
        };
        meta.insert(DELIVERY_META.to_owned(), Value::from(name));
    }
    if !meta.is_empty() {
        entry = entry.with_meta(meta);
    }
    entry
}

fn encode_cursor(offset: usize) -> String {
    URL_SAFE_NO_PAD.encode(format!("p{offset}"))
}

fn decode_cursor(cursor: &str) -> Option<usize> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    std::str::from_utf8(&bytes)
        .ok()?
        .strip_prefix('p')?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aaa_tools::{ToolError, tool, tools};

    /// First.
    #[tool]
    async fn one() -> Result<u8, ToolError> {
        Ok(1)
    }
    /// Second.
    #[tool(requires_approval = true, delivery = "at_most_once")]
    async fn two() -> Result<u8, ToolError> {
        Ok(2)
    }
    /// Third.
    #[tool]
    async fn three() -> Result<u8, ToolError> {
        Ok(3)
    }

    fn listing_of(page: usize) -> Listing {
        let registry = ToolRegistry::new(tools![one, two, three]).unwrap();
        Listing::new(&registry, &HashMap::new(), page)
    }

    #[test]
    fn pages_follow_the_registry_order() {
        let listing = listing_of(2);
        let first = listing.page(None).unwrap();
        let names: Vec<_> = first.tools.iter().map(|t| t.name.to_string()).collect();
        assert_eq!(names, ["one", "two"]);
        let cursor = first.next_cursor.expect("a second page");
        let second = listing.page(Some(&cursor)).unwrap();
        assert_eq!(second.tools.len(), 1);
        assert_eq!(second.tools[0].name, "three");
        assert!(second.next_cursor.is_none());
        assert!(listing_of(10).page(None).unwrap().next_cursor.is_none());
    }

    #[test]
    fn foreign_cursors_are_invalid_params() {
        let listing = listing_of(2);
        for cursor in ["", "bm9wZQ", "cDk5", "cDA"] {
            let error = listing.page(Some(cursor)).unwrap_err();
            assert_eq!(
                error.code,
                rmcp::model::ErrorCode::INVALID_PARAMS,
                "{cursor}"
            );
            assert!(error.message.contains("invalid cursor"));
        }
    }

    #[test]
    fn entries_say_what_the_engine_enforces() {
        let listing = listing_of(10);
        let two = listing.get("two").unwrap();
        assert_eq!(two.description.as_deref(), Some("Second."));
        assert_eq!(two.input_schema["type"], "object");
        let meta = two.meta.as_ref().unwrap();
        assert_eq!(meta[REQUIRES_APPROVAL_META], true);
        assert_eq!(meta[DELIVERY_META], "at_most_once");
        assert!(listing.get("one").unwrap().meta.is_none());
        assert!(listing.get("nope").is_none());
    }
}
