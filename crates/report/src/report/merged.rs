//! The merged verdict of a fan-out workflow ([`crate::merge::MergedVerdict`]) for people and
//! workflows: GitHub-flavoured Markdown (an overview plus a section per profile), plain text,
//! and `$GITHUB_OUTPUT` lines. Joining the shards happens in [`crate::merge`]; this only renders.

use crate::merge::{MergedVerdict, ProfileVerdict, ShardOutcome};
use infergate_io::untrusted_text::markdown as escape;
use infergate_schema::answer::NO_VALUE;
use infergate_schema::results::{ProfileKey, RunStatus};
use infergate_schema::verdict::GateVerdict;

/// Marker that opens the merged Markdown, so a sticky comment can be found and updated.
pub(crate) const MARKDOWN_MARKER: &str = "<!-- infergate:merged -->";

fn gate_badge(gate: GateVerdict) -> &'static str {
    match gate {
        GateVerdict::Pass => "✅ pass",
        GateVerdict::Regression => "❌ regression",
        GateVerdict::Insufficient => "⚠️ insufficient",
        GateVerdict::NoBaseline => "ℹ️ no baseline",
        GateVerdict::Unmeasured => "⛔ unmeasured",
    }
}

/// The badge of one profile: its gate's, "no verdict" for a run measured in full whose gate
/// failed after measuring, "not measured" for one that stopped early.
fn profile_badge(p: &ProfileVerdict) -> &'static str {
    match p.outcome.gate() {
        Some(g) => gate_badge(g),
        None if p.outcome.compare_error().is_some() => "⛔ no verdict",
        None => "⛔ not measured",
    }
}

/// The lower-case word of one profile (`pass`, ..., or `cancelled` / `partial`).
fn profile_word(p: &ProfileVerdict) -> &'static str {
    match (&p.outcome, p.outcome.gate()) {
        (_, Some(g)) => g.as_str(),
        (_, None) if p.outcome.compare_error().is_some() => "no verdict",
        (
            ShardOutcome::NotCompared {
                status: RunStatus::Cancelled,
                ..
            },
            None,
        ) => "cancelled",
        _ => "partial",
    }
}

/// One line about a profile: its verdict's headline without the gate's symbol (the verdict
/// column beside it says that), or why there is no verdict.
fn profile_headline(p: &ProfileVerdict) -> String {
    match &p.outcome {
        ShardOutcome::Compared { report } => {
            let symbol = infergate_schema::answer::gate_word(report.gate).0;
            let h = &report.headline;
            h.strip_prefix(symbol)
                .map_or(h.as_str(), str::trim_start)
                .to_string()
        }
        ShardOutcome::NotCompared {
            compare_error: Some(why),
            ..
        } => format!("measured, but no verdict: {why}"),
        ShardOutcome::NotCompared {
            status: RunStatus::Complete,
            ..
        } => "no baseline yet: nothing to compare with".to_string(),
        ShardOutcome::NotCompared { reason, .. } => format!(
            "not measured: {}",
            reason.as_deref().unwrap_or("the run stopped early")
        ),
    }
}

fn hardware(profile: &ProfileKey) -> String {
    let hw = &profile.hardware;
    hw.gpu_model
        .as_deref()
        .map(|g| format!("{} x{}", g, hw.gpu_count.max(1)))
        .unwrap_or_else(|| hw.cpu_model.clone().unwrap_or_else(|| "cpu".into()))
}

