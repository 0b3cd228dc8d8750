//! [`McpServer`] and its builder: what is served (a registry's tools, through an
//! engine), under which name, and what else the server answers ([`McpServerBuilder::extras`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use aaa_tools::{Engine, EngineError, RunHandle, RunId, TenantId, ToolRegistry};
use rmcp::ServerHandler;
use rmcp::model::{ClientCapabilities, Implementation, JsonObject};
use schemars::JsonSchema;
use tokio::sync::OnceCell;

use crate::approval::Approvals;
use crate::cancel::Session;
use crate::follow::Follower;
use crate::listing::Listing;
use crate::state::StateSeal;
use crate::tasks::support::TaskSupport;

/// The default `tools/list` page size.
pub const DEFAULT_PAGE_SIZE: usize = 100;

/// An MCP server whose tools are a [`ToolRegistry`]'s, each call requested through an
/// [`Engine`]: rmcp's [`ServerHandler`], to serve over any rmcp transport
/// ([`serve_stdio`](crate::serve_stdio), [`HttpServer`](crate::HttpServer), or your
/// own). Cheap to clone.
///
/// `X` answers everything but tools (resources, prompts, completions, logging level):
/// [`NoExtras`] unless set with [`McpServerBuilder::extras`].
///
/// ```
/// use aaa_mcp::McpServer;
/// use aaa_tools::{Engine, ToolHandler, ToolRegistry, tool, tools};
///
/// /// Add two integers.
/// ///
/// /// # Arguments
/// /// * `a` - The first addend.
/// /// * `b` - The second addend.
/// #[tool]
/// async fn add(a: i64, b: i64) -> i64 { a + b }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let registry = ToolRegistry::new(tools![add])?;
/// let engine = Engine::embedded();
/// let _worker = ToolHandler::new(registry.clone()).attach(&engine).await?;
/// let server = McpServer::builder(registry, engine).name("calculator", "1.0.0").build()?;
/// # let _ = server;
/// # Ok(()) }
/// ```
pub struct McpServer<X = NoExtras> {
    pub(crate) shared: Arc<Shared>,
    pub(crate) extras: X,
    /// The session this value serves: a clone starts a new one (see [`cancel`](crate::cancel)).
    pub(crate) session: Session,
}

/// A clone shares everything but the session: each session (each stateless request)
/// is served by a clone of its own, whose request ids are its own.
impl<X: Clone> Clone for McpServer<X> {
    fn clone(&self) -> Self {
        McpServer {
            shared: self.shared.clone(),
            extras: self.extras.clone(),
            session: Session {
                in_flight: Arc::default(),
                stopping: self.session.stopping.clone(),
            },
        }
    }
}

impl<X> McpServer<X> {
    /// This server, on a transport that cancels `stopping` when it stops.
    pub(crate) fn stopping_with(mut self, stopping: tokio_util::sync::CancellationToken) -> Self {
        self.session.stopping = Some(stopping);
        self
    }
}

impl<X> std::fmt::Debug for McpServer<X> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.shared.info.name)
            .field("tools", &self.shared.registry.len())
            .field("run", &self.shared.run.run_id())
            .finish_non_exhaustive()
    }
}

/// What every clone of a server shares.
pub(crate) struct Shared {
    pub(crate) registry: ToolRegistry,
    pub(crate) engine: Engine,
    pub(crate) tenant: TenantId,
    /// The run of every call without an idempotency key.
    pub(crate) run: RunHandle,
    /// Follows `run`'s progress and approval facts, from the first call on.
    follower: OnceCell<Follower>,
    pub(crate) listing: Listing,
    pub(crate) seal: StateSeal,
    pub(crate) info: Implementation,
    pub(crate) instructions: Option<String>,
    pub(crate) approvals: Approvals,
    pub(crate) share_sessions: bool,
    /// The client capabilities a tool cannot do without.
    pub(crate) required: HashMap<String, ClientCapabilities>,
    /// Which tools were seen reporting progress (see `call`'s catch-up).
    reporting: HashMap<String, AtomicBool>,
    /// The tools whose calls may become MCP tasks.
    pub(crate) tasks: HashMap<String, TaskSupport>,
}

