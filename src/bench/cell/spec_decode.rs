//! Speculative-decoding figures of a cell's window, from the engine's counters at its two
//! ends (vLLM) or the mean accepted length gauge (SGLang).

use std::time::Instant;

use crate::bench::metrics::EngineState;
use crate::results::SpecDecodeStats;

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
        if drafts <= 0.0 {
            return None;
        }
        let draft_tokens = (y.draft_tokens - x.draft_tokens).max(0.0);
        let accepted = (y.accepted_tokens - x.accepted_tokens).max(0.0);
        let out = output_tokens as f64;
        let engine_steps = drafts + (out - (accepted + drafts)).max(0.0);
        let accept_len = if engine_steps > 0.0 {
            out / engine_steps
        } else {
            0.0
        };
        let per_position_acceptance = y
            .accepted_per_pos
            .iter()
            .enumerate()
            .map(|(i, v)| (v - x.accepted_per_pos.get(i).copied().unwrap_or(0.0)).max(0.0) / drafts)
            .collect();
        return Some(SpecDecodeStats {
            drafts: drafts as u64,
            draft_tokens: draft_tokens as u64,
            accepted_tokens: accepted as u64,
            acceptance_rate: if draft_tokens > 0.0 {
                accepted / draft_tokens
            } else {
                0.0
            },
            accept_len,
            steps_per_s: if accept_len > 0.0 {
                aggregate_tps / accept_len
            } else {
                0.0
            },
            per_position_acceptance,
        });
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

    #[test]
    fn spec_formulas() {
        let st = |d: f64, dt: f64, a: f64| EngineState {
            spec: Some(SpecCounters {
                drafts: d,
                draft_tokens: dt,
                accepted_tokens: a,
                accepted_per_pos: vec![a * 0.6, a * 0.4],
            }),
            ..EngineState::default()
        };
        let t = Instant::now();
        let s = spec_stats(
            Some(&(t, st(100.0, 200.0, 50.0))),
            Some(&(t, st(200.0, 400.0, 150.0))),
            300,
            150.0,
        )
        .unwrap();
        // steps = 100 + max(0, 300 - (100 + 100)) = 200; accept_len = 1.5; steps/s = 100.
        assert_eq!(s.drafts, 100);
        assert!((s.accept_len - 1.5).abs() < 1e-9);
        assert!((s.steps_per_s - 100.0).abs() < 1e-9);
        assert!((s.acceptance_rate - 0.5).abs() < 1e-9);
        assert!((s.per_position_acceptance[0] - 0.6).abs() < 1e-9);
    }
}
