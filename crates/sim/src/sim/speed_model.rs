//! The speed model of continuous batching, as pure functions: step time, prefill time, KV
//! reservations and FIFO admission. The scheduler task only applies these to its state, so
//! the model can be unit-tested (and calibrated against the seed) without a server.

use rand::Rng;
#[cfg(test)]
use rand::RngExt;
use rand_distr::{Distribution, LogNormal};

use super::profile::{CellCalibration, SimProfile};

/// Step-time coefficients plus the run-wide multipliers (slowdown, boot factor, time scale).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SpeedModel {
    /// Fixed step cost, ms.
    pub(crate) base_ms: f64,
    /// Step cost per running sequence, ms.
    pub(crate) per_seq_ms: f64,
    /// Step cost per resident KV token, µs.
    pub(crate) per_kv_token_us: f64,
    /// Prefill speed, prompt tokens per engine second (0 = instantaneous).
    pub(crate) prefill_tps: f64,
    /// Prefill time is multiplied by this (the `prefill-slowdown` fault; 1 = as profiled).
    pub(crate) prefill_factor: f64,
    /// Decode steps of a batch whose mean prompt context is at least `.0` tokens last `.1`
    /// times longer (the `long-context-slowdown` fault; `None` = as profiled).
    pub(crate) long_context_slowdown: Option<(u64, f64)>,
    /// Injected regression: multiplies every engine time.
    pub(crate) slowdown: f64,
    /// Per-process speed factor (boot noise), multiplies every engine time.
    pub(crate) boot_factor: f64,
    /// Engine times are divided by this (simulate long matrices quickly).
    pub(crate) time_scale: f64,
    /// KV budget in tokens.
    pub(crate) kv_budget_tokens: u64,
    /// KV tokens reserved per prompt/output token.
    pub(crate) kv_cost_per_token: f64,
    /// Per-position draft acceptance of the profile (empty = no speculative decoding).
    pub(crate) draft_acceptance: Vec<f64>,
    /// Per-cell calibration (empty = the step coefficients alone).
    pub(crate) cells: Vec<CellCalibration>,
}

/// What one engine step of the current batch looks like.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StepShape {
    /// Wall seconds of the decode step, before jitter (scaled like [`SpeedModel::step_time`]).
    pub(crate) step_time: f64,
    /// Per-position draft acceptance probabilities (empty without speculative decoding).
    pub(crate) acceptance: Vec<f64>,
    /// Mean engine steps per streamed chunk (>= 1).
    pub(crate) steps_per_chunk: f64,
}

/// Expected tokens one step emits with these per-position acceptance probabilities:
/// `1 + p1 + p1*p2 + ...` (drafting stops at the first rejection).
pub(crate) fn tokens_per_step(acceptance: &[f64]) -> f64 {
    let mut reach = 1.0;
    acceptance.iter().fold(1.0, |sum, p| {
        reach *= p;
        sum + reach
    })
}

/// `positions` equal per-position probabilities whose acceptance rate (accepted / drafted,
/// with drafting stopped at the first rejection) is `rate`: solves `(p + p^2 + ... + p^k) / k
/// = rate` by bisection.
pub(crate) fn acceptance_for_rate(rate: f64, positions: usize) -> Vec<f64> {
    if positions == 0 {
        return Vec::new();
    }
    let rate = rate.clamp(0.0, 1.0);
    let mean = |p: f64| (tokens_per_step(&vec![p; positions]) - 1.0) / positions as f64;
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..60 {
        let mid = (lo + hi) / 2.0;
        if mean(mid) < rate {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    vec![(lo + hi) / 2.0; positions]
}

/// A stream's chunk boundaries: with `s` steps per chunk, a chunk ends at the steps where the
/// running step count crosses a multiple of `s`, so chunks carry `s` steps on average.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct ChunkClock {
    phase: f64,
}

impl ChunkClock {
    /// Counts one step; true when a chunk ends with it.
    pub(crate) fn tick(&mut self, steps_per_chunk: f64) -> bool {
        self.phase += 1.0;
        if self.phase + 1e-9 >= steps_per_chunk {
            self.phase = (self.phase - steps_per_chunk).max(0.0);
            true
        } else {
            false
        }
    }
}

/// What a steady cell produced over many engine steps (see [`SpeedModel::simulate_cell`]).
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg(test)]
pub(crate) struct CellFigures {
    /// Aggregate output tokens per engine second.
    pub(crate) tokens_per_s: f64,
    /// Output tokens per streamed chunk.
    pub(crate) tokens_per_chunk: f64,
    /// Accepted / drafted tokens (0 without speculative decoding).
    pub(crate) acceptance: f64,
}

