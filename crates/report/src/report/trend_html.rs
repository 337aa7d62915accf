//! The trend report: one self-contained HTML page (inline CSS, SVG and a few lines of script; no
//! network, so it works straight from a CI artifact) with, per baseline group, the matrix as a
//! heat map of change and each series' history as a plot: a point per run, the level and band
//! of each segment between change points, the change points marked, the candidate highlighted.
//!
//! Every string from the store (engine and model names in the profile key, run ids, commits,
//! notes) is data: it goes through [`html`] before it reaches the page, and the embedded JSON
//! has `<` escaped so it cannot close its script element.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::report::changes::{
    GroupChanges, change_label, commits_label, location_label, scope_label,
};
use infergate_io::untrusted_text::{is_bidi_control, is_invisible};
use infergate_model::stats::changepoint::{ChangePoint, HistorySeries, RunRef, Scope};
use infergate_schema::answer::{metric_label, metric_name, plural, value_range};
use infergate_schema::results::context_label;
use infergate_schema::verdict::{Metric, signed_percent};

/// Escapes text for HTML element content and quoted attribute values.
pub(crate) fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' => out.push(' '),
            c if is_bidi_control(c) || is_invisible(c) => {
                out.push('\u{FFFD}');
            }
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1f2328;background:#fff}\
h1{font-size:20px}h2{font-size:17px;margin-top:32px}h3{font-size:14px;margin:18px 0 4px}\
table.heat{border-collapse:collapse;margin:8px 0}table.heat td,table.heat th{border:1px solid #d0d7de;padding:4px 8px;text-align:right}\
svg.plot{display:block;border:1px solid #d0d7de;background:#fafbfc}\
.band{fill:#54aeff;fill-opacity:.18}.level{stroke:#0969da;stroke-width:1.5}\
.cp-span{fill:#cf222e;fill-opacity:.16;stroke:#cf222e;stroke-opacity:.6}.cp-est{stroke:#cf222e;stroke-width:1.5}.cp-label{fill:#cf222e;font-size:11px}\
.cp-span.accepted{fill:#8250df;stroke:#8250df}.pt{fill:#57606a}.pt.candidate{fill:#bf8700;stroke:#1f2328;stroke-width:1.5}\
.axis{fill:#57606a;font-size:11px}.grid{stroke:#d0d7de}\
.legend span{margin-right:14px}.sw{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}\
#status{color:#57606a}";

const SCRIPT: &str = "(function(){var d=JSON.parse(document.getElementById('trend-data').textContent);\
var n=0;d.forEach(function(g){n+=g.change_points.length;});\
var s=document.getElementById('status');if(s){s.textContent=d.length+' group(s), '+n+' change point(s)';}\
document.querySelectorAll('circle.pt').forEach(function(c){c.addEventListener('click',function(){\
var o=document.getElementById('picked');if(o){o.textContent=c.getAttribute('data-run')+': '+c.getAttribute('data-value');}});});})();";

/// The whole page for `groups`.
pub fn render(groups: &[GroupChanges]) -> String {
    let mut out = String::new();
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    out.push_str("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'\">");
    out.push_str("<title>infergate trend report</title><style>");
    out.push_str(STYLE);
    out.push_str("</style></head><body>\n<h1>infergate trend report</h1>\n");
    out.push_str(
        "<p class=\"legend\"><span><i class=\"sw\" style=\"background:#57606a\"></i>run</span>\
<span><i class=\"sw\" style=\"background:#bf8700\"></i>candidate (newest)</span>\
<span><i class=\"sw\" style=\"background:#0969da\"></i>level</span>\
<span><i class=\"sw\" style=\"background:#54aeff;opacity:.4\"></i>band (±2 robust SD)</span>\
<span><i class=\"sw\" style=\"background:#cf222e\"></i>change point (line: estimate; shaded: where it may be, at the interval's confidence)</span>\
<span><i class=\"sw\" style=\"background:#8250df\"></i>accepted change</span></p>\n",
    );
    out.push_str("<p id=\"status\"></p><p id=\"picked\"></p>\n");
    if groups.is_empty() {
        out.push_str("<p>No baseline history.</p>\n");
    }
    for g in groups {
        group(&mut out, g);
    }
    let data = serde_json::to_string(groups)
        .unwrap_or_else(|_| "[]".into())
        .replace('<', "\\u003c");
    let _ = write!(
        out,
        "<script type=\"application/json\" id=\"trend-data\">{data}</script>\n<script>{SCRIPT}</script>\n</body></html>\n"
    );
    out
}

fn group(out: &mut String, g: &GroupChanges) {
    let h = &g.history;
    let _ = writeln!(
        out,
        "<section class=\"group\"><h2>{} / suite {}</h2><p>{}, {}{}.</p>",
        html(&g.profile_key),
        html(&g.suite),
        plural(h.runs.len(), "run"),
        plural(h.change_points.len(), "change point"),
        accepted_words(g)
    );
    heat_map(out, g);
    for s in &h.series {
        let _ = writeln!(
            out,
            "<h3>{} · {}</h3>",
            html(&scope_label(&s.scope, s.metric)),
            html(metric_name(s.metric))
        );
        plot(out, g, s);
    }
    out.push_str("</section>\n");
}

/// The newest change point of a series (its `change_points` entry).
/// `, accepted from run X; ITL p99 from run Y`: the accepts in force, each restarting the
/// group's every metric or the ones it names.
fn accepted_words(g: &GroupChanges) -> String {
    let each: Vec<String> = (g.accepted.iter())
        .map(|run| match g.accepted_metrics.get(run) {
            Some(ms) => {
                let names: Vec<String> = ms.iter().map(|m| metric_label(*m)).collect();
                format!("{} from run {}", names.join(", "), html(run))
            }
            None => format!("from run {}", html(run)),
        })
        .collect();
    if each.is_empty() {
        String::new()
    } else {
        format!(", accepted {}", each.join("; "))
    }
}

fn newest_change<'a>(g: &'a GroupChanges, s: &HistorySeries) -> Option<&'a ChangePoint> {
    g.history
        .change_points
        .iter()
        .find(|c| c.scope == s.scope && c.metric == s.metric)
}

fn heat_colour(change: f64) -> String {
    let strength = (change.abs() / 0.10).min(1.0);
    let light = 96.0 - 46.0 * strength;
    let hue = if change < 0.0 { 0 } else { 130 };
    format!("hsl({hue},70%,{light:.0}%)")
}

fn heat_map(out: &mut String, g: &GroupChanges) {
    let cells: Vec<&HistorySeries> = g
        .history
        .series
        .iter()
        .filter(|s| matches!(s.scope, Scope::Cell { .. }))
        .collect();
    let coords = cells.iter().filter_map(|s| match s.scope {
        Scope::Cell {
            concurrency,
            context_tokens,
        } => Some((concurrency, context_tokens)),
        Scope::Matrix => None,
    });
    let conc: BTreeSet<u32> = coords.clone().map(|(c, _)| c).collect();
    let ctx: BTreeSet<u64> = coords.map(|(_, x)| x).collect();
    out.push_str("<table class=\"heat\"><caption>Newest change point per cell (aggregate tok/s; red = slower)</caption><tr><th>context \\ C</th>");
    for c in &conc {
        let _ = write!(out, "<th>{c}</th>");
    }
    out.push_str("</tr>\n");
    for &x in &ctx {
        let _ = write!(out, "<tr><th>{}</th>", html(&context_label(x)));
        for &c in &conc {
            let series = cells.iter().find(|s| {
                s.scope
                    == Scope::Cell {
                        concurrency: c,
                        context_tokens: x,
                    }
                    && s.metric == Metric::AggregateTps
            });
            match series.and_then(|s| newest_change(g, s)) {
                Some(cp) => {
                    let _ = write!(
                        out,
                        "<td style=\"background:{}\" title=\"{}\">{}</td>",
                        heat_colour(cp.change),
                        html(&format!("{} at run {}", change_label(cp), cp.run_id)),
                        signed_percent(cp.change)
                    );
                }
                None if series.is_some() => out.push_str("<td>–</td>"),
                None => out.push_str("<td>n/a</td>"),
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

const W: f64 = 720.0;
const H: f64 = 220.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 18.0;
const BOTTOM: f64 = 30.0;

fn plot(out: &mut String, g: &GroupChanges, s: &HistorySeries) {
    let n_runs = g.history.runs.len().max(1);
    if s.values.is_empty() {
        out.push_str("<p>No ok value in this series.</p>\n");
        return;
    }
    let (lo, hi) = (s.values.iter().copied())
        .chain(s.segments.iter().flat_map(|x| [x.band_low, x.band_high]))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.002).max(1e-9);
    let (lo, hi) = (lo - pad, hi + pad);
    // Stores refuse values no measurement gives (`baseline::PLAUSIBLE_TPS`); a series that
    // still cannot be scaled is said, never drawn as `inf`/`NaN` coordinates.
    if !(lo.is_finite() && hi.is_finite() && hi > lo) {
        out.push_str("<p>This series holds values that cannot be drawn (not finite).</p>\n");
        return;
    }
    let x = |pos: usize| LEFT + (W - LEFT - RIGHT) * (pos as f64 + 0.5) / n_runs as f64;
    // Half a run's width: a run's band or change point starts this far left of its point.
    let half = (W - LEFT - RIGHT) / n_runs as f64 / 2.0;
    let y = |v: f64| TOP + (H - TOP - BOTTOM) * (hi - v) / (hi - lo);
    let _ = write!(
        out,
        "<svg class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"{}\">",
        html(&format!("history of {}", scope_label(&s.scope, s.metric)))
    );
    for v in [lo + pad, (lo + hi) / 2.0, hi - pad] {
        let _ = write!(
            out,
            "<line class=\"grid\" x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/><text class=\"axis\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            W - RIGHT,
            y(v),
            y(v),
            LEFT - 6.0,
            y(v) + 4.0,
            html(&series_value(s, v))
        );
    }
    for seg in &s.segments {
        let (Some(&first), Some(&last)) = (s.runs.get(seg.start), s.runs.get(seg.end - 1)) else {
            continue;
        };
        let (x0, x1) = (x(first) - half, x(last) + half);
        let _ = write!(
            out,
            "<rect class=\"band\" x=\"{x0:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\"/><line class=\"level\" x1=\"{x0:.1}\" x2=\"{x1:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"><title>{}</title></line>",
            y(seg.band_high),
            x1 - x0,
            (y(seg.band_low) - y(seg.band_high)).max(0.5),
            y(seg.level),
            y(seg.level),
            html(&format!(
                "level {} (band {} – {})",
                series_value(s, seg.level),
                series_value(s, seg.band_low),
                series_value(s, seg.band_high)
            ))
        );
    }
    change_marks(out, g, s, x, half);
    let newest = g.history.runs.len().saturating_sub(1);
    for (&pos, &v) in s.runs.iter().zip(&s.values) {
        let run = &g.history.runs[pos];
        let candidate = pos == newest;
        let label = format!(
            "{}{} · {} · {}",
            if candidate { "candidate · " } else { "" },
            run.run_id,
            run.commit.as_deref().unwrap_or("no commit label"),
            series_value(s, v)
        );
        let _ = write!(
            out,
            "<circle class=\"pt{}\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"{}\" data-run=\"{}\" data-value=\"{}\"><title>{}</title></circle>",
            if candidate { " candidate" } else { "" },
            x(pos),
            y(v),
            if candidate { 5 } else { 3 },
            html(&run.run_id),
            html(&series_value(s, v)),
            html(&label)
        );
    }
    if let (Some(first), Some(last)) = (g.history.runs.first(), g.history.runs.last()) {
        let _ = write!(
            out,
            "<text class=\"axis\" x=\"{LEFT}\" y=\"{:.1}\">{}</text><text class=\"axis\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            H - 10.0,
            html(&axis_label(first)),
            W - RIGHT,
            H - 10.0,
            html(&axis_label(last))
        );
    }
    out.push_str("</svg>\n");
}

/// The change points of series `s`: the span each may lie on, its estimate and its size.
fn change_marks(
    out: &mut String,
    g: &GroupChanges,
    s: &HistorySeries,
    x: impl Fn(usize) -> f64,
    half: f64,
) {
    for cp in g
        .history
        .change_points
        .iter()
        .filter(|c| c.scope == s.scope && c.metric == s.metric)
    {
        let pos_of = |id: &str| g.history.runs.iter().position(|r| r.run_id == id);
        let Some(pos) = pos_of(&cp.run_id) else {
            continue;
        };
        // The shaded span: every boundary the change may lie on at the interval's confidence
        // (from the run before its first possible run to its last possible run), the
        // estimate a solid tick on it.
        let (first, last) = cp
            .location_interval
            .as_ref()
            .and_then(|l| Some((pos_of(&l.first_run_id)?, pos_of(&l.last_run_id)?)))
            .unwrap_or((pos, pos));
        let (x0, x1) = (x(first.saturating_sub(1)), x(last));
        let cx = x(pos) - half;
        let _ = write!(
            out,
            "<rect class=\"cp-span{}\" x=\"{x0:.1}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{:.1}\"><title>{}</title></rect><line class=\"cp-est\" x1=\"{cx:.1}\" x2=\"{cx:.1}\" y1=\"{TOP}\" y2=\"{:.1}\"/><text class=\"cp-label\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            if cp.accepted { " accepted" } else { "" },
            (x1 - x0).max(1.0),
            H - BOTTOM - TOP,
            html(&format!(
                "change {} from run {}; where: {}; commits to bisect {}{}",
                change_label(cp),
                cp.run_id,
                location_label(cp),
                commits_label(cp),
                if cp.accepted { ", accepted" } else { "" }
            )),
            H - BOTTOM,
            x0 + 3.0,
            TOP - 4.0,
            html(&signed_percent(cp.change))
        );
    }
}

fn axis_label(r: &RunRef) -> String {
    let date = r.started_at.get(..10).unwrap_or(&r.started_at);
    match &r.commit {
        Some(c) => format!("{date} {}", c.chars().take(9).collect::<String>()),
        None => date.to_string(),
    }
}

/// A series' value as its axis and tooltips show it: a latency cell's in ms (`18.3 ms`), as
/// the gate's reports write it; anything else (a matrix series' level relative to the
/// cells', a throughput) as a number.
fn series_value(s: &HistorySeries, v: f64) -> String {
    let ms = s.metric.is_latency_percentile() || s.metric == Metric::BurstTtftP90;
    if ms && s.scope != Scope::Matrix {
        value_range(s.metric, std::iter::once(v))
    } else {
        format_value(v)
    }
}

fn format_value(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_model::stats::changepoint::{ChangeSettings, analyse};
    use infergate_schema::asserts::{assert_contains, assert_lacks};
    use infergate_schema::verdict::Metric;
    use rand::SeedableRng;

    pub(crate) fn hostile_group() -> GroupChanges {
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let runs: Vec<_> = (0..24)
            .map(|i| {
                let f = if i >= 16 { 0.94 } else { 1.0 };
                let mut r = infergate_model::synthetic::synthetic_run(
                    &format!("run<{i:02}>"),
                    &mut rng,
                    0.004,
                    0.008,
                    &|_| f,
                );
                r.started_at += chrono::Duration::days(i);
                r.labels
                    .insert("sha".into(), format!("\"><script>alert({i})</script>"));
                r
            })
            .collect();
        let history = analyse(
            &runs,
            &[Metric::AggregateTps],
            &[],
            &ChangeSettings::default(),
        )
        .unwrap();
        GroupChanges {
            profile_key: "gpu__<img src=x onerror=alert(1)>__m".into(),
            suite: "nightly&'".into(),
            accepted: vec![],
            accepted_metrics: Default::default(),
            candidate: None,
            history,
        }
    }

    /// The group's heading names what each accept restarted: every metric, or those it names.
    #[test]
    fn the_heading_names_each_accepts_metrics() {
        let mut g = hostile_group();
        assert_lacks(&render(std::slice::from_ref(&g)), "accepted from");
        g.accepted = vec!["run<04>".into(), "run<09>".into()];
        (g.accepted_metrics).insert("run<09>".into(), vec![Metric::ItlP99, Metric::BurstTtftP90]);
        assert_contains(
            &render(&[g]),
            ", accepted from run run&lt;04&gt;; ITL p99, burst TTFT p90 from run run&lt;09&gt;.",
        );
    }

    /// A latency cell's series reads in ms on its axis and points, as the gate's reports write
    /// it; the matrix series of the same metric stays a level relative to the cells'.
    #[test]
    fn a_latency_cells_plot_reads_in_ms() {
        let mut g = hostile_group();
        let series = |scope: Scope, values: Vec<f64>| HistorySeries {
            scope,
            metric: Metric::ItlP99,
            runs: (0..values.len()).collect(),
            values,
            against_rest: false,
            min_effect: None,
            changes: Vec::new(),
            segments: Vec::new(),
        };
        let cell = Scope::Cell {
            concurrency: 4,
            context_tokens: 8192,
        };
        g.history.series = vec![
            series(Scope::Matrix, vec![0.98, 1.02]),
            series(cell, vec![0.0183, 0.0191]),
        ];
        let page = render(&[g]);
        assert!(page.contains("data-value=\"18.3 ms\""), "{page}");
        assert!(page.contains("data-value=\"0.9800\""), "{page}");
        assert!(page.contains("<h3>C=4 / 8k · ITL p99</h3>"), "{page}");
    }

    #[test]
    fn a_series_that_cannot_be_scaled_is_said_not_drawn() {
        let mut g = hostile_group();
        for s in &mut g.history.series {
            if let Some(v) = s.values.first_mut() {
                *v = f64::INFINITY;
            }
        }
        let page = render(std::slice::from_ref(&g));
        for bad in ["=\"inf", "=\"NaN", "=\"-inf", ">inf<", ">NaN<"] {
            let at = page.find(bad);
            assert!(
                at.is_none(),
                "drawn anyway: {:?}",
                at.map(|i| &page[i.saturating_sub(80)..i + 20])
            );
        }
        assert_eq!(
            page.matches("cannot be drawn").count(),
            g.history.series.len()
        );
    }

    #[test]
    fn page_holds_every_run_and_change_and_no_markup_from_the_store() {
        let g = hostile_group();
        let page = render(std::slice::from_ref(&g));
        assert!(page.starts_with("<!DOCTYPE html>"));
        // Store text is escaped.
        assert_lacks(&page, "<script>alert");
        assert_lacks(&page, "<img");
        assert!(
            !page.contains("src=\"") && !page.contains("href"),
            "nothing loaded from elsewhere"
        );
        // One plot per series, one point per ok value, one marker per change point.
        assert_eq!(
            page.matches("<svg class=\"plot\"").count(),
            g.history.series.len()
        );
        let points: usize = g.history.series.iter().map(|s| s.values.len()).sum();
        assert_eq!(page.matches("<circle class=\"pt").count(), points);
        assert_eq!(
            page.matches("<rect class=\"cp-span").count(),
            g.history.change_points.len()
        );
        assert!(!g.history.change_points.is_empty());
        assert_eq!(
            page.matches("<circle class=\"pt candidate\"").count(),
            g.history.series.len()
        );
        // The numbers of the store are in the plots.
        let v = g.history.series[1].values[3];
        assert!(page.contains(&format!("data-value=\"{}\"", format_value(v))));
        // The heat map has a cell per (context, concurrency).
        assert_eq!(page.matches("<td").count(), 20);
        assert_eq!(page.matches("<script").count(), 2);
    }
}
