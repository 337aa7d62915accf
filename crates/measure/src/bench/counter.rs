//! The engine's own generation counter at a cell window's edges, read so that the figure
//! computed from it (`server_tps`) means what it says.
//!
//! A per-token counter (vLLM) is read as is. A per-request counter moves only when a request
//! ends; for llama.cpp the tokens of running requests (`/slots` `n_decoded`) are added at
//! each edge, so the difference is the tokens made between the readings. Without that (SGLang,
//! TensorRT-LLM) the figure is kept, with its caveat recorded in [`EngineCounterWindow::moves`].

use std::time::Instant;

use super::client::EngineClient;
use super::metrics::{EngineState, MetricsDialect, scrape};
use super::slots::scrape_slots;
use infergate_schema::results::EngineCounterWindow;

/// The counter at one edge of the window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct CounterReading {
    /// When the reading holds (the in-flight read, where there is one).
    pub(crate) at: Instant,
    /// The engine's counter.
    pub(crate) counter: f64,
    /// Tokens of requests still running, not yet in `counter` (llama.cpp `/slots`).
    pub(crate) in_flight: Option<f64>,
    /// How far `at` may be off, seconds: half the time the reading took (the engine read its
    /// counter somewhere in it). Cross-checks allow the tokens made in it.
    pub(crate) uncertainty_s: f64,
}

/// What was read at one edge of a window.
#[derive(Debug, Clone, Default)]
pub(crate) struct EdgeReading {
    /// The engine's state (also the spec-decode counters), when `/metrics` answered.
    pub(crate) state: Option<(Instant, EngineState)>,
    /// The generation counter, when the engine has one.
    pub(crate) counter: Option<CounterReading>,
}

/// Tries for a `/slots` reading that no request end falls into.
const CONSISTENT_TRIES: usize = 3;

/// Reads the engine's state and generation counter at a window edge. For llama.cpp the
/// running slots' tokens are read between two `/metrics` scrapes; when the counter moved
/// between them (a request ended, so `/slots` and the counter disagree about it) it is read
/// again, up to three times (the last try is kept: off by at most one request).
pub(crate) async fn read_edge(
    client: &EngineClient,
    dialect: Option<MetricsDialect>,
) -> EdgeReading {
    let Some(d) = dialect else {
        return EdgeReading::default();
    };
    let began = Instant::now();
    let mut state = scrape(client, dialect).await;
    let half = began.elapsed().as_secs_f64() / 2.0;
    let plain = |state: Option<(Instant, EngineState)>| {
        let counter = state.as_ref().and_then(|(at, s)| {
            s.generated_tokens.map(|c| CounterReading {
                at: *at,
                counter: c,
                in_flight: None,
                uncertainty_s: half,
            })
        });
        EdgeReading { state, counter }
    };
    if !d.has_in_flight_tokens() {
        return plain(state);
    }
    for attempt in 1..=CONSISTENT_TRIES {
        let Some(before) = state.as_ref().and_then(|(_, s)| s.generated_tokens) else {
            return plain(state);
        };
        let sent = Instant::now();
        let Some(slots) = scrape_slots(client).await else {
            return plain(state);
        };
        let at = sent + Instant::now().duration_since(sent) / 2;
        let again = scrape(client, dialect).await;
        let Some(after) = again.as_ref().and_then(|(_, s)| s.generated_tokens) else {
            return plain(state);
        };
        if after == before || attempt == CONSISTENT_TRIES {
            return EdgeReading {
                state: again,
                counter: Some(CounterReading {
                    at,
                    counter: after,
                    in_flight: Some(slots.in_flight_tokens),
                    uncertainty_s: sent.elapsed().as_secs_f64() / 2.0,
                }),
            };
        }
        state = again;
    }
    plain(state)
}

