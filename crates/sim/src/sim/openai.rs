//! OpenAI-compatible request and response bodies, in vLLM's exact shapes (field names, `null`s,
//! the usage-only final chunk), so clients written for vLLM parse the simulated engine's output.

use serde::{Deserialize, Serialize};

/// `stream_options` of a request.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub(crate) struct StreamOptions {
    /// Send a final chunk with empty `choices` and the request's usage.
    pub(crate) include_usage: Option<bool>,
    /// With `include_usage`: cumulative usage on every chunk (vLLM extension).
    pub(crate) continuous_usage_stats: Option<bool>,
}

impl StreamOptions {
    /// `(include_usage, continuous_usage_stats)` of a request's optional `stream_options`,
    /// each false when absent.
    pub(crate) fn flags(options: Option<StreamOptions>) -> (bool, bool) {
        let o = options.unwrap_or_default();
        (
            o.include_usage.unwrap_or(false),
            o.continuous_usage_stats.unwrap_or(false),
        )
    }
}

/// A completion prompt: text, a one-element list of texts, or token ids.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum PromptInput {
    /// Plain text.
    Text(String),
    /// A list of texts (only one is supported: one choice per request).
    Texts(Vec<String>),
    /// Pre-tokenized prompt.
    Tokens(Vec<u32>),
}

/// `POST /v1/completions` body (fields the simulator does not model are ignored).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct CompletionRequest {
    /// Served model name; absent = the served model.
    pub(crate) model: Option<String>,
    /// The prompt.
    pub(crate) prompt: PromptInput,
    /// Output limit (default 16, as vLLM).
    pub(crate) max_tokens: Option<u64>,
    /// Stream SSE chunks.
    pub(crate) stream: Option<bool>,
    /// Streaming usage options.
    pub(crate) stream_options: Option<StreamOptions>,
    /// Run to `max_tokens` whatever the model "wants".
    pub(crate) ignore_eos: Option<bool>,
}

/// Content of a chat message: a string, or a list of parts whose `text`s are concatenated.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum MessageContent {
    /// Plain text.
    Text(String),
    /// Multi-part content (`[{"type":"text","text":"..."}]`).
    Parts(Vec<ContentPart>),
}

/// One part of a multi-part message.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ContentPart {
    /// Text of a `text` part; other part types count as empty.
    pub(crate) text: Option<String>,
}

impl MessageContent {
    /// The message's text.
    pub(crate) fn text(&self) -> String {
        match self {
            MessageContent::Text(t) => t.clone(),
            MessageContent::Parts(parts) => {
                parts.iter().filter_map(|p| p.text.as_deref()).collect()
            }
        }
    }
}

/// One chat message.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ChatMessage {
    /// `system`, `user`, `assistant`, ...
    pub(crate) role: String,
    /// The message content (may be null).
    pub(crate) content: Option<MessageContent>,
}

/// `POST /v1/chat/completions` body.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ChatRequest {
    /// Served model name; absent = the served model.
    pub(crate) model: Option<String>,
    /// The conversation.
    pub(crate) messages: Vec<ChatMessage>,
    /// Output limit (default 16).
    pub(crate) max_tokens: Option<u64>,
    /// Newer name of `max_tokens`; wins when both are given.
    pub(crate) max_completion_tokens: Option<u64>,
    /// Stream SSE chunks.
    pub(crate) stream: Option<bool>,
    /// Streaming usage options.
    pub(crate) stream_options: Option<StreamOptions>,
    /// Run to `max_tokens` whatever the model "wants".
    pub(crate) ignore_eos: Option<bool>,
}

/// `POST /tokenize` body: a prompt or chat messages.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct TokenizeRequest {
    /// Served model name; absent = the served model.
    pub(crate) model: Option<String>,
    /// Text to tokenize.
    pub(crate) prompt: Option<String>,
    /// Or a conversation (counted with the chat template overhead).
    pub(crate) messages: Option<Vec<ChatMessage>>,
}

/// `POST /tokenize` response.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct TokenizeResponse {
    /// Number of tokens.
    pub(crate) count: u64,
    /// The model's context limit.
    pub(crate) max_model_len: u64,
    /// Token ids.
    pub(crate) tokens: Vec<u32>,
    /// Token strings (not produced: always null, as vLLM without `return_token_strs`).
    pub(crate) token_strs: Option<Vec<String>>,
}

/// Token accounting of a request.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Usage {
    /// Prompt tokens.
    pub(crate) prompt_tokens: u64,
    /// Prompt + completion.
    pub(crate) total_tokens: u64,
    /// Output tokens so far (cumulative).
    pub(crate) completion_tokens: u64,
    /// Always null (no prompt caching details).
    pub(crate) prompt_tokens_details: Option<()>,
}

impl Usage {
    /// Usage after `completion` output tokens.
    pub(crate) fn new(prompt: u64, completion: u64) -> Self {
        Usage {
            prompt_tokens: prompt,
            total_tokens: prompt + completion,
            completion_tokens: completion,
            prompt_tokens_details: None,
        }
    }
}

/// One choice of a text-completion chunk or response.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CompletionChoice {
    pub(crate) index: u32,
    pub(crate) text: String,
    pub(crate) logprobs: Option<()>,
    pub(crate) finish_reason: Option<&'static str>,
    pub(crate) stop_reason: Option<()>,
}

/// The envelope every streamed chunk (and a non-streamed text completion) shares: id, object,
/// created, model, the choices, and usage when asked for.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Envelope<'a, C> {
    pub(crate) id: &'a str,
    pub(crate) object: &'static str,
    pub(crate) created: i64,
    pub(crate) model: &'a str,
    pub(crate) choices: Vec<C>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) usage: Option<Usage>,
}

/// A text completion (`object` = `text_completion` for both chunks and full responses).
pub(crate) type CompletionBody<'a> = Envelope<'a, CompletionChoice>;

/// The delta of a chat chunk.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ChatDelta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) role: Option<&'static str>,
    pub(crate) content: String,
}

/// One choice of a chat chunk.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ChatChunkChoice {
    pub(crate) index: u32,
    pub(crate) delta: ChatDelta,
    pub(crate) logprobs: Option<()>,
    pub(crate) finish_reason: Option<&'static str>,
}

/// A `chat.completion.chunk`.
pub(crate) type ChatChunk<'a> = Envelope<'a, ChatChunkChoice>;

/// The assistant message of a non-streamed chat response.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ChatResponseMessage {
    pub(crate) role: &'static str,
    pub(crate) content: String,
    pub(crate) tool_calls: Vec<()>,
}

/// One choice of a non-streamed chat response.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ChatChoice {
    pub(crate) index: u32,
    pub(crate) message: ChatResponseMessage,
    pub(crate) logprobs: Option<()>,
    pub(crate) finish_reason: Option<&'static str>,
    pub(crate) stop_reason: Option<()>,
}

/// A non-streamed `chat.completion` (its usage always present).
pub(crate) type ChatResponse<'a> = Envelope<'a, ChatChoice>;

/// vLLM's error body: `{"error": {"message", "type", "param", "code"}}`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ErrorBody {
    pub(crate) error: ErrorInfo,
}

/// The inner error object.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ErrorInfo {
    pub(crate) message: String,
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    pub(crate) param: Option<&'static str>,
    pub(crate) code: u16,
}
