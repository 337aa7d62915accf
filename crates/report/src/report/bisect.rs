//! The bisection's console report: the cells that moved between good and bad, every boot with
//! the answer it gave, and the culprit (or why there is none). Revisions, build outputs and
//! failure text (build and engine log tails) come from commands: each passes
//! [`infergate_io::untrusted_text::console`] before it is shown.

use crate::report::console::{align_right, fitted_table, push_wrapped, wrap};
use infergate_io::untrusted_text::console as inert;
use infergate_model::stats::bisect::{BisectRecord, BootRole};
use infergate_schema::answer::{NO_VALUE, cell_label, interval, metric_name, plural};
use infergate_schema::verdict::{signed_number, signed_percent};

/// A commit as the boots table shows it ([`super::short_commit`]; the answer line above
/// gives the culprit's in full).
fn short(rev: &str) -> String {
    inert(super::short_commit(rev))
}

/// The answer: `first bad commit: c3 (commit 3 of 4; last good: c2), after 4 boots`, or
/// `no culprit: <why>` with the suspects left and the likeliest of them.
fn answer(r: &BisectRecord) -> String {
    let mut out = match (&r.culprit, &r.failure) {
        (Some(c), _) => format!(
            "first bad commit: {} (commit {} of {}; last good: {}), after {}",
            inert(&c.rev),
            c.index,
            r.commits.len(),
            inert(&c.last_good),
            plural(r.boots.len(), "boot")
        ),
        (None, Some(f)) => {
            let mut out = format!("no culprit: {}", inert(f));
            if !r.suspects.is_empty() && r.suspects.len() < r.commits.len() {
                out.push_str(&format!(
                    "; still suspected: {}, {} … {}",
                    plural(r.suspects.len(), "commit"),
                    inert(&r.suspects[0]),
                    inert(&r.suspects[r.suspects.len() - 1])
                ));
            }
            out
        }
        (None, None) => "no culprit".to_string(),
    };
    if r.culprit.is_none() && !r.suspect_probabilities.is_empty() {
        let list: Vec<String> = r
            .suspect_probabilities
            .iter()
            .take(8)
            .map(|(c, p)| format!("{} {:.1}%", inert(c), p * 100.0))
            .collect();
        out.push_str(&format!(
            "; most likely first bad commit: {}",
            list.join(", ")
        ));
    }
    out
}

