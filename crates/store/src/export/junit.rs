//! JUnit XML, the file every CI test reporter renders (the Jenkins `junit-10.xsd` shape that
//! dorny/test-reporter and mikepenz/action-junit-report read): one `<testcase>` per cell and
//! metric (`classname` = the cell, `name` = the metric, `time` = the cell's measured seconds).
//!
//! With a verdict: each regressed cell has exactly one `<failure>` with the cell's reason, on
//! its first regressed metric (a capacity regression, which has no metric, on a `cell` case);
//! a matrix-wide regression is one more failure; cells that could not be compared are
//! `<skipped>` with the reason. Without a verdict nothing fails: the cases carry the figures,
//! cells that errored are `<error>`, skipped cells `<skipped>`. Engine-provided text (model
//! names, reasons) is escaped, and characters XML 1.0 cannot hold are replaced with U+FFFD.

use quick_xml::Writer;
use quick_xml::events::{BytesDecl, BytesText, Event};

use super::{ExportError, cell_name, check_pair, figures, unit};
use infergate_schema::answer::{
    cell_word, cells_word, direction_word, interval, label, metric_name, with_unit,
};
use infergate_schema::results::{CellResult, CellStatus, RunResults, RunStatus};
use infergate_schema::verdict::{
    CellComparison, CellVerdict, ComparisonReport, DecisionBasis, Metric, MetricComparison,
    signed_percent,
};

/// Text made storable in XML 1.0: control characters other than tab, LF and CR (and the
/// non-characters U+FFFE/U+FFFF) become U+FFFD. Escaping of `<`, `&`, quotes is the writer's.
pub(crate) fn xml_safe(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\t' | '\n' | '\r' => c,
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => '\u{FFFD}',
            c => c,
        })
        .collect()
}

/// What a test case reports besides passing.
enum Outcome {
    Pass,
    Failure {
        kind: String,
        message: String,
        body: String,
    },
    Error {
        message: String,
    },
    Skipped {
        reason: String,
    },
}

/// One `<testcase>`.
struct Case {
    classname: String,
    name: String,
    time: f64,
    outcome: Outcome,
    out: String,
}

fn cell_time(run: &RunResults, coord: (u32, u64)) -> f64 {
    run.cells
        .iter()
        .find(|c| c.coord() == coord)
        .map_or(0.0, |c| c.measured_s)
}

/// A metric's comparison in the reports' words (levels with units, the change it was decided
/// on with its interval, the margin, the verdict), then its own test as the check line a
/// reviewer redoes by hand.
fn describe(c: &CellComparison, m: &MetricComparison) -> String {
    let d = m.shown_change();
    // As the reports say it: the primary metric's verdict, every other metric's direction.
    let word = match m.verdict {
        CellVerdict::Regression | CellVerdict::Improvement if m.metric != Metric::AggregateTps => {
            direction_word(m.change)
        }
        v => cell_word(v),
    };
    let mut text = format!(
        "{} {} → {}, {} {}{}, margin {:.1}%: {}",
        metric_name(m.metric),
        with_unit(m.metric, m.baseline),
        with_unit(m.metric, m.candidate),
        signed_percent(d.change),
        interval(d.ci_low, d.ci_high),
        match d.basis {
            DecisionBasis::Total => String::new(),
            _ => format!(" ({})", d.label()),
        },
        100.0 * m.margin,
        word
    );
    if let Some(check) = &m.check {
        text.push_str("; ");
        text.push_str(&check.line(&format!("cell {} {}", label(c), metric_name(m.metric))));
    }
    text
}

fn verdict_cases(run: &RunResults, report: &ComparisonReport) -> Vec<Case> {
    let mut cases = Vec::new();
    for c in &report.cells {
        cases.extend(cell_verdict_cases(run, c));
    }
    if let Some(m) = &report.matrix_test {
        let mut out = format!(
            "matrix-wide aggregate tok/s over {}: {} {}, margin {:.1}%: {}",
            cells_word(m.cells),
            signed_percent(m.change),
            interval(m.ci_low, m.ci_high),
            100.0 * m.margin,
            cell_word(m.verdict)
        );
        if let Some(check) = &m.check {
            out.push_str("; ");
            out.push_str(&check.line("matrix"));
        }
        let outcome = if m.verdict == CellVerdict::Regression {
            Outcome::Failure {
                kind: "regression".into(),
                message: report.headline.clone(),
                body: out.clone(),
            }
        } else {
            Outcome::Pass
        };
        cases.push(Case {
            classname: "matrix".into(),
            name: "aggregate_tps (matrix-wide)".into(),
            time: 0.0,
            outcome,
            out,
        });
    }
    cases
}

