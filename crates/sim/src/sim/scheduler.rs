//! The engine: one tokio task that owns the queue, the running batch and the KV reservations,
//! and runs continuous-batching steps on an absolute-deadline clock.
//!
//! Each step: take new requests, admit from the FIFO queue while reservations fit the KV
//! budget, cost the step with the [`SpeedModel`] (decode + prefill of the newly admitted),
//! wait until the step's deadline, then give every running sequence its tokens (1, or
//! 1 + accepted drafts with speculative decoding; a newly admitted sequence gets its first
//! token from prefill). Deadlines accumulate from the previous deadline, not from "now", so
//! the long-run rate is exact even when single steps are shorter than the timer resolution:
//! steps due within a millisecond run back to back without sleeping, and their tokens are
//! coalesced into one event per sequence per millisecond (the zero-time profile excepted: it
//! sends one event per step and is paced by its clients). A sequence's tokens are released as
//! one event (one SSE chunk) at its chunk boundaries: every step by default, every
//! `tokens_per_chunk / tokens_per_step` steps on average with a calibrated cell
//! ([`ChunkClock`]), always at its first token and at its end.

use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::metrics::{EngineCounters, add, set};
use super::prefix_cache::{BLOCK_TOKENS, PrefixCache};
use super::speed_model::{ChunkClock, Jitter, SpeedModel, StepShape, spec_step};

/// Capacity of a sequence's event channel; a slow client in a timed profile overflows into
/// an unbounded backlog (the engine never waits), in the zero profile it paces the engine.
pub(crate) const EVENT_CHANNEL_CAPACITY: usize = 64;

/// How far behind its schedule the engine may fall (overloaded machine) before it stops
/// trying to catch up: beyond this the lost time is dropped instead of bursting.
const MAX_LAG: Duration = Duration::from_millis(200);

/// Why a sequence ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FinishReason {
    /// Reached `max_tokens`.
    Length,
    /// Hit the simulated EOS point (only when `ignore_eos` is false).
    Stop,
}

impl FinishReason {
    /// The OpenAI `finish_reason` string.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FinishReason::Length => "length",
            FinishReason::Stop => "stop",
        }
    }
}

/// Tokens one engine step gave one sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StepEvent {
    /// Tokens emitted in this step (≥ 1).
    pub(crate) tokens: u64,
    /// Set on the sequence's last step.
    pub(crate) finish: Option<FinishReason>,
}

/// A request handed to the engine.
#[derive(Debug)]
pub(crate) struct EngineRequest {
    /// Prompt length in tokens.
    pub(crate) prompt_tokens: u64,
    /// Requested `max_tokens` (the KV reservation is sized for it).
    pub(crate) max_tokens: u64,
    /// Tokens after which the sequence stops with EOS (`>= max_tokens`: runs to the limit).
    pub(crate) stop_at: u64,
    /// Chained hashes of the prompt's full 16-token blocks (prefix cache lookup; may be empty).
    pub(crate) prefix_blocks: Vec<u64>,
    /// Where the sequence's steps are sent; dropping the receiver aborts the sequence.
    pub(crate) events: mpsc::Sender<StepEvent>,
}

/// Handle the HTTP layer submits requests through.
#[derive(Debug, Clone)]
pub(crate) struct EngineHandle {
    tx: mpsc::UnboundedSender<EngineRequest>,
}

/// The engine has stopped (server shutting down).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the simulated engine has stopped")]
pub(crate) struct EngineStopped;

impl EngineHandle {
    /// Queues a request (FIFO).
    pub(crate) fn submit(&self, req: EngineRequest) -> Result<(), EngineStopped> {
        self.tx.send(req).map_err(|_| EngineStopped)
    }
}

/// Everything the engine task needs.
#[derive(Debug)]
pub(crate) struct EngineConfig {
    /// Step and prefill costs, KV budget, draft acceptance and chunking.
    pub(crate) model: SpeedModel,
    /// Per-step jitter.
    pub(crate) jitter: Jitter,
    /// Seed of jitter and draft acceptance draws.
    pub(crate) seed: u64,
    /// Automatic prefix caching, when on.
    pub(crate) prefix_cache: Option<PrefixCache>,
    /// The `preempt` fault: the KV tokens running sequences really have (their prompt plus
    /// what they generated); beyond it the newest is preempted. `None`: no preemption (the
    /// admission reservation always holds).
    pub(crate) preempt_budget: Option<u64>,
    /// The `stall-every` fault: after every `.0` steps the engine pauses `.1` wall seconds.
    pub(crate) stall_every: Option<(u64, f64)>,
    /// At most this many sequences run at once (llama-cpp-python: 1); the rest queue.
    pub(crate) max_running: Option<usize>,
    /// The `chunked-prefill` fault: a request admitted while others decode prefills at most
    /// this many tokens per step.
    pub(crate) chunked_prefill: Option<u64>,
    /// The `itl-tail` fault: `(every, factor)`, one gap of `factor` steps after every
    /// `every` tokens of a stream.
    pub(crate) itl_tail: Option<(u64, u64)>,
    /// The `admit-delay` fault: a request arriving while others decode waits this long
    /// (wall time) before it is admitted.
    pub(crate) admit_delay: Option<Duration>,
}

