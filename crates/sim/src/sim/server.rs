//! The HTTP surface (axum): vLLM's routes, request validation and error bodies, and the SSE
//! encoding of the engine's steps (one chunk per engine step per sequence).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tokio::sync::{Mutex, mpsc};
use tokio_util::sync::CancellationToken;

use super::SimOptions;
use super::faults::FaultSet;
use super::metrics::{self, EngineCounters};
use super::openai::*;
use super::profile::UsageMode;
use super::scheduler::{
    EVENT_CHANNEL_CAPACITY, EngineHandle, EngineRequest, FinishReason, StepEvent,
};
use super::speed_model::SpeedModel;
use super::tokenizer::{SimTokenizer, push_output_text, token_block_hashes};

/// `max_tokens` when the request gives none (vLLM's completions default).
pub(crate) const DEFAULT_MAX_TOKENS: u64 = 16;

/// Shared state of the HTTP handlers.
#[derive(Debug)]
pub(crate) struct AppState {
    model_name: Arc<str>,
    profile_name: String,
    max_model_len: u64,
    tokenizer: SimTokenizer,
    speed: SpeedModel,
    spec: bool,
    prefix_caching: bool,
    usage_mode: UsageMode,
    faults: FaultSet,
    engine: EngineHandle,
    counters: Arc<EngineCounters>,
    rng: Mutex<StdRng>,
    next_id: AtomicU64,
    created: i64,
    cancel: CancellationToken,
    /// Completion requests in flight (fault `fail-above-concurrency`).
    in_flight: Arc<AtomicU64>,
    /// When the engine stops answering (fault `hang-after`).
    hang_at: Option<Instant>,
    /// Completion requests received so far (fault `llama-cpp-python`: a stream aborts when a
    /// later one arrives).
    arrivals: AtomicU64,
}

impl AppState {
    /// State for one server.
    pub(crate) fn new(
        opts: &SimOptions,
        speed: SpeedModel,
        engine: EngineHandle,
        counters: Arc<EngineCounters>,
        faults: FaultSet,
        cancel: CancellationToken,
    ) -> Self {
        AppState {
            model_name: opts.model_name().into(),
            profile_name: opts.profile.name.clone(),
            max_model_len: opts.profile.max_model_len,
            tokenizer: SimTokenizer::new(opts.profile.chars_per_token),
            speed,
            spec: opts.profile.spec_decode.is_some(),
            prefix_caching: opts.profile.prefix_caching,
            usage_mode: opts.usage_mode,
            engine,
            counters,
            rng: Mutex::new(StdRng::seed_from_u64(opts.seed ^ 0x5eed_f00d)),
            next_id: AtomicU64::new(1),
            created: chrono::Utc::now().timestamp(),
            cancel,
            in_flight: Arc::new(AtomicU64::new(0)),
            hang_at: faults
                .hang_after
                .map(|s| Instant::now() + Duration::from_secs_f64(s)),
            arrivals: AtomicU64::new(0),
            faults,
        }
    }

    /// Under the `llama-cpp-python` fault the server has no such route.
    fn no_route(&self) -> Option<Response> {
        self.faults
            .llama_cpp_python
            .map(|_| StatusCode::NOT_FOUND.into_response())
    }

    /// The prompt's block hashes for the prefix cache, when it is on.
    fn prefix_blocks(&self, hashes: impl FnOnce() -> Vec<u64>) -> Vec<u64> {
        self.prefix_caching.then(hashes).unwrap_or_default()
    }

    /// Whether the `hang-after` fault has struck.
    fn hung(&self) -> bool {
        self.hang_at.is_some_and(|t| Instant::now() >= t)
    }

    /// Holds a hung request until shutdown (the socket stays open, nothing is sent).
    async fn hang(&self) {
        self.cancel.cancelled().await;
    }
}

/// One completion request in flight; dropped (or [`InFlight::release`]d) when it ends.
struct InFlight(Arc<AtomicU64>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Fault `hang-after`: once it strikes, no request gets an answer (until shutdown).
async fn hang_layer(
    State(s): State<Arc<AppState>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if s.hung() {
        s.hang().await;
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    next.run(req).await
}

/// The routes.
pub(crate) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/v1/models", get(models))
        .route("/version", get(version))
        .route("/tokenize", post(tokenize))
        .route("/metrics", get(metrics_text))
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat_completions))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            hang_layer,
        ))
        .with_state(state)
}