fn cell_verdict_cases(run: &RunResults, c: &CellComparison) -> Vec<Case> {
    let classname = cell_name(c.concurrency, c.context_tokens);
    let time = cell_time(run, (c.concurrency, c.context_tokens));
    let reason = c
        .reason
        .as_ref()
        .map_or_else(String::new, ToString::to_string);
    if c.metrics.is_empty() {
        let outcome = match c.verdict {
            v if v.is_regression() => Outcome::Failure {
                kind: v.as_str().into(),
                message: reason.clone(),
                body: format!("{classname}: {}: {reason}", v.as_str()),
            },
            CellVerdict::NotComparable | CellVerdict::Saturated => Outcome::Skipped {
                reason: reason.clone(),
            },
            _ => Outcome::Pass,
        };
        return vec![Case {
            classname,
            name: "cell".into(),
            time,
            outcome,
            out: format!("verdict {}: {reason}", c.verdict.as_str()),
        }];
    }
    // The one failure of a regressed cell goes on its first regressed metric.
    let failing = c.verdict.is_regression().then(|| {
        c.metrics
            .iter()
            .position(|m| m.verdict == c.verdict)
            .unwrap_or(0)
    });
    c.metrics
        .iter()
        .enumerate()
        .map(|(i, m)| Case {
            classname: classname.clone(),
            name: m.metric.as_str().into(),
            time,
            outcome: if failing == Some(i) {
                Outcome::Failure {
                    kind: c.verdict.as_str().into(),
                    message: if reason.is_empty() {
                        format!("{} regressed", m.metric.as_str())
                    } else {
                        reason.clone()
                    },
                    body: describe(c, m),
                }
            } else {
                Outcome::Pass
            },
            // A failure's body already holds the figures.
            out: if failing == Some(i) {
                String::new()
            } else {
                describe(c, m)
            },
        })
        .collect()
}

fn results_cases(run: &RunResults) -> Vec<Case> {
    let figs = figures(run);
    let mut cases = Vec::new();
    for cell in &run.cells {
        let classname = cell_name(cell.concurrency, cell.context_tokens);
        let reason = cell.reason.clone().unwrap_or_default();
        let mine: Vec<_> = figs
            .iter()
            .filter(|f| std::ptr::eq(f.cell as *const CellResult, cell))
            .collect();
        let unmeasured = match cell.status {
            CellStatus::Error => Some(Outcome::Error {
                message: reason.clone(),
            }),
            CellStatus::Skipped => Some(Outcome::Skipped {
                reason: reason.clone(),
            }),
            _ if mine.is_empty() => Some(Outcome::Skipped {
                reason: "no figure measured".into(),
            }),
            _ => None,
        };
        if let Some(outcome) = unmeasured {
            cases.push(Case {
                classname,
                name: "cell".into(),
                time: cell.measured_s,
                outcome,
                out: reason,
            });
            continue;
        }
        for f in mine {
            cases.push(Case {
                classname: classname.clone(),
                name: f.metric.as_str().into(),
                time: cell.measured_s,
                outcome: Outcome::Pass,
                out: format!(
                    "{} = {} {}{}",
                    f.metric.as_str(),
                    f.value,
                    unit(f.metric),
                    if reason.is_empty() {
                        String::new()
                    } else {
                        format!(" ({reason})")
                    }
                ),
            });
        }
    }
    cases
}

/// A run that did not finish (`in_progress`: its gate was stopped; `cancelled`; `partial`)
/// is one `error` case, `run` / `finished`, first in the suite: a test reporter then shows the
/// suite as broken, not as a passing suite of fewer cells.
fn unfinished_case(run: &RunResults) -> Option<Case> {
    let what = match run.status {
        RunStatus::Complete => return None,
        RunStatus::InProgress => {
            "the gate that wrote it was stopped before it finished (no verdict); only the cells done before are reported"
        }
        RunStatus::Cancelled => "it was cancelled; only the cells done before are reported",
        RunStatus::Partial => {
            "it stopped early; the cells it did not measure are errors or missing"
        }
    };
    let message = format!(
        "run `{}` is `{}`{}: {what}",
        run.run_id,
        run.status.as_str(),
        run.status_reason
            .as_deref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default()
    );
    Some(Case {
        classname: "run".into(),
        name: "finished".into(),
        time: 0.0,
        outcome: Outcome::Error {
            message: message.clone(),
        },
        out: message,
    })
}

