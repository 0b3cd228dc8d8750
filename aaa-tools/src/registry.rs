//! [`ToolRegistry`]: the tools an agent may call, by name, in registration order.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use crate::args::{self, DEFAULT_MAX_ARGS_BYTES};
use crate::context::{StateMap, ToolContext};
use crate::error::{ArgProblem, CallError, DefinitionError, ToolArgsError};
use crate::tool::Tool;

/// A set of tools with unique names, shared state, and the arguments size limit.
///
/// ```
/// use aaa_tools::{ToolError, ToolRegistry, tool, tools};
///
/// /// Add two integers.
/// #[tool]
/// async fn add(a: i64, b: i64) -> Result<i64, ToolError> {
///     Ok(a + b)
/// }
///
/// /// Say hello.
/// #[tool]
/// fn hello() -> String {
///     "hello".into()
/// }
///
/// let registry = ToolRegistry::new(tools![add, hello]).unwrap();
/// assert_eq!(registry.names().collect::<Vec<_>>(), ["add", "hello"]);
/// ```
#[derive(Clone)]
pub struct ToolRegistry {
    tools: Arc<Vec<Tool>>,
    by_name: Arc<HashMap<String, usize, foldhash::fast::RandomState>>,
    pub(crate) state: StateMap,
    max_args_bytes: usize,
}

impl ToolRegistry {
    /// The largest arguments a registry takes by default, in bytes of JSON: 1 MiB.
    pub const DEFAULT_MAX_ARGS_BYTES: usize = DEFAULT_MAX_ARGS_BYTES;

    /// A registry of `tools`. Fails on a duplicate name (naming both positions) or on a
    /// tool that needs a `State<T>` (use [`builder`](Self::builder) to register state).
    pub fn new(tools: impl IntoIterator<Item = Tool>) -> Result<Self, DefinitionError> {
        ToolRegistry::builder().tools(tools).build()
    }

    /// A builder for registries with state or options.
    pub fn builder() -> ToolRegistryBuilder {
        ToolRegistryBuilder {
            tools: Vec::new(),
            state: StateMap::default(),
            require_descriptions: false,
            max_args_bytes: DEFAULT_MAX_ARGS_BYTES,
        }
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.by_name.get(name).map(|&i| &self.tools[i])
    }

    /// Every tool, in registration order.
    pub fn iter(&self) -> std::slice::Iter<'_, Tool> {
        self.tools.iter()
    }

    /// Every tool name, in registration order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(Tool::name)
    }

    /// The number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there are no tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The arguments size limit, in bytes of JSON text.
    pub fn max_args_bytes(&self) -> usize {
        self.max_args_bytes
    }

    /// Up to three registered names closest to `name` (for an `unknown_tool` message).
    pub fn closest_names(&self, name: &str) -> Vec<&str> {
        closest_names(name, self.tools.iter().map(Tool::name))
    }

    /// The model-readable message for a call of an unregistered tool.
    pub fn unknown_tool_message(&self, name: &str) -> String {
        unknown_tool_message(name, self.tools.iter().map(Tool::name))
    }

    /// Parses raw argument text (as a model sends it), enforcing the size limit before
    /// parsing.
    pub fn parse_args(&self, tool: &str, text: &str) -> Result<Value, ToolArgsError> {
        args::check_size(tool, text.len(), self.max_args_bytes)?;
        let text = if text.trim().is_empty() { "{}" } else { text };
        serde_json::from_str(text).map_err(|e| {
            ToolArgsError::single(tool, ArgProblem::ROOT, format!("are not valid JSON ({e})"))
        })
    }

    /// Runs one call directly, without an engine (no timeout, approval or guard): the
    /// registry's state is injected into `ctx`.
    pub async fn call(
        &self,
        name: &str,
        ctx: ToolContext,
        args: Value,
    ) -> Result<Value, RegistryCallError> {
        let tool = self
            .get(name)
            .ok_or_else(|| RegistryCallError::UnknownTool(self.unknown_tool_message(name)))?;
        let prepared = tool
            .prepare_with_limit(args, self.max_args_bytes)
            .map_err(CallError::BadArgs)?;
        Ok(prepared.run(ctx.with_registry_state(&self.state)).await?)
    }

    /// The context for a call, with the registry's state added.
    pub fn inject_state(&self, ctx: ToolContext) -> ToolContext {
        ctx.with_registry_state(&self.state)
    }
}

/// Up to three of `names` closest to `name` (Jaro-Winkler similarity of at least 0.7,
/// ignoring case), best first.
pub(crate) fn closest_names<'a>(name: &str, names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let lowered = name.to_lowercase();
    let mut scored: Vec<(f64, &str)> = names
        .map(|candidate| {
            (
                strsim::jaro_winkler(&lowered, &candidate.to_lowercase()),
                candidate,
            )
        })
        .filter(|(score, _)| *score >= 0.7)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    scored.into_iter().take(3).map(|(_, n)| n).collect()
}

