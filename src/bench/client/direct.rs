//! A stream's own HTTP/1.1 connection to a plain-`http://` engine, driven inside the stream's
//! task: hyper's connection state machine is polled together with the response it feeds, so
//! a streamed chunk costs no wake-up of a separate connection task and passes no pool or
//! reqwest body layer. A stream's requests go back to back on its connection.
//!
//! Reuse follows the client's [`ConnectionPolicy`] as the pool does for everything else: a
//! connection idle longer than its idle time-out, closed by the engine, or left in the middle
//! of a response is replaced by a fresh one, and a request that got no response at all is
//! sent once more on a fresh connection (never one that got its response head).

use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::{ConnectionPolicy, RequestFailure, error_chain, excerpt};

/// Where a plain-HTTP engine's completions are: what to connect to and what to ask for.
#[derive(Debug)]
pub(super) struct Target {
    /// `host:port` to connect to (an IP literal needs no resolver thread).
    addr: String,
    /// The `Host` header.
    authority: http::HeaderValue,
    /// `/v1/completions` under the base URL's path.
    path: http::Uri,
    /// `Bearer …`, marked sensitive.
    auth: Option<http::HeaderValue>,
}

impl Target {
    /// The target of a `http://` base URL; `None` for any other (then the pool streams).
    pub(super) fn of(base: &str, api_key: Option<&str>) -> Option<Target> {
        let url = reqwest::Url::parse(base).ok()?;
        // Credentials in the URL (sent as basic auth) are the pooled client's to handle.
        if url.scheme() != "http" || !url.username().is_empty() || url.password().is_some() {
            return None;
        }
        // An IPv6 host comes in brackets, as `host:port` and `Host` want it.
        let host = url.host_str()?.to_string();
        let port = url.port_or_known_default()?;
        let authority = match url.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.clone(),
        };
        let path = format!("{}/v1/completions", url.path().trim_end_matches('/'));
        let auth = match api_key {
            Some(key) => {
                let mut v = http::HeaderValue::try_from(format!("Bearer {key}")).ok()?;
                v.set_sensitive(true);
                Some(v)
            }
            None => None,
        };
        Some(Target {
            addr: format!("{host}:{port}"),
            authority: http::HeaderValue::try_from(authority).ok()?,
            path: path.parse().ok()?,
            auth,
        })
    }

    fn request(&self, body: Bytes) -> Result<http::Request<Full<Bytes>>, RequestFailure> {
        let mut req = http::Request::post(self.path.clone())
            .header(http::header::HOST, self.authority.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "text/event-stream");
        if let Some(auth) = &self.auth {
            req = req.header(http::header::AUTHORIZATION, auth.clone());
        }
        req.body(Full::new(body))
            .map_err(|e| RequestFailure::new("request failed", e.to_string()))
    }
}

/// One open connection.
pub(super) struct Conn {
    sender: http1::SendRequest<Full<Bytes>>,
    io: Pin<Box<http1::Connection<TokioIo<TcpStream>, Full<Bytes>>>>,
    /// The connection future has finished (closed or failed): it is never polled again.
    ended: bool,
    /// When its last response ended.
    idle_since: Instant,
}

impl Conn {
    async fn open(target: &Target) -> Result<Conn, RequestFailure> {
        let tcp =
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&target.addr)).await {
                Err(_) => {
                    return Err(RequestFailure::new(
                        "timed out",
                        format!("no connection within {} s", CONNECT_TIMEOUT.as_secs()),
                    ));
                }
                Ok(Err(e)) => {
                    let kind = if e.kind() == std::io::ErrorKind::ConnectionRefused {
                        "connection refused"
                    } else {
                        "connection failed"
                    };
                    return Err(RequestFailure::new(kind, excerpt(&e.to_string(), 300)));
                }
                Ok(Ok(tcp)) => tcp,
            };
        let _ = tcp.set_nodelay(true);
        let (sender, io) = http1::handshake(TokioIo::new(tcp))
            .await
            .map_err(|e| failure("connection failed", &e))?;
        Ok(Conn {
            sender,
            io: Box::pin(io),
            ended: false,
            idle_since: Instant::now(),
        })
    }

    /// Polls `fut` with the connection driven alongside (it reads the socket that feeds
    /// `fut`); the connection is polled first so a chunk read now is seen by `fut` at once.
    async fn driven<F: Future>(&mut self, fut: F) -> F::Output {
        let mut fut = pin!(fut);
        poll_fn(|cx| {
            if !self.ended && self.io.as_mut().poll(cx).is_ready() {
                self.ended = true;
            }
            fut.as_mut().poll(cx)
        })
        .await
    }

    /// Whether a new request can go on this connection now: not ended, idle no longer than
    /// the policy allows, and hyper ready for it. Polling the connection first reads an
    /// engine's close, and the end of a response dropped after its `[DONE]` (hyper drains
    /// what is there and closes a connection left mid-response).
    async fn reusable(&mut self, idle_timeout: Option<Duration>) -> bool {
        if idle_timeout.is_some_and(|t| self.idle_since.elapsed() >= t) {
            return false;
        }
        for _ in 0..3 {
            let ready = poll_fn(|cx| {
                if !self.ended && self.io.as_mut().poll(cx).is_ready() {
                    self.ended = true;
                }
                Poll::Ready(!self.ended && self.sender.poll_ready(cx).is_ready())
            })
            .await;
            if self.ended {
                return false;
            }
            if ready && self.sender.is_ready() {
                return true;
            }
            tokio::task::yield_now().await;
        }
        false
    }
}

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A response being read on a stream's connection.
pub(crate) struct Response<'c> {
    conn: &'c mut Conn,
    body: Incoming,
}