impl SpeedModel {
    /// The model of a profile with the given multipliers.
    pub(crate) fn new(
        profile: &SimProfile,
        slowdown: f64,
        time_scale: f64,
        boot_factor: f64,
    ) -> Self {
        SpeedModel {
            base_ms: profile.base_ms,
            per_seq_ms: profile.per_seq_ms,
            per_kv_token_us: profile.per_kv_token_us,
            prefill_tps: profile.prefill_tps,
            prefill_factor: 1.0,
            long_context_slowdown: None,
            slowdown,
            boot_factor,
            time_scale,
            kv_budget_tokens: profile.kv_budget_tokens,
            kv_cost_per_token: profile.kv_cost_per_token,
            draft_acceptance: profile
                .spec_decode
                .as_ref()
                .map(|s| s.acceptance.clone())
                .unwrap_or_default(),
            cells: profile.cells.clone(),
        }
    }

    /// Whether every step takes zero time (the `zero` profile): the engine is then paced by
    /// its clients instead of a clock.
    pub(crate) fn is_zero_time(&self) -> bool {
        self.base_ms == 0.0 && self.per_seq_ms == 0.0 && self.per_kv_token_us == 0.0
    }

    fn scale(&self) -> f64 {
        self.slowdown * self.boot_factor / self.time_scale
    }

    /// Wall seconds of one decode step with `n_running` sequences holding `resident_kv_tokens`
    /// tokens of KV, before jitter:
    /// `(base_ms + per_seq_ms*n + per_kv_token_us*kv/1000) / 1000 * slowdown * boot / time_scale`.
    pub(crate) fn step_time(&self, n_running: usize, resident_kv_tokens: u64) -> f64 {
        let ms = self.base_ms
            + self.per_seq_ms * n_running as f64
            + self.per_kv_token_us * resident_kv_tokens as f64 / 1000.0;
        ms / 1000.0 * self.scale()
    }

    /// The step of a batch of `n_running` sequences of `mean_context` prompt tokens holding
    /// `resident_kv_tokens` of KV. Without calibrated cells: [`Self::step_time`], the
    /// profile's acceptance and one chunk per step. With them: the row of the nearest context
    /// (log scale) is interpolated linearly in the batch size (clamped at the row's ends; below
    /// its smallest concurrency the rate scales with the batch) for the aggregate rate, the
    /// acceptance rate and tokens per chunk, and the step lasts `n * tokens_per_step / rate`.
    pub(crate) fn step_shape(
        &self,
        n_running: usize,
        resident_kv_tokens: u64,
        mean_context: u64,
    ) -> StepShape {
        let n = n_running.max(1) as f64;
        let long_context = match self.long_context_slowdown {
            Some((tokens, factor)) if mean_context >= tokens => factor,
            _ => 1.0,
        };
        let Some(row) = self.cell_row(mean_context) else {
            return StepShape {
                step_time: self.step_time(n_running, resident_kv_tokens) * long_context,
                acceptance: self.draft_acceptance.clone(),
                steps_per_chunk: 1.0,
            };
        };
        let first = row[0];
        let last = row[row.len() - 1];
        let (lo, hi, w) = if n <= first.concurrency as f64 {
            (first, first, 0.0)
        } else if n >= last.concurrency as f64 {
            (last, last, 0.0)
        } else {
            let i = row
                .iter()
                .position(|c| c.concurrency as f64 >= n)
                .unwrap_or(row.len() - 1);
            let (a, b) = (row[i - 1], row[i]);
            let w = (n - a.concurrency as f64) / (b.concurrency as f64 - a.concurrency as f64);
            (a, b, w)
        };
        let mix = |x: f64, y: f64| x + (y - x) * w;
        let mut rate = mix(lo.tokens_per_s, hi.tokens_per_s);
        if n < first.concurrency as f64 {
            rate *= n / first.concurrency as f64;
        }
        let acceptance = match (lo.acceptance, hi.acceptance) {
            (Some(a), Some(b)) if !self.draft_acceptance.is_empty() => {
                acceptance_for_rate(mix(a, b), self.draft_acceptance.len())
            }
            _ => self.draft_acceptance.clone(),
        };
        let per_step = tokens_per_step(&acceptance);
        let steps_per_chunk = match (lo.tokens_per_chunk, hi.tokens_per_chunk) {
            (Some(a), Some(b)) => (mix(a, b) / per_step).max(1.0),
            _ => 1.0,
        };
        StepShape {
            step_time: n * per_step / rate * self.scale() * long_context,
            acceptance,
            steps_per_chunk,
        }
    }

