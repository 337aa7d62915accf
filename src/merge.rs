//! Joining shard verdicts: a fan-out workflow measures one profile per GPU runner (H100, H200,
//! RTX 5090, ...), and a final job needs ONE verdict, one check and one comment. This module
//! reads each shard's `verdict.json` (a [`ComparisonReport`]), combines the gates and renders one
//! summary with a section per profile. It never measures and never re-decides a cell: a shard's
//! verdict is taken as its runner computed it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::report::markdown::escape;
use crate::verdict::{ComparisonReport, GateVerdict};

/// Version of the merged-verdict file format.
pub const MERGED_SCHEMA_VERSION: u32 = 1;

/// File name of a shard's verdict inside its results directory (written by `infergate run`).
pub const VERDICT_FILE: &str = "verdict.json";

/// File name of a shard's results inside its results directory.
pub const RESULTS_FILE: &str = "results.json";

/// One shard's verdict and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Shard {
    /// The file the verdict was read from (shown in summaries so a reader can find the artifact).
    pub source: PathBuf,
    /// The shard's `results.json`, when it sits beside the verdict.
    pub results: Option<PathBuf>,
    /// The shard's comparison, as its runner computed it.
    pub report: ComparisonReport,
}

/// Why a shard could not be read. Every variant names the file, so exit 2 tells the user which
/// artifact to look at.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    /// Neither a verdict file nor a directory holding one.
    #[error(
        "{path}: no such shard (expected a results directory containing {VERDICT_FILE} or a verdict JSON file)"
    )]
    Missing { path: PathBuf },
    /// The file exists but could not be read.
    #[error("{path}: cannot read shard verdict: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not a comparison report (wrong JSON, wrong field, wrong type).
    #[error(
        "{path}: not a verdict file (ComparisonReport JSON): at `{field}`: {message}; pass the verdict.json written by `infergate run` or `infergate compare`"
    )]
    Parse {
        path: PathBuf,
        field: String,
        message: String,
    },
    /// Written by a newer infergate with an incompatible format.
    #[error(
        "{path}: verdict schema_version {found} is newer than this build understands ({supported}); upgrade infergate"
    )]
    Schema {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
}

impl Shard {
    /// Reads a shard from a results directory (its `verdict.json`) or a verdict file.
    pub fn load(path: &Path) -> Result<Shard, ShardError> {
        let (file, results) = if path.is_dir() {
            let results = path.join(RESULTS_FILE);
            (
                path.join(VERDICT_FILE),
                results.is_file().then_some(results),
            )
        } else {
            let results = path
                .parent()
                .map(|p| p.join(RESULTS_FILE))
                .filter(|p| p.is_file());
            (path.to_path_buf(), results)
        };
        if !file.is_file() {
            return Err(ShardError::Missing { path: file });
        }
        let text = std::fs::read_to_string(&file).map_err(|source| ShardError::Read {
            path: file.clone(),
            source,
        })?;
        let report = parse_report(&file, &text)?;
        Ok(Shard {
            source: file,
            results,
            report,
        })
    }
}

fn parse_report(path: &Path, text: &str) -> Result<ComparisonReport, ShardError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    let report: ComparisonReport =
        serde_path_to_error::deserialize(de).map_err(|e| ShardError::Parse {
            path: path.to_path_buf(),
            field: e.path().to_string(),
            message: e.inner().to_string(),
        })?;
    if report.schema_version > crate::verdict::VERDICT_SCHEMA_VERSION {
        return Err(ShardError::Schema {
            path: path.to_path_buf(),
            found: report.schema_version,
            supported: crate::verdict::VERDICT_SCHEMA_VERSION,
        });
    }
    Ok(report)
}

/// The joined answer of all shards: what the final fan-out job reports and exits on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergedVerdict {
    pub schema_version: u32,
    /// Worst gate over the shards: regression, then inconclusive, then no_baseline, else pass.
    pub gate: GateVerdict,
    /// Blocking cells over all shards.
    pub regressions: usize,
    /// One line for people: "1 of 3 profiles regressed (gpu-...): 2 regressions".
    pub headline: String,
    /// Per-profile verdicts, in the order the shards were given.
    pub profiles: Vec<ProfileVerdict>,
}

/// One shard's place in the merged verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileVerdict {
    /// Where the shard's verdict was read from.
    pub source: String,
    /// The shard's `results.json`, when present.
    #[serde(default)]
    pub results: Option<String>,
    /// Blocking cells in this shard.
    pub regressions: usize,
    /// The shard's full comparison, so the merged file is self-contained.
    pub report: ComparisonReport,
}

impl MergedVerdict {
    /// Whether the merged gate blocks (exit code 1).
    pub fn is_regression(&self) -> bool {
        self.gate == GateVerdict::Regression
    }
}

/// Severity order used to combine gates: the worst shard decides.
fn severity(gate: GateVerdict) -> u8 {
    match gate {
        GateVerdict::Pass => 0,
        GateVerdict::NoBaseline => 1,
        GateVerdict::Inconclusive => 2,
        GateVerdict::Regression => 3,
    }
}