fn error(
    status: StatusCode,
    kind: &'static str,
    param: Option<&'static str>,
    message: String,
) -> Response {
    let body = ErrorBody {
        error: ErrorInfo {
            message,
            kind,
            param,
            code: status.as_u16(),
        },
    };
    (status, axum::Json(body)).into_response()
}

fn bad_request(message: String) -> Response {
    error(StatusCode::BAD_REQUEST, "BadRequestError", None, message)
}

fn internal_error(message: String) -> Response {
    let status = StatusCode::INTERNAL_SERVER_ERROR;
    error(status, "InternalServerError", None, message)
}

fn unavailable(message: &str) -> Response {
    let status = StatusCode::SERVICE_UNAVAILABLE;
    error(status, "ServiceUnavailableError", None, message.into())
}

fn not_ready() -> Response {
    unavailable("the engine is not ready (fault never-ready)")
}

/// Parses a request body and checks that the `model` it names (if any) is the one served.
fn parse_request<T: serde::de::DeserializeOwned>(
    state: &AppState,
    body: &Bytes,
    model: impl Fn(&T) -> &Option<String>,
) -> Result<T, Box<Response>> {
    let req: T = serde_json::from_slice(body)
        .map_err(|e| Box::new(bad_request(format!("invalid request body: {e}"))))?;
    match model(&req) {
        Some(m) if m.as_str() != &*state.model_name => Err(Box::new(error(
            StatusCode::NOT_FOUND,
            "NotFoundError",
            Some("model"),
            format!("The model `{m}` does not exist."),
        ))),
        _ => Ok(req),
    }
}

async fn health(State(s): State<Arc<AppState>>) -> StatusCode {
    if s.faults.never_ready {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    }
}

async fn models(State(s): State<Arc<AppState>>) -> Response {
    if s.faults.never_ready {
        return not_ready();
    }
    axum::Json(serde_json::json!({
        "object": "list",
        "data": [{
            "id": &*s.model_name,
            "object": "model",
            "created": s.created,
            "owned_by": "vllm",
            "root": &*s.model_name,
            "parent": null,
            "max_model_len": s.max_model_len,
            "permission": [],
        }]
    }))
    .into_response()
}

async fn version(State(s): State<Arc<AppState>>) -> Response {
    if let Some(r) = s.no_route() {
        return r;
    }
    axum::Json(serde_json::json!({
        "version": format!("0.0.0-infergate-sim+{}", s.profile_name)
    }))
    .into_response()
}

async fn metrics_text(State(s): State<Arc<AppState>>) -> Response {
    if let Some(r) = s.no_route() {
        return r;
    }
    let text = metrics::render(
        &s.counters,
        &s.model_name,
        s.speed.kv_budget_tokens,
        s.spec,
        metrics::CounterFactors {
            generation: s.faults.counter_factor,
            prompt: s.faults.prompt_counter_factor,
        },
    );
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

async fn tokenize(State(s): State<Arc<AppState>>, body: Bytes) -> Response {
    if let Some(r) = s.no_route() {
        return r;
    }
    let req: TokenizeRequest = match parse_request(&s, &body, |r: &TokenizeRequest| &r.model) {
        Ok(r) => r,
        Err(e) => return *e,
    };
    let (count, tokens) = match (&req.prompt, &req.messages) {
        (Some(p), _) => {
            let ids = s.tokenizer.token_ids(p);
            (ids.len() as u64, ids)
        }
        (None, Some(msgs)) => {
            let texts: Vec<String> = msgs.iter().map(message_text).collect();
            let n = s.tokenizer.count_chat(texts.iter().map(String::as_str));
            let mut ids = s.tokenizer.token_ids(&texts.concat());
            ids.resize(n as usize, 0);
            (n, ids)
        }
        (None, None) => return bad_request("`prompt` or `messages` is required".into()),
    };
    axum::Json(TokenizeResponse {
        count,
        max_model_len: s.max_model_len,
        tokens,
        token_strs: None,
    })
    .into_response()
}

fn message_text(m: &ChatMessage) -> String {
    let _ = &m.role;
    m.content
        .as_ref()
        .map(MessageContent::text)
        .unwrap_or_default()
}

/// Which endpoint a generation came from (shapes its chunks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Completion,
    Chat,
}

/// A validated generation request.
struct Generation {
    kind: Kind,
    prompt_tokens: u64,
    prefix_blocks: Vec<u64>,
    max_tokens: u64,
    stream: bool,
    include_usage: bool,
    continuous_usage: bool,
    ignore_eos: bool,
}

