//! [`Settings`]: what every client builder holds (where, who, how long, how often),
//! and how it becomes an [`Endpoint`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value};

use super::BuildError;
use super::endpoint::Endpoint;
use super::retry::RetryPolicy;
use crate::provider::Provider;

/// The shared part of a client builder.
#[derive(Clone)]
pub(crate) struct Settings {
    pub(crate) base_url: String,
    pub(crate) api_key: Option<String>,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) retry: RetryPolicy,
    pub(crate) client: Option<reqwest::Client>,
    pub(crate) body: Map<String, Value>,
    pub(crate) streaming: bool,
}

/// Everything but the key (and the headers, which may hold keys too).
impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("Settings")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "(set)"))
            .field("headers", &headers)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("retry", &self.retry)
            .field("body", &self.body)
            .field("streaming", &self.streaming)
            .finish_non_exhaustive()
    }
}

/// What a client sends as `User-Agent`.
const USER_AGENT: &str = concat!("aaa-loop/", env!("CARGO_PKG_VERSION"));

impl Settings {
    /// Settings for `base_url`: no key, a 10 minute timeout per attempt (a long answer
    /// from a slow model takes minutes), 10 s to connect, the default retries.
    pub(crate) fn new(base_url: &str) -> Self {
        Settings {
            base_url: base_url.to_owned(),
            api_key: None,
            headers: Vec::new(),
            timeout: Duration::from_secs(600),
            connect_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
            client: None,
            body: Map::new(),
            streaming: false,
        }
    }

    /// These settings with the key and base URL from the environment, when set there
    /// (`lookup` reads a variable).
    pub(crate) fn with_env(
        mut self,
        key_variable: &str,
        url_variable: &str,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Self {
        let set = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        if let Some(key) = set(key_variable) {
            self.api_key = Some(key.trim().to_owned());
        }
        if let Some(url) = set(url_variable) {
            self.base_url = url.trim().to_owned();
        }
        self
    }

    /// The endpoint at `path` under the base URL, authenticated with `auth` (header
    /// names and values, marked sensitive), plus the user's headers.
    pub(crate) fn endpoint(
        &self,
        path: &str,
        provider: Provider,
        auth: Vec<(HeaderName, String)>,
    ) -> Result<Endpoint, BuildError> {
        let text = format!("{}{path}", self.base_url.trim_end_matches('/'));
        let url = Url::parse(&text).map_err(|e| BuildError::InvalidUrl {
            url: self.base_url.clone(),
            reason: e.to_string(),
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(BuildError::InvalidUrl {
                url: self.base_url.clone(),
                reason: format!("the scheme is `{}`, not http or https", url.scheme()),
            });
        }
        let mut headers = HeaderMap::new();
        for (name, value) in auth {
            let mut value = header_value(name.as_str(), &value)?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        for (name, value) in &self.headers {
            let header =
                HeaderName::from_bytes(name.as_bytes()).map_err(|e| BuildError::InvalidHeader {
                    name: name.clone(),
                    reason: e.to_string(),
                })?;
            headers.append(header, header_value(name, value)?);
        }
        let client = match &self.client {
            Some(client) => client.clone(),
            None => default_client(self.connect_timeout)?,
        };
        Ok(Endpoint {
            client,
            url,
            headers,
            timeout: self.timeout,
            retry: self.retry.clone(),
            provider,
        })
    }
}

fn header_value(name: &str, value: &str) -> Result<HeaderValue, BuildError> {
    HeaderValue::from_str(value).map_err(|_| BuildError::InvalidHeader {
        name: name.to_owned(),
        reason: "the value has characters a header cannot carry (a line break, a control \
                 character or non-ASCII text)"
            .to_owned(),
    })
}

/// A reqwest client over rustls with the *ring* provider and the platform's
/// certificate roots, HTTP/1.1.
fn default_client(connect_timeout: Duration) -> Result<reqwest::Client, BuildError> {
    use rustls_platform_verifier::BuilderVerifierExt;

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|builder| builder.with_platform_verifier())
        .map_err(|e| BuildError::Tls(e.to_string()))?
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .connect_timeout(connect_timeout)
        .user_agent(USER_AGENT)
        .build()
        .map_err(|e| BuildError::Client(e.to_string()))
}

/// The setters every client builder has, over its `settings` field.
macro_rules! settings_setters {
    () => {
        /// Sets the base URL: the address the API's paths are under (see the
        /// client's docs for its default and the path it appends).
        pub fn base_url(mut self, url: impl Into<String>) -> Self {
            self.settings.base_url = url.into();
            self
        }

        /// Sets the API key.
        pub fn api_key(mut self, key: impl Into<String>) -> Self {
            self.settings.api_key = Some(key.into());
            self
        }

        /// Sets the longest one attempt may take, from sending the request to the
        /// last byte of the answer (10 minutes by default). An attempt that takes
        /// longer fails with [`ModelError::Timeout`](crate::ModelError::Timeout) and
        /// is retried as the [`RetryPolicy`](crate::http::RetryPolicy) says.
        pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
            self.settings.timeout = timeout;
            self
        }

        /// Sets the longest wait for a connection (10 s by default). Not used with
        /// [`http_client`](Self::http_client): that client's setting holds.
        pub fn connect_timeout(mut self, timeout: std::time::Duration) -> Self {
            self.settings.connect_timeout = timeout;
            self
        }

        /// Sets how failed requests are retried.
        pub fn retry(mut self, policy: crate::http::RetryPolicy) -> Self {
            self.settings.retry = policy;
            self
        }

        /// Adds a header to every request (an organization or project header, a
        /// gateway's own key).
        pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
            self.settings.headers.push((name.into(), value.into()));
            self
        }

        /// Adds a field to every request body (`temperature`, `tool_choice`,
        /// `parallel_tool_calls`, a server's own options). The fields the client
        /// writes from the request (model, messages, tools, the output limit when the
        /// request has one, `stream`) take precedence.
        pub fn body_field(mut self, name: impl Into<String>, value: serde_json::Value) -> Self {
            self.settings.body.insert(name.into(), value);
            self
        }

        /// Asks for a streamed answer (server-sent events), read whole and assembled
        /// into the turn by the provider's `Assembler`. Off by default. Streaming
        /// keeps a long answer's connection busy, which some proxies need. A
        /// connection that fails mid-stream fails the attempt, which is retried; a
        /// stream that ends cleanly before its final event is
        /// [`CodecError::Unfinished`](crate::CodecError::Unfinished), not retried. A
        /// server that answers with plain JSON anyway is read as such.
        pub fn streaming(mut self, streaming: bool) -> Self {
            self.settings.streaming = streaming;
            self
        }

        /// Sends requests with `client` instead of one of the client's own (to share
        /// a connection pool, or for a proxy or TLS setup of your own). Its TLS must
        /// be set up: build it from the [`reqwest`](crate::http::reqwest) this crate
        /// re-exports.
        pub fn http_client(mut self, client: crate::http::reqwest::Client) -> Self {
            self.settings.client = Some(client);
            self
        }
    };
}