    /// The calibrated cells of the context nearest `context` (log scale), by concurrency.
    fn cell_row(&self, context: u64) -> Option<Vec<&CellCalibration>> {
        let distance = |c: &CellCalibration| {
            ((c.context.max(1) as f64).ln() - (context.max(1) as f64).ln()).abs()
        };
        let nearest = self
            .cells
            .iter()
            .min_by(|a, b| distance(a).total_cmp(&distance(b)))?
            .context;
        let mut row: Vec<&CellCalibration> =
            self.cells.iter().filter(|c| c.context == nearest).collect();
        row.sort_by_key(|c| c.concurrency);
        Some(row)
    }

    /// Runs `steps` steady engine steps of `c` streams of `context` prompt tokens (no prefill,
    /// no restarts) with the same step shape, draft draws, jitter and chunk clock the engine
    /// task uses, and reports what a client would measure. Pure and seeded: used to check a
    /// profile against the run it was calibrated to.
    #[cfg(test)]
    pub(crate) fn simulate_cell<R: Rng + ?Sized>(
        &self,
        c: usize,
        context: u64,
        steps: usize,
        jitter: &Jitter,
        rng: &mut R,
    ) -> CellFigures {
        let mut generated = vec![0u64; c];
        let mut clocks = vec![ChunkClock::default(); c];
        let (mut time, mut tokens, mut chunks, mut drafted, mut accepted) =
            (0.0, 0u64, 0u64, 0u64, 0u64);
        let mut uniform = Vec::new();
        for _ in 0..steps {
            let resident = c as u64 * context + generated.iter().sum::<u64>();
            let shape = self.step_shape(c, resident, context);
            time += shape.step_time * jitter.sample(rng);
            for (g, clock) in generated.iter_mut().zip(clocks.iter_mut()) {
                uniform.clear();
                uniform.extend((0..shape.acceptance.len()).map(|_| rng.random::<f64>()));
                let s = spec_step(&shape.acceptance, &uniform, u64::MAX);
                *g += s.emitted;
                tokens += s.emitted;
                drafted += s.drafted;
                accepted += s.accepted;
                if clock.tick(shape.steps_per_chunk) {
                    chunks += 1;
                }
            }
        }
        CellFigures {
            tokens_per_s: tokens as f64 / time * self.scale(),
            tokens_per_chunk: tokens as f64 / chunks.max(1) as f64,
            acceptance: if drafted == 0 {
                0.0
            } else {
                accepted as f64 / drafted as f64
            },
        }
    }

    /// Wall seconds to prefill `prompt_tokens` (scaled like step time, and by the
    /// `prefill-slowdown` factor).
    pub(crate) fn prefill_time(&self, prompt_tokens: u64) -> f64 {
        if self.prefill_tps <= 0.0 {
            return 0.0;
        }
        prompt_tokens as f64 / self.prefill_tps * self.prefill_factor * self.scale()
    }

    /// KV tokens a request reserves for its whole life: `(prompt + max_tokens) * cost`, rounded up.
    pub(crate) fn reservation(&self, prompt_tokens: u64, max_tokens: u64) -> u64 {
        ((prompt_tokens + max_tokens) as f64 * self.kv_cost_per_token).ceil() as u64
    }