impl Response<'_> {
    /// The next piece of the body; `None` at its end.
    pub(super) async fn chunk(&mut self) -> Result<Option<Bytes>, RequestFailure> {
        loop {
            match self.conn.driven(self.body.frame()).await {
                None => return Ok(None),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        return Ok(Some(data));
                    }
                }
                Some(Err(e)) => return Err(failure("stream broken", &e)),
            }
        }
    }
}

impl Drop for Response<'_> {
    fn drop(&mut self) {
        self.conn.idle_since = Instant::now();
    }
}

/// Sends the streaming request on the stream's connection (`slot`), opening one when there is
/// none or it cannot be reused; retries once on a fresh connection when the request got no
/// response at all. Returns the status and the response.
pub(super) async fn send<'c>(
    target: &Target,
    policy: &ConnectionPolicy,
    slot: &'c mut Option<Conn>,
    body: Bytes,
) -> Result<(http::StatusCode, Response<'c>), RequestFailure> {
    let mut attempts = if policy.retry_unanswered { 2 } else { 1 };
    let resp = loop {
        attempts -= 1;
        let reuse = match slot.as_mut() {
            Some(c) => c.reusable(policy.pool_idle_timeout).await,
            None => false,
        };
        if !reuse {
            *slot = None;
            *slot = Some(Conn::open(target).await?);
        }
        let Some(conn) = slot.as_mut() else {
            unreachable!("a connection was just put in the slot")
        };
        let sent = conn.sender.send_request(target.request(body.clone())?);
        match conn.driven(sent).await {
            Ok(resp) => break resp,
            Err(e) => {
                *slot = None;
                if attempts == 0 || !unanswered(&e) {
                    return Err(failure(before_response_kind(&e), &e));
                }
            }
        }
    };
    let Some(conn) = slot.as_mut() else {
        unreachable!("the slot holds the connection the request went on")
    };
    Ok((
        resp.status(),
        Response {
            conn,
            body: resp.into_body(),
        },
    ))
}

/// The body of a failed (non-2xx) response, at most 64 KiB and 5 s of it.
pub(super) async fn error_body(mut resp: Response<'_>) -> String {
    let read = resp
        .conn
        .driven(Limited::new(&mut resp.body, 64 * 1024).collect());
    match tokio::time::timeout(Duration::from_secs(5), read).await {
        Ok(Ok(collected)) => String::from_utf8_lossy(&collected.to_bytes()).into_owned(),
        _ => String::new(),
    }
}

/// A request that got no response on a connection that was open (the engine closed it as
/// the request went out), as the pooled client's `is_unanswered`: a fresh connection may
/// succeed. A malformed answer or a time-out would fail again.
fn unanswered(e: &hyper::Error) -> bool {
    !(e.is_parse() || e.is_timeout() || e.is_user())
}

fn before_response_kind(e: &hyper::Error) -> &'static str {
    let all = error_chain(e).join(": ");
    if e.is_incomplete_message()
        || e.is_canceled()
        || all.contains("reset by peer")
        || all.contains("Broken pipe")
    {
        "connection closed by the engine before a response"
    } else {
        "request failed"
    }
}

fn failure(kind: &str, e: &hyper::Error) -> RequestFailure {
    RequestFailure::new(kind, excerpt(&error_chain(e).join(": "), 300))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_of_plain_http_bases() {
        let t = Target::of("http://127.0.0.1:8000", Some("k")).unwrap();
        assert_eq!(t.addr, "127.0.0.1:8000");
        assert_eq!(t.authority, "127.0.0.1:8000");
        assert_eq!(t.path, "/v1/completions");
        assert!(t.auth.as_ref().unwrap().is_sensitive());
        let t = Target::of("http://[::1]/engine", None).unwrap();
        assert_eq!(t.addr, "[::1]:80");
        assert_eq!(t.authority, "[::1]");
        assert_eq!(t.path, "/engine/v1/completions");
        assert!(Target::of("https://h:1", None).is_none());
        assert!(Target::of("http://u:p@h:1", None).is_none());
    }
}