pub(crate) use settings_setters;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_sets_key_and_url_when_given() {
        let env = |name: &str| match name {
            "KEY" => Some(" sk-env \n".to_owned()),
            "URL" => Some("  ".to_owned()),
            _ => None,
        };
        let settings = Settings::new("https://api.example.com/v1").with_env("KEY", "URL", env);
        assert_eq!(settings.api_key.as_deref(), Some("sk-env"));
        assert_eq!(settings.base_url, "https://api.example.com/v1");
        let settings = Settings::new("https://a").with_env("K", "U", |name| {
            (name == "U").then(|| "http://localhost:11434/v1".to_owned())
        });
        assert_eq!(
            (settings.api_key, settings.base_url.as_str()),
            (None, "http://localhost:11434/v1")
        );
    }

    #[test]
    fn urls_and_headers_are_checked() {
        let endpoint =
            |settings: Settings| settings.endpoint("/chat", Provider::OpenAiChat, vec![]);
        let url = endpoint(Settings::new("http://127.0.0.1:8080/v1/"))
            .unwrap()
            .url;
        assert_eq!(url.as_str(), "http://127.0.0.1:8080/v1/chat");
        assert_eq!(
            endpoint(Settings::new("localhost:11434"))
                .unwrap_err()
                .to_string(),
            "the base URL \"localhost:11434\" is not usable: the scheme is `localhost`, not http or https"
        );
        assert_eq!(
            endpoint(Settings::new("not a url"))
                .unwrap_err()
                .to_string(),
            "the base URL \"not a url\" is not usable: relative URL without a base"
        );
        let mut bad_name = Settings::new("http://h");
        bad_name.headers.push(("bad header".into(), "x".into()));
        assert!(matches!(
            endpoint(bad_name).unwrap_err(),
            BuildError::InvalidHeader { name, .. } if name == "bad header"
        ));
        let auth = vec![(
            HeaderName::from_static("x-api-key"),
            "key\nwith a break".to_owned(),
        )];
        let error = Settings::new("http://h")
            .endpoint("/m", Provider::Anthropic, auth)
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "the header `x-api-key` is not usable: the value has characters a header cannot \
             carry (a line break, a control character or non-ASCII text)"
        );
    }

    #[test]
    fn keys_are_not_shown_by_debug() {
        let auth = vec![(HeaderName::from_static("x-api-key"), "sk-secret".to_owned())];
        let endpoint = Settings::new("http://h")
            .endpoint("/m", Provider::Anthropic, auth)
            .unwrap();
        assert!(!format!("{endpoint:?}").contains("sk-secret"));
        let mut settings = Settings::new("http://h");
        settings.api_key = Some("sk-secret".into());
        settings
            .headers
            .push(("x-gateway-key".into(), "gw-secret".into()));
        let debug = format!("{settings:?}");
        assert!(
            !debug.contains("secret") && debug.contains("(set)"),
            "{debug}"
        );
    }
}