/// What the model reads when it calls `name` and only `names` exist: the closest names,
/// or every name when none is close.
pub(crate) fn unknown_tool_message<'a>(
    name: &str,
    names: impl Iterator<Item = &'a str> + Clone,
) -> String {
    let shown = args::cut(name, 64);
    let closest = closest_names(name, names.clone());
    if closest.is_empty() {
        format!(
            "there is no tool named `{shown}`; the tools are: {}",
            names.collect::<Vec<_>>().join(", ")
        )
    } else {
        let quoted: Vec<String> = closest.iter().map(|n| format!("`{n}`")).collect();
        format!(
            "there is no tool named `{shown}`; did you mean {}?",
            quoted.join(" or ")
        )
    }
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.names().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl<'a> IntoIterator for &'a ToolRegistry {
    type Item = &'a Tool;
    type IntoIter = std::slice::Iter<'a, Tool>;
    fn into_iter(self) -> Self::IntoIter {
        self.tools.iter()
    }
}

/// A direct call through a registry that did not succeed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryCallError {
    /// No tool has that name; the message lists the closest names.
    #[error("{0}")]
    UnknownTool(String),
    /// The call itself failed.
    #[error(transparent)]
    Call(#[from] CallError),
}

/// Builds a [`ToolRegistry`].
///
/// ```
/// use aaa_tools::{State, ToolError, ToolRegistry, tool};
///
/// struct Db;
///
/// /// Count rows.
/// ///
/// /// # Arguments
/// /// * `table` - The table to count.
/// #[tool]
/// async fn count(db: State<Db>, table: String) -> Result<u64, ToolError> {
///     let _ = (db, table);
///     Ok(0)
/// }
///
/// let err = ToolRegistry::new([count::tool()]).unwrap_err();
/// assert!(err.to_string().contains("State<"));
///
/// let registry = ToolRegistry::builder()
///     .tool(count::tool())
///     .state(Db)
///     .require_descriptions(true)
///     .max_args_bytes(64 * 1024)
///     .build()
///     .unwrap();
/// assert_eq!(registry.len(), 1);
/// ```
pub struct ToolRegistryBuilder {
    tools: Vec<Tool>,
    state: StateMap,
    require_descriptions: bool,
    max_args_bytes: usize,
}

impl ToolRegistryBuilder {
    /// Adds a tool.
    pub fn tool(mut self, tool: Tool) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds tools.
    pub fn tools(mut self, tools: impl IntoIterator<Item = Tool>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// Registers a shared state value for `State<T>` parameters.
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.state.insert(Arc::new(value));
        self
    }

    /// Registers a shared state value already in an `Arc`.
    pub fn state_arc<T: Send + Sync + 'static>(mut self, value: Arc<T>) -> Self {
        self.state.insert(value);
        self
    }

    /// Refuses tools without a description or with an undescribed parameter.
    pub fn require_descriptions(mut self, require: bool) -> Self {
        self.require_descriptions = require;
        self
    }

    /// The limit on a call's arguments, in bytes of JSON text (default 1 MiB).
    pub fn max_args_bytes(mut self, limit: usize) -> Self {
        self.max_args_bytes = limit;
        self
    }

    /// Checks names, state and descriptions, and builds the registry.
    pub fn build(self) -> Result<ToolRegistry, DefinitionError> {
        let mut by_name = HashMap::with_capacity_and_hasher(
            self.tools.len(),
            foldhash::fast::RandomState::default(),
        );
        for (position, tool) in self.tools.iter().enumerate() {
            if let Some(&first) = by_name.get(tool.name()) {
                return Err(DefinitionError::DuplicateName {
                    name: tool.name().to_owned(),
                    first,
                    second: position,
                });
            }
            by_name.insert(tool.name().to_owned(), position);
            for need in tool.state_needs() {
                if !self.state.contains(need.id) {
                    return Err(DefinitionError::MissingState {
                        tool: tool.name().to_owned(),
                        state: need.name.to_owned(),
                    });
                }
            }
            if self.require_descriptions || tool.requires_descriptions() {
                let mut missing = Vec::new();
                if tool.description().is_empty() {
                    missing.push("the tool".to_owned());
                }
                missing.extend(
                    tool.undescribed_params()
                        .iter()
                        .map(|p| format!("parameter `{p}`")),
                );
                if !missing.is_empty() {
                    return Err(DefinitionError::MissingDescriptions {
                        tool: tool.name().to_owned(),
                        missing,
                    });
                }
            }
        }
        Ok(ToolRegistry {
            tools: Arc::new(self.tools),
            by_name: Arc::new(by_name),
            state: self.state,
            max_args_bytes: self.max_args_bytes,
        })
    }
}