    /// How many requests of the FIFO queue `queued` (their reservations, front first) can be
    /// admitted when `reserved` KV tokens are already taken. Admission stops at the first
    /// request that does not fit (strict FIFO: no overtaking).
    pub(crate) fn admit_count(
        &self,
        reserved: u64,
        queued: impl IntoIterator<Item = u64>,
    ) -> usize {
        let mut used = reserved;
        queued
            .into_iter()
            .take_while(|r| {
                used += r;
                used <= self.kv_budget_tokens
            })
            .count()
    }

    /// Steady-state aggregate tokens per engine second with `c` sequences of `context` prompt
    /// tokens, each `avg_generated` tokens into its output, at the expected tokens per step of
    /// the batch's [`StepShape`]; ignores prefill and jitter. Used by the tests that pin the
    /// profiles' calibration.
    #[cfg(test)]
    pub(crate) fn steady_tps(&self, c: usize, context: u64, avg_generated: u64) -> f64 {
        let resident = c as u64 * (context + avg_generated);
        let shape = self.step_shape(c, resident, context);
        c as f64 * tokens_per_step(&shape.acceptance) / shape.step_time * self.scale()
    }
}

/// A multiplicative log-normal factor with mean 1 and the given coefficient of variation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Jitter {
    dist: Option<LogNormal<f64>>,
}

impl Jitter {
    /// `cv` = 0 gives a constant 1.
    pub(crate) fn new(cv: f64) -> Self {
        if !(cv.is_finite() && cv > 0.0) {
            return Jitter { dist: None };
        }
        let sigma = (1.0 + cv * cv).ln().sqrt();
        Jitter {
            dist: LogNormal::new(-sigma * sigma / 2.0, sigma).ok(),
        }
    }

    /// One draw.
    pub(crate) fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        self.dist.map_or(1.0, |d| d.sample(rng))
    }
}

/// Outcome of one speculative-decoding step for one sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SpecStep {
    /// Tokens emitted this step (1 + accepted, capped by what the request still wants).
    pub(crate) emitted: u64,
    /// Draft tokens proposed (the number of draft positions).
    pub(crate) drafted: u64,
    /// Accepted draft tokens that were emitted.
    pub(crate) accepted: u64,
}

