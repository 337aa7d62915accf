//! floor.c's loop as idiomatic tokio: one task per stream on a current-thread runtime, one
//! `read` and one clock read per wake-up, count `data:` events (with floor.c's carry across
//! reads), re-post the request when the chunked response ends (`[DONE]`, then the
//! terminator). Nothing else: no parsing, no timers, no accounting. What `infergate bench`
//! costs above this is infergate's; what this costs above floor.c is the runtime's.
//!
//! Usage: tokio-floor PORT C SECONDS REQFILE

use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CARRY: usize = 8;

/// Occurrences of `pat` in `b` that end after `fresh` (bytes before it are carry), and where
/// the first of them ends.
fn count_from(b: &[u8], fresh: usize, pat: &[u8]) -> (u64, Option<usize>) {
    let (mut k, mut first) = (0, None);
    for (i, w) in b.windows(pat.len()).enumerate() {
        if w == pat && i + pat.len() > fresh {
            k += 1;
            first.get_or_insert(i + pat.len());
        }
    }
    (k, first)
}

#[derive(Default)]
struct Tally {
    events: u64,
    reads: u64,
    responses: u64,
    gap_ns: u128,
    gaps: u64,
}

async fn stream(port: u16, req: Rc<Vec<u8>>, until: Instant) -> std::io::Result<Tally> {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    s.set_nodelay(true)?;
    let mut t = Tally::default();
    let mut buf = vec![0u8; CARRY + 65536];
    let (mut carry, mut done_seen, mut last) = (0usize, false, None::<Instant>);
    s.write_all(&req).await?;
    loop {
        let n = s.read(&mut buf[CARRY..]).await?;
        let now = Instant::now(); // the one clock read per read
        if n == 0 || now >= until {
            return Ok(t);
        }
        t.reads += 1;
        if let Some(l) = last {
            t.gap_ns += (now - l).as_nanos();
            t.gaps += 1;
        }
        last = Some(now);
        let b = &buf[CARRY - carry..CARRY + n];
        t.events += count_from(b, carry, b"data:").0;
        let mut scan = 0;
        let mut scan_fresh = carry;
        if !done_seen && let (_, Some(end)) = count_from(b, carry, b"[DONE]") {
            (done_seen, scan, scan_fresh) = (true, end, 0);
        }
        if done_seen
            && count_from(&b[scan..], scan_fresh, b"\r\n0\r\n\r\n")
                .1
                .is_some()
        {
            (done_seen, carry) = (false, 0);
            t.responses += 1;
            s.write_all(&req).await?;
            continue;
        }
        let keep = b.len().min(CARRY - 1);
        buf.copy_within(CARRY + n - keep..CARRY + n, CARRY - keep);
        carry = keep;
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 5 {
        eprintln!("usage: tokio-floor PORT C SECONDS REQFILE");
        std::process::exit(2);
    }
    let (port, c, secs): (u16, usize, f64) = (a[1].parse()?, a[2].parse()?, a[3].parse()?);
    let req = Rc::new(std::fs::read(&a[4])?);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    let t0 = Instant::now();
    let until = t0 + Duration::from_secs_f64(secs);
    let tallies = local.block_on(&rt, async {
        let tasks: Vec<_> = (0..c)
            .map(|_| tokio::task::spawn_local(stream(port, req.clone(), until)))
            .collect();
        let mut out = Vec::new();
        for task in tasks {
            out.push(task.await);
        }
        out
    });
    let mut sum = Tally::default();
    for t in tallies {
        let t = t??;
        sum.events += t.events;
        sum.reads += t.reads;
        sum.responses += t.responses;
        sum.gap_ns += t.gap_ns;
        sum.gaps += t.gaps;
    }
    println!(
        "tokio-floor C={c} secs={:.2} events={} reads={} responses={} mean_gap_ms={:.3}",
        t0.elapsed().as_secs_f64(),
        sum.events,
        sum.reads,
        sum.responses,
        sum.gap_ns as f64 / sum.gaps.max(1) as f64 / 1e6
    );
    Ok(())
}