async fn completions(State(s): State<Arc<AppState>>, body: Bytes) -> Response {
    let req: CompletionRequest = match parse_request(&s, &body, |r: &CompletionRequest| &r.model) {
        Ok(r) => r,
        Err(e) => return *e,
    };
    let text = |t: &str| {
        (
            s.tokenizer.count(t),
            s.prefix_blocks(|| s.tokenizer.block_hashes(t)),
        )
    };
    let (prompt_tokens, prefix_blocks) = match &req.prompt {
        PromptInput::Text(t) => text(t),
        PromptInput::Texts(ts) if ts.len() == 1 => text(&ts[0]),
        PromptInput::Texts(_) => {
            return bad_request("only one prompt per request is supported".into());
        }
        PromptInput::Tokens(ids) => (
            ids.len() as u64,
            s.prefix_blocks(|| token_block_hashes(ids)),
        ),
    };
    let (include_usage, continuous_usage) = StreamOptions::flags(req.stream_options);
    let genr = Generation {
        kind: Kind::Completion,
        prompt_tokens,
        prefix_blocks,
        max_tokens: req.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        stream: req.stream.unwrap_or(false),
        include_usage,
        continuous_usage,
        ignore_eos: req.ignore_eos.unwrap_or(false),
    };
    generate(s, genr).await
}

async fn chat_completions(State(s): State<Arc<AppState>>, body: Bytes) -> Response {
    let req: ChatRequest = match parse_request(&s, &body, |r: &ChatRequest| &r.model) {
        Ok(r) => r,
        Err(e) => return *e,
    };
    if req.messages.is_empty() {
        return bad_request("`messages` must not be empty".into());
    }
    let texts: Vec<String> = req.messages.iter().map(message_text).collect();
    let (include_usage, continuous_usage) = StreamOptions::flags(req.stream_options);
    let genr = Generation {
        kind: Kind::Chat,
        prompt_tokens: s.tokenizer.count_chat(texts.iter().map(String::as_str)),
        prefix_blocks: s.prefix_blocks(|| s.tokenizer.block_hashes(&texts.concat())),
        max_tokens: req
            .max_completion_tokens
            .or(req.max_tokens)
            .unwrap_or(DEFAULT_MAX_TOKENS),
        stream: req.stream.unwrap_or(false),
        include_usage,
        continuous_usage,
        ignore_eos: req.ignore_eos.unwrap_or(false),
    };
    generate(s, genr).await
}

/// Per-request random draws, taken under one lock.
struct Draws {
    fail: bool,
    stop_at: u64,
    malformed: bool,
    request_seed: u64,
}

async fn generate(s: Arc<AppState>, mut genr: Generation) -> Response {
    if let Err(refused) = check_generation(&s, &genr) {
        return *refused;
    }
    // `truncate-at` clamps max_tokens as vLLM clamps it to max_model_len - prompt: the
    // request then ends with finish_reason `length`, short of what was asked.
    let engine_max = genr
        .max_tokens
        .min(s.faults.truncate_at.unwrap_or(u64::MAX).max(1));
    let arrival = s.arrivals.fetch_add(1, Ordering::Relaxed) + 1;
    let draws = draw_request(&s, &genr, engine_max).await;
    if draws.fail {
        return internal_error("simulated internal server error (fault http-500)".into());
    }
    let in_flight = match enter_in_flight(&s) {
        Ok(in_flight) => in_flight,
        Err(refused) => return *refused,
    };
    let rx = match submit_to_engine(&s, &mut genr, engine_max, draws.stop_at) {
        Ok(rx) => rx,
        Err(refused) => return *refused,
    };
    let n = s.next_id.fetch_add(1, Ordering::Relaxed);
    let id = match genr.kind {
        Kind::Completion => format!("cmpl-{:016x}{n:08x}", draws.request_seed),
        Kind::Chat => format!("chatcmpl-{:016x}{n:08x}", draws.request_seed),
    };
    let created = chrono::Utc::now().timestamp();
    if genr.stream {
        stream_response(s, genr, draws, id, created, rx, in_flight, arrival)
    } else {
        let response = full_response(s, genr, draws, id, created, rx).await;
        drop(in_flight);
        response
    }
}