/// Spec-decode accounting for one step: `uniform[i]` decides position `i` (accepted when
/// `uniform[i] < acceptance[i]`), drafting stops at the first rejection, and the step never
/// emits more than `remaining` tokens.
pub(crate) fn spec_step(acceptance: &[f64], uniform: &[f64], remaining: u64) -> SpecStep {
    let accepted = acceptance
        .iter()
        .zip(uniform)
        .take_while(|(p, u)| u < p)
        .count() as u64;
    let emitted = (1 + accepted).min(remaining.max(1));
    SpecStep {
        emitted,
        drafted: acceptance.len() as u64,
        accepted: emitted - 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn ldb() -> SpeedModel {
        SpeedModel::new(&SimProfile::named("ldb-rtx5090").unwrap(), 1.0, 1.0, 1.0)
    }

    #[test]
    fn step_time_formula_and_multipliers() {
        let p = SimProfile::named("test").unwrap();
        let m = SpeedModel::new(&p, 1.0, 1.0, 1.0);
        // 5 + 1*4 + 0.01 * 100_000 / 1000 = 10 ms
        assert!((m.step_time(4, 100_000) - 0.010).abs() < 1e-12);
        let slow = SpeedModel::new(&p, 1.1, 10.0, 2.0);
        assert!((slow.step_time(4, 100_000) - 0.010 * 1.1 * 2.0 / 10.0).abs() < 1e-12);
        assert!((m.prefill_time(200_000) - 1.0).abs() < 1e-12);
        // The `prefill-slowdown` fault: prefill only, decode steps unchanged.
        for k in [4.0, 1.3] {
            let mut slow_prefill = m.clone();
            slow_prefill.prefill_factor = k;
            assert!((slow_prefill.prefill_time(200_000) - k).abs() < 1e-12);
            assert_eq!(slow_prefill.step_time(4, 100_000), m.step_time(4, 100_000));
        }
        // The `long-context-slowdown` fault: decode steps from its context on, nothing else.
        let mut long = m.clone();
        long.long_context_slowdown = Some((4096, 1.25));
        let step = |m: &SpeedModel, context| m.step_shape(4, 100_000, context).step_time;
        assert_eq!(step(&long, 1024), step(&m, 1024));
        assert!((step(&long, 8192) - 1.25 * step(&m, 8192)).abs() < 1e-15);
        assert_eq!(long.prefill_time(200_000), m.prefill_time(200_000));
        assert!(SpeedModel::new(&SimProfile::named("zero").unwrap(), 1.0, 1.0, 1.0).is_zero_time());
    }

    #[test]
    fn fifo_admission_stops_at_first_misfit() {
        let m = SpeedModel::new(&SimProfile::named("test").unwrap(), 1.0, 1.0, 1.0);
        assert_eq!(m.admit_count(0, [100_000, 100_000, 1]), 2);
        assert_eq!(m.admit_count(150_000, [60_000, 1]), 0);
        assert_eq!(m.admit_count(0, []), 0);
    }

    /// The seed's capacity-limited cells: C=12@64k admits 9, C=8@128k and C=12@128k admit 5,
    /// every other cell of the seed matrix (max_tokens 2048) admits all its streams.
    #[test]
    fn ldb_profile_admits_like_the_seed() {
        let m = ldb();
        for context in [8192u64, 32768, 65536, 131072] {
            for c in [1usize, 2, 4, 8, 12] {
                let r = m.reservation(context, 2048);
                let admitted = m.admit_count(0, std::iter::repeat_n(r, c));
                let expected = match (c, context) {
                    (12, 65536) => 9,
                    (8, 131072) | (12, 131072) => 5,
                    _ => c,
                };
                assert_eq!(admitted, expected, "C={c} ctx={context}");
            }
        }
        // 8k and 32k with an actual (slightly larger) prompt still fit
        let r = m.reservation(65_600, 2048);
        assert_eq!(m.admit_count(0, std::iter::repeat_n(r, 12)), 9);
    }

    fn seed_fixture() -> serde_json::Value {
        let path = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("tests/fixtures/llm-decode-bench-0.4.30-vllm-rtx5090-sustained.json");
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    /// The `ldb-rtx5090` profile against the seed it was calibrated to, cell by cell (every
    /// cell the seed did not mark capacity-limited): tokens/s and tokens per streamed chunk
    /// within 5%, draft acceptance within 0.03, over 4,000 seeded steady steps with the
    /// profile's jitter. The seed's tokens per chunk is its chunk ITL over its token ITL.
    #[test]
    fn ldb_profile_matches_the_seed_per_cell() {
        let seed = seed_fixture();
        let profile = SimProfile::named("ldb-rtx5090").unwrap();
        let m = SpeedModel::new(&profile, 1.0, 1.0, 1.0);
        let nospec = SpeedModel::new(
            &SimProfile::named("ldb-rtx5090-nospec").unwrap(),
            1.0,
            1.0,
            1.0,
        );
        let jitter = Jitter::new(profile.jitter_cv);
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut compared = 0;
        for r in seed["results"].as_array().unwrap() {
            if r["capacity_limited"].as_bool().unwrap() {
                continue;
            }
            let f = |k: &str| r[k].as_f64().unwrap();
            let c = f("concurrency") as usize;
            let context = f("input_seq_len_avg") as u64;
            let tps = f("aggregate_tps");
            let tpc = f("chunk_inter_token_latency_avg") / f("inter_token_latency_avg");
            let acceptance = f("server_spec_accept_rate");
            let got = m.simulate_cell(c, context, 4000, &jitter, &mut rng);
            let at = format!("C={c} context={context}: sim {got:?}");
            assert!(
                (got.tokens_per_s / tps - 1.0).abs() < 0.05,
                "{at} vs {tps} tok/s"
            );
            assert!(
                (got.tokens_per_chunk / tpc - 1.0).abs() < 0.05,
                "{at} vs {tpc} tok/chunk"
            );
            assert!(
                (got.acceptance - acceptance).abs() < 0.03,
                "{at} vs {acceptance}"
            );
            // without speculative decoding: the same rates, one token per chunk
            let plain = nospec.simulate_cell(c, context, 4000, &jitter, &mut rng);
            assert!(
                (plain.tokens_per_s / tps - 1.0).abs() < 0.05,
                "{at}: nospec {plain:?}"
            );
            assert_eq!((plain.tokens_per_chunk, plain.acceptance), (1.0, 0.0));
            compared += 1;
        }
        assert_eq!(
            compared, 17,
            "the seed has 17 cells that were not capacity-limited"
        );
        // a 128k prompt takes about a minute
        let t = m.prefill_time(131_072);
        assert!((50.0..70.0).contains(&t), "{t}");
    }

    #[test]
    fn step_shape_interpolates_between_cells() {
        let m = ldb();
        let rate = |n: usize, ctx: u64| m.steady_tps(n, ctx, 0);
        // C=3 at 8k lies halfway between the seed's C=2 (70.2) and C=4 (101.3)
        assert!((rate(3, 8192) - (70.2 + 101.3) / 2.0).abs() < 1e-6);
        // beyond the row's largest concurrency the aggregate rate saturates
        assert!((rate(16, 8192) - 144.2).abs() < 1e-6);
        // 48k is nearer 64k than 32k on a log scale
        assert!((rate(1, 48_000) - 52.6).abs() < 1e-6);
        // the step lasts n * tokens_per_step / rate, and slowdown / time scale apply
        let shape = m.step_shape(4, 0, 8192);
        let per_step = tokens_per_step(&shape.acceptance);
        assert!((shape.step_time - 4.0 * per_step / 101.3).abs() < 1e-9);
        assert!((shape.steps_per_chunk - 2.67 / per_step).abs() < 1e-9);
        let slow = SpeedModel::new(&SimProfile::named("ldb-rtx5090").unwrap(), 1.1, 10.0, 1.0);
        assert!((slow.step_shape(4, 0, 8192).step_time / shape.step_time - 0.11).abs() < 1e-9);
        // without cells: the coefficients, the profile's acceptance, one chunk per step
        let t = SpeedModel::new(&SimProfile::named("test").unwrap(), 1.0, 1.0, 1.0);
        let s = t.step_shape(4, 100_000, 25_000);
        assert_eq!(s.step_time, t.step_time(4, 100_000));
        assert_eq!((s.acceptance.len(), s.steps_per_chunk), (0, 1.0));
    }

    #[test]
    fn acceptance_rate_and_chunk_clock() {
        for rate in [0.0, 0.26, 0.5, 0.75, 1.0] {
            let p = acceptance_for_rate(rate, 2);
            assert!(
                ((tokens_per_step(&p) - 1.0) / 2.0 - rate).abs() < 1e-9,
                "{rate}"
            );
        }
        assert!(acceptance_for_rate(0.5, 0).is_empty());
        assert!((tokens_per_step(&[0.7, 0.45]) - 2.015).abs() < 1e-12);
        let mut clock = ChunkClock::default();
        assert_eq!((0..300).filter(|_| clock.tick(1.5)).count(), 200);
        let mut clock = ChunkClock::default();
        assert!((0..10).all(|_| clock.tick(1.0)));
    }

    #[test]
    fn spec_step_stops_at_first_rejection_and_caps() {
        for (uniform, remaining, emitted, accepted) in [
            ([0.1, 0.2], 100, 3, 2),
            ([0.1, 0.9], 100, 2, 1),
            ([0.9, 0.1], 100, 1, 0),
            ([0.1, 0.2], 2, 2, 1),
        ] {
            let step = spec_step(&[0.7, 0.45], &uniform, remaining);
            let drafted = 2;
            assert_eq!(
                step,
                SpecStep {
                    emitted,
                    drafted,
                    accepted
                },
                "{uniform:?}"
            );
        }
    }

    #[test]
    fn jitter_has_mean_one_and_the_requested_cv() {
        let j = Jitter::new(0.1);
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let xs: Vec<f64> = (0..20_000).map(|_| j.sample(&mut rng)).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
        assert!((mean - 1.0).abs() < 0.01, "{mean}");
        assert!((var.sqrt() / mean - 0.1).abs() < 0.01);
        assert_eq!(Jitter::new(0.0).sample(&mut rng), 1.0);
    }
}