/// The whole report as text for a terminal or a log: the answer first, then what it rests on.
pub fn text(r: &BisectRecord) -> String {
    let mut out = wrap(&answer(r), 2);
    out.push('\n');
    let engine = if r.engine_s > 0.0 {
        format!(
            " · engine time {:.1} min (builds, boots and measurements)",
            r.engine_s / 60.0
        )
    } else {
        String::new()
    };
    push_wrapped(
        &mut out,
        &format!(
            "bisect {}..{} · suite `{}` · {} · {} · {}{engine}",
            inert(&r.good),
            inert(&r.bad),
            inert(&r.suite),
            metric_name(r.metric),
            plural(r.commits.len(), "commit"),
            plural(r.boots.len(), "boot")
        ),
        2,
    );
    if !r.cells.is_empty() {
        let mut cells = fitted_table(vec!["cell", "bad vs good [interval]", "moved"]);
        for c in &r.cells {
            let change = match (c.change, c.interval) {
                (Some(x), Some((lo, hi))) => format!("{} {}", signed_percent(x), interval(lo, hi)),
                (Some(x), None) => signed_percent(x),
                (None, _) => NO_VALUE.into(),
            };
            cells.add_row(vec![
                cell_label(c.concurrency, c.context_tokens),
                change,
                if c.moved { "yes" } else { "no" }.into(),
            ]);
        }
        out.push_str(&format!("cells (aggregate tok/s):\n{cells}\n"));
    }
    let mut boots = fitted_table(vec![
        "boot", "role", "commit", "build", "cells", "answer", "position", "z",
    ]);
    for b in &r.boots {
        let step = r.steps.iter().find(|s| s.boots.last() == Some(&b.boot));
        let index = r.commits.iter().position(|c| *c == b.rev);
        let commit = match (b.role, index) {
            (BootRole::Step, Some(i)) => {
                format!("{} ({}/{})", short(&b.rev), i + 1, r.commits.len())
            }
            _ => short(&b.rev),
        };
        let (answer, position, z) = match (b.role, step, &b.failure) {
            (_, _, Some(_)) => ("failed".to_string(), NO_VALUE.into(), NO_VALUE.into()),
            (BootRole::Good, ..) => ("good (given)".into(), "0".into(), NO_VALUE.into()),
            (BootRole::Bad, ..) => ("bad (given)".into(), "1".into(), NO_VALUE.into()),
            (BootRole::Step, Some(s), None) => (
                format!(
                    "{} ({})",
                    s.evidence.answer.as_str(),
                    plural(s.boots.len(), "boot")
                ),
                s.evidence.position.map_or(NO_VALUE.into(), |p| {
                    signed_number(p, 2).trim_start_matches('+').to_string()
                }),
                format!(
                    "{} (±{:.1})",
                    signed_number(s.evidence.z, 1),
                    s.evidence.z_needed
                ),
            ),
            (BootRole::Step, None, None) => {
                ("uncertain: again".into(), NO_VALUE.into(), NO_VALUE.into())
            }
        };
        boots.add_row(vec![
            b.boot.to_string(),
            b.role.as_str().into(),
            commit,
            b.build.as_deref().map_or_else(|| NO_VALUE.into(), inert),
            b.cells_measured.to_string(),
            answer,
            position,
            z,
        ]);
    }
    align_right(&mut boots, [0, 4, 6, 7]);
    out.push_str(&format!(
        "boots (position: 0 = good level, 1 = bad level):\n{boots}\n"
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_model::stats::bisect::*;

    fn record() -> BisectRecord {
        let boot = |n: u32, rev: &str, role| BisectBoot {
            boot: n,
            rev: rev.into(),
            role,
            build: Some(
                if rev == "c3" || rev == "c4" || rev == "bad" {
                    "1.5"
                } else {
                    "1.0"
                }
                .into(),
            ),
            results: Some(format!("results-{n:02}.json")),
            cells_measured: 3,
            boot_s: Some(0.4),
            failure: None,
        };
        let ev = |answer, position: f64, z: f64| StepEvidence {
            answer,
            position: Some(position),
            z,
            z_needed: 3.29,
            cells: 3,
            boots: 1,
        };
        BisectRecord {
            good: "good".into(),
            bad: "bad".into(),
            suite: "pr".into(),
            commits: vec!["c1".into(), "c2".into(), "c3".into(), "bad".into()],
            metric: infergate_schema::verdict::Metric::AggregateTps,
            cells: vec![CellMove {
                concurrency: 1,
                context_tokens: 0,
                change: Some(-0.333),
                interval: Some((-0.38, -0.28)),
                moved: true,
            }],
            boots: vec![
                boot(1, "good", BootRole::Good),
                boot(2, "bad", BootRole::Bad),
                boot(3, "c2", BootRole::Step),
                boot(4, "c3", BootRole::Step),
            ],
            steps: vec![
                BisectStep {
                    rev: "c2".into(),
                    index: 2,
                    boots: vec![3],
                    evidence: ev(StepAnswer::Good, 0.02, -9.5),
                    suspects: (3, 4),
                },
                BisectStep {
                    rev: "c3".into(),
                    index: 3,
                    boots: vec![4],
                    evidence: ev(StepAnswer::Bad, 0.97, 9.1),
                    suspects: (3, 3),
                },
            ],
            culprit: Some(Culprit {
                rev: "c3".into(),
                index: 3,
                last_good: "c2".into(),
            }),
            failure: None,
            suspects: vec!["c3".into()],
            suspect_probabilities: Vec::new(),
            engine_s: 0.0,
            noise_prior: None,
        }
    }

    #[test]
    fn the_report_shows_every_boot_and_the_culprit() {
        insta::assert_snapshot!(text(&record()));
    }
}
