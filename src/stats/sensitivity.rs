//! What a baseline can detect: the minimum detectable effect (MDE) of the matrix-wide test and
//! of each cell's test, and how many more baseline runs a thin history needs before the rule
//! reaches its design power.
//!
//! A gate on a 2-run history passes (or is `inconclusive`) because it cannot see a −10%
//! regression, not because there is none; this module lets the report say so plainly.
//!
//! The MDE is the smallest true slowdown that the rule, as applied, would call a regression with
//! probability `design_power`. A test with estimate `e = δ + se·T` (Student t with `df`) calls a
//! regression when the interval's upper end lies beyond the margin, `e + q_c·se < −margin`
//! (`q_c` the two-sided quantile at `confidence`), and the one-sided p-value clears the level,
//! `e < −t_{1−α}·se`. So it needs `e < −τ` with `τ = max(margin + q_c·se, t_{1−α}·se)`, and
//! `P(δ + se·T < −τ) ≥ power` gives `|δ| ≥ τ + t_{power}·se`. A cell's level is its share of
//! the cells' alpha under Holm when it regresses alone (`cell_alpha / k`).
//!
//! The projection to a longer history keeps the noise estimates as they are and lets the two
//! things a new run changes change: the level averages more runs (up to `level_runs`), and the
//! noise estimate gains a degree of freedom per run (up to `noise_runs`).

use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::verdict::{CellSensitivity, Sensitivity};

use super::interval::{LogChange, unit_variance_t};
use super::rule::DecisionRule;

/// The longest projection tried: a history that needs more than this many further runs is
/// reported as unable to reach the design effect at its noise.
const MAX_EXTRA_RUNS: usize = 200;

/// Student-t quantile with `df` degrees of freedom (∞ when the distribution is degenerate).
fn t_quantile(p: f64, df: f64) -> f64 {
    StudentsT::new(0.0, 1.0, df.max(0.5))
        .map(|t| t.inverse_cdf(p))
        .unwrap_or(f64::INFINITY)
}

/// The MDE of one test in log units (positive): see the module docs. With heavy tails
/// (`tail_df` finite, as [`LogChange::tail_df`]) the test's p-value is the larger of the
/// estimation t's and a unit-variance t of `tail_df`, so both quantiles bind: the level's and
/// the power's are each the larger of the two (a Gaussian MDE would promise a heavy-tailed
/// history what its test cannot find).
pub(crate) fn mde_log(
    se: f64,
    df: f64,
    tail_df: f64,
    margin: f64,
    confidence: f64,
    alpha: f64,
    power: f64,
) -> f64 {
    if !(se.is_finite() && se >= 0.0) {
        return f64::INFINITY;
    }
    let q_c = t_quantile(1.0 - (1.0 - confidence) / 2.0, df);
    let mut q_a = t_quantile(1.0 - alpha, df);
    let mut q_p = t_quantile(power, df);
    if let Some((t, unit)) = unit_variance_t(tail_df) {
        q_a = q_a.max(t.inverse_cdf(1.0 - alpha) * unit);
        q_p = q_p.max(t.inverse_cdf(power) * unit);
    }
    let tau = (margin + q_c * se).max(q_a * se);
    tau + q_p * se
}

/// A log-unit MDE as the relative slowdown it stands for (negative: `exp(−m) − 1`).
fn as_relative_slowdown(m: f64) -> f64 {
    (-m).exp_m1()
}

/// The matrix-wide test as it was applied, with what its standard error is made of.
pub(crate) struct MatrixDesign {
    /// The test's change (its `se` and `df` are what the MDE is computed from).
    pub change: LogChange,
    /// Candidate runs pooled (repetitions).
    pub candidate_runs: usize,
    /// Baseline runs the level averaged.
    pub level_runs_used: usize,
}

impl MatrixDesign {
    /// The MDE (log units) had the history `extra` more runs.
    fn mde_with(&self, extra: usize, history: usize, rule: &DecisionRule) -> f64 {
        let j = self.candidate_runs.max(1) as f64;
        let nb = self.level_runs_used.max(1) as f64;
        // se = σ_run·sqrt(1/j + 1/nb): recover σ_run, then let the level grow.
        let sigma = self.change.se / (1.0 / j + 1.0 / nb).sqrt();
        let nb_then = (self.level_runs_used + extra).min(rule.level_runs.max(1)) as f64;
        let nb_then = nb_then.max(nb);
        let se = sigma * (1.0 / j + 1.0 / nb_then).sqrt();
        let df_gain = extra.min(rule.noise_runs.saturating_sub(history)) as f64;
        mde_log(
            se,
            self.change.df + df_gain,
            self.change.tail_df,
            rule.matrix_min_effect,
            rule.confidence,
            rule.matrix_alpha(),
            rule.design_power,
        )
    }
}

