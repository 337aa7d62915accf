//! The stream loop: one task per stream, requests back to back with the stream's own prompt,
//! first-token and stall deadlines, back-off after failures.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::accounting::{CellShared, StreamRecord, StreamWorker};
use crate::bench::client::{EngineClient, RequestFailure, SseParser, StreamConn};

/// Runs one stream: requests back to back until cancelled, restarting with the same prompt
/// (the stream's identity) whenever a request finishes or fails.
pub(super) async fn run_stream(
    client: EngineClient,
    body: bytes::Bytes,
    shared: Arc<CellShared>,
    cancel: CancellationToken,
    first_token_timeout: Duration,
    stall_timeout: Duration,
) -> StreamRecord {
    let mut w = StreamWorker::new(shared);
    let mut parser = SseParser::new();
    let mut backoff = Duration::from_millis(50);
    let mut conn = StreamConn::default();
    'outer: while !cancel.is_cancelled() {
        let sent = Instant::now();
        w.shared.requests_started.fetch_add(1, Ordering::Relaxed);
        w.begin_request(sent);
        let outcome: Result<(), RequestFailure> = async {
            let mut resp = tokio::select! {
                _ = cancel.cancelled() => return Ok(()),
                r = tokio::time::timeout(first_token_timeout, client.start_stream(&mut conn, body.clone())) => match r {
                    Ok(r) => r?,
                    Err(_) => return Err(RequestFailure::new("timed out", format!("no response headers within {:.0} s", first_token_timeout.as_secs_f64()))),
                },
            };
            parser = SseParser::new();
            let mut last_byte = Instant::now();
            let deadline = |first: bool, last: Instant| {
                if first { last + stall_timeout } else { sent + first_token_timeout }
            };
            let sleep = tokio::time::sleep_until(deadline(false, last_byte).into());
            tokio::pin!(sleep);
            // The timer is re-armed lazily: once when the first token arrives (switching from
            // the first-token deadline to the stall deadline), then only when it fires early.
            let mut armed_for_stall = false;
            // One cancellation waiter for the whole response, not one registered per chunk.
            let cancelled = cancel.cancelled();
            tokio::pin!(cancelled);
            loop {
                tokio::select! {
                    biased;
                    _ = &mut cancelled => return Ok(()),
                    chunk = resp.chunk() => {
                        let now = Instant::now();
                        match chunk {
                            Ok(Some(bytes)) => {
                                last_byte = now;
                                client.activity().note_at(now);
                                let mut failure = None;
                                parser.feed(&bytes, |payload| match w.on_payload(payload, now) {
                                    Ok(()) => true,
                                    Err(f) => { failure = Some(f); false }
                                });
                                if let Some(f) = failure { return Err(f); }
                                if w.req.done { return Ok(()); }
                                if !armed_for_stall && w.req.first.is_some() {
                                    armed_for_stall = true;
                                    sleep.as_mut().reset((now + stall_timeout).into());
                                }
                            }
                            Ok(None) => {
                                let mut failure = None;
                                parser.finish(|payload| match w.on_payload(payload, now) {
                                    Ok(()) => true,
                                    Err(f) => { failure = Some(f); false }
                                });
                                if let Some(f) = failure { return Err(f); }
                                if w.req.done || w.req.finished { return Ok(()); }
                                return Err(RequestFailure::new("stream closed early", format!("after {} tokens, without a finish reason or [DONE]", w.req.chunk_tokens.max(w.req.usage_seen))));
                            }
                            Err(f) => return Err(f),
                        }
                    }
                    _ = &mut sleep => {
                        let due = deadline(w.req.first.is_some(), last_byte);
                        let now = Instant::now();
                        if now >= due {
                            return Err(if w.req.first.is_some() {
                                RequestFailure::new("stream stalled", format!("no data for {:.0} s", stall_timeout.as_secs_f64()))
                            } else {
                                RequestFailure::new("timed out", format!("no first token within {:.0} s", first_token_timeout.as_secs_f64()))
                            });
                        }
                        sleep.as_mut().reset(due.into());
                    }
                }
            }
        }
        .await;
        let produced = w.req.first.is_some();
        w.end_request();
        match outcome {
            Ok(()) => {
                backoff = Duration::from_millis(50);
            }
            Err(f) => {
                if cancel.is_cancelled() {
                    break 'outer;
                }
                w.shared.record_failure(&f);
                if produced {
                    backoff = Duration::from_millis(50);
                }
                tokio::select! {
                    _ = cancel.cancelled() => break 'outer,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        }
    }
    w.rec
}