/// Joins shard verdicts into one. No shards gives `no_baseline` (nothing was compared).
pub fn merge(shards: Vec<Shard>) -> MergedVerdict {
    let gate = if shards.is_empty() {
        GateVerdict::NoBaseline
    } else {
        shards
            .iter()
            .map(|s| s.report.gate)
            .max_by_key(|g| severity(*g))
            .unwrap_or(GateVerdict::NoBaseline)
    };
    let profiles: Vec<ProfileVerdict> = shards
        .into_iter()
        .map(|s| ProfileVerdict {
            source: s.source.display().to_string(),
            results: s.results.map(|p| p.display().to_string()),
            regressions: s.report.regressions().count(),
            report: s.report,
        })
        .collect();
    let regressions = profiles.iter().map(|p| p.regressions).sum();
    let headline = headline(gate, &profiles, regressions);
    MergedVerdict {
        schema_version: MERGED_SCHEMA_VERSION,
        gate,
        regressions,
        headline,
        profiles,
    }
}

fn headline(gate: GateVerdict, profiles: &[ProfileVerdict], regressions: usize) -> String {
    let n = profiles.len();
    let plural = |k: usize, word: &str| {
        if k == 1 {
            format!("{k} {word}")
        } else {
            format!("{k} {word}s")
        }
    };
    let with = |g: GateVerdict| {
        profiles
            .iter()
            .filter(|p| p.report.gate == g)
            .map(|p| p.report.profile.key.as_str())
            .collect::<Vec<_>>()
    };
    match gate {
        GateVerdict::Regression => {
            let bad = with(GateVerdict::Regression);
            format!(
                "{} of {} regressed ({}): {}",
                bad.len(),
                plural(n, "profile"),
                bad.join(", "),
                plural(regressions, "regression")
            )
        }
        GateVerdict::Inconclusive => format!(
            "no regression; {} of {} inconclusive",
            with(GateVerdict::Inconclusive).len(),
            plural(n, "profile")
        ),
        GateVerdict::NoBaseline if n == 0 => "no shards to merge".to_string(),
        GateVerdict::NoBaseline => format!(
            "no regression; {} of {} without a baseline yet",
            with(GateVerdict::NoBaseline).len(),
            plural(n, "profile")
        ),
        GateVerdict::Pass => format!("all {} passed", plural(n, "profile")),
    }
}

/// Marker that opens the merged Markdown, so a sticky comment can be found and updated.
pub const MARKDOWN_MARKER: &str = "<!-- infergate:merged -->";

fn gate_badge(gate: GateVerdict) -> &'static str {
    match gate {
        GateVerdict::Pass => "✅ pass",
        GateVerdict::Regression => "❌ regression",
        GateVerdict::Inconclusive => "⚠️ inconclusive",
        GateVerdict::NoBaseline => "ℹ️ no baseline",
    }
}