impl Shared {
    /// Whether `tool` has reported progress in a call this server followed.
    pub(crate) fn reports_progress(&self, tool: &str) -> bool {
        self.reporting
            .get(tool)
            .is_some_and(|flag| flag.load(Ordering::Relaxed))
    }

    /// Notes that `tool` reports progress.
    pub(crate) fn mark_reports_progress(&self, tool: &str) {
        if let Some(flag) = self.reporting.get(tool) {
            flag.store(true, Ordering::Relaxed);
        }
    }

    /// The follower of the server's run, started by the first call that needs it.
    pub(crate) async fn follower(&self) -> Result<&Follower, EngineError> {
        self.follower
            .get_or_try_init(|| Follower::start(&self.run))
            .await
    }
}

/// Answers nothing but what every server answers (`ping`): the extras of a server
/// that serves only tools.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoExtras;

impl ServerHandler for NoExtras {}

/// A bad server configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// An output schema or a required capability was declared for a tool the
    /// registry does not have.
    #[error("`{0}` is configured on the server but is not in the registry")]
    UnknownTool(String),
    /// An output schema that is not an object schema (MCP requires `type: object`).
    #[error(
        "the output schema of `{tool}` must describe an object (`\"type\": \"object\"`); {reason}"
    )]
    OutputSchema {
        /// The tool.
        tool: String,
        /// What is wrong.
        reason: String,
    },
    /// The key sealing `requestState` is too short.
    #[error("the request state key must be at least 32 bytes; got {0}")]
    StateKeyTooShort(usize),
    /// The page size is zero.
    #[error("the tools/list page size must be at least 1")]
    PageSize,
}

/// Builds an [`McpServer`]: [`McpServer::builder`].
#[must_use]
pub struct McpServerBuilder<X = NoExtras> {
    registry: ToolRegistry,
    engine: Engine,
    tenant: TenantId,
    run: Option<RunId>,
    output_schemas: Vec<(String, Result<JsonObject, String>)>,
    page_size: usize,
    state_key: Option<Vec<u8>>,
    info: Implementation,
    instructions: Option<String>,
    approvals: Approvals,
    share_sessions: bool,
    required: Vec<(String, ClientCapabilities)>,
    progress_tools: Vec<String>,
    tasks: Vec<(String, TaskSupport)>,
    extras: X,
}

impl McpServer {
    /// A builder for a server of `registry`'s tools, each call requested through
    /// `engine` (which runs them itself when a [`ToolHandler`](aaa_tools::ToolHandler)
    /// is attached to it, or on workers elsewhere on its bus).
    pub fn builder(registry: ToolRegistry, engine: Engine) -> McpServerBuilder {
        McpServerBuilder {
            registry,
            engine,
            tenant: TenantId::default(),
            run: None,
            output_schemas: Vec::new(),
            page_size: DEFAULT_PAGE_SIZE,
            state_key: None,
            info: Implementation::new("aaa-mcp", env!("CARGO_PKG_VERSION")),
            instructions: None,
            approvals: Approvals::default(),
            share_sessions: false,
            required: Vec::new(),
            progress_tools: Vec::new(),
            tasks: Vec::new(),
            extras: NoExtras,
        }
    }
}

impl<X> McpServer<X> {
    /// The registry whose tools are served.
    pub fn registry(&self) -> &ToolRegistry {
        &self.shared.registry
    }

    /// The engine calls go through.
    pub fn engine(&self) -> &Engine {
        &self.shared.engine
    }

    /// The run of every call without an idempotency key.
    pub fn run(&self) -> &RunHandle {
        &self.shared.run
    }
}

