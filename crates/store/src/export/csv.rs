//! CSV of the cell table, one row per cell, for spreadsheets and notebooks: the cell, its
//! status, the headline figures and, with a verdict, the cell's verdict and its primary change.
//! Absent figures are empty cells. Text fields that a spreadsheet would run as a formula
//! (starting with `=`, `+`, `-`, `@`, tab or carriage return) are prefixed with `'`.

use super::{ExportError, check_pair};
use infergate_schema::results::{Percentiles, RunResults};
use infergate_schema::verdict::ComparisonReport;

/// The header row.
pub(crate) const COLUMNS: [&str; 25] = [
    "run_id",
    "profile",
    "engine",
    "model",
    "concurrency",
    "context_tokens",
    "status",
    "reason",
    "aggregate_tps",
    "samples",
    "per_user_tps_p50",
    "ttft_p50_s",
    "ttft_p90_s",
    "itl_p50_s",
    "itl_p90_s",
    "output_tokens",
    "measured_s",
    "errors",
    "steps_per_s",
    "joules_per_token",
    "verdict",
    "verdict_reason",
    "change",
    "ci_low",
    "ci_high",
];

/// A text field made safe for spreadsheets (CSV injection).
pub(crate) fn text(s: &str) -> String {
    if s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{s}")
    } else {
        s.to_string()
    }
}

fn num(v: Option<f64>) -> String {
    v.filter(|v| v.is_finite())
        .map(|v| v.to_string())
        .unwrap_or_default()
}

fn pct(p: Option<Percentiles>, f: fn(&Percentiles) -> f64) -> String {
    num(p.as_ref().map(f))
}

/// The CSV text of a run, with the verdict's columns filled when one is given.
pub fn render(run: &RunResults, verdict: Option<&ComparisonReport>) -> Result<String, ExportError> {
    if let Some(report) = verdict {
        check_pair(run, report)?;
    }
    let mut w = ::csv::Writer::from_writer(Vec::new());
    w.write_record(COLUMNS)?;
    for c in &run.cells {
        let status = serde_json::to_value(c.status)?
            .as_str()
            .unwrap_or_default()
            .to_string();
        let cmp = verdict.and_then(|r| {
            r.cells
                .iter()
                .find(|v| (v.concurrency, v.context_tokens) == c.coord())
        });
        let primary = cmp.and_then(|v| v.primary());
        let row = [
            text(&run.run_id),
            text(&run.profile.key),
            text(&run.profile.engine),
            text(&run.profile.model),
            c.concurrency.to_string(),
            c.context_tokens.to_string(),
            status,
            text(c.reason.as_deref().unwrap_or_default()),
            num(Some(c.aggregate_tps)),
            c.samples.len().to_string(),
            pct(c.per_user_tps, |p| p.p50),
            pct(c.ttft_s, |p| p.p50),
            pct(c.ttft_s, |p| p.p90),
            pct(c.itl_s, |p| p.p50),
            pct(c.itl_s, |p| p.p90),
            c.output_tokens.to_string(),
            num(Some(c.measured_s)),
            c.errors.to_string(),
            num(c.spec_decode.as_ref().map(|s| s.steps_per_s)),
            num(c.telemetry.as_ref().and_then(|t| t.joules_per_token)),
            cmp.map(|v| v.verdict.as_str().to_string())
                .unwrap_or_default(),
            text(
                &cmp.and_then(|v| v.reason.as_ref())
                    .map_or_else(String::new, ToString::to_string),
            ),
            num(primary.map(|m| m.change)),
            num(primary.map(|m| m.ci_low)),
            num(primary.map(|m| m.ci_high)),
        ];
        w.write_record(&row)?;
    }
    let bytes = w.into_inner().map_err(|e| e.into_error())?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::fixture;
    use infergate_schema::asserts::assert_contains;

    #[test]
    fn formulas_are_defused_and_numbers_kept() {
        assert_eq!(text("=1+1"), "'=1+1");
        assert_eq!(text("-x"), "'-x");
        assert_eq!(text("@SUM"), "'@SUM");
        assert_eq!(text("ok"), "ok");
        let run = fixture::run();
        let report = fixture::verdict(&run);
        let out = render(&run, Some(&report)).unwrap();
        let mut r = ::csv::Reader::from_reader(out.as_bytes());
        let rows: Vec<::csv::StringRecord> = r.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), run.cells.len());
        assert_eq!(
            rows[0][8].parse::<f64>().unwrap(),
            run.cells[0].aggregate_tps
        );
        assert_eq!(&rows[1][20], "regression");
        assert_eq!(rows[1][22].parse::<f64>().unwrap(), 45.5 / 50.0 - 1.0);
        assert!(rows[3][7].starts_with("'=HYPERLINK"), "{}", &rows[3][7]);
    }

    #[test]
    fn a_verdict_of_other_runs_is_refused() {
        let run = fixture::run();
        let mut report = fixture::verdict(&run);
        report.candidate_runs = vec!["someone-else".into()];
        let err = render(&run, Some(&report)).unwrap_err().to_string();
        assert_contains(&err, "not for results run");
    }
}