/// Refuses what the engine would not run: anything under fault `never-ready`, no tokens
/// asked for, a prompt and completion past the context length or the KV cache.
fn check_generation(s: &AppState, genr: &Generation) -> Result<(), Box<Response>> {
    if s.faults.never_ready {
        return Err(Box::new(not_ready()));
    }
    if genr.max_tokens == 0 {
        return Err(Box::new(error(
            StatusCode::BAD_REQUEST,
            "BadRequestError",
            Some("max_tokens"),
            "max_tokens must be at least 1, got 0.".into(),
        )));
    }
    let total = genr.prompt_tokens.saturating_add(genr.max_tokens);
    if total > s.max_model_len {
        return Err(Box::new(bad_request(format!(
            "This model's maximum context length is {} tokens. However, you requested {} tokens ({} in the messages, {} in the completion). Please reduce the length of the messages or completion.",
            s.max_model_len, total, genr.prompt_tokens, genr.max_tokens
        ))));
    }
    let reservation = s.speed.reservation(genr.prompt_tokens, genr.max_tokens);
    if reservation > s.speed.kv_budget_tokens {
        return Err(Box::new(bad_request(format!(
            "the request needs {reservation} KV cache tokens ({} prompt + {} max_tokens) but the engine's KV cache holds {}; reduce the prompt or max_tokens",
            genr.prompt_tokens, genr.max_tokens, s.speed.kv_budget_tokens
        ))));
    }
    Ok(())
}

/// The request's random draws, in a fixed order under one lock of the server's seeded rng
/// (the sim's outputs at a seed depend on it).
async fn draw_request(s: &AppState, genr: &Generation, engine_max: u64) -> Draws {
    let mut rng = s.rng.lock().await;
    Draws {
        fail: s.faults.http_500 > 0.0 && rng.random::<f64>() < s.faults.http_500,
        stop_at: if genr.ignore_eos || rng.random_bool(0.5) {
            genr.max_tokens
        } else {
            rng.random_range(1..=genr.max_tokens)
        }
        .min(engine_max),
        malformed: genr.stream
            && s.faults.malformed_sse > 0.0
            && rng.random::<f64>() < s.faults.malformed_sse,
        request_seed: rng.random::<u64>(),
    }
}

/// Counts the request in flight; fault `fail-above-concurrency` refuses it beyond its limit.
fn enter_in_flight(s: &AppState) -> Result<InFlight, Box<Response>> {
    let before = s.in_flight.fetch_add(1, Ordering::Relaxed);
    let in_flight = InFlight(s.in_flight.clone());
    if let Some(limit) = s.faults.fail_above_concurrency
        && before >= u64::from(limit)
    {
        drop(in_flight);
        return Err(Box::new(internal_error(format!(
            "simulated internal server error: {} requests in flight, at most {limit} served (fault fail-above-concurrency={limit})",
            before + 1
        ))));
    }
    Ok(in_flight)
}

/// Hands the request to the engine; returns where its steps arrive.
fn submit_to_engine(
    s: &AppState,
    genr: &mut Generation,
    engine_max: u64,
    stop_at: u64,
) -> Result<mpsc::Receiver<StepEvent>, Box<Response>> {
    let (tx, rx) = mpsc::channel(EVENT_CHANNEL_CAPACITY);
    let submitted = s.engine.submit(EngineRequest {
        prompt_tokens: genr.prompt_tokens,
        max_tokens: engine_max,
        stop_at,
        prefix_blocks: std::mem::take(&mut genr.prefix_blocks),
        events: tx,
    });
    match submitted {
        Ok(()) => Ok(rx),
        Err(_) => Err(Box::new(unavailable("the engine is shutting down"))),
    }
}

async fn full_response(
    s: Arc<AppState>,
    genr: Generation,
    draws: Draws,
    id: String,
    created: i64,
    mut rx: mpsc::Receiver<StepEvent>,
) -> Response {
    let mut generated = 0u64;
    let finish = loop {
        let Some(ev) = rx.recv().await else {
            return internal_error("the engine stopped before the request finished".into());
        };
        generated += ev.tokens;
        if let Some(f) = ev.finish {
            break f;
        }
    };
    let mut text = String::new();
    push_output_text(&mut text, draws.request_seed, 0, generated);
    let usage = Usage::new(genr.prompt_tokens, s.faults.reported_usage(generated));
    let model = &*s.model_name;
    match genr.kind {
        Kind::Completion => axum::Json(CompletionBody {
            id: &id,
            object: "text_completion",
            created,
            model,
            choices: vec![CompletionChoice {
                index: 0,
                text,
                logprobs: None,
                finish_reason: Some(finish.as_str()),
                stop_reason: None,
            }],
            usage: Some(usage),
        })
        .into_response(),
        Kind::Chat => axum::Json(ChatResponse {
            id: &id,
            object: "chat.completion",
            created,
            model,
            choices: vec![ChatChoice {
                index: 0,
                message: ChatResponseMessage {
                    role: "assistant",
                    content: text,
                    tool_calls: Vec::new(),
                },
                logprobs: None,
                finish_reason: Some(finish.as_str()),
                stop_reason: None,
            }],
            usage: Some(usage),
        })
        .into_response(),
    }
}