impl<X> McpServerBuilder<X> {
    /// The name and version the server gives in `initialize` and `server/discover`
    /// (default `aaa-mcp` and this crate's version).
    pub fn name(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.info = Implementation::new(name, version);
        self
    }

    /// Instructions for the client's model, sent in `initialize`.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// The tenant of every call (default `default`).
    pub fn tenant(mut self, tenant: TenantId) -> Self {
        self.tenant = tenant;
        self
    }

    /// The run that calls without an idempotency key go to (default: a fresh run
    /// per server). Calls with a key go to runs of their own (see
    /// [`IDEMPOTENCY_KEY`](crate::IDEMPOTENCY_KEY)).
    pub fn run_id(mut self, run: RunId) -> Self {
        self.run = Some(run);
        self
    }

    /// Declares the `outputSchema` of `tool`: the schema of `T`, which must be an
    /// object (a struct). The tool's result is then sent as `structuredContent` that a
    /// client may check against it.
    pub fn output_schema<T: JsonSchema>(mut self, tool: &str) -> Self {
        let schema = schemars::schema_for!(T);
        let object = match serde_json::to_value(&schema) {
            Ok(serde_json::Value::Object(object))
                if object.get("type") == Some(&serde_json::Value::from("object")) =>
            {
                Ok(object)
            }
            Ok(other) => Err(format!(
                "`{}` has the schema {}",
                std::any::type_name::<T>(),
                other
            )),
            Err(error) => Err(error.to_string()),
        };
        self.output_schemas.push((tool.to_owned(), object));
        self
    }

    /// The most tools in one `tools/list` page (default [`DEFAULT_PAGE_SIZE`]).
    pub fn page_size(mut self, page_size: usize) -> Self {
        self.page_size = page_size;
        self
    }

    /// The key (at least 32 bytes, secret) that seals the `requestState` of
    /// `input_required` results. Default: a random key per server, so a state does
    /// not survive a restart and is not understood by another server; give every
    /// server of a deployment the same key to change that.
    pub fn request_state_key(mut self, key: impl Into<Vec<u8>>) -> Self {
        self.state_key = Some(key.into());
        self
    }

    /// Who may decide on calls that wait for approval (default
    /// [`Approvals::ClientThenOperator`]).
    pub fn approvals(mut self, approvals: Approvals) -> Self {
        self.approvals = approvals;
        self
    }

    /// Lets tools running in this process reach the calling session through
    /// [`McpCaller`](crate::McpCaller) (default off: each call then costs a
    /// registration in a process-wide table).
    pub fn share_sessions(mut self, share: bool) -> Self {
        self.share_sessions = share;
        self
    }

    /// Says that `tool` reports progress: its result then waits until every report
    /// made before it has been forwarded to a client that asked for progress. (A tool
    /// not named here is learned the first time a report of it arrives before its
    /// result; until then, reports racing the end of the call may arrive after the
    /// result, or not at all.)
    pub fn reports_progress(mut self, tool: &str) -> Self {
        self.progress_tools.push(tool.to_owned());
        self
    }

    /// Says that `tool` cannot run for a client without `capabilities` (sampling,
    /// elicitation or roots: what the tool asks of the client through
    /// [`McpCaller`](crate::McpCaller) or an `input_required` result). A client that
    /// did not declare them gets JSON-RPC `-32021` (missing required client capability)
    /// naming them, and the engine is not asked.
    pub fn requires_capability(mut self, tool: &str, capabilities: ClientCapabilities) -> Self {
        self.required.push((tool.to_owned(), capabilities));
        self
    }

