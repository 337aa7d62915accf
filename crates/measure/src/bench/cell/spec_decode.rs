//! Speculative-decoding figures of a cell's window, from the engine's counters at its two
//! ends (vLLM; llama.cpp, whose counters move per finished request; TensorRT-LLM, which counts
//! draft and accepted tokens but no steps) or the mean accepted length gauge (SGLang).

use std::time::Instant;

use crate::bench::metrics::EngineState;
use infergate_schema::results::SpecDecodeStats;

/// Speculative-decoding figures over the window (formulas in `results::SpecDecodeStats`).
pub(super) fn spec_stats(
    s0: Option<&(Instant, EngineState)>,
    s1: Option<&(Instant, EngineState)>,
    output_tokens: u64,
    aggregate_tps: f64,
) -> Option<SpecDecodeStats> {
    let (a, b) = (&s0?.1, &s1?.1);
    if let (Some(x), Some(y)) = (&a.spec, &b.spec) {
        let drafts = (y.drafts - x.drafts).max(0.0);
        let draft_tokens = (y.draft_tokens - x.draft_tokens).max(0.0);
        let accepted = (y.accepted_tokens - x.accepted_tokens).max(0.0);
        let acceptance_rate = if draft_tokens > 0.0 {
            accepted / draft_tokens
        } else {
            0.0
        };
        let per_position_acceptance = |drafts: f64| {
            y.accepted_per_pos
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    (v - x.accepted_per_pos.get(i).copied().unwrap_or(0.0)).max(0.0) / drafts
                })
                .collect()
        };
        let stats = |drafts: f64, accept_len: f64, per_pos: Vec<f64>| SpecDecodeStats {
            drafts: drafts as u64,
            draft_tokens: draft_tokens as u64,
            accepted_tokens: accepted as u64,
            acceptance_rate,
            accept_len,
            steps_per_s: if accept_len > 0.0 {
                aggregate_tps / accept_len
            } else {
                0.0
            },
            per_position_acceptance: per_pos,
        };
        if drafts > 0.0 && y.per_request {
            // The differences cover the requests that finished in the window, not the
            // window's tokens: the engine's own per-step mean, 1 + accepted / steps
            // (llama.cpp's "mean len").
            return Some(stats(
                drafts,
                1.0 + accepted / drafts,
                per_position_acceptance(drafts),
            ));
        }
        if drafts > 0.0 {
            let out = output_tokens as f64;
            let engine_steps = drafts + (out - (accepted + drafts)).max(0.0);
            let accept_len = if engine_steps > 0.0 {
                out / engine_steps
            } else {
                0.0
            };
            return Some(stats(drafts, accept_len, per_position_acceptance(drafts)));
        }
        if draft_tokens > 0.0
            && let Some(len) = b.spec_accept_length_gauge
        {
            // Tokens counted but no steps (TensorRT-LLM): the acceptance rate from the
            // counters, the accepted length from the engine's gauge.
            return Some(stats(0.0, len, Vec::new()));
        }
    }
    // SGLang reports only the mean accepted length as a gauge.
    let len = b.spec_accept_length_gauge?;
    Some(SpecDecodeStats {
        drafts: 0,
        draft_tokens: 0,
        accepted_tokens: 0,
        acceptance_rate: 0.0,
        accept_len: len,
        steps_per_s: aggregate_tps / len,
        per_position_acceptance: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::metrics::SpecCounters;

    /// An engine state with these cumulative spec-decode counters.
    fn state(drafts: f64, draft_tokens: f64, accepted: f64, per_pos: Vec<f64>) -> EngineState {
        EngineState {
            spec: Some(SpecCounters {
                drafts,
                draft_tokens,
                accepted_tokens: accepted,
                accepted_per_pos: per_pos,
                per_request: false,
            }),
            ..EngineState::default()
        }
    }

    /// [`spec_stats`] between two states read at the same instant.
    fn between(a: EngineState, b: EngineState, out: u64, tps: f64) -> Option<SpecDecodeStats> {
        let t = Instant::now();
        spec_stats(Some(&(t, a)), Some(&(t, b)), out, tps)
    }

    #[test]
    fn spec_formulas() {
        let st = |d: f64, dt: f64, a: f64| state(d, dt, a, vec![a * 0.6, a * 0.4]);
        let s = between(st(100.0, 200.0, 50.0), st(200.0, 400.0, 150.0), 300, 150.0).unwrap();
        // steps = 100 + max(0, 300 - (100 + 100)) = 200; accept_len = 1.5; steps/s = 100.
        assert_eq!(s.drafts, 100);
        assert!((s.accept_len - 1.5).abs() < 1e-9);
        assert!((s.steps_per_s - 100.0).abs() < 1e-9);
        assert!((s.acceptance_rate - 0.5).abs() < 1e-9);
        assert!((s.per_position_acceptance[0] - 0.6).abs() < 1e-9);
    }

    #[test]
    fn per_request_counters_give_the_engines_own_mean_length() {
        // llama.cpp: 40 verification steps, 120 drafted, 60 accepted among the requests that
        // finished in the window; the window's own token count does not enter.
        let st = |d: f64, dt: f64, a: f64| {
            let mut s = state(d, dt, a, vec![a * 0.5]);
            s.spec.as_mut().unwrap().per_request = true;
            s
        };
        let s = between(st(10.0, 30.0, 15.0), st(50.0, 150.0, 75.0), 9999, 100.0).unwrap();
        assert_eq!((s.drafts, s.draft_tokens, s.accepted_tokens), (40, 120, 60));
        assert!((s.accept_len - 2.5).abs() < 1e-9);
        assert!((s.acceptance_rate - 0.5).abs() < 1e-9);
        assert!((s.steps_per_s - 40.0).abs() < 1e-9);
        assert!((s.per_position_acceptance[0] - 0.75).abs() < 1e-9);
        // No request finished in the window: no figure, not a zero one.
        assert!(between(st(10.0, 30.0, 15.0), st(10.0, 30.0, 15.0), 50, 1.0).is_none());
    }

    #[test]
    fn token_counters_without_steps_take_the_length_gauge() {
        // TensorRT-LLM: draft/accepted tokens counted per iteration, no step count.
        let st = |dt: f64, a: f64, gauge: f64| EngineState {
            spec_accept_length_gauge: Some(gauge),
            ..state(0.0, dt, a, Vec::new())
        };
        let s = between(st(300.0, 100.0, 1.9), st(600.0, 280.0, 2.2), 500, 110.0).unwrap();
        assert_eq!((s.drafts, s.draft_tokens, s.accepted_tokens), (0, 300, 180));
        assert!((s.acceptance_rate - 0.6).abs() < 1e-9);
        assert!((s.accept_len - 2.2).abs() < 1e-9);
        assert!((s.steps_per_s - 50.0).abs() < 1e-9);
    }
}
