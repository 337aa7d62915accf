//! Seed-style console rendering of a results matrix, one-line event logs, and the progress
//! display of `infergate bench`. Rendering only: nothing here measures.

use std::collections::BTreeSet;
use std::io::IsTerminal;

use comfy_table::{CellAlignment, ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};

use infergate_schema::answer::{NO_VALUE, cell_label};
use infergate_schema::results::{
    BurstRecord, CellResult, CellStatus, Event, EventKind, PrefillRecord, RunResults,
    TelemetrySummary, context_label, itl_is_latency, thousands,
};

/// The widest line the console reports write.
pub(crate) const CONSOLE_WIDTH: usize = 100;

/// Wraps `text` at [`CONSOLE_WIDTH`], continuation lines indented by `indent` spaces (the
/// text's own leading spaces are kept).
pub fn wrap(text: &str, indent: usize) -> String {
    let mut out = String::new();
    let lead = text.len() - text.trim_start().len();
    let mut line = text[..lead].to_string();
    for word in text.split_whitespace() {
        let width = line.chars().count();
        let started = !line.trim().is_empty();
        if started && width + 1 + word.chars().count() > CONSOLE_WIDTH {
            out.push_str(line.trim_end());
            out.push('\n');
            line = " ".repeat(indent);
        } else if started && !line.ends_with(' ') {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(line.trim_end());
    out
}

/// `error: …` for the console: each of the text's own lines wrapped at [`CONSOLE_WIDTH`]
/// (continuations indented by 2), so an error that quotes an engine log keeps its lines and
/// none runs past 100 columns. The text is made inert first (it may quote an engine, a config
/// or an artifact).
pub fn error_line(text: &str) -> String {
    let text = infergate_io::untrusted_text::console(text);
    format!("error: {text}")
        .lines()
        .map(|l| {
            if l.chars().count() > CONSOLE_WIDTH {
                wrap(l, 2)
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether every line of `text` fits the console ([`CONSOLE_WIDTH`] columns).
pub fn fits(text: &str) -> bool {
    text.lines().all(|l| l.chars().count() <= CONSOLE_WIDTH)
}

/// A table at [`CONSOLE_WIDTH`]: long cells and headers wrap inside their column. For the
/// evaluation reports, whose runner and scenario names are long.
pub fn fitted_table<T: Into<comfy_table::Cell>>(header: Vec<T>) -> Table {
    let mut t = Table::new();
    t.load_style(crate::report::verdict_table::TABLE_STYLE)
        .force_no_tty()
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(CONSOLE_WIDTH as u16)
        .set_header(header);
    t
}

/// Right-aligns `columns` of `table` (those that hold figures).
pub(crate) fn align_right(table: &mut Table, columns: impl IntoIterator<Item = usize>) {
    for i in columns {
        if let Some(col) = table.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// Appends `text` [`wrap`]ped (continuations indented by `indent`) as a line of its own.
pub(crate) fn push_wrapped(out: &mut String, text: &str, indent: usize) {
    out.push_str(&wrap(text, indent));
    out.push('\n');
}

/// A `kind: text` line (`notice`, `warning`): the text escaped as untrusted (it may quote an
/// engine, a config or a store file), then wrapped.
pub fn kind_line(kind: &str, text: &str) -> String {
    wrap(
        &format!("{kind}: {}", infergate_io::untrusted_text::console(text)),
        2,
    )
}

/// `label` then `text` wrapped at [`CONSOLE_WIDTH`], continuation lines under the text (the
/// doctor's aligned `NVML:    …` lines).
pub fn wrap_labelled(label: &str, text: &str) -> String {
    let indent = label.chars().count();
    // Leading spaces are kept by `wrap`: they hold the label's place on the first line.
    let wrapped = wrap(&format!("{}{text}", " ".repeat(indent)), indent);
    // An empty `text` leaves nothing after the label (`wrap` trims the line's spaces).
    format!("{label}{}", wrapped.get(indent..).unwrap_or_default())
}

/// The run's GPU telemetry on the console ([`crate::report::layout::telemetry_text`], wrapped).
pub fn telemetry_line(t: &TelemetrySummary) -> Option<String> {
    Some(kind_line(
        "telemetry",
        &crate::report::layout::telemetry_text(t)?,
    ))
}

/// Tokens per second as a whole number with thousands separators: `2,712`.
pub(crate) fn tok_s(x: f64) -> String {
    thousands(x.round().max(0.0) as u64)
}

/// Milliseconds in a compact form: `7.3`, `76`, `12.3k`.
fn fmt_ms(seconds: f64) -> String {
    let ms = seconds * 1000.0;
    if !ms.is_finite() {
        NO_VALUE.into()
    } else if ms < 10.0 {
        format!("{ms:.1}")
    } else if ms < 1000.0 {
        format!("{ms:.0}")
    } else if ms < 100_000.0 {
        format!("{:.1}k", ms / 1000.0)
    } else {
        format!("{:.0}k", ms / 1000.0)
    }
}

/// `(7/8)*` from the engine's mean running count, `(?/8)*` without metrics.
fn capacity_marker(cell: &CellResult) -> String {
    match cell.effective_concurrency {
        Some(r) => format!(" ({r:.0}/{})*", cell.concurrency),
        // No engine metrics: what the client saw, marked as such.
        None => match cell.requests.as_ref().map(|t| t.max_streams_at_once) {
            Some(n) if n > 0 => format!(" ({n}/{})°", cell.concurrency),
            _ => format!(" (?/{})°", cell.concurrency),
        },
    }
}

fn error_marker(cell: &CellResult) -> String {
    let errors = (cell.errors > 0).then(|| format!(" ({}e)", cell.errors));
    errors.unwrap_or_default()
}

/// The aggregate value line of a cell.
fn aggregate_line(cell: &CellResult) -> String {
    match cell.status {
        CellStatus::CapacityLimited if !cell.has_window() => "— (cap)".into(),
        CellStatus::Ok => format!("{:.1}{}", cell.aggregate_tps, error_marker(cell)),
        CellStatus::CapacityLimited => format!(
            "{:.1}{}{}",
            cell.aggregate_tps,
            capacity_marker(cell),
            error_marker(cell)
        ),
        CellStatus::Saturated => format!("{:.1} sat{}", cell.aggregate_tps, error_marker(cell)),
        CellStatus::Error => format!("ERR{}", error_marker(cell)),
        CellStatus::Skipped => "∅".into(),
    }
}

/// The dim detail line: `TTFT ms/TPOT ms/ITL ms` p50 (TPOT only where measured).
fn detail_line(cell: &CellResult) -> Option<String> {
    if !cell.has_window() {
        return None;
    }
    let ttft = cell
        .ttft_s
        .map(|p| fmt_ms(p.p50))
        .unwrap_or_else(|| NO_VALUE.into());
    // Tokens that came together are not a latency: not shown (the same rule as the verdict's
    // Details, `results::itl_is_latency`).
    let itl = cell
        .itl_s
        .filter(|p| itl_is_latency(p.p50, cell.per_user_tps.map(|u| u.p50)))
        .map(|p| fmt_ms(p.p50))
        .unwrap_or_else(|| NO_VALUE.into());
    Some(match cell.tpot_s {
        Some(p) => format!("{ttft}/{}/{itl}", fmt_ms(p.p50)),
        None => format!("{ttft}/{itl}"),
    })
}

fn per_user_line(cell: &CellResult) -> String {
    let marker = match cell.status {
        CellStatus::Ok | CellStatus::Saturated => String::new(),
        CellStatus::CapacityLimited => capacity_marker(cell),
        CellStatus::Error => return NO_VALUE.into(),
        CellStatus::Skipped => return "∅".into(),
    };
    let p50 = cell.per_user_tps.map(|p| format!("{:.1}{marker}", p.p50));
    p50.unwrap_or_else(|| NO_VALUE.into())
}

fn new_table(concurrency: &[u32]) -> Table {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED.with_rounded_corners())
        .force_no_tty()
        .set_content_arrangement(ContentArrangement::Disabled);
    let mut header = vec!["ctx \\ conc".to_string()];
    header.extend(concurrency.iter().map(|c| c.to_string()));
    t.set_header(header);
    align_right(&mut t, 1..=concurrency.len());
    t
}

/// The axes of a results matrix: concurrency columns and context rows present in the cells.
pub(crate) fn axes(results: &RunResults) -> (Vec<u32>, Vec<u64>) {
    let mut cs: BTreeSet<u32> = results.matrix.concurrency.iter().copied().collect();
    let mut ls: BTreeSet<u64> = results.matrix.contexts.iter().copied().collect();
    for c in &results.cells {
        cs.insert(c.concurrency);
        ls.insert(c.context_tokens);
    }
    (cs.into_iter().collect(), ls.into_iter().collect())
}

/// The cell at concurrency `c` and context `l`, if measured.
pub(crate) fn find(results: &RunResults, c: u32, l: u64) -> Option<&CellResult> {
    results.cells.iter().find(|x| x.coord() == (c, l))
}

/// Renders the run as the seed does: an aggregate tok/s matrix (context rows x concurrency
/// columns, TTFT/ITL detail line, capacity and error markers), a per-user tok/s matrix, a
/// legend, and the reasons of every cell that is not `ok`.
pub fn render_matrix(results: &RunResults) -> String {
    infergate_io::untrusted_text::console(&matrix_table(results))
}

fn matrix_table(results: &RunResults) -> String {
    let (cs, ls) = axes(results);
    let mut out = String::new();
    push_wrapped(
        &mut out,
        &format!(
            "infergate {} · {} {} · model {} · {} s window x {} sub-windows, max_tokens {}",
            results.tool.version,
            results.engine.name,
            results.engine.version.as_deref().unwrap_or(""),
            results.matrix.model,
            results.matrix.timing.duration_s,
            results.matrix.timing.sub_windows,
            results.matrix.timing.max_tokens,
        ),
        2,
    );
    out.push_str(if results.cells.iter().any(|c| c.tpot_s.is_some()) {
        "Aggregate tok/s  + TTFT/TPOT/ITL p50 ms\n"
    } else {
        "Aggregate tok/s  + TTFT/ITL p50 ms\n"
    });
    let mut agg = new_table(&cs);
    for &l in &ls {
        let mut row = vec![context_label(l)];
        let mut detail = vec![String::new()];
        let mut any_detail = false;
        for &c in &cs {
            let cell = find(results, c, l);
            row.push(cell.map_or("·".into(), aggregate_line));
            let d = cell.and_then(detail_line);
            any_detail |= d.is_some();
            detail.push(d.unwrap_or_default());
        }
        agg.add_row(row);
        if any_detail {
            agg.add_row(detail);
        }
    }
    out.push_str(&format!(
        "{agg}\nPer-user tok/s (p50 over streams: tokens after a request's first / their time, ≈ 1 / TPOT)\n"
    ));
    let mut pu = new_table(&cs);
    for &l in &ls {
        let mut row = vec![context_label(l)];
        row.extend(
            cs.iter()
                .map(|&c| find(results, c, l).map_or("·".into(), per_user_line)),
        );
        pu.add_row(row);
    }
    out.push_str(&format!("{pu}\n"));
    push_legend(&mut out, results);
    push_not_ok(&mut out, results);
    out
}

/// What the tables' marks mean, and the notes this run needs (a cached prompt's TTFT,
/// capacity as the client saw it, counts not cross-checked, the prefill layer).
fn push_legend(out: &mut String, results: &RunResults) {
    out.push_str(
        "(X/Y)* = capacity-limited: mean running / requested streams from engine metrics;\n\
         (Ne) = N failed requests; ERR = cell could not be measured; ∅ = skipped.\n\
         Aggregate = output tokens counted as they streamed over the steady-state window.\n\
         — = no value, or an ITL p50 under 0.5 ms and half the mean token gap (tokens that came together).\n",
    );
    let any = |seen: &dyn Fn(&CellResult) -> bool| results.cells.iter().any(seen);
    let capacity = |c: &CellResult| c.status == CellStatus::CapacityLimited;
    let notes = [
        // What an engine developer would otherwise misread: TTFT at a long context is not the
        // prefill of that context here (docs/results-schema.md, `ttft_s`).
        (
            any(&|c| c.context_tokens > 0 && c.ttft_s.is_some()),
            "TTFT = request sent → first token. A stream repeats its prompt, so after its first \
             request an engine with prefix caching finds it cached: at context > 0 this is mostly \
             a cached prompt's TTFT, not the prefill of the context.",
        ),
        (
            any(&|c| capacity(c) && c.has_window() && c.effective_concurrency.is_none()),
            "(X/Y)° = capacity-limited, as the client saw it (no engine metrics): the most \
             streams decoding at once / requested.",
        ),
        (
            any(&|c| capacity(c) && !c.has_window()),
            "— (cap) = capacity-limited without a window: a smaller concurrency at this context \
             already was, so it was not measured.",
        ),
    ];
    for (_, note) in notes.iter().filter(|(shown, _)| *shown) {
        push_wrapped(out, note, 2);
    }
    let unverified: Vec<&str> = results
        .cells
        .iter()
        .filter_map(|c| c.unverified.as_deref())
        .collect();
    if let Some(&why) = unverified.first() {
        let why = why
            .strip_prefix("client count not cross-checked: ")
            .unwrap_or(why);
        push_wrapped(
            out,
            &format!(
                "Client count not cross-checked in {} of {} cells: {why}",
                unverified.len(),
                results.cells.len(),
            ),
            2,
        );
    }
    for p in &results.prefill {
        push_wrapped(out, &prefill_line(p), 2);
    }
    if let Some(b) = &results.burst {
        for line in burst_lines(b) {
            push_wrapped(out, &line, 2);
        }
    }
}

/// The cells that are not ok, grouped by what happened to them, and why the run ended so.
fn push_not_ok(out: &mut String, results: &RunResults) {
    // Cells that are not ok, grouped by what happened to them: a cause shared by every cell
    // (an engine that never started) is said once, with the cells it hit.
    let mut groups: Vec<(&'static str, &str, Vec<String>)> = Vec::new();
    for c in results.cells.iter().filter(|c| c.status != CellStatus::Ok) {
        let status = match c.status {
            CellStatus::CapacityLimited => "capacity-limited",
            CellStatus::Saturated => "saturated",
            CellStatus::Error => "error",
            CellStatus::Skipped => "skipped",
            CellStatus::Ok => "ok",
        };
        let reason = c.reason.as_deref().unwrap_or("(no reason recorded)");
        let at = cell_label(c.concurrency, c.context_tokens);
        match groups
            .iter_mut()
            .find(|(s, r, _)| *s == status && *r == reason)
        {
            Some((_, _, cells)) => cells.push(at),
            None => groups.push((status, reason, vec![at])),
        }
    }
    if !groups.is_empty() {
        out.push_str("Cells not ok:\n");
        for (status, reason, cells) in &groups {
            let line = format!("  {} {status}: {reason}", cells.join(", "));
            push_wrapped(out, &line, 4);
        }
    }
    if let Some(reason) = &results.status_reason {
        let status = results.status.as_str();
        // Said once: when the cells above already carry this reason, only the status is new.
        if groups.iter().any(|(_, r, _)| *r == reason.as_str()) {
            out.push_str(&format!("Run {status} (the reason is given above).\n"));
        } else {
            push_wrapped(out, &format!("Run {status}: {reason}"), 2);
        }
    }
}

/// The burst layer under the table: what was sent and how every request ended, the
/// throughput, then each latency's p50/p90/p99 and which of them its observations bound
/// (`PERCENTILE_BOUND`: a p90 needs 29, a p99 299).
fn burst_lines(b: &BurstRecord) -> Vec<String> {
    use infergate_model::stats::rule::percentile_min_count;
    let rate = b
        .settings
        .request_rate
        .map_or_else(|| "all at once".to_string(), |r| format!("at {r}/s"));
    let mut first = format!(
        "Burst: {} requests {rate} ({} prompt, {} output tokens each): {} completed, {} ended early, {} failed in {:.2} s; {} total tok/s, {} output tok/s, {:.1} requests/s",
        b.sent,
        b.settings.prompt_tokens,
        b.settings.max_tokens,
        b.completed,
        b.incomplete,
        b.errors,
        b.duration_s,
        tok_s(b.total_tps),
        tok_s(b.output_tps),
        b.request_throughput
    );
    if let (Some(good), Some(rate)) = (b.good, b.goodput) {
        first.push_str(&format!(
            "; goodput {good} of {} within the SLOs ({rate:.1}/s)",
            b.completed
        ));
    }
    if let Some(p) = &b.first_problem {
        first.push_str(&format!(" ({p})"));
    }
    let mut lines = vec![first];
    let bounded = |count: u64| {
        let ok: Vec<&str> = [(0.5, "p50"), (0.9, "p90"), (0.99, "p99")]
            .into_iter()
            .filter(|(q, _)| count >= percentile_min_count(*q))
            .map(|(_, name)| name)
            .collect();
        if ok.is_empty() {
            "none bounded".to_string()
        } else {
            format!("{} bounded", ok.join(", "))
        }
    };
    for (name, p) in [
        ("TTFT", &b.ttft_s),
        ("TPOT", &b.tpot_s),
        ("ITL", &b.itl_s),
        ("E2EL", &b.e2el_s),
    ] {
        if let Some(p) = p {
            lines.push(format!(
                "  {name} p50 / p90 / p99: {} / {} / {} ms ({} observations: {})",
                fmt_ms(p.p50),
                fmt_ms(p.p90),
                fmt_ms(p.p99),
                p.count,
                bounded(p.count)
            ));
        }
    }
    lines
}

/// "Prefill 8k: 187,012 tok/s (TTFT 44 ms, 3 cold samples; engine counters 189,500 tok/s,
/// within tolerance)": the prefill layer at one context.
fn prefill_line(p: &PrefillRecord) -> String {
    use infergate_schema::results::PrefillAgreement;
    let label = context_label(p.context_tokens);
    let cold: Vec<_> = p.samples.iter().filter(|s| s.cold).collect();
    let rate = match p.prefill_tps {
        Some(tps) => {
            let mut ttft: Vec<f64> = cold.iter().map(|s| s.ttft_s).collect();
            ttft.sort_by(f64::total_cmp);
            let mid = ttft.get(ttft.len() / 2).copied().unwrap_or(0.0);
            format!(
                "{} tok/s (TTFT {} ms, {} cold samples",
                tok_s(tps),
                fmt_ms(mid),
                cold.len()
            )
        }
        None => "no cold sample (".to_string(),
    };
    let engine = p
        .engine_counters
        .as_ref()
        .and_then(|c| c.engine_prefill_tps)
        .map(|t| format!("engine counters {} tok/s, ", tok_s(t)))
        .unwrap_or_default();
    let verdict = match p.cross_check.verdict {
        PrefillAgreement::WithinTolerance => format!("{engine}within tolerance"),
        PrefillAgreement::Disagrees => format!(
            "{engine}DISAGREE: {}",
            p.cross_check.detail.as_deref().unwrap_or("")
        ),
        PrefillAgreement::Unavailable => "no engine counters".to_string(),
    };
    let mut line = format!("Prefill {label}: {rate}; {verdict})");
    if let Some(e) = &p.error {
        line.push_str(&format!("; {e}"));
    }
    line
}

/// One log line per event: `19:48:41 ready C=1 ctx=8k running_reqs=1/1, ...` (cell events
/// carry their own wording; run-level events are prefixed with their kind).
pub(crate) fn format_event(e: &Event) -> String {
    let time = e.at.format("%H:%M:%S");
    if e.concurrency.is_some() {
        format!("{time} {}", e.message)
    } else {
        format!("{time} {} {}", e.kind, e.message)
    }
}

/// Whether an event ends a cell (drives the progress bar).
fn ends_cell(e: &Event) -> bool {
    matches!(e.kind, EventKind::CellDone | EventKind::CellError)
}

/// Renders progress events on stderr until the sender side closes: a progress bar on a
/// terminal, one line per event otherwise (CI logs).
pub async fn render_progress(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Event>,
    total_cells: u64,
) {
    let tty = std::io::stderr().is_terminal();
    let bar = if tty {
        let bar = indicatif::ProgressBar::new(total_cells);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} cells  {wide_msg}",
        ) {
            bar.set_style(style);
        }
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        Some(bar)
    } else {
        None
    };
    // A notice repeated by every boot (no GPU telemetry, in each of an A/B's 16 boots) is
    // said once; each boot's results keep it.
    let mut noticed = BTreeSet::new();
    while let Some(e) = rx.recv().await {
        if e.kind == EventKind::Notice && !noticed.insert(e.message.clone()) {
            continue;
        }
        let line = wrap(&infergate_io::untrusted_text::console(&format_event(&e)), 9);
        match &bar {
            Some(bar) => {
                if ends_cell(&e) || e.concurrency.is_none() {
                    bar.println(&line);
                }
                if ends_cell(&e) {
                    bar.inc(1);
                }
                bar.set_message(infergate_io::untrusted_text::console(&e.message));
            }
            None => errln!("{line}"),
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use infergate_schema::asserts::{assert_contains, assert_ends_with, assert_starts_with};
    use infergate_schema::results::*;

    fn pct(mean: f64) -> Percentiles {
        Percentiles {
            mean,
            p50: mean,
            p90: mean * 1.2,
            p99: mean * 1.5,
            count: 100,
        }
    }

    fn ok(c: u32, l: u64, tps: f64, ttft: f64, itl: f64) -> CellResult {
        let mut cell = CellResult::unmeasured(c, l, CellStatus::Ok, "");
        cell.reason = None;
        cell.aggregate_tps = tps;
        cell.samples = vec![tps; 5];
        cell.ttft_s = Some(pct(ttft));
        cell.itl_s = Some(pct(itl));
        cell.per_user_tps = Some(pct(1.0 / itl));
        cell.effective_concurrency = Some(f64::from(c));
        cell.measured_s = 10.0;
        cell.output_tokens = (tps * 10.0) as u64;
        cell
    }

    /// An error is wrapped at 100 columns, each of its own lines kept (an engine log's tail);
    /// a word longer than a line (a path) is never cut.
    #[test]
    fn error_lines_are_wrapped_and_keep_their_lines() {
        let long = format!("cannot read {}: {}", "/a/b".repeat(40), "word ".repeat(30));
        let text = error_line(&format!(
            "{long}\n--- last lines of the engine log ---\nboom"
        ));
        assert_starts_with(&text, "error: cannot read\n  /a/b");
        assert_eq!(text.lines().filter(|l| !fits(l)).count(), 1, "{text}");
        assert_contains(&text, &"/a/b".repeat(40));
        assert_ends_with(&text, "\n--- last lines of the engine log ---\nboom");
        assert_eq!(error_line("short"), "error: short");
    }

    /// An ITL p50 of tokens that came together is not shown; the 3 ms step of a server that
    /// pauses regularly (15.5 ms a token on average) is.
    #[test]
    fn detail_line_hides_bursts_not_stalls() {
        let mut burst = ok(1, 0, 750.0, 0.04, 0.0001);
        burst.per_user_tps = Some(pct(750.0));
        assert_eq!(detail_line(&burst).as_deref(), Some("40/—"));
        let mut stalls = ok(1, 0, 64.5, 0.04, 0.003);
        stalls.per_user_tps = Some(pct(1.0 / 0.0155));
        assert_eq!(detail_line(&stalls).as_deref(), Some("40/3.0"));
    }

    /// Figures as an H200 reported them under load (device check, 2026-12-04).
    #[test]
    fn telemetry_line_names_heat_and_clock_limits() {
        let t = infergate_store::export::fixture::h200_telemetry();
        assert_eq!(
            telemetry_line(&t).as_deref(),
            Some(
                "telemetry: 0: NVIDIA H200 · energy 5614 J · 1.590 J/token · avg power 442 W · max 63 °C · clocks\n  limited by sw_power_cap"
            )
        );
        // Energy counts every window; J/token says when it leaves idle ones out.
        let mixed = TelemetrySummary {
            idle_windows: Some(2),
            ..t.clone()
        };
        let line = telemetry_line(&mixed).unwrap();
        assert_contains(&line, "1.590 J/token (2 idle-GPU windows left out)");
        // A GPU without an energy counter or power reading: those figures are left out, not
        // shown as dashes.
        let bare = TelemetrySummary {
            energy_j: None,
            joules_per_token: None,
            power_w_avg: None,
            ..t.clone()
        };
        assert_eq!(
            telemetry_line(&bare).as_deref(),
            Some("telemetry: 0: NVIDIA H200 · max 63 °C · clocks limited by sw_power_cap")
        );
        let off = TelemetrySummary {
            status: "unavailable".into(),
            ..t
        };
        assert_eq!(telemetry_line(&off), None);
    }

    /// The power cap is a busy GPU's normal state; heat and hardware slowdowns are the runner's.
    #[test]
    fn clock_slowdowns_name_cells_slowed_by_heat_not_by_the_power_cap() {
        let mut r = sample_results();
        r.cells[0].telemetry = Some(infergate_store::export::fixture::h200_window(&[
            "sw_power_cap",
        ]));
        r.cells[3].telemetry = Some(infergate_store::export::fixture::h200_window(&[
            "sw_power_cap",
            "hw_thermal_slowdown",
        ]));
        let slowed = crate::report::layout::slowed_cells;
        assert_eq!(slowed(&r), vec!["C=1 / 8k (hw_thermal_slowdown)"]);
        r.cells[3].telemetry = None;
        assert!(slowed(&r).is_empty());
    }

    /// A vLLM run of Qwen3-8B over 3 × 3 cells: ok ones, one with failed requests, one error
    /// and one capacity-limited.
    fn sample_results() -> RunResults {
        let mut cap = ok(8, 131072, 17.1, 40.2, 0.058);
        cap.status = CellStatus::CapacityLimited;
        cap.effective_concurrency = Some(5.4);
        cap.reason = Some("running 5/8, waiting 3: KV capacity (admission stalled 3.0 s)".into());
        let mut err = CellResult::unmeasured(
            2,
            131072,
            CellStatus::Error,
            "14 of 14 requests failed: HTTP 500 Internal Server Error",
        );
        err.errors = 14;
        let mut with_errors = ok(8, 8192, 134.3, 0.481, 0.013);
        with_errors.errors = 2;
        RunResults {
            tool: ToolInfo {
                name: "infergate".into(),
                version: "0.1.0".into(),
            },
            engine: EngineIdentity {
                name: "vllm".into(),
                version: Some("0.11.0".into()),
                ..EngineIdentity::default()
            },
            matrix: MatrixSpec {
                model: "Qwen/Qwen3-8B".into(),
                concurrency: vec![1, 2, 8],
                contexts: vec![0, 8192, 131072],
                timing: CellTiming {
                    duration_s: 10.0,
                    warmup_s: 3.0,
                    max_tokens: 1024,
                    unique_context_percent: 25.0,
                    sub_windows: 5,
                    ..CellTiming::DEFAULT
                },
                repetitions: 1,
            },
            cells: vec![
                ok(1, 0, 146.7, 0.076, 0.0068),
                ok(2, 0, 258.2, 0.119, 0.0077),
                ok(8, 0, 564.8, 0.481, 0.013),
                ok(1, 8192, 45.4, 3.2, 0.022),
                ok(2, 8192, 70.2, 4.1, 0.028),
                with_errors,
                ok(1, 131072, 38.3, 12.5, 0.026),
                err,
                cap,
            ],
            ..infergate_model::synthetic::template()
        }
    }

    #[test]
    fn matrix_rendering_snapshot() {
        let mut r = sample_results();
        // One skipped cell replaces a measured one to show every marker.
        r.cells[2] = CellResult::unmeasured(8, 0, CellStatus::Skipped, "cancelled");
        insta::assert_snapshot!(render_matrix(&r));
    }

    /// TPOT joins the detail line where measured; a capacity-limited cell without engine
    /// metrics is marked as the client's view (never "from engine metrics"); an unverified
    /// client count is said under the matrix.
    #[test]
    fn tpot_client_view_and_unverified_counts_are_shown() {
        let mut r = sample_results();
        r.cells[0].tpot_s = Some(pct(0.0071));
        r.cells[0].unverified = Some("client count not cross-checked: no usage".into());
        let cap = r
            .cells
            .iter_mut()
            .find(|c| c.status == CellStatus::CapacityLimited)
            .unwrap();
        cap.effective_concurrency = None;
        cap.requests = Some(RequestTally {
            max_streams_at_once: 1,
            ..RequestTally::default()
        });
        let out = render_matrix(&r);
        assert_contains(&out, "TTFT/TPOT/ITL p50 ms");
        assert_contains(&out, "/7.1/");
        assert_contains(&out, "(1/8)°");
        assert_contains(&out, "(X/Y)° = capacity-limited, as the client saw it");
        assert_contains(&out, "Client count not cross-checked in 1 of");
    }

    /// A capacity-limited cell decided without a window (a smaller C at its context already
    /// was) shows no figure: not `0.0`, not the client's view of a window it never had.
    #[test]
    fn a_capacity_cell_decided_without_a_window_shows_no_figure() {
        let mut r = sample_results();
        let idx = r
            .cells
            .iter()
            .position(|c| c.status == CellStatus::Error)
            .unwrap();
        r.cells[idx] = CellResult::unmeasured(
            2,
            131072,
            CellStatus::CapacityLimited,
            "C=1 already capacity-limited at 128k: not measured",
        );
        assert!(!r.cells[idx].has_window());
        let out = render_matrix(&r);
        assert_contains(&out, "— (cap)");
        assert!(!out.contains("0.0 (?/2)") && !out.contains("°"), "{out}");
        assert_contains(&out, "— (cap) = capacity-limited without a window");
        assert!(fits(&out), "{out}");
    }

    #[test]
    fn a_labelled_line_wraps_under_its_text() {
        let text = "unavailable: ".to_string() + &"word ".repeat(40);
        let out = wrap_labelled("NVML:    ", text.trim_end());
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("NVML:    unavailable: word"), "{out}");
        assert_eq!(wrap_labelled("NVML:    ", ""), "NVML:    ");
        assert!(lines.len() > 1 && lines[1..].iter().all(|l| l.starts_with("         word")));
        assert!(fits(&out), "{out}");
    }

    #[test]
    fn compact_milliseconds() {
        assert_eq!(fmt_ms(0.0068), "6.8");
        assert_eq!(fmt_ms(0.076), "76");
        assert_eq!(fmt_ms(12.345), "12.3k");
        assert_eq!(fmt_ms(140.5), "140k");
    }

    #[test]
    fn event_lines() {
        let mut e = Event::cell(
            EventKind::Ready,
            1,
            8192,
            "ready C=1 ctx=8k running_reqs=1/1",
        );
        e.at = chrono::Utc
            .with_ymd_and_hms(2026, 7, 16, 19, 48, 41)
            .unwrap();
        assert_eq!(
            format_event(&e),
            "19:48:41 ready C=1 ctx=8k running_reqs=1/1"
        );
        let mut s = Event::now(EventKind::Startup, "calibrated: 4.00 chars/token");
        s.at = e.at;
        assert_eq!(
            format_event(&s),
            "19:48:41 startup calibrated: 4.00 chars/token"
        );
    }

    /// One line per prefill context under the table, with the engine's figure and verdict.
    #[test]
    fn prefill_lines_follow_the_table() {
        use infergate_schema::results::{
            PrefillAgreement, PrefillCounters, PrefillCrossCheck, PrefillRecord, PrefillSample,
            PrefillSampleKind,
        };
        let mut r = sample_results();
        let sample = |kind, ttft_s: f64, cold| PrefillSample {
            kind,
            prompt_tokens: 8192,
            ttft_s,
            prefill_tps: 8192.0 / ttft_s,
            cold,
        };
        r.prefill = vec![PrefillRecord {
            context_tokens: 8192,
            samples: vec![
                sample(PrefillSampleKind::Warmup, 0.05, false),
                sample(PrefillSampleKind::Unique, 0.041, true),
                sample(PrefillSampleKind::Unique, 0.043, true),
            ],
            prefill_tps: Some(8192.0 / 0.042),
            engine_counters: Some(PrefillCounters {
                prompt_metric: "vllm:prompt_tokens_total".into(),
                prompt_tokens: 16384.0,
                excludes_cached: false,
                time_metric: Some("vllm:request_prefill_time_seconds".into()),
                seconds: Some(0.082),
                engine_prefill_tps: Some(16384.0 / 0.082),
            }),
            cross_check: PrefillCrossCheck {
                verdict: PrefillAgreement::WithinTolerance,
                checks: Vec::new(),
                detail: None,
            },
            error: None,
        }];
        let out = render_matrix(&r).replace("\n  ", " ");
        assert_contains(
            &out,
            "Prefill 8k: 195,048 tok/s (TTFT 43 ms, 2 cold samples; engine counters 199,805 tok/s, within tolerance)",
        );
    }
}