/// The JUnit XML text of a run, with failures from its verdict when one is given.
pub fn render(run: &RunResults, verdict: Option<&ComparisonReport>) -> Result<String, ExportError> {
    if let Some(report) = verdict {
        check_pair(run, report)?;
    }
    let mut cases = match verdict {
        Some(report) => verdict_cases(run, report),
        None => results_cases(run),
    };
    if let Some(case) = unfinished_case(run) {
        cases.insert(0, case);
    }
    let count =
        |f: fn(&Outcome) -> bool| cases.iter().filter(|c| f(&c.outcome)).count().to_string();
    let tests = cases.len().to_string();
    let failures = count(|o| matches!(o, Outcome::Failure { .. }));
    let errors = count(|o| matches!(o, Outcome::Error { .. }));
    let skipped = count(|o| matches!(o, Outcome::Skipped { .. }));
    let total_time: f64 = run.cells.iter().map(|c| c.measured_s).sum();
    let time = format!("{total_time:.3}");
    let suite_name = xml_safe(&format!("infergate {}", run.profile.key));
    let timestamp = run.started_at.format("%Y-%m-%dT%H:%M:%S").to_string();
    let mut properties: Vec<(&str, String)> = vec![
        ("run_id", run.run_id.clone()),
        ("engine", run.profile.engine.clone()),
        ("model", run.profile.model.clone()),
    ];
    if let Some(v) = run.engine.version.clone() {
        properties.push(("engine_version", v));
    }
    if run.status != RunStatus::Complete {
        properties.push(("status", run.status.as_str().into()));
    }
    if let Some(report) = verdict {
        properties.push(("gate", report.gate.as_str().into()));
        properties.push(("headline", report.headline.clone()));
        properties.push(("baseline_runs", report.baseline.level_runs.join(", ")));
    }

    let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
    w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    w.create_element("testsuites")
        .with_attributes([
            ("name", "infergate"),
            ("tests", tests.as_str()),
            ("failures", failures.as_str()),
            ("errors", errors.as_str()),
            ("time", time.as_str()),
        ])
        .write_inner_content(|w| {
            w.create_element("testsuite")
                .with_attributes([
                    ("name", suite_name.as_str()),
                    ("tests", tests.as_str()),
                    ("failures", failures.as_str()),
                    ("errors", errors.as_str()),
                    ("skipped", skipped.as_str()),
                    ("time", time.as_str()),
                    ("timestamp", timestamp.as_str()),
                ])
                .write_inner_content(|w| {
                    w.create_element("properties").write_inner_content(|w| {
                        for (name, value) in &properties {
                            w.create_element("property")
                                .with_attributes([
                                    ("name", *name),
                                    ("value", xml_safe(value).as_str()),
                                ])
                                .write_empty()?;
                        }
                        Ok(())
                    })?;
                    for case in &cases {
                        write_case(w, case)?;
                    }
                    Ok(())
                })?;
            Ok(())
        })?;
    let mut text = String::from_utf8_lossy(&w.into_inner()).into_owned();
    text.push('\n');
    Ok(text)
}