    /// Lets the calls of `tool` become MCP tasks (the `io.modelcontextprotocol/tasks`
    /// extension, which the server then advertises): see [`tasks`](crate::tasks). A
    /// task is an engine call recorded in the engine's store, so it outlives the
    /// server process.
    ///
    /// ```
    /// use aaa_mcp::{McpServer, TaskSupport};
    /// use aaa_tools::{Engine, ToolRegistry, tool, tools};
    ///
    /// /// Render a report.
    /// #[tool]
    /// async fn render() -> String { "done".to_owned() }
    ///
    /// let registry = ToolRegistry::new(tools![render]).unwrap();
    /// let server = McpServer::builder(registry, Engine::embedded())
    ///     .task_support("render", TaskSupport::Optional)
    ///     .build()
    ///     .unwrap();
    /// # let _ = server;
    /// ```
    pub fn task_support(mut self, tool: &str, support: TaskSupport) -> Self {
        self.tasks.push((tool.to_owned(), support));
        self
    }

    /// What answers everything but tools: resources, prompts, completions, the
    /// logging level, resource subscriptions. Its capabilities are advertised beside
    /// the tools; its `initialize`, tools and `server/discover` are not used.
    pub fn extras<Y: ServerHandler>(self, extras: Y) -> McpServerBuilder<Y> {
        McpServerBuilder {
            registry: self.registry,
            engine: self.engine,
            tenant: self.tenant,
            run: self.run,
            output_schemas: self.output_schemas,
            page_size: self.page_size,
            state_key: self.state_key,
            info: self.info,
            instructions: self.instructions,
            approvals: self.approvals,
            share_sessions: self.share_sessions,
            required: self.required,
            progress_tools: self.progress_tools,
            tasks: self.tasks,
            extras,
        }
    }

    /// Builds the server.
    pub fn build(self) -> Result<McpServer<X>, BuildError> {
        if self.page_size == 0 {
            return Err(BuildError::PageSize);
        }
        let mut schemas = HashMap::new();
        for (tool, schema) in self.output_schemas {
            if self.registry.get(&tool).is_none() {
                return Err(BuildError::UnknownTool(tool));
            }
            let schema = schema.map_err(|reason| BuildError::OutputSchema {
                tool: tool.clone(),
                reason,
            })?;
            schemas.insert(tool, Arc::new(schema));
        }
        let required = by_tool(&self.registry, self.required)?;
        let key = match self.state_key {
            Some(key) if key.len() < 32 => return Err(BuildError::StateKeyTooShort(key.len())),
            Some(key) => key,
            None => rand::random::<[u8; 32]>().to_vec(),
        };
        for tool in &self.progress_tools {
            if self.registry.get(tool).is_none() {
                return Err(BuildError::UnknownTool(tool.clone()));
            }
        }
        let tasks = by_tool(&self.registry, self.tasks)?;
        let reporting = self
            .registry
            .names()
            .map(|name| {
                let declared = self.progress_tools.iter().any(|t| t == name);
                (name.to_owned(), AtomicBool::new(declared))
            })
            .collect();
        let run = self.run.unwrap_or_else(aaa_tools::new_run_id);
        let listing = Listing::new(&self.registry, &schemas, self.page_size);
        let run = self.engine.run_for(self.tenant.clone(), run);
        Ok(McpServer {
            shared: Arc::new(Shared {
                registry: self.registry,
                engine: self.engine,
                tenant: self.tenant,
                run,
                follower: OnceCell::new(),
                listing,
                seal: StateSeal::new(key),
                info: self.info,
                instructions: self.instructions,
                approvals: self.approvals,
                share_sessions: self.share_sessions,
                required,
                reporting,
                tasks,
            }),
            extras: self.extras,
            session: Session::default(),
        })
    }
}

/// A setting per tool, by tool; [`BuildError::UnknownTool`] for a tool `registry`
/// does not have.
fn by_tool<T>(
    registry: &ToolRegistry,
    settings: Vec<(String, T)>,
) -> Result<HashMap<String, T>, BuildError> {
    let mut by_tool = HashMap::with_capacity(settings.len());
    for (tool, setting) in settings {
        if registry.get(&tool).is_none() {
            return Err(BuildError::UnknownTool(tool));
        }
        by_tool.insert(tool, setting);
    }
    Ok(by_tool)
}
