//! [`Endpoint`]: one provider URL, POSTed JSON with timeouts and retries, and the
//! provider's error bodies turned into [`ModelError`]s.

use std::time::{Duration, SystemTime};

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use reqwest::{StatusCode, Url};
use serde_json::Value;

use super::retry::{RetryPolicy, retry_after, retry_delay_in_body, retryable_status};
use crate::error::CodecError;
use crate::model::ModelError;
use crate::provider::Provider;
use crate::shape::provider_error;
use crate::turn::AssistantTurn;

/// A provider's endpoint, ready to POST to.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    pub(crate) client: reqwest::Client,
    pub(crate) url: Url,
    /// Authentication and any headers the user added.
    pub(crate) headers: HeaderMap,
    /// The longest one attempt may take, the whole response body read.
    pub(crate) timeout: Duration,
    pub(crate) retry: RetryPolicy,
    pub(crate) provider: Provider,
}

/// A successful response: its body, and whether it is a stream of server-sent events.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) body: Vec<u8>,
    pub(crate) event_stream: bool,
}

/// A failed attempt: the error, whether another attempt may succeed, and how long the
/// provider asked to wait first.
#[derive(Debug)]
struct Failure {
    error: ModelError,
    retryable: bool,
    retry_after: Option<Duration>,
}

impl Endpoint {
    /// POSTs `body` and reads the successful response with `read`, retrying as the
    /// policy says: a failed request, and a response whose error (an `error` event in
    /// a stream that began with `200 OK`) is [transient](CodecError::is_transient).
    /// The turn, or the error of the last attempt.
    pub(crate) async fn post_turn(
        &self,
        body: &Value,
        read: impl Fn(&Reply) -> Result<AssistantTurn, CodecError>,
    ) -> Result<AssistantTurn, ModelError> {
        let bytes = serde_json::to_vec(body)
            .map_err(|e| ModelError::Other(format!("the request body is not JSON: {e}")))?;
        let mut retry = 0;
        loop {
            let failure = match self.attempt(&bytes).await.map(|reply| read(&reply)) {
                Ok(Ok(turn)) => return Ok(turn),
                Ok(Err(error)) if error.is_transient() => Failure {
                    error: ModelError::Decode(error),
                    retryable: true,
                    retry_after: None,
                },
                Ok(Err(error)) => return Err(ModelError::Decode(error)),
                Err(failure) => failure,
            };
            let attempts = retry + 1;
            if !failure.retryable {
                return Err(failure.error);
            }
            if retry >= self.retry.max_retries {
                return Err(gave_up(failure.error, attempts));
            }
            match self.retry.wait(retry, failure.retry_after) {
                Ok(wait) => tokio::time::sleep(wait).await,
                Err(asked) => {
                    let note = format!(
                        "the provider asked to wait {asked:?} before asking again, longer \
                         than the {:?} the retry policy waits",
                        self.retry.max_retry_after
                    );
                    return Err(annotate(failure.error, &note));
                }
            }
            retry += 1;
        }
    }

    /// One request and its whole response.
    async fn attempt(&self, body: &[u8]) -> Result<Reply, Failure> {
        let response = self
            .client
            .post(self.url.clone())
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .timeout(self.timeout)
            .body(body.to_vec())
            .send()
            .await
            .map_err(|e| self.transport(e))?;
        let status = response.status();
        let waited = retry_after(response.headers(), SystemTime::now());
        let event_stream = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.trim_start().starts_with("text/event-stream"));
        let body = response.bytes().await.map_err(|e| self.transport(e))?;
        if status.is_success() {
            return Ok(Reply {
                body: body.to_vec(),
                event_stream,
            });
        }
        let (message, code) = error_message(self.provider, status, &body);
        Err(Failure {
            retryable: retryable_status(status, code.as_deref()),
            error: ModelError::Status {
                status: status.as_u16(),
                message,
            },
            // A header wins; a Google API says it in the body instead.
            retry_after: waited.or_else(|| retry_delay_in_body(&body)),
        })
    }

    /// A request that got no (whole) response: a timeout, or a connection that failed
    /// (a connection that timed out included: the model was never asked).
    fn transport(&self, error: reqwest::Error) -> Failure {
        if error.is_timeout() && !error.is_connect() {
            return Failure {
                error: ModelError::Timeout(self.timeout),
                retryable: true,
                retry_after: None,
            };
        }
        // reqwest's own words name the URL; the causes below say what went wrong
        // ("Connection refused", a TLS failure).
        let mut message = error.to_string();
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            let cause_text = cause.to_string();
            if !message.contains(&cause_text) {
                message.push_str(": ");
                message.push_str(&cause_text);
            }
            source = cause.source();
        }
        Failure {
            error: ModelError::Transport(message),
            // A request reqwest could not even build will not build next time.
            retryable: !error.is_builder(),
            retry_after: None,
        }
    }
}