/// The merged verdict as GitHub-flavoured Markdown: an overview table, then one section per
/// profile rendered by [`crate::report::verdict_table::markdown`]. Profile keys, suites,
/// headlines and stop reasons come from engine and config text, so every one is escaped.
pub fn markdown(merged: &MergedVerdict) -> String {
    let badge = if merged.ending().verdict_word == "error" {
        "⛔ no verdict"
    } else {
        gate_badge(merged.gate)
    };
    let mut out = format!(
        "{MARKDOWN_MARKER}\n## infergate: {badge} ({})\n\n{}\n\n\
         | Profile | Suite | Verdict | Regressions | Headline |\n|---|---|---|---:|---|\n",
        merged.profiles.len(),
        escape(&merged.headline)
    );
    let suite = |p: &ProfileVerdict| escape(p.outcome.suite().unwrap_or(NO_VALUE));
    for p in &merged.profiles {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            escape(&p.outcome.profile().key),
            suite(p),
            profile_badge(p),
            p.regressions,
            escape(&profile_headline(p))
        ));
    }
    for p in &merged.profiles {
        let profile = p.outcome.profile();
        out.push_str(&format!(
            "\n### {} — {}\n\nHardware: {} · engine: {} · model: {} · suite: {}\n\n",
            escape(&profile.key),
            profile_badge(p),
            escape(&hardware(profile)),
            escape(&profile.engine),
            escape(&profile.model),
            suite(p)
        ));
        match &p.outcome {
            ShardOutcome::Compared { report } => {
                out.push_str(&crate::report::verdict_table::markdown(report));
            }
            ShardOutcome::NotCompared { .. } => out.push_str(&format!(
                "{} (results: `{}`)\n",
                escape(&profile_headline(p)),
                escape(p.results.as_deref().unwrap_or(&p.source))
            )),
        }
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// The merged verdict as plain text for a terminal (inert: headlines, profile keys and
/// sources are the shards' text, and a merge job prints them to the Actions log).
pub fn text(merged: &MergedVerdict) -> String {
    let word = merged.ending().verdict_word;
    let mut out = format!("merged verdict: {word} — {}\n", merged.headline);
    for p in &merged.profiles {
        out.push_str(&format!(
            "  {:<14} {:>15}  {}  ({})\n",
            profile_word(p),
            infergate_schema::answer::plural(p.regressions, "regression"),
            p.outcome.profile().key,
            p.source
        ));
    }
    infergate_io::untrusted_text::console(&out)
}

/// `key=value` lines for `$GITHUB_OUTPUT`: `verdict` and `conclusion` (the check run's, which
/// the action's merge script posts as given), both from [`MergedVerdict::ending`], then
/// `regressions`, `profiles` and `not-gated` (the gating metrics that did not gate in some
/// profile, as a single gate's step output says them). Values are single words, numbers or
/// comma-separated words, so no multi-line delimiter is needed.
pub fn github_outputs(merged: &MergedVerdict) -> String {
    let ending = merged.ending();
    let compared = merged.profiles.iter().filter_map(|p| match &p.outcome {
        ShardOutcome::Compared { report } => Some(&**report),
        ShardOutcome::NotCompared { .. } => None,
    });
    format!(
        "verdict={}\nconclusion={}\nregressions={}\nprofiles={}\nnot-gated={}\n",
        ending.verdict_word,
        ending.conclusion.as_str(),
        merged.regressions,
        merged.profiles.len(),
        crate::report::actions::not_gated_output(compared)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge::tests::{merged as merge, not_compared, report, shard};
    use infergate_schema::asserts::{assert_contains, assert_starts_with};

    #[test]
    fn markdown_escapes_profile_text_and_has_a_section_per_profile() {
        let mut evil = report("H200", GateVerdict::Pass, 0);
        evil.profile.key = "a|b<script>".into();
        evil.profile.model = "`m`".into();
        let md = markdown(&merge(vec![
            shard(evil),
            shard(report("H100", GateVerdict::Pass, 0)),
        ]));
        assert!(md.starts_with(MARKDOWN_MARKER));
        assert!(!md.contains("<script>"));
        assert!(md.contains("a\\|b&lt;script&gt;"));
        assert_eq!(md.matches("\n### ").count(), 2);
    }

    #[test]
    fn text_of_a_crafted_shard_issues_no_workflow_command() {
        let mut evil = report("H200", GateVerdict::Pass, 0);
        evil.profile.key = "k\n::error title=pwned::forged".into();
        evil.headline = "fine\n::add-mask::x".into();
        let t = text(&merge(vec![shard(evil)]));
        assert_contains(&t, "pwned");
        for line in t.lines() {
            assert!(!line.trim_start().starts_with("::"), "{line:?}\n{t}");
        }
    }

    /// A workflow that needs every listed metric gated reads the profiles' together.
    #[test]
    fn outputs_list_what_did_not_gate_in_any_profile_once() {
        use infergate_schema::verdict::{Metric, NotGated};
        let young = |gpu: &str, runs: usize| {
            let mut r = report(gpu, GateVerdict::Pass, 0);
            r.not_gated = vec![
                NotGated::ShortHistory {
                    metric: Metric::ItlP99,
                    runs,
                    needs: 10,
                },
                NotGated::PrefillShortHistory { runs, needs: 10 },
            ];
            r
        };
        let mut thin = young("RTX 5090", 12);
        thin.not_gated = vec![NotGated::BurstThin {
            completed: 20,
            needs: 29,
        }];
        let m = merge(vec![
            shard(young("H100", 3)),
            shard(young("H200", 5)),
            shard(thin),
        ]);
        assert_contains(
            &github_outputs(&m),
            "\nnot-gated=itl_p99,prefill_tps,burst_ttft_p90\n",
        );
    }

    #[test]
    fn outputs_say_error_when_a_profile_was_not_measured() {
        let m = merge(vec![
            shard(report("H100", GateVerdict::Pass, 0)),
            shard(report("H200", GateVerdict::Regression, 2)),
        ]);
        assert_eq!(
            github_outputs(&m),
            "verdict=regression\nconclusion=failure\nregressions=2\nprofiles=2\nnot-gated=\n"
        );
        let m = merge(vec![
            shard(report("H100", GateVerdict::Pass, 0)),
            not_compared("H200", RunStatus::Cancelled, Some("<b>cancelled</b>")),
            not_compared("RTX 5090", RunStatus::Complete, None),
        ]);
        assert_eq!(
            github_outputs(&m),
            "verdict=error\nconclusion=failure\nregressions=0\nprofiles=3\nnot-gated=\n"
        );
        let md = markdown(&m);
        assert_contains(&md, "## infergate: ⛔ no verdict (3)");
        assert_contains(
            &md,
            "| ⛔ not measured | 0 | not measured: &lt;b&gt;cancelled&lt;/b&gt; |",
        );
        assert_contains(
            &md,
            "| ℹ️ no baseline | 0 | no baseline yet: nothing to compare with |",
        );
        assert_eq!(md.matches("\n### ").count(), 3);
        let t = text(&m);
        assert_starts_with(
            &t,
            "merged verdict: error — 1 of 3 profiles without a verdict",
        );
        assert_contains(&t, "  cancelled        0 regressions  gpu-h200x1");
        // A run measured in full whose comparison failed is not one without a baseline yet.
        let mut failed = not_compared("RTX 5090", RunStatus::Complete, None);
        if let ShardOutcome::NotCompared { compare_error, .. } = &mut failed.outcome {
            *compare_error = Some("comparison with the baseline failed: baseline store …".into());
        }
        let m = merge(vec![shard(report("H100", GateVerdict::Pass, 0)), failed]);
        assert_eq!(
            github_outputs(&m),
            "verdict=error\nconclusion=failure\nregressions=0\nprofiles=2\nnot-gated=\n"
        );
        let md = markdown(&m);
        assert_contains(
            &md,
            "| ⛔ no verdict | 0 | measured, but no verdict: comparison with the baseline failed",
        );
        assert_contains(
            &text(&m),
            "without a verdict (gpu-rtx-5090x1__vllm__m__mabc: measured, but no verdict: comparison",
        );
        assert_contains(&text(&m), "; compared: 1 profile passed");
        assert_contains(&t, "  no_baseline      0 regressions  gpu-rtx-5090x1");
    }
}