/// One cell's per-cell test as it was applied.
pub(crate) struct CellDesign {
    /// Concurrency of the cell.
    pub concurrency: u32,
    /// Context length of the cell.
    pub context_tokens: u64,
    /// The cell's own test (the cell relative to its run).
    pub specific: LogChange,
    /// Its margin (log units).
    pub margin: f64,
}

/// What the baseline can detect now, and whether that reaches the rule's design effect.
/// `history` = baseline runs the noise was learnt from; `cell_tests` = the gating family's size.
pub(crate) fn assess(
    rule: &DecisionRule,
    history: usize,
    matrix: Option<&MatrixDesign>,
    cells: &[CellDesign],
    cell_tests: usize,
) -> Sensitivity {
    let cell_alpha = rule.cell_alpha() / cell_tests.max(1) as f64;
    let per_cell: Vec<CellSensitivity> = cells
        .iter()
        .map(|c| CellSensitivity {
            concurrency: c.concurrency,
            context_tokens: c.context_tokens,
            mde: as_relative_slowdown(mde_log(
                c.specific.se,
                c.specific.df,
                c.specific.tail_df,
                c.margin,
                rule.confidence,
                cell_alpha,
                rule.design_power,
            )),
        })
        .collect();
    let target = -(1.0 - rule.design_effect).ln();
    let matrix = matrix.filter(|_| rule.matrix_test);
    let matrix_mde = matrix.map(|m| m.mde_with(0, history, rule));
    // What "reaching the design power" means: the matrix-wide test finding a uniform
    // `design_effect`; without a matrix test, the median cell finding it on its own.
    let (now, runs_needed) = match (matrix, matrix_mde) {
        (Some(m), Some(now)) => {
            let needed = (0..=MAX_EXTRA_RUNS).find(|&k| m.mde_with(k, history, rule) <= target);
            (now, needed)
        }
        _ => {
            let mut logs: Vec<f64> = per_cell.iter().map(|c| -(c.mde).ln_1p()).collect();
            logs.sort_by(f64::total_cmp);
            let median = logs.get(logs.len() / 2).copied().unwrap_or(f64::INFINITY);
            // Without the matrix design there is no projection: sufficient or not, now.
            (median, (median <= target).then_some(0))
        }
    };
    Sensitivity {
        design_effect: rule.design_effect,
        design_power: rule.design_power,
        history_runs: history,
        matrix_mde: matrix_mde.map(as_relative_slowdown),
        mde: as_relative_slowdown(now),
        runs_needed,
        sufficient: runs_needed == Some(0),
        cells: per_cell,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn design(se: f64, df: f64, level: usize) -> MatrixDesign {
        MatrixDesign {
            change: LogChange {
                estimate: 0.0,
                se,
                df,
                tail_df: f64::INFINITY,
            },
            candidate_runs: 1,
            level_runs_used: level,
        }
    }

    #[test]
    fn mde_is_the_effect_found_at_the_design_power() {
        // With a huge df, the MDE is margin + z_c·se + z_power·se when the margin term binds.
        let m = mde_log(0.01, 1e6, f64::INFINITY, 0.01, 0.90, 0.005, 0.80);
        let want = (0.01 + 1.6449 * 0.01_f64).max(2.5758 * 0.01) + 0.8416 * 0.01;
        assert!((m - want).abs() < 1e-3, "{m} vs {want}");
        // A test at exactly that effect regresses about 80% of the time.
        use rand::SeedableRng;
        use rand_distr::{Distribution, Normal};
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let noise = Normal::new(0.0, 0.01).unwrap_or_else(|_| unreachable!());
        let trials = 20_000;
        let found = (0..trials)
            .filter(|_| {
                let c = LogChange {
                    estimate: -m + noise.sample(&mut rng),
                    se: 0.01,
                    df: 1e6,
                    tail_df: f64::INFINITY,
                };
                let (_, hi) = c.interval(0.90);
                hi < -0.01 && c.p_worse(crate::verdict::Direction::HigherIsBetter) < 0.005
            })
            .count() as f64
            / trials as f64;
        assert!((0.78..0.82).contains(&found), "power {found}");
    }

    #[test]
    fn a_heavy_tailed_cell_test_gets_the_mde_it_can_reach() {
        // A cell test with heavy-tailed noise (unit-variance t with 3 df, the p-value the
        // larger of the two): the Gaussian MDE is found well under 80% of the time, the
        // heavy-tailed one at least 80%.
        use rand::SeedableRng;
        use rand_distr::{Distribution, StudentT};
        let (se, alpha) = (0.01, 0.001);
        let gaussian = mde_log(se, 1e6, f64::INFINITY, 0.01, 0.90, alpha, 0.80);
        let heavy = mde_log(se, 1e6, 3.0, 0.01, 0.90, alpha, 0.80);
        assert!(heavy > gaussian * 1.2, "{heavy} vs {gaussian}");
        let t3 = StudentT::new(3.0).unwrap_or_else(|_| unreachable!());
        let unit = (1.0f64 / 3.0).sqrt();
        let power = |m: f64| {
            let mut rng = rand::rngs::StdRng::seed_from_u64(5);
            let trials = 20_000;
            (0..trials)
                .filter(|_| {
                    let c = LogChange {
                        estimate: -m + se * unit * t3.sample(&mut rng),
                        se,
                        df: 1e6,
                        tail_df: 3.0,
                    };
                    let (_, hi) = c.interval(0.90);
                    hi < -0.01 && c.p_worse(crate::verdict::Direction::HigherIsBetter) < alpha
                })
                .count() as f64
                / trials as f64
        };
        let (at_gaussian, at_heavy) = (power(gaussian), power(heavy));
        assert!(at_gaussian < 0.7, "the Gaussian MDE's power {at_gaussian}");
        assert!(at_heavy >= 0.80, "the heavy-tailed MDE's power {at_heavy}");
    }

    #[test]
    fn a_two_run_history_is_insufficient_and_says_how_many_runs_it_needs() {
        let rule = DecisionRule::default();
        // σ_run = 1%: two runs of history, one candidate, df from two runs plus the prior.
        let d = design(0.01 * (1.0_f64 + 0.5).sqrt(), 2.0, 2);
        let s = assess(&rule, 2, Some(&d), &[], 20);
        assert!(!s.sufficient, "{s:?}");
        let needed = s.runs_needed.unwrap_or(usize::MAX);
        assert!((1..=20).contains(&needed), "{s:?}");
        assert!(s.mde < -rule.design_effect, "{s:?}");
        // After those runs, the projection is below the design effect, and not one run before.
        let target = -(1.0 - rule.design_effect).ln();
        assert!(d.mde_with(needed, 2, &rule) <= target);
        assert!(d.mde_with(needed - 1, 2, &rule) > target);
    }

    #[test]
    fn a_full_quiet_history_is_sufficient() {
        let rule = DecisionRule::default();
        let d = design(0.01 * (1.0_f64 + 0.2).sqrt(), 21.0, 5);
        let s = assess(&rule, 20, Some(&d), &[], 20);
        assert!(s.sufficient, "{s:?}");
        assert_eq!(s.runs_needed, Some(0));
        assert!(s.mde > -rule.design_effect);
    }

    #[test]
    fn a_noise_too_large_for_the_design_effect_never_suffices() {
        let rule = DecisionRule::default();
        let d = design(0.05 * (1.0_f64 + 0.2).sqrt(), 21.0, 5);
        let s = assess(&rule, 20, Some(&d), &[], 20);
        assert!(!s.sufficient);
        assert_eq!(s.runs_needed, None, "{s:?}");
    }

    #[test]
    fn cells_get_their_own_mde_at_their_share_of_alpha() {
        let rule = DecisionRule::default();
        let cell = |se| CellDesign {
            concurrency: 8,
            context_tokens: 1024,
            specific: LogChange {
                estimate: 0.0,
                se,
                df: 20.0,
                tail_df: f64::INFINITY,
            },
            margin: 0.03,
        };
        let s = assess(&rule, 20, None, &[cell(0.01), cell(0.03)], 2);
        assert_eq!(s.cells.len(), 2);
        assert!(s.cells[0].mde > s.cells[1].mde, "{s:?}");
        assert!(s.cells[0].mde < -0.03);
    }
}