/// The provider's words for an error response, and its error type or code: the
/// `error` object of the body (`"<type>: <message>"`), else the body's text, else the
/// status's reason.
fn error_message(provider: Provider, status: StatusCode, body: &[u8]) -> (String, Option<String>) {
    if let Ok(json) = serde_json::from_slice::<Value>(body)
        && let Some(CodecError::Provider { message, code, .. }) = provider_error(provider, &json)
    {
        return (message, code);
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        let reason = status.canonical_reason().unwrap_or("no reason given");
        return (format!("{reason} (empty body)"), None);
    }
    const MAX: usize = 500;
    let cut = match text.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_owned(),
    };
    (cut, None)
}

/// The last error of several attempts, saying how many there were.
fn gave_up(error: ModelError, attempts: u32) -> ModelError {
    if attempts < 2 {
        return error;
    }
    annotate(error, &format!("gave up after {attempts} attempts"))
}

/// `error` with `note` added to its message (a timeout has none, and stays as it is).
fn annotate(error: ModelError, note: &str) -> ModelError {
    match error {
        ModelError::Status { status, message } => ModelError::Status {
            status,
            message: format!("{message} ({note})"),
        },
        ModelError::Transport(message) => ModelError::Transport(format!("{message} ({note})")),
        ModelError::Decode(CodecError::Provider {
            provider,
            message,
            code,
        }) => ModelError::Decode(CodecError::Provider {
            provider,
            message: format!("{message} ({note})"),
            code,
        }),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_give_the_providers_words() {
        let openai = br#"{"error": {"message": "Incorrect API key provided: sk-bad.", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}"#;
        assert_eq!(
            error_message(Provider::OpenAiChat, StatusCode::UNAUTHORIZED, openai),
            (
                "invalid_request_error: Incorrect API key provided: sk-bad.".to_owned(),
                Some("invalid_request_error".to_owned())
            )
        );
        let quota = br#"{"error": {"message": "You exceeded your current quota.", "type": "insufficient_quota", "code": "insufficient_quota"}}"#;
        assert_eq!(
            error_message(Provider::OpenAiChat, StatusCode::TOO_MANY_REQUESTS, quota).1,
            Some("insufficient_quota".to_owned())
        );
        let html = b"<html><body>502 Bad Gateway</body></html>";
        assert_eq!(
            error_message(Provider::Anthropic, StatusCode::BAD_GATEWAY, html).0,
            "<html><body>502 Bad Gateway</body></html>"
        );
        assert_eq!(
            error_message(Provider::Anthropic, StatusCode::BAD_GATEWAY, b"").0,
            "Bad Gateway (empty body)"
        );
        let long = "é".repeat(600);
        let (cut, _) = error_message(
            Provider::Anthropic,
            StatusCode::BAD_GATEWAY,
            long.as_bytes(),
        );
        assert_eq!(cut.chars().count(), 503);
    }

    #[test]
    fn notes_go_on_messages() {
        let status = ModelError::Status {
            status: 500,
            message: "api_error: boom".into(),
        };
        assert_eq!(
            gave_up(status, 3).to_string(),
            "the model API answered 500: api_error: boom (gave up after 3 attempts)"
        );
        let timeout = ModelError::Timeout(Duration::from_secs(1));
        assert_eq!(gave_up(timeout.clone(), 3), timeout);
        let once = ModelError::Transport("refused".into());
        assert_eq!(gave_up(once.clone(), 1), once);
    }
}