struct Queued {
    req: EngineRequest,
    reservation: u64,
    /// Not admitted before this instant (the `admit-delay` fault).
    not_before: Option<Instant>,
}

struct Seq {
    prompt_tokens: u64,
    target: u64,
    max_tokens: u64,
    generated: u64,
    /// Generated but not yet released to the client (coalesced catch-up steps).
    pending: u64,
    reservation: u64,
    fresh: bool,
    /// Admission order (the newest is preempted first, as vLLM does).
    admitted: u64,
    /// Preempted for lack of KV (the `preempt` fault): no KV resident, no tokens, until it is
    /// resumed with a recompute of its prompt and what it generated.
    preempted: bool,
    /// Where the stream's chunk boundaries fall.
    chunk_clock: ChunkClock,
    /// A chunk boundary passed while catching up: release before the next sleep.
    chunk_due: bool,
    /// Prompt tokens still to prefill, a chunk per step (the `chunked-prefill` fault); the
    /// sequence gets its first token in the step that prefills the last chunk.
    prefill_left: u64,
    /// Start of the step it was admitted in (its prefill time runs from here to its first
    /// token, as vLLM's `request_prefill_time_seconds` runs from scheduling).
    admitted_at: Instant,
    /// Steps its tokens are still held back (the `itl-tail` fault).
    hold: u64,
    /// A hold just ended: release at this step whatever the chunk clock says.
    after_hold: bool,
    events: mpsc::Sender<StepEvent>,
    backlog: VecDeque<StepEvent>,
    closed: bool,
}

impl Seq {
    /// A sequence for an admitted request, `admission`-th in order, admitted in the step
    /// that started at `step_start`.
    fn admitted(q: Queued, admission: u64, prefill_left: u64, step_start: Instant) -> Self {
        Seq {
            prompt_tokens: q.req.prompt_tokens,
            target: q.req.stop_at.min(q.req.max_tokens).max(1),
            max_tokens: q.req.max_tokens,
            generated: 0,
            pending: 0,
            reservation: q.reservation,
            fresh: true,
            admitted: admission,
            preempted: false,
            chunk_clock: ChunkClock::default(),
            chunk_due: false,
            prefill_left,
            admitted_at: step_start,
            hold: 0,
            after_hold: false,
            events: q.req.events,
            backlog: VecDeque::new(),
            closed: false,
        }
    }

    /// KV tokens it really has resident: its prompt and what it generated.
    fn resident(&self) -> u64 {
        self.prompt_tokens + self.generated
    }

    /// Why it ends, once it has generated its target.
    fn finish_if_done(&self) -> Option<FinishReason> {
        let reason = if self.target < self.max_tokens {
            FinishReason::Stop
        } else {
            FinishReason::Length
        };
        (self.generated >= self.target).then_some(reason)
    }

    /// The `itl-tail` fault (`(every, factor)`): after every `every`-th token, holds the
    /// stream's tokens back for `factor - 1` steps, then releases them together (one long
    /// gap); `true` while its tokens are held.
    fn itl_tail_holds(
        &mut self,
        itl_tail: Option<(u64, u64)>,
        first: bool,
        finish: Option<FinishReason>,
        tokens: u64,
    ) -> bool {
        match itl_tail {
            Some((every, factor)) if !first && finish.is_none() => {
                if self.hold > 0 {
                    self.hold -= 1;
                    self.hold > 0
                } else if self.generated / every.max(1) > (self.generated - tokens) / every.max(1) {
                    self.hold = factor.max(2) - 1;
                    true
                } else {
                    false
                }
            }
            _ => false,
        }
    }

    /// Whether this step ends a chunk, given the chunk clock's `chunk_ends`: never while its
    /// tokens are held, always in the step a hold ends.
    fn chunk_ends_around_hold(&mut self, held: bool, chunk_ends: bool) -> bool {
        if held {
            self.after_hold = true;
            false
        } else if self.after_hold {
            self.after_hold = false;
            true
        } else {
            chunk_ends
        }
    }

    /// Sends what the backlog holds without waiting; marks the sequence closed once the
    /// client is gone.
    fn flush(&mut self) {
        while let Some(ev) = self.backlog.front().copied() {
            match self.events.try_send(ev) {
                Ok(()) => {
                    self.backlog.pop_front();
                }
                Err(TrySendError::Full(_)) => return,
                Err(TrySendError::Closed(_)) => {
                    self.closed = true;
                    self.backlog.clear();
                    return;
                }
            }
        }
    }

