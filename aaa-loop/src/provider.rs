//! [`Provider`]: which provider's wire format a codec speaks.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The provider whose wire format a codec speaks; named in every [`CodecError`](crate::CodecError).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Provider {
    /// OpenAI Chat Completions ([`openai_chat`](crate::openai_chat)).
    OpenAiChat,
    /// OpenAI Responses ([`openai_responses`](crate::openai_responses)).
    OpenAiResponses,
    /// Anthropic Messages ([`anthropic`](crate::anthropic)).
    Anthropic,
    /// Google Gemini `generateContent` ([`gemini`](crate::gemini)).
    Gemini,
}

impl Provider {
    /// The API's name, as error messages say it: `OpenAI Chat Completions`, ...
    pub fn api_name(self) -> &'static str {
        match self {
            Provider::OpenAiChat => "OpenAI Chat Completions",
            Provider::OpenAiResponses => "OpenAI Responses",
            Provider::Anthropic => "Anthropic Messages",
            Provider::Gemini => "Gemini generateContent",
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.api_name())
    }
}
