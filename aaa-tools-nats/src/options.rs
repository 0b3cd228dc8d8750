//! [`NatsOptions`]: how to reach the server and how the stream and bucket are laid out.

use std::path::PathBuf;
use std::time::Duration;

use crate::NatsError;

/// Where JetStream keeps the stream and the bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Storage {
    /// On disk: survives a server restart (the default).
    #[default]
    File,
    /// In memory: faster, lost when the server stops.
    Memory,
}

/// How the client proves who it is.
#[derive(Clone, Default)]
enum Auth {
    #[default]
    None,
    Token(String),
    UserPassword(String, String),
    NKey(String),
    CredentialsFile(PathBuf),
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Secrets never reach logs.
        f.write_str(match self {
            Auth::None => "none",
            Auth::Token(_) => "token",
            Auth::UserPassword(..) => "user and password",
            Auth::NKey(_) => "nkey",
            Auth::CredentialsFile(_) => "credentials file",
        })
    }
}

/// Connection and layout options of the JetStream bus and KV store.
///
/// ```
/// use std::time::Duration;
/// use aaa_tools_nats::{NatsOptions, Storage};
///
/// let options = NatsOptions::new("nats://127.0.0.1:4222")
///     .server("nats://10.0.0.2:4222")
///     .token("s3cret")
///     .stream("AGENTS")
///     .bucket("agents_guard")
///     .replicas(3)
///     .storage(Storage::File)
///     .max_age(Duration::from_secs(7 * 24 * 3600));
/// assert_eq!(options.stream_name(), "AGENTS");
/// ```
#[derive(Debug, Clone)]
pub struct NatsOptions {
    pub(crate) servers: Vec<String>,
    auth: Auth,
    tls_required: bool,
    root_certificates: Vec<PathBuf>,
    client_certificate: Option<(PathBuf, PathBuf)>,
    name: Option<String>,
    inbox_prefix: Option<String>,
    pub(crate) stream: String,
    pub(crate) bucket: String,
    pub(crate) replicas: usize,
    pub(crate) storage: Storage,
    pub(crate) max_age: Duration,
    pub(crate) duplicate_window: Duration,
    pub(crate) max_workers: usize,
    pub(crate) request_timeout: Duration,
    pub(crate) pull_expires: Duration,
    pub(crate) fenced_outcomes: bool,
}

impl NatsOptions {
    /// Options for the server at `url` (`nats://host:port`, `tls://host:port`), with
    /// the defaults: stream `AAA` over `aaa.>`, bucket `aaa_guard`, one replica, file
    /// storage, facts kept 7 days, a 2-minute de-duplication window, room for 64
    /// workers per consumer, 5 s request timeout.
    pub fn new(url: impl Into<String>) -> Self {
        NatsOptions {
            servers: vec![url.into()],
            auth: Auth::None,
            tls_required: false,
            root_certificates: Vec::new(),
            client_certificate: None,
            name: None,
            inbox_prefix: None,
            stream: "AAA".into(),
            bucket: "aaa_guard".into(),
            replicas: 1,
            storage: Storage::File,
            max_age: Duration::from_secs(7 * 24 * 3600),
            duplicate_window: Duration::from_secs(120),
            max_workers: 64,
            request_timeout: Duration::from_secs(5),
            pull_expires: Duration::from_secs(5),
            fenced_outcomes: true,
        }
    }

    /// Adds another server of the same cluster (the client picks one and fails over).
    pub fn server(mut self, url: impl Into<String>) -> Self {
        self.servers.push(url.into());
        self
    }