    /// Sends the tokens generated since the last release as one event.
    fn release(&mut self, finish: Option<FinishReason>) {
        self.chunk_due = false;
        if self.pending > 0 && !self.closed {
            self.backlog.push_back(StepEvent {
                tokens: self.pending,
                finish,
            });
            self.pending = 0;
            self.flush();
        }
    }
}

/// Creates the engine's request channel.
pub(crate) fn channel() -> (EngineHandle, mpsc::UnboundedReceiver<EngineRequest>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (EngineHandle { tx }, rx)
}

/// Starts the engine on a thread of its own (a single-threaded runtime of its own), where it
/// can wait out the last stretch before a step's deadline precisely ([`wait_until`]): on
/// tokio's timer, which wakes on millisecond ticks, every release was rounded up to one, so a
/// 1.5 ms step streamed gaps of 1 and 2 ms, half each, and the ITL median flipped between
/// them from run to run. Runs until `cancel` fires or every handle is dropped.
pub(crate) fn spawn_engine(
    cfg: EngineConfig,
    counters: Arc<EngineCounters>,
    rx: mpsc::UnboundedReceiver<EngineRequest>,
    cancel: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::task::spawn_blocking(move || {
        match tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
        {
            Ok(runtime) => runtime.block_on(run_engine(cfg, counters, rx, cancel)),
            Err(e) => {
                errln!("infergate sim: cannot start the engine's runtime: {e}");
                cancel.cancel();
            }
        }
    })
}

/// How far before a deadline the engine leaves tokio's timer (millisecond ticks, woken up
/// to a tick late) for a sleep of its thread (the OS timer: a 1.5 ms `nanosleep` on the
/// development VM woke 105 µs late at the median, 160 µs at the 90th percentile).
const PRECISE_WAIT: Duration = Duration::from_millis(2);

/// Waits until `deadline`; `true` when `cancel` fired first. Only on the engine's own thread
/// ([`spawn_engine`]): its last [`PRECISE_WAIT`] blocks the thread.
async fn wait_until(deadline: Instant, cancel: &CancellationToken) -> bool {
    if let Some(coarse) = deadline.checked_sub(PRECISE_WAIT)
        && coarse > Instant::now()
    {
        tokio::select! {
            _ = cancel.cancelled() => return true,
            _ = tokio::time::sleep_until(coarse) => {}
        }
    }
    let left = deadline.saturating_duration_since(Instant::now());
    if !left.is_zero() {
        std::thread::sleep(left);
    }
    cancel.is_cancelled()
}

/// Runs the engine until `cancel` fires or every handle is dropped ([`spawn_engine`]).
async fn run_engine(
    cfg: EngineConfig,
    counters: Arc<EngineCounters>,
    mut rx: mpsc::UnboundedReceiver<EngineRequest>,
    cancel: CancellationToken,
) {
    let mut engine = Engine::new(cfg, counters);
    loop {
        // 1. intake
        let disconnected = engine.take_arrivals(&mut rx);

        // 2. admission (strict FIFO), preempted sequences first
        let mut prefill_tokens = engine.resume_preempted();
        prefill_tokens += engine.admit_queued();
        engine.publish_admission_gauges();

        if engine.running.is_empty() {
            if engine
                .wait_for_work(&mut rx, &cancel, disconnected)
                .await
                .is_break()
            {
                return;
            }
            continue;
        }

        // 2b. the `chunked-prefill` fault: each sequence still prefilling takes one chunk
        prefill_tokens += engine.take_prefill_chunks();

        // 3. cost of this step, and the wait for its deadline
        let shape = engine.decode_shape();
        engine.advance_deadline(&shape, prefill_tokens);
        let ControlFlow::Continue(catching_up) = engine.pace_step(&cancel).await else {
            return;
        };

        // 4. the zero-time engine is paced by its slowest client
        if engine.zero_time && engine.send_backlogs_paced(&cancel).await.is_break() {
            return;
        }

        // 5. emit tokens; 5b. the `preempt` fault; 6. retire
        engine.emit_tokens(&shape, catching_up);
        engine.preempt_over_budget();
        engine.retire_finished();
    }
}

/// The engine task's state between steps: its configuration, the FIFO queue, the running
/// batch with the KV it reserves, the step clock and the seeded draws.
struct Engine {
    cfg: EngineConfig,
    counters: Arc<EngineCounters>,
    /// The zero-time profile: one event per step, paced by the clients.
    zero_time: bool,
    /// Jitter and draft acceptance draws, in a fixed order from `cfg.seed`.
    rng: StdRng,
    /// Scratch for one speculative step's acceptance draws (one per draft position).
    uniforms: Vec<f64>,
    queue: VecDeque<Queued>,
    running: Vec<Seq>,
    /// KV tokens reserved by the running sequences (what admission checks the budget with).
    reserved: u64,
    /// The current step's deadline; deadlines accumulate from the previous one.
    deadline: Instant,
    /// When coalesced tokens were last released (at least every millisecond).
    last_release: Instant,
    /// Sequences admitted so far (a sequence's admission order).
    admitted_total: u64,
    /// Steps run so far (the `stall-every` fault counts them).
    steps: u64,
}

