//! The stream loop: one task per stream, requests back to back with the stream's own prompt,
//! first-token and stall deadlines, back-off after failures.
//!
//! Each wake-up reads what the connection has: the piece that woke the task and every piece
//! already there behind it, all stamped with one instant (one arrival). After `[DONE]` the
//! body is read to its end (at most [`BODY_END_GRACE`]): an engine that never ends it has
//! not finished the request.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::FutureExt;

use super::accounting::{CellShared, Ended, StreamRecord, StreamWorker};
use super::cut::{StreamCut, Wait};
use crate::bench::client::{EngineClient, RequestFailure, SseParser, StreamConn, StreamResponse};

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
    let mut resp = match open_stream(client, conn, body, cut, first_token_timeout).await {
        Ok(resp) => resp,
        Err(ended) => return ended,
    };
    *parser = SseParser::new();
    let mut reader = StreamReader {
        parser,
        w,
        deadlines: Deadlines {
            sent,
            first_token_timeout,
            stall_timeout,
        },
        last_byte: Instant::now(),
    };
    let cancelled = cut.wait();
    tokio::pin!(cancelled);
    if let Some(ended) = reader
        .read_until_done(client, &mut resp, cancelled.as_mut())
        .await
    {
        return ended;
    }
    // `[DONE]`: the body must end now.
    await_body_end(&mut resp, cancelled).await
}

/// Sends the request and waits for its response headers, at most `first_token_timeout`.
async fn open_stream<'c>(
    client: &EngineClient,
    conn: &'c mut StreamConn,
    body: bytes::Bytes,
    cut: &StreamCut,
    first_token_timeout: Duration,
) -> Result<StreamResponse<'c>, Ended> {
    tokio::select! {
        _ = cut.wait() => Err(Ended::Cut),
        r = tokio::time::timeout(first_token_timeout, client.start_stream(conn, body)) => match r {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(f)) => Err(Ended::Failed(f)),
            Err(_) => Err(Ended::Failed(RequestFailure::new("timed out", format!("no response headers within {:.0} s", first_token_timeout.as_secs_f64())))),
        },
    }
}

/// A request's deadlines: its first token within `first_token_timeout` of its send, then no
/// gap in its data longer than `stall_timeout`.
#[derive(Clone, Copy)]
struct Deadlines {
    sent: Instant,
    first_token_timeout: Duration,
    stall_timeout: Duration,
}

impl Deadlines {
    /// When the request times out, once it has its `first` token or not, data last at `last`.
    fn due(&self, first: bool, last: Instant) -> Instant {
        if first {
            last + self.stall_timeout
        } else {
            self.sent + self.first_token_timeout
        }
    }

    /// How a request that passed its deadline ended.
    fn timed_out(&self, first: bool) -> Ended {
        Ended::Failed(if first {
            RequestFailure::new(
                "stream stalled",
                format!("no data for {:.0} s", self.stall_timeout.as_secs_f64()),
            )
        } else {
            RequestFailure::new(
                "timed out",
                format!(
                    "no first token within {:.0} s",
                    self.first_token_timeout.as_secs_f64()
                ),
            )
        })
    }
}

/// One request's body as it is read: the parser, the stream's bookkeeping it feeds, the
/// request's deadlines and when its data last arrived.
struct StreamReader<'a> {
    parser: &'a mut SseParser,
    w: &'a mut StreamWorker,
    deadlines: Deadlines,
    last_byte: Instant,
}

impl StreamReader<'_> {
    /// Reads the body until `[DONE]` (`None`), or how the request ended before: cut, failed,
    /// its body ended, or a deadline passed.
    async fn read_until_done(
        &mut self,
        client: &EngineClient,
        resp: &mut StreamResponse<'_>,
        mut cancelled: Pin<&mut Wait<'_>>,
    ) -> Option<Ended> {
        let sleep = tokio::time::sleep_until(self.deadlines.due(false, self.last_byte).into());
        tokio::pin!(sleep);
        // The timer is re-armed lazily: once when the first token arrives (switching from the
        // first-token deadline to the stall deadline), then only when it fires early.
        let mut armed_for_stall = false;
        loop {
            tokio::select! {
                biased;
                _ = &mut cancelled => return Some(Ended::Cut),
                piece = resp.chunk() => {
                    let now = Instant::now();
                    let mut piece = piece;
                    let mut pieces = 0;
                    // This piece and every one already read behind it: one arrival at `now`.
                    loop {
                        if let Some(ended) = self.feed(piece, now) {
                            return Some(ended);
                        }
                        pieces += 1;
                        if self.w.req.done || pieces >= MAX_PIECES_PER_ARRIVAL {
                            break;
                        }
                        match resp.chunk().now_or_never() {
                            Some(next) => piece = next,
                            None => break,
                        }
                    }
                    client.activity().note_at(now);
                    if self.w.req.done {
                        break;
                    }
                    // Checked here too, so data that never brings a token (an endless line, pings)
                    // cannot hold the timer off.
                    if now >= self.deadlines.due(self.w.req.first.is_some(), self.last_byte) {
                        return Some(self.deadlines.timed_out(self.w.req.first.is_some()));
                    }
                    if !armed_for_stall && self.w.req.first.is_some() {
                        armed_for_stall = true;
                        sleep.as_mut().reset((now + self.deadlines.stall_timeout).into());
                    }
                }
                _ = &mut sleep => {
                    let due = self.deadlines.due(self.w.req.first.is_some(), self.last_byte);
                    if Instant::now() >= due {
                        return Some(self.deadlines.timed_out(self.w.req.first.is_some()));
                    }
                    sleep.as_mut().reset(due.into());
                }
            }
        }
        None
    }

    /// Feeds one piece of the body, read at `now`; how the request ended, when it did.
    fn feed(
        &mut self,
        piece: Result<Option<&[u8]>, RequestFailure>,
        now: Instant,
    ) -> Option<Ended> {
        let (parser, w) = (&mut *self.parser, &mut *self.w);
        match piece {
            Ok(Some(bytes)) => {
                self.last_byte = now;
                let mut failure = None;
                parser.feed(bytes, |payload| match w.on_payload(payload, now) {
                    Ok(()) => true,
                    Err(f) => {
                        failure = Some(f);
                        false
                    }
                });
                failure.or_else(|| parser.overflow()).map(Ended::Failed)
            }
            Ok(None) => {
                let mut failure = None;
                parser.finish(|payload| match w.on_payload(payload, now) {
                    Ok(()) => true,
                    Err(f) => {
                        failure = Some(f);
                        false
                    }
                });
                Some(match failure {
                    Some(f) => Ended::Failed(f),
                    None => Ended::Body { terminated: true },
                })
            }
            Err(f) => Some(Ended::Failed(f)),
        }
    }
}

/// After `[DONE]` the body must end: within [`BODY_END_GRACE`], or the request is not
/// terminated.
async fn await_body_end(resp: &mut StreamResponse<'_>, mut cancelled: Pin<&mut Wait<'_>>) -> Ended {
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