    /// Authenticates with a token.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.auth = Auth::Token(token.into());
        self
    }

    /// Authenticates with a user name and password.
    pub fn user_and_password(
        mut self,
        user: impl Into<String>,
        password: impl Into<String>,
    ) -> Self {
        self.auth = Auth::UserPassword(user.into(), password.into());
        self
    }

    /// Authenticates with an NKey seed (`SU...`).
    pub fn nkey(mut self, seed: impl Into<String>) -> Self {
        self.auth = Auth::NKey(seed.into());
        self
    }

    /// Authenticates with a `.creds` file (JWT and NKey seed), as issued by `nsc`.
    pub fn credentials_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.auth = Auth::CredentialsFile(path.into());
        self
    }

    /// Requires TLS even when the URL does not say `tls://`.
    pub fn require_tls(mut self, required: bool) -> Self {
        self.tls_required = required;
        self
    }

    /// Trusts the CA certificates in the PEM file at `path` (besides the system's).
    pub fn root_certificates(mut self, path: impl Into<PathBuf>) -> Self {
        self.root_certificates.push(path.into());
        self
    }

    /// Presents a client certificate (PEM files) for mutual TLS.
    pub fn client_certificate(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.client_certificate = Some((cert.into(), key.into()));
        self
    }

    /// The connection name the server shows in its monitoring.
    pub fn connection_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The prefix of this connection's reply subjects (default `_INBOX`). A tenant's
    /// client gets a prefix of its own (`_INBOX_acme`, say) so that a server's
    /// permissions can let it read its own replies and no one else's: see the
    /// README's permissions for tenants.
    pub fn inbox_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.inbox_prefix = Some(prefix.into());
        self
    }

    /// The stream that holds every fact (default `AAA`; subjects `aaa.>`).
    pub fn stream(mut self, name: impl Into<String>) -> Self {
        self.stream = name.into();
        self
    }

    /// The KV bucket that holds guard records, approvals and budgets (default
    /// `aaa_guard`).
    pub fn bucket(mut self, name: impl Into<String>) -> Self {
        self.bucket = name.into();
        self
    }

    /// Replicas of the stream and the bucket in a cluster (default 1; at most 5).
    pub fn replicas(mut self, replicas: usize) -> Self {
        self.replicas = replicas;
        self
    }

    /// File (default) or memory storage for the stream and the bucket.
    pub fn storage(mut self, storage: Storage) -> Self {
        self.storage = storage;
        self
    }

    /// How long facts stay in the stream (default 7 days). A run's facts replay only
    /// while they are kept.
    pub fn max_age(mut self, max_age: Duration) -> Self {
        self.max_age = max_age;
        self
    }

    /// The window in which a second publish with the same message id is dropped
    /// (default 2 minutes).
    pub fn duplicate_window(mut self, window: Duration) -> Self {
        self.duplicate_window = window;
        self
    }

    /// How many workers may share one consumer (default 64). With each worker's
    /// `max_in_flight`, it sets the consumer's `MaxAckPending`, which must exceed
    /// workers × concurrency or the server silently stops delivering.
    pub fn max_workers(mut self, workers: usize) -> Self {
        self.max_workers = workers;
        self
    }

    /// How long a request to the server may take before it counts as failed (default
    /// 5 s). A store write that times out is resolved by reading it back.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Whether outcomes are committed in one conditional write where the server takes
    /// it (2.11 and later; default `true`; see [the crate docs](crate)). Turn it off
    /// while a cluster's servers straddle 2.11: a leader before 2.11 would store a
    /// stale attempt's outcome. Outcomes are then committed on the call's record first
    /// and published after, on every server.
    pub fn fenced_outcomes(mut self, fenced: bool) -> Self {
        self.fenced_outcomes = fenced;
        self
    }

    /// The stream's name.
    pub fn stream_name(&self) -> &str {
        &self.stream
    }

    /// The bucket's name.
    pub fn bucket_name(&self) -> &str {
        &self.bucket
    }

    pub(crate) fn validate(&self) -> Result<(), NatsError> {
        let bad = |detail: String| Err(NatsError::Options(detail));
        if self.servers.is_empty() {
            return bad("no server URL given".into());
        }
        let name_ok = |n: &str| {
            !n.is_empty()
                && n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        };
        if !name_ok(&self.stream) {
            return bad(format!(
                "stream name {:?}: use only A-Z, a-z, 0-9, '_' and '-'",
                self.stream
            ));
        }
        if !name_ok(&self.bucket) {
            return bad(format!(
                "bucket name {:?}: use only A-Z, a-z, 0-9, '_' and '-'",
                self.bucket
            ));
        }
        if !(1..=5).contains(&self.replicas) {
            return bad(format!("replicas is {}; use 1 to 5", self.replicas));
        }
        if self.max_workers == 0 {
            return bad("max_workers must be at least 1".into());
        }
        if self.request_timeout < Duration::from_millis(10) {
            return bad("request_timeout must be at least 10 ms".into());
        }
        Ok(())
    }

    /// The async-nats options these settings stand for.
    pub(crate) async fn connect_options(&self) -> Result<async_nats::ConnectOptions, NatsError> {
        let mut options = async_nats::ConnectOptions::new()
            .request_timeout(Some(self.request_timeout))
            .require_tls(self.tls_required)
            // A worker outlives server restarts: reconnect forever.
            .max_reconnects(None::<usize>);
        if let Some(name) = &self.name {
            options = options.name(name);
        }
        if let Some(prefix) = &self.inbox_prefix {
            options = options.custom_inbox_prefix(prefix);
        }
        for path in &self.root_certificates {
            options = options.add_root_certificates(path.clone());
        }
        if let Some((cert, key)) = &self.client_certificate {
            options = options.add_client_certificate(cert.clone(), key.clone());
        }
        options = match &self.auth {
            Auth::None => options,
            Auth::Token(token) => options.token(token.clone()),
            Auth::UserPassword(user, password) => {
                options.user_and_password(user.clone(), password.clone())
            }
            Auth::NKey(seed) => options.nkey(seed.clone()),
            Auth::CredentialsFile(path) => {
                options.credentials_file(path).await.map_err(|error| {
                    NatsError::Options(format!(
                        "cannot read the credentials file {}: {error}",
                        path.display()
                    ))
                })?
            }
        };
        Ok(options)
    }
}