impl Engine {
    fn new(cfg: EngineConfig, counters: Arc<EngineCounters>) -> Self {
        let deadline = Instant::now();
        Engine {
            zero_time: cfg.model.is_zero_time(),
            rng: StdRng::seed_from_u64(cfg.seed),
            uniforms: vec![0.0f64; cfg.model.draft_acceptance.len()],
            cfg,
            counters,
            queue: VecDeque::new(),
            running: Vec::new(),
            reserved: 0,
            deadline,
            last_release: deadline,
            admitted_total: 0,
            steps: 0,
        }
    }

    /// Appends a request to the queue with its KV reservation.
    fn enqueue(&mut self, req: EngineRequest, not_before: Option<Instant>) {
        let reservation = self
            .cfg
            .model
            .reservation(req.prompt_tokens, req.max_tokens);
        self.queue.push_back(Queued {
            req,
            reservation,
            not_before,
        });
    }

    /// Queues every request that has arrived, then drops queued requests whose client left;
    /// `true` once every handle is dropped.
    fn take_arrivals(&mut self, rx: &mut mpsc::UnboundedReceiver<EngineRequest>) -> bool {
        let disconnected = loop {
            match rx.try_recv() {
                Ok(req) => {
                    // The `admit-delay` fault holds back what arrives while others decode.
                    let not_before = self
                        .cfg
                        .admit_delay
                        .filter(|_| self.running.iter().any(|s| !s.closed))
                        .map(|d| Instant::now() + d);
                    self.enqueue(req, not_before);
                }
                Err(e) => break e == mpsc::error::TryRecvError::Disconnected,
            }
        };
        self.queue.retain(|q| !q.req.events.is_closed());
        disconnected
    }

    /// The `preempt` fault: resumes preempted sequences (oldest first) when the real KV has
    /// room for them again; returns the tokens they recompute (their prompt and what they
    /// generated).
    fn resume_preempted(&mut self) -> u64 {
        let Some(budget) = self.cfg.preempt_budget else {
            return 0;
        };
        let running = &mut self.running;
        let mut prefill_tokens = 0u64;
        let mut used = kv_used(running);
        let mut waiting: Vec<usize> = (0..running.len())
            .filter(|&i| running[i].preempted && !running[i].closed)
            .collect();
        waiting.sort_by_key(|&i| running[i].admitted);
        let none_active = used == 0;
        for (k, i) in waiting.into_iter().enumerate() {
            let need = running[i].resident();
            if used + need <= budget || (none_active && k == 0) {
                used += need;
                prefill_tokens += need;
                running[i].preempted = false;
            }
        }
        prefill_tokens
    }

    /// Admits from the head of the queue what the KV budget, the `admit-delay` fault and
    /// `max_running` allow; returns the prompt tokens they prefill in this step.
    fn admit_queued(&mut self) -> u64 {
        // The `chunked-prefill` fault chunks the prefill of what arrives while others decode.
        let chunk_prefill = self.cfg.chunked_prefill.is_some()
            && self
                .running
                .iter()
                .any(|s| !s.preempted && !s.closed && s.prefill_left == 0);
        let n = self.admissible_count();
        let admitted: Vec<Queued> = self.queue.drain(..n).collect();
        admitted
            .into_iter()
            .map(|q| self.start_sequence(q, chunk_prefill))
            .sum()
    }

    /// How many requests at the head of the queue may be admitted now.
    fn admissible_count(&mut self) -> usize {
        // Held-back arrivals (the `admit-delay` fault) wait their time, or none once nothing
        // decodes any more; FIFO: nothing behind one overtakes it.
        if self.running.is_empty() {
            for q in self.queue.iter_mut() {
                q.not_before = None;
            }
        }
        let now = Instant::now();
        let eligible = self
            .queue
            .iter()
            .take_while(|q| q.not_before.is_none_or(|t| t <= now))
            .count();
        let n = self
            .cfg
            .model
            .admit_count(self.reserved, self.queue.iter().map(|q| q.reservation))
            .min(eligible);
        match self.cfg.max_running {
            Some(cap) => n.min(cap.saturating_sub(self.running.len())),
            None => n,
        }
    }