fn write_case(w: &mut Writer<Vec<u8>>, case: &Case) -> std::io::Result<()> {
    let classname = xml_safe(&case.classname);
    let name = xml_safe(&case.name);
    let time = format!("{:.3}", case.time);
    w.create_element("testcase")
        .with_attributes([
            ("classname", classname.as_str()),
            ("name", name.as_str()),
            ("time", time.as_str()),
        ])
        .write_inner_content(|w| {
            match &case.outcome {
                Outcome::Pass => {}
                Outcome::Skipped { reason } => {
                    w.create_element("skipped")
                        .write_text_content(BytesText::new(&xml_safe(reason)))?;
                }
                Outcome::Error { message } => {
                    let message = xml_safe(message);
                    w.create_element("error")
                        .with_attributes([("type", "cell_error"), ("message", message.as_str())])
                        .write_text_content(BytesText::new(&message))?;
                }
                Outcome::Failure {
                    kind,
                    message,
                    body,
                } => {
                    let message = xml_safe(message);
                    w.create_element("failure")
                        .with_attributes([("type", kind.as_str()), ("message", message.as_str())])
                        .write_text_content(BytesText::new(&xml_safe(body)))?;
                }
            }
            if !case.out.is_empty() {
                w.create_element("system-out")
                    .write_text_content(BytesText::new(&xml_safe(&case.out)))?;
            }
            Ok(())
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::fixture;
    use infergate_schema::asserts::assert_contains;
    use infergate_schema::verdict::{Against, CheckOutcome, DecidedChange, Found, fixtures};

    /// A failure's body is written as the reports write it (units, real minus, the verdict's
    /// word) and ends with the cell's own test as the line a reviewer redoes by hand; a cell
    /// the matrix decided says so there, not a bare "no regression".
    #[test]
    fn a_failure_body_carries_the_figures_and_the_check_line() {
        let run = fixture::run();
        let mut report = fixture::verdict(&run);
        let m = &mut report.cells[1].metrics[0];
        let decided = DecidedChange {
            basis: DecisionBasis::WithMatrix,
            change: m.change,
            ci_low: m.ci_low,
            ci_high: m.ci_high,
            matrix_change: Some(-0.09),
        };
        m.decided_on = Some(decided);
        m.check = Some(fixtures::check(CheckOutcome::DecidedByBroader {
            own: Box::new(CheckOutcome::NoRegression),
            against: Against::Baseline,
            verdict: Found::Regression,
            decided,
        }));
        let body = describe(&report.cells[1], &report.cells[1].metrics[0]);
        assert!(
            body.starts_with("aggregate tok/s 50.0 tok/s → 45.5 tok/s, −9.0% [")
                && body.contains("(with the matrix: −9.0%), margin 3.0%: regression; cell C="),
            "{body}"
        );
        assert!(
            body.ends_with(
                "aggregate tok/s: t = +0.21 > −3.60 (t(37.0), one-sided α = 4.67e-4, both boots) \
                 → no regression against the rest of its run; regression with the matrix: −9.0%"
            ),
            "{body}"
        );
    }

    #[test]
    fn one_failure_per_regressed_cell_and_hostile_text_escaped() {
        let run = fixture::run();
        let report = fixture::verdict(&run);
        let xml = render(&run, Some(&report)).unwrap();
        let failures = xml.matches("<failure ").count();
        assert_eq!(failures, report.regressions().count());
        assert_eq!(failures, 2);
        assert!(xml.contains("type=\"capacity_regression\""));
        assert_contains(&xml, "&lt;model=&quot;q&quot;&gt;");
        assert!(xml.contains("<skipped>error in candidate</skipped>"));
        assert!(!xml.contains('\u{1}'));
        assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"));
    }

    #[test]
    fn results_alone_never_fail_and_errors_are_errors() {
        let run = fixture::run();
        let xml = render(&run, None).unwrap();
        assert_eq!(xml.matches("<failure").count(), 0);
        assert_eq!(xml.matches("<error ").count(), 1);
        assert_contains(
            &xml,
            "=HYPERLINK(&quot;x&quot;) engine said &lt;b&gt;&amp;\u{FFFD}",
        );
        assert!(xml.contains("classname=\"C=1 / 8k\" name=\"aggregate_tps\""));
    }

    #[test]
    fn an_unfinished_run_is_an_error_case_first_in_the_suite() {
        let mut run = fixture::run();
        assert!(!render(&run, None).unwrap().contains("name=\"finished\""));
        run.status = RunStatus::InProgress;
        let xml = render(&run, None).unwrap();
        let first = xml.find("<testcase ").unwrap();
        assert!(
            xml[first..].starts_with("<testcase classname=\"run\" name=\"finished\""),
            "{xml}"
        );
        assert_contains(&xml, "is `in_progress`");
        assert_contains(&xml, "stopped before it finished");
        assert_eq!(xml.matches("<error ").count(), 2, "{xml}");
        assert_contains(&xml, "name=\"status\" value=\"in_progress\"");
        run.status = RunStatus::Cancelled;
        let xml = render(&run, None).unwrap();
        assert_contains(&xml, "is `cancelled`");
    }
}