/// The merged verdict as GitHub-flavoured Markdown: an overview table, then one section per
/// profile rendered by [`crate::report::verdict_table::markdown`]. Profile keys, suites and
/// headlines come from engine and config text, so every one of them is escaped.
pub fn markdown(merged: &MergedVerdict) -> String {
    let mut out = String::new();
    out.push_str(MARKDOWN_MARKER);
    out.push('\n');
    out.push_str(&format!(
        "## infergate: {} ({})\n\n{}\n\n",
        gate_badge(merged.gate),
        merged.profiles.len(),
        escape(&merged.headline)
    ));
    out.push_str("| Profile | Suite | Verdict | Regressions | Headline |\n");
    out.push_str("|---|---|---|---:|---|\n");
    for p in &merged.profiles {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            escape(&p.report.profile.key),
            escape(p.report.suite.as_deref().unwrap_or("-")),
            gate_badge(p.report.gate),
            p.regressions,
            escape(&p.report.headline)
        ));
    }
    for p in &merged.profiles {
        let r = &p.report;
        out.push_str(&format!(
            "\n### {} — {}\n\n",
            escape(&r.profile.key),
            gate_badge(r.gate)
        ));
        let gpu = r
            .profile
            .hardware
            .gpu_model
            .as_deref()
            .map(|g| format!("{} x{}", g, r.profile.hardware.gpu_count.max(1)))
            .unwrap_or_else(|| {
                r.profile
                    .hardware
                    .cpu_model
                    .clone()
                    .unwrap_or_else(|| "cpu".into())
            });
        out.push_str(&format!(
            "Hardware: {} · engine: {} · model: {} · suite: {}\n\n",
            escape(&gpu),
            escape(&r.profile.engine),
            escape(&r.profile.model),
            escape(r.suite.as_deref().unwrap_or("-"))
        ));
        out.push_str(&crate::report::verdict_table::markdown(r));
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// The merged verdict as plain text for a terminal.
pub fn text(merged: &MergedVerdict) -> String {
    let mut out = format!(
        "merged verdict: {} — {}\n",
        merged.gate.as_str(),
        merged.headline
    );
    for p in &merged.profiles {
        out.push_str(&format!(
            "  {:<14} {:>3} regressions  {}  ({})\n",
            p.report.gate.as_str(),
            p.regressions,
            p.report.profile.key,
            p.source
        ));
    }
    out
}

/// `key=value` lines for `$GITHUB_OUTPUT`: `verdict`, `regressions`, `profiles`. Values are
/// single words or numbers, so no multi-line delimiter is needed.
pub fn github_outputs(merged: &MergedVerdict) -> String {
    format!(
        "verdict={}\nregressions={}\nprofiles={}\n",
        merged.gate.as_str(),
        merged.regressions,
        merged.profiles.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::HardwareFingerprint;
    use crate::verdict::{
        BaselineSummary, CellComparison, CellVerdict, Direction, Metric, MetricComparison,
        RuleSummary, VERDICT_SCHEMA_VERSION,
    };

    fn report(gpu: &str, gate: GateVerdict, regressed_cells: usize) -> ComparisonReport {
        let profile = crate::results::ProfileKey {
            key: format!("gpu-{}x1__vllm__m__mabc", crate::results::path_safe(gpu)),
            hardware: HardwareFingerprint {
                kind: "gpu".into(),
                gpu_model: Some(gpu.into()),
                gpu_count: 1,
                driver_version: None,
                cpu_model: None,
            },
            engine: "vllm".into(),
            model: "m".into(),
            matrix_hash: "abc".into(),
        };
        let cell = |v: CellVerdict| CellComparison {
            concurrency: 8,
            context_tokens: 32768,
            verdict: v,
            reason: None,
            metrics: vec![MetricComparison {
                metric: Metric::AggregateTps,
                direction: Direction::HigherIsBetter,
                baseline: 100.0,
                candidate: 93.0,
                change: -0.07,
                ci_low: -0.09,
                ci_high: -0.05,
                margin: 0.03,
                p_value: 0.001,
                p_adjusted: 0.004,
                verdict: v,
                decided_on: None,
            }],
        };
        let mut cells: Vec<_> = (0..regressed_cells)
            .map(|_| cell(CellVerdict::Regression))
            .collect();
        cells.push(cell(CellVerdict::Unchanged));
        ComparisonReport {
            schema_version: VERDICT_SCHEMA_VERSION,
            profile,
            suite: Some("pr".into()),
            candidate_runs: vec!["r1".into()],
            baseline: BaselineSummary {
                level_runs: vec![],
                noise_runs: 0,
            },
            gate,
            headline: format!("{gpu} headline"),
            matrix_test: None,
            cells,
            confirmation: None,
            rule: RuleSummary {
                alpha: 0.05,
                min_effect: 0.03,
                noise_k: 2.0,
                correction: "holm".into(),
                confidence: 0.95,
            },
        }
    }

    fn shard(r: ComparisonReport) -> Shard {
        Shard {
            source: PathBuf::from(format!("{}/verdict.json", r.profile.key)),
            results: None,
            report: r,
        }
    }

    #[test]
    fn worst_gate_wins_in_severity_order() {
        use GateVerdict::*;
        let cases = [
            (vec![Pass, Pass], Pass),
            (vec![Pass, NoBaseline], NoBaseline),
            (vec![NoBaseline, Inconclusive, Pass], Inconclusive),
            (vec![Pass, Regression, Inconclusive], Regression),
            (vec![], NoBaseline),
        ];
        for (gates, want) in cases {
            let shards = gates
                .iter()
                .enumerate()
                .map(|(i, g)| shard(report(&format!("G{i}"), *g, 0)))
                .collect();
            assert_eq!(merge(shards).gate, want, "{gates:?}");
        }
    }

    #[test]
    fn counts_regressions_over_shards_and_names_the_bad_profile() {
        let m = merge(vec![
            shard(report("H100", GateVerdict::Pass, 0)),
            shard(report("H200", GateVerdict::Regression, 2)),
            shard(report("RTX 5090", GateVerdict::Pass, 0)),
        ]);
        assert_eq!(m.regressions, 2);
        assert_eq!(m.profiles[1].regressions, 2);
        assert!(
            m.headline
                .starts_with("1 of 3 profiles regressed (gpu-h200x1")
        );
        assert_eq!(
            github_outputs(&m),
            "verdict=regression\nregressions=2\nprofiles=3\n"
        );
    }

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
    fn unreadable_shards_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("verdict.json");
        std::fs::write(&bad, r#"{"schema_version": 1, "profile": 7}"#).unwrap();
        let err = Shard::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("verdict.json"), "{err}");
        assert!(err.contains("profile"), "{err}");
        let missing = Shard::load(&dir.path().join("nope")).unwrap_err();
        assert!(matches!(missing, ShardError::Missing { .. }));
    }
}