    /// Starts a sequence for an admitted request: reserves its KV, looks its prompt up in the
    /// prefix cache and counts it; returns the prompt tokens it prefills in this step (none
    /// when its prefill is chunked).
    fn start_sequence(&mut self, q: Queued, chunk_prefill: bool) -> u64 {
        self.reserved += q.reservation;
        let prompt = q.req.prompt_tokens;
        // a fully cached prompt still computes its last token, as vLLM does
        let cached = match self.cfg.prefix_cache.as_mut() {
            Some(c) => (c.lookup_and_insert(&q.req.prefix_blocks) as u64 * BLOCK_TOKENS)
                .min(prompt.saturating_sub(1)),
            None => 0,
        };
        let uncached = prompt - cached;
        let prefill_left = if chunk_prefill { uncached } else { 0 };
        add(&self.counters.prefix_cache_queries, prompt);
        add(&self.counters.prefix_cache_hits, cached);
        add(&self.counters.prompt_tokens, q.req.prompt_tokens);
        self.admitted_total += 1;
        self.running.push(Seq::admitted(
            q,
            self.admitted_total,
            prefill_left,
            self.deadline,
        ));
        uncached - prefill_left
    }

    /// Publishes the running and waiting counts and the reserved KV after admission.
    fn publish_admission_gauges(&self) {
        set(&self.counters.running, self.running.len() as u64);
        set(&self.counters.waiting, self.queue.len() as u64);
        set(&self.counters.kv_reserved, self.reserved);
    }

    /// Idle (or a queue that cannot be admitted with nothing running, which the HTTP layer
    /// prevents by rejecting requests larger than the KV budget): waits for work, and
    /// restarts the step clock when it comes. `Break` when the engine is to stop.
    async fn wait_for_work(
        &mut self,
        rx: &mut mpsc::UnboundedReceiver<EngineRequest>,
        cancel: &CancellationToken,
        disconnected: bool,
    ) -> ControlFlow<()> {
        if disconnected && self.queue.is_empty() {
            return ControlFlow::Break(());
        }
        tokio::select! {
            _ = cancel.cancelled() => return ControlFlow::Break(()),
            req = rx.recv() => match req {
                Some(req) => self.enqueue(req, None),
                None => return ControlFlow::Break(()),
            },
        }
        self.deadline = Instant::now();
        ControlFlow::Continue(())
    }

    /// The `chunked-prefill` fault: each sequence still prefilling takes one chunk; returns
    /// the tokens prefilled.
    fn take_prefill_chunks(&mut self) -> u64 {
        let mut prefill_tokens = 0u64;
        if let Some(chunk) = self.cfg.chunked_prefill {
            for seq in self
                .running
                .iter_mut()
                .filter(|s| s.prefill_left > 0 && !s.closed)
            {
                let take = seq.prefill_left.min(chunk.max(1));
                seq.prefill_left -= take;
                prefill_tokens += take;
            }
        }
        prefill_tokens
    }

    /// This step's decode shape (preempted sequences hold no KV and are not decoded).
    fn decode_shape(&self) -> StepShape {
        let decoding = || self.running.iter().filter(|s| !s.preempted);
        let active = decoding().count().max(1);
        let resident_now: u64 = decoding().map(Seq::resident).sum();
        let mean_context = decoding().map(|s| s.prompt_tokens).sum::<u64>() / active as u64;
        self.cfg
            .model
            .step_shape(active, resident_now, mean_context)
    }

    /// Costs this step (jittered decode, prefill, the `stall-every` pause) and moves the
    /// deadline on by it.
    fn advance_deadline(&mut self, shape: &StepShape, prefill_tokens: u64) {
        let mut step = shape.step_time * self.cfg.jitter.sample(&mut self.rng)
            + self.cfg.model.prefill_time(prefill_tokens);
        self.steps += 1;
        if let Some((every, pause)) = self.cfg.stall_every
            && self.steps.is_multiple_of(every.max(1))
        {
            // Fault `stall-every`: the whole engine pauses, every stream with it.
            step += pause;
        }
        self.deadline += Duration::from_secs_f64(step.max(0.0));
    }

    /// Waits for the step's deadline, or runs on when it is due within a millisecond
    /// ("catching up"): the tokens of such steps are coalesced per sequence and released at
    /// least every millisecond and before any sleep. `Continue(catching_up)`, or `Break` when
    /// `cancel` fired.
    async fn pace_step(&mut self, cancel: &CancellationToken) -> ControlFlow<(), bool> {
        let now = Instant::now();
        let catching_up = self.deadline <= now + Duration::from_millis(1);
        if !catching_up {
            for seq in self.running.iter_mut().filter(|s| s.chunk_due) {
                seq.release(None);
            }
            self.last_release = now;
            if wait_until(self.deadline, cancel).await {
                return ControlFlow::Break(());
            }
        } else {
            if self.deadline + MAX_LAG < now {
                self.deadline = now - MAX_LAG;
            }
            if self.zero_time || now >= self.last_release + Duration::from_millis(1) {
                for seq in self.running.iter_mut().filter(|s| s.hold == 0) {
                    seq.release(None);
                }
                self.last_release = now;
                tokio::task::yield_now().await;
                if cancel.is_cancelled() {
                    return ControlFlow::Break(());
                }
            }
        }
        ControlFlow::Continue(catching_up)
    }