/// The engine's generation rate between two edge readings and what it was computed from;
/// `None` without both readings. In-flight tokens count only when read at both edges.
pub(crate) fn window(
    dialect: Option<MetricsDialect>,
    start: &EdgeReading,
    end: &EdgeReading,
    opened: Instant,
    closed: Instant,
) -> Option<(f64, EngineCounterWindow)> {
    let d = dialect?;
    let (a, b) = (start.counter?, end.counter?);
    if b.at <= a.at {
        return None;
    }
    let (fa, fb) = a.in_flight.zip(b.in_flight).unzip();
    let start_tokens = a.counter + fa.unwrap_or(0.0);
    let end_tokens = b.counter + fb.unwrap_or(0.0);
    let tps = (end_tokens - start_tokens).max(0.0) / b.at.duration_since(a.at).as_secs_f64();
    let offset = |at: Instant, edge: Instant| {
        if at >= edge {
            at.duration_since(edge).as_secs_f64()
        } else {
            -edge.duration_since(at).as_secs_f64()
        }
    };
    Some((
        tps,
        EngineCounterWindow {
            metric: d.generation_counter().to_string(),
            moves: d.counter_moves(),
            start_offset_s: offset(a.at, opened),
            end_offset_s: offset(b.at, closed),
            start_tokens,
            end_tokens,
            in_flight_start: fa,
            in_flight_end: fb,
        },
    ))
}

/// " (engine counter 251.9 tok/s, per-request counter + in-flight tokens)": the figure with
/// how to read it, for progress lines.
pub(crate) fn describe(server_tps: f64, w: &EngineCounterWindow) -> String {
    format!(
        " (engine counter {server_tps:.1} tok/s, {})",
        w.moves.caveat(w.in_flight_added())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_schema::results::CounterMoves;
    use std::time::Duration;

    fn edge(at: Instant, counter: f64, in_flight: Option<f64>) -> EdgeReading {
        EdgeReading {
            state: None,
            counter: Some(CounterReading {
                at,
                counter,
                in_flight,
                uncertainty_s: 0.0,
            }),
        }
    }

    #[test]
    fn in_flight_tokens_are_added_at_both_edges_or_neither() {
        let t = Instant::now();
        let (open, close) = (
            t + Duration::from_millis(10),
            t + Duration::from_millis(2010),
        );
        let d = Some(MetricsDialect::Llamacpp);
        // 2 s apart: counter +100 (one request of 100 ended), in flight 30 → 50.
        let a = edge(t, 1000.0, Some(30.0));
        let b = edge(t + Duration::from_secs(2), 1100.0, Some(50.0));
        let (tps, w) = window(d, &a, &b, open, close).unwrap();
        assert!((tps - 60.0).abs() < 1e-9, "{tps}");
        assert!(w.in_flight_added());
        assert_eq!(w.moves, CounterMoves::PerRequest);
        assert_eq!(w.metric, "llamacpp:tokens_predicted_total");
        assert!((w.start_offset_s + 0.01).abs() < 1e-9);
        assert!((w.end_offset_s + 0.01).abs() < 1e-9);
        assert!(describe(tps, &w).contains("in-flight"));
        // One edge without /slots: the raw counter at both, and the caveat says so.
        let b = edge(t + Duration::from_secs(2), 1100.0, None);
        let (tps, w) = window(d, &a, &b, open, close).unwrap();
        assert!((tps - 50.0).abs() < 1e-9);
        assert!(!w.in_flight_added());
        assert!(describe(tps, &w).contains("moves when a request ends"));
    }

    #[test]
    fn no_figure_without_both_readings() {
        let t = Instant::now();
        let d = Some(MetricsDialect::Vllm);
        let a = edge(t, 1.0, None);
        assert!(window(d, &a, &EdgeReading::default(), t, t).is_none());
        assert!(window(d, &a, &a, t, t).is_none(), "same instant");
        assert!(window(None, &a, &edge(t + Duration::from_secs(1), 2.0, None), t, t).is_none());
    }
}