/// Where a stream is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Role,
    Tokens,
    UsageChunk,
    Done,
    /// Fault `llama-cpp-python`: `[DONE]` without a finish_reason, then a broken body.
    Abort,
    Broken,
    End,
}

/// State of one SSE stream, advanced one engine event at a time.
struct SseStream {
    state: Arc<AppState>,
    kind: Kind,
    id: String,
    created: i64,
    request_seed: u64,
    prompt_tokens: u64,
    /// Tokens received from the engine.
    generated: u64,
    include_usage: bool,
    continuous: bool,
    final_only: bool,
    stall_after: Option<u64>,
    malformed: bool,
    phase: Phase,
    rx: mpsc::Receiver<StepEvent>,
    /// Released before `[DONE]` is sent, so a client's next request never sees this one.
    in_flight: Option<InFlight>,
    /// This request's arrival number and whether a later arrival aborts it (fault
    /// `llama-cpp-python`).
    arrival: u64,
    interrupt: bool,
}

fn sse(out: &mut Vec<u8>, value: &impl serde::Serialize) {
    out.extend_from_slice(b"data: ");
    // serializing these plain structs cannot fail
    let _ = serde_json::to_writer(&mut *out, value);
    out.extend_from_slice(b"\n\n");
}

impl SseStream {
    /// The usage the engine reports now (inflated or deflated under `lie-usage`).
    fn reported_usage(&self) -> Usage {
        Usage::new(
            self.prompt_tokens,
            self.state.faults.reported_usage(self.generated),
        )
    }

    fn usage_now(&self) -> Option<Usage> {
        self.continuous.then(|| self.reported_usage())
    }

    /// One SSE chunk: its one choice `(text, role, finish)` (`role`: the chat's assistant role,
    /// on its first chunk), or no choice at all in the usage-only chunk at the stream's end.
    fn chunk(
        &self,
        choice: Option<(String, bool, Option<FinishReason>)>,
        usage: Option<Usage>,
    ) -> Vec<u8> {
        let mut out = Vec::with_capacity(256 + choice.as_ref().map_or(0, |c| c.0.len()));
        let model = &*self.state.model_name;
        match self.kind {
            Kind::Completion => sse(
                &mut out,
                &CompletionBody {
                    id: &self.id,
                    object: "text_completion",
                    created: self.created,
                    model,
                    choices: Vec::from_iter(choice.map(|(text, _, finish)| CompletionChoice {
                        index: 0,
                        text,
                        logprobs: None,
                        finish_reason: finish.map(FinishReason::as_str),
                        stop_reason: None,
                    })),
                    usage,
                },
            ),
            Kind::Chat => sse(
                &mut out,
                &ChatChunk {
                    id: &self.id,
                    object: "chat.completion.chunk",
                    created: self.created,
                    model,
                    choices: Vec::from_iter(choice.map(|(text, role, finish)| ChatChunkChoice {
                        index: 0,
                        delta: ChatDelta {
                            role: role.then_some("assistant"),
                            content: text,
                        },
                        logprobs: None,
                        finish_reason: finish.map(FinishReason::as_str),
                    })),
                    usage,
                },
            ),
        }
        out
    }

    /// Swallows the rest of the engine's output and holds the connection open until shutdown.
    async fn stall(&mut self) {
        while self.rx.recv().await.is_some() {}
        self.state.cancel.cancelled().await;
    }

    /// The next piece of the body, or `None` at its end.
    async fn next(&mut self) -> Option<Vec<u8>> {
        if self.state.hung() {
            // Fault `hang-after`: the stream goes silent with its connection open.
            self.state.hang().await;
            return None;
        }
        match self.phase {
            Phase::Role => {
                self.phase = Phase::Tokens;
                Some(self.chunk(Some((String::new(), true, None)), self.usage_now()))
            }
            Phase::Tokens => self.next_tokens().await,
            Phase::UsageChunk => {
                self.phase = Phase::Done;
                Some(self.chunk(None, Some(self.reported_usage())))
            }
            Phase::Done => {
                self.phase = Phase::End;
                self.in_flight = None;
                Some(b"data: [DONE]\n\n".to_vec())
            }
            Phase::Abort => {
                self.phase = Phase::Broken;
                self.rx.close();
                self.in_flight = None;
                Some(b"data: [DONE]\n\n".to_vec())
            }
            Phase::Broken | Phase::End => None,
        }
    }