    /// The zero-time engine: waits until every client has taken its backlog. `Break` when
    /// `cancel` fired.
    async fn send_backlogs_paced(&mut self, cancel: &CancellationToken) -> ControlFlow<()> {
        for seq in self.running.iter_mut() {
            while let Some(ev) = seq.backlog.pop_front() {
                tokio::select! {
                    _ = cancel.cancelled() => return ControlFlow::Break(()),
                    sent = seq.events.send(ev) => if sent.is_err() {
                        seq.closed = true;
                        seq.backlog.clear();
                    },
                }
            }
        }
        ControlFlow::Continue(())
    }

    /// Gives every decoding sequence its tokens for this step (the first from prefill, then
    /// 1 or 1 + accepted drafts) and releases them at its chunk boundaries.
    fn emit_tokens(&mut self, shape: &StepShape, catching_up: bool) {
        let counters = &self.counters;
        for seq in self.running.iter_mut() {
            if seq.closed {
                continue;
            }
            seq.flush();
            if seq.closed || seq.preempted || seq.prefill_left > 0 {
                continue;
            }
            let remaining = seq.target - seq.generated;
            // the first token (from prefill) is a chunk of its own
            let first = seq.fresh;
            if first {
                let took = self.deadline.saturating_duration_since(seq.admitted_at);
                add(&counters.prefill_time_ns, took.as_nanos() as u64);
                add(&counters.prefill_requests, 1);
            }
            let tokens = if seq.fresh || shape.acceptance.is_empty() {
                seq.fresh = false;
                1
            } else {
                speculative_step(
                    &mut self.rng,
                    &mut self.uniforms,
                    counters,
                    &shape.acceptance,
                    remaining,
                )
            };
            seq.generated += tokens;
            seq.pending += tokens;
            let finish = seq.finish_if_done();
            add(&counters.generation_tokens, tokens);
            let chunk_ends = first || seq.chunk_clock.tick(shape.steps_per_chunk);
            let held = seq.itl_tail_holds(self.cfg.itl_tail, first, finish, tokens);
            let chunk_ends = seq.chunk_ends_around_hold(held, chunk_ends);
            if finish.is_some() || self.zero_time || (chunk_ends && !catching_up) {
                seq.release(finish);
            } else if chunk_ends {
                seq.chunk_due = true;
            }
        }
    }

    /// The `preempt` fault: while the running sequences' KV outgrows what the engine really
    /// has, preempts the newest (its tokens so far are released first).
    fn preempt_over_budget(&mut self) {
        let Some(budget) = self.cfg.preempt_budget else {
            return;
        };
        let running = &mut self.running;
        loop {
            let live = |s: &&mut Seq| !s.preempted && !s.closed && s.generated < s.target;
            if kv_used(running) <= budget || running.iter_mut().filter(live).count() < 2 {
                break;
            }
            let Some(victim) = running.iter_mut().filter(live).max_by_key(|s| s.admitted) else {
                break;
            };
            victim.release(None);
            victim.preempted = true;
            add(&self.counters.preemptions, 1);
        }
    }

    /// Retires finished and abandoned sequences, freeing their KV; a finished sequence whose
    /// client lags behind gets its remaining events from a small flushing task.
    fn retire_finished(&mut self) {
        let mut i = 0;
        while i < self.running.len() {
            let s = &self.running[i];
            if s.closed || s.generated >= s.target {
                let s = self.running.swap_remove(i);
                self.reserved -= s.reservation;
                if !s.closed {
                    add(&self.counters.requests_finished, 1);
                    if !s.backlog.is_empty() {
                        send_backlog_later(s.events, s.backlog);
                    }
                }
            } else {
                i += 1;
            }
        }
        set(&self.counters.running, self.running.len() as u64);
        set(&self.counters.kv_reserved, self.reserved);
    }
}

/// KV tokens the running sequences really hold (preempted ones hold none).
fn kv_used(running: &[Seq]) -> u64 {
    running
        .iter()
        .filter(|s| !s.preempted)
        .map(Seq::resident)
        .sum()
}

/// One speculative decoding step: draws each draft position's acceptance, counts the drafts
/// and what was accepted; returns the tokens emitted (at most `remaining`).
fn speculative_step(
    rng: &mut StdRng,
    uniforms: &mut [f64],
    counters: &EngineCounters,
    acceptance: &[f64],
    remaining: u64,
) -> u64 {
    uniforms.fill_with(|| rng.random::<f64>());
    let s = spec_step(acceptance, uniforms, remaining);
    add(&counters.spec_drafts, 1);
    add(&counters.spec_draft_tokens, s.drafted);
    add(&counters.spec_accepted, s.accepted);
    for pos in counters
        .spec_accepted_per_pos
        .iter()
        .take(s.accepted as usize)
    {
        add(pos, 1);
    }
    s.emitted
}

