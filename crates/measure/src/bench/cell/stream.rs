//! The stream loop: one task per stream, requests back to back with the stream's own prompt,
//! first-token and stall deadlines, back-off after failures.
//!
//! Each wake-up reads what the connection has: the piece that woke the task and every piece
//! already there behind it, all stamped with one instant (one arrival). After `[DONE]` the
//! body is read to its end (at most [`BODY_END_GRACE`]): an engine that never ends it has
//! not finished the request.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::FutureExt;

use super::accounting::{CellShared, Ended, StreamRecord, StreamWorker};
use super::cut::StreamCut;
use crate::bench::client::{EngineClient, RequestFailure, SseParser, StreamConn};

/// How long the body may take to end after `[DONE]` (a healthy engine ends it with the same
/// write).
pub(super) const BODY_END_GRACE: Duration = Duration::from_secs(2);

/// Pieces of a body read as one arrival at most (then the timers get their turn).
const MAX_PIECES_PER_ARRIVAL: usize = 256;

/// Runs one stream: requests back to back until cancelled, restarting with the same prompt
/// (the stream's identity) whenever a request finishes or fails.
pub(super) async fn run_stream(
    client: EngineClient,
    body: bytes::Bytes,
    shared: Arc<CellShared>,
    cut: StreamCut,
    first_token_timeout: Duration,
    stall_timeout: Duration,
) -> StreamRecord {
    let mut w = StreamWorker::new(shared);
    let mut parser = SseParser::new();
    let mut backoff = Duration::from_millis(50);
    let mut conn = StreamConn::default();
    while !cut.is_cut() {
        let sent = Instant::now();
        w.shared.requests_started.fetch_add(1, Ordering::Relaxed);
        w.begin_request(sent);
        let ended = one_request(
            &client,
            &mut conn,
            body.clone(),
            &mut parser,
            &mut w,
            &cut,
            sent,
            first_token_timeout,
            stall_timeout,
        )
        .await;
        let produced = w.req.first.is_some();
        // A request in flight when the gate ends the cell is the gate's doing.
        let ended = if cut.is_cut() && !matches!(ended, Ended::Body { .. }) {
            Ended::Cut
        } else {
            ended
        };
        let early = w.end_request(ended);
        if cut.is_cut() {
            break;
        }
        match early {
            None => backoff = Duration::from_millis(50),
            Some(_) => {
                if produced {
                    backoff = Duration::from_millis(50);
                }
                tokio::select! {
                    _ = cut.wait() => break,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        }
    }
    w.rec
}

/// Sends one request and reads its stream to the end; how it ended.
#[allow(clippy::too_many_arguments)]
async fn one_request(
    client: &EngineClient,
    conn: &mut StreamConn,
    body: bytes::Bytes,
    parser: &mut SseParser,
    w: &mut StreamWorker,
    cut: &StreamCut,
    sent: Instant,
    first_token_timeout: Duration,
    stall_timeout: Duration,
) -> Ended {
    let mut resp = tokio::select! {
        _ = cut.wait() => return Ended::Cut,
        r = tokio::time::timeout(first_token_timeout, client.start_stream(conn, body)) => match r {
            Ok(Ok(r)) => r,
            Ok(Err(f)) => return Ended::Failed(f),
            Err(_) => return Ended::Failed(RequestFailure::new("timed out", format!("no response headers within {:.0} s", first_token_timeout.as_secs_f64()))),
        },
    };
    *parser = SseParser::new();
    let mut last_byte = Instant::now();
    let deadline = |first: bool, last: Instant| {
        if first {
            last + stall_timeout
        } else {
            sent + first_token_timeout
        }
    };
    let timed_out = |first: bool| {
        Ended::Failed(if first {
            RequestFailure::new(
                "stream stalled",
                format!("no data for {:.0} s", stall_timeout.as_secs_f64()),
            )
        } else {
            RequestFailure::new(
                "timed out",
                format!(
                    "no first token within {:.0} s",
                    first_token_timeout.as_secs_f64()
                ),
            )
        })
    };
    let sleep = tokio::time::sleep_until(deadline(false, last_byte).into());
    tokio::pin!(sleep);
    // The timer is re-armed lazily: once when the first token arrives (switching from the
    // first-token deadline to the stall deadline), then only when it fires early.
    let mut armed_for_stall = false;
    let cancelled = cut.wait();
    tokio::pin!(cancelled);
    loop {
        tokio::select! {
            biased;
            _ = &mut cancelled => return Ended::Cut,
            piece = resp.chunk() => {
                let now = Instant::now();
                let mut piece = piece;
                let mut pieces = 0;
                // This piece and every one already read behind it: one arrival at `now`.
                loop {
                    match piece {
                        Ok(Some(bytes)) => {
                            last_byte = now;
                            let mut failure = None;
                            parser.feed(bytes, |payload| match w.on_payload(payload, now) {
                                Ok(()) => true,
                                Err(f) => { failure = Some(f); false }
                            });
                            if let Some(f) = failure.or_else(|| parser.overflow()) {
                                return Ended::Failed(f);
                            }
                        }
                        Ok(None) => {
                            let mut failure = None;
                            parser.finish(|payload| match w.on_payload(payload, now) {
                                Ok(()) => true,
                                Err(f) => { failure = Some(f); false }
                            });
                            return match failure {
                                Some(f) => Ended::Failed(f),
                                None => Ended::Body { terminated: true },
                            };
                        }
                        Err(f) => return Ended::Failed(f),
                    }
                    pieces += 1;
                    if w.req.done || pieces >= MAX_PIECES_PER_ARRIVAL {
                        break;
                    }
                    match resp.chunk().now_or_never() {
                        Some(next) => piece = next,
                        None => break,
                    }
                }
                client.activity().note_at(now);
                if w.req.done {
                    break;
                }
                // Checked here too, so data that never brings a token (an endless line, pings)
                // cannot hold the timer off.
                if now >= deadline(w.req.first.is_some(), last_byte) {
                    return timed_out(w.req.first.is_some());
                }
                if !armed_for_stall && w.req.first.is_some() {
                    armed_for_stall = true;
                    sleep.as_mut().reset((now + stall_timeout).into());
                }
            }
            _ = &mut sleep => {
                let due = deadline(w.req.first.is_some(), last_byte);
                if Instant::now() >= due {
                    return timed_out(w.req.first.is_some());
                }
                sleep.as_mut().reset(due.into());
            }
        }
    }
    // `[DONE]`: the body must end now.
    let grace = tokio::time::sleep(BODY_END_GRACE);
    tokio::pin!(grace);
    loop {
        tokio::select! {
            biased;
            _ = &mut cancelled => return Ended::Body { terminated: true },
            piece = resp.chunk() => match piece {
                Ok(Some(_)) => {}
                Ok(None) => return Ended::Body { terminated: true },
                Err(_) => return Ended::Body { terminated: false },
            },
            _ = &mut grace => return Ended::Body { terminated: false },
        }
    }
}