    /// The chunk of the engine's next step, or `None` once the stream goes silent (faults
    /// `stall-after`, `hang-after`) or the engine went away mid-stream (shutdown: the body
    /// ends without [DONE]).
    async fn next_tokens(&mut self) -> Option<Vec<u8>> {
        if let Some(limit) = self.stall_after
            && self.generated >= limit
        {
            self.stall().await;
            return None;
        }
        let mut ev = self.rx.recv().await?;
        if self.state.hung() {
            self.state.hang().await;
            return None;
        }
        let from = self.generated;
        if let Some(limit) = self.stall_after
            && from + ev.tokens > limit
        {
            // cut the chunk at the limit; the stream then goes silent
            ev.tokens = limit - from;
            ev.finish = None;
        }
        self.generated += ev.tokens;
        let out = self.tokens_chunk(from, ev.finish);
        self.phase_after_tokens(ev.finish);
        Some(out)
    }

    /// The chunk carrying the tokens generated after `from` (with its usage), followed by a
    /// broken event after the first under fault `malformed-sse`.
    fn tokens_chunk(&self, from: u64, finish: Option<FinishReason>) -> Vec<u8> {
        let mut text = String::new();
        push_output_text(&mut text, self.request_seed, from, self.generated);
        let usage = if self.final_only && finish.is_some() {
            Some(self.reported_usage())
        } else {
            self.usage_now()
        };
        let mut out = self.chunk(Some((text, false, finish)), usage);
        if self.malformed && from == 0 {
            out.extend_from_slice(b"data: {\"id\": \"cmpl-garbage\", \"choices\": [{\"te\n\n");
        }
        out
    }

    /// After a tokens chunk: the last goes on to the usage chunk or [DONE]; under fault
    /// `llama-cpp-python` a later arrival aborts the stream.
    fn phase_after_tokens(&mut self, finish: Option<FinishReason>) {
        if finish.is_some() {
            self.phase = if self.include_usage && !self.final_only {
                Phase::UsageChunk
            } else {
                Phase::Done
            };
        } else if self.interrupt && self.state.arrivals.load(Ordering::Relaxed) > self.arrival {
            // llama-cpp-python checks after each chunk whether another request waits
            // for the model, and if so sends [DONE] and cancels this one.
            self.phase = Phase::Abort;
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn stream_response(
    s: Arc<AppState>,
    genr: Generation,
    draws: Draws,
    id: String,
    created: i64,
    rx: mpsc::Receiver<StepEvent>,
    in_flight: InFlight,
    arrival: u64,
) -> Response {
    // llama-cpp-python streams no usage at all.
    let no_usage = s.faults.llama_cpp_python.is_some();
    let final_only = s.usage_mode == UsageMode::FinalOnly && !no_usage;
    let st = SseStream {
        kind: genr.kind,
        id,
        created,
        request_seed: draws.request_seed,
        prompt_tokens: genr.prompt_tokens,
        generated: 0,
        include_usage: genr.include_usage && !no_usage,
        // vLLM: continuous usage only when include_usage is also set
        continuous: !final_only && !no_usage && genr.include_usage && genr.continuous_usage,
        final_only,
        stall_after: s.faults.stall_after,
        malformed: draws.malformed,
        phase: if genr.kind == Kind::Chat {
            Phase::Role
        } else {
            Phase::Tokens
        },
        rx,
        in_flight: Some(in_flight),
        arrival,
        interrupt: s.faults.llama_cpp_python == Some(true),
        state: s,
    };
    let body = futures::stream::unfold(st, |mut st| async move {
        if st.phase == Phase::Broken {
            // The body errors: the server drops the connection without ending the chunked
            // body, as uvicorn does when llama-cpp-python cancels a stream.
            st.phase = Phase::End;
            // After the [DONE] went out (a Python server takes a moment to unwind the
            // cancelled stream; erroring at once could drop the [DONE] unsent).
            tokio::time::sleep(Duration::from_millis(20)).await;
            let e = std::io::Error::other("stream aborted (fault llama-cpp-python)");
            return Some((Err(e), st));
        }
        st.next()
            .await
            .map(|bytes| (Ok::<_, std::io::Error>(Bytes::from(bytes)), st))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream; charset=utf-8")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