/// Hands a retired sequence's unsent events to a task of their own, so a lagging client
/// still gets them without holding the engine up.
fn send_backlog_later(events: mpsc::Sender<StepEvent>, backlog: VecDeque<StepEvent>) {
    tokio::spawn(async move {
        for ev in backlog {
            if events.send(ev).await.is_err() {
                break;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::profile::{SimProfile, SpecDecodeProfile};
    use std::sync::atomic::Ordering;

    /// The `test` profile's engine without jitter, caching or any fault: tests change the
    /// one field they exercise.
    fn plain(p: &SimProfile) -> EngineConfig {
        EngineConfig {
            model: SpeedModel::new(p, 1.0, 1.0, 1.0),
            jitter: Jitter::new(0.0),
            seed: 1,
            prefix_cache: None,
            preempt_budget: None,
            max_running: None,
            stall_every: None,
            chunked_prefill: None,
            itl_tail: None,
            admit_delay: None,
        }
    }

    /// Starts an engine with `cfg`.
    fn start(cfg: EngineConfig) -> (EngineHandle, Arc<EngineCounters>, CancellationToken) {
        let counters = Arc::new(EngineCounters::new(cfg.model.draft_acceptance.len()));
        let (handle, rx) = channel();
        let cancel = CancellationToken::new();
        spawn_engine(cfg, counters.clone(), rx, cancel.clone());
        (handle, counters, cancel)
    }

    fn engine(
        budget: u64,
        spec: Vec<f64>,
    ) -> (EngineHandle, Arc<EngineCounters>, CancellationToken) {
        let mut p = SimProfile::named("test").unwrap();
        p.kv_budget_tokens = budget;
        p.spec_decode = (!spec.is_empty()).then_some(SpecDecodeProfile { acceptance: spec });
        start(plain(&p))
    }

    fn submit(h: &EngineHandle, prompt: u64, max: u64, stop_at: u64) -> mpsc::Receiver<StepEvent> {
        let (tx, rx) = mpsc::channel(EVENT_CHANNEL_CAPACITY);
        h.submit(EngineRequest {
            prompt_tokens: prompt,
            max_tokens: max,
            stop_at,
            prefix_blocks: Vec::new(),
            events: tx,
        })
        .unwrap();
        rx
    }

    #[tokio::test]
    async fn queue_waits_for_kv_and_counts_every_token() {
        // budget fits two requests of (100 + 100) tokens, not three
        let (h, counters, cancel) = engine(500, Vec::new());
        let rxs: Vec<_> = (0..3).map(|_| submit(&h, 100, 100, 100)).collect();
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert_eq!(counters.running.load(Ordering::Relaxed), 2);
        assert_eq!(counters.waiting.load(Ordering::Relaxed), 1);
        let mut total = 0;
        for rx in rxs {
            let (n, finish) = drain_until_finish(rx).await;
            assert_eq!(n, 100);
            assert_eq!(finish, Some(FinishReason::Length));
            total += n;
        }
        assert_eq!(counters.generation_tokens.load(Ordering::Relaxed), total);
        assert_eq!(counters.prompt_tokens.load(Ordering::Relaxed), 300);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(counters.kv_reserved.load(Ordering::Relaxed), 0);
        assert_eq!(counters.running.load(Ordering::Relaxed), 0);
        cancel.cancel();
    }

    async fn drain_until_finish(mut rx: mpsc::Receiver<StepEvent>) -> (u64, Option<FinishReason>) {
        let mut n = 0;
        while let Some(ev) = rx.recv().await {
            n += ev.tokens;
            if ev.finish.is_some() {
                return (n, ev.finish);
            }
        }
        (n, None)
    }

    /// The `preempt` fault: four sequences of 10 + 128 tokens outgrow a real KV of 250 tokens;
    /// the newest are preempted and resumed, every sequence still gets all its tokens, and the
    /// counter counts the preemptions. Within budget nothing is preempted.
    #[tokio::test]
    async fn preempted_sequences_resume_and_are_counted() {
        for (budget, preempts) in [(250u64, true), (10_000, false)] {
            let p = SimProfile::named("test").unwrap();
            let (h, counters, cancel) = start(EngineConfig {
                preempt_budget: Some(budget),
                ..plain(&p)
            });
            let rxs: Vec<_> = (0..4).map(|_| submit(&h, 10, 128, 128)).collect();
            for rx in rxs {
                let (n, finish) = drain_until_finish(rx).await;
                assert_eq!((n, finish), (128, Some(FinishReason::Length)));
            }
            assert_eq!(counters.generation_tokens.load(Ordering::Relaxed), 512);
            let n = counters.preemptions.load(Ordering::Relaxed);
            assert_eq!(n > 0, preempts, "budget {budget}: {n} preemptions");
            cancel.cancel();
        }
    }

    fn engine_with(
        chunked_prefill: Option<u64>,
        itl_tail: Option<(u64, u64)>,
    ) -> (EngineHandle, Arc<EngineCounters>, CancellationToken) {
        let p = SimProfile::named("test").unwrap();
        start(EngineConfig {
            chunked_prefill,
            itl_tail,
            ..plain(&p)
        })
    }

    /// The `itl-tail` fault: every 50th token's gap is stretched by holding the stream's
    /// tokens one step and sending them together, so at least one event carries two tokens
    /// per 50 (steps that catch up may coalesce more), and no token is lost.
    #[tokio::test]
    async fn itl_tail_holds_tokens_back_without_losing_any() {
        let (h, counters, cancel) = engine_with(None, Some((50, 2)));
        let mut rx = submit(&h, 10, 400, 400);
        let (mut total, mut multi) = (0, 0);
        while let Some(ev) = rx.recv().await {
            total += ev.tokens;
            multi += u64::from(ev.tokens >= 2);
            if ev.finish.is_some() {
                break;
            }
        }
        assert_eq!(total, 400);
        assert!(multi >= 7, "{multi} events of two tokens or more");
        assert_eq!(counters.generation_tokens.load(Ordering::Relaxed), 400);
        cancel.cancel();
    }

    /// The `chunked-prefill` fault: a 1,000-token prompt arriving while another stream decodes
    /// prefills 100 tokens a step, so the decoding stream gets a token in each of the 10 steps
    /// before the arrival's first token; without the fault the arrival prefills in one step.
    /// The prefill histogram counts both requests' first tokens.
    #[tokio::test]
    async fn chunked_prefill_delays_an_arrival_by_a_step_per_chunk() {
        for (chunk, chunked) in [(Some(100), true), (None, false)] {
            let (h, counters, cancel) = engine_with(chunk, None);
            let mut a = submit(&h, 10, 10_000, 10_000);
            let first = a.recv().await.unwrap();
            assert_eq!(first.tokens, 1);
            while a.try_recv().is_ok() {}
            let mut b = submit(&h, 1000, 4, 4);
            b.recv().await.unwrap();
            let mut decoded_meanwhile = 0;
            while let Ok(ev) = a.try_recv() {
                decoded_meanwhile += ev.tokens;
            }
            if chunked {
                assert!(decoded_meanwhile >= 9, "{decoded_meanwhile}");
            } else {
                assert!(decoded_meanwhile <= 3, "{decoded_meanwhile}");
            }
            assert_eq!(counters.prefill_requests.load(Ordering::Relaxed), 2);
            assert!(counters.prefill_time_ns.load(Ordering::Relaxed) > 0);
            cancel.cancel();
        }
    }

    /// The `admit-delay` fault: an arrival while another stream decodes gets its first token
    /// no sooner than the delay (a lower bound: a loaded machine only makes it later), and the
    /// decoding stream keeps getting tokens meanwhile.
    #[tokio::test]
    async fn admit_delay_holds_arrivals_back_while_others_decode() {
        let p = SimProfile::named("test").unwrap();
        let (h, _counters, cancel) = start(EngineConfig {
            admit_delay: Some(Duration::from_millis(100)),
            ..plain(&p)
        });
        // Alone: admitted at once (it is the one decoding afterwards).
        let mut a = submit(&h, 10, 10_000, 10_000);
        a.recv().await.unwrap();
        while a.try_recv().is_ok() {}
        let sent = Instant::now();
        let mut b = submit(&h, 10, 4, 4);
        b.recv().await.unwrap();
        assert!(
            sent.elapsed() >= Duration::from_millis(100),
            "{:?}",
            sent.elapsed()
        );
        let mut decoded_meanwhile = 0;
        while let Ok(ev) = a.try_recv() {
            decoded_meanwhile += ev.tokens;
        }
        assert!(decoded_meanwhile > 0);
        cancel.cancel();
    }

    #[tokio::test]
    async fn eos_and_spec_decoding_accounting() {
        let (h, counters, cancel) = engine(1_000_000, vec![0.7, 0.45]);
        let (n, finish) = drain_until_finish(submit(&h, 10, 50, 20)).await;
        assert_eq!((n, finish), (20, Some(FinishReason::Stop)));
        let drafts = counters.spec_drafts.load(Ordering::Relaxed);
        let accepted = counters.spec_accepted.load(Ordering::Relaxed);
        assert_eq!(1 + drafts + accepted, 20);
        assert_eq!(
            counters.spec_draft_tokens.load(Ordering::Relaxed),
            2 * drafts
        );
        let per_pos: u64 = counters
            .spec_accepted_per_pos
            .iter()
            .map(|a| a.load(Ordering::Relaxed))
            .sum();
        assert_eq!(per_pos, accepted);
        // a dropped client frees its slot
        drop(submit(&h, 10, 1000, 1000));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(counters.running.load(Ordering::Relaxed), 0);
        cancel.cancel();
    }
}
