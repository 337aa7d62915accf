//! How sensitive the gate's plan is: the minimum detectable effect (MDE) of the matrix-wide
//! test as the plan makes it (one boot, or two boots with the futility screen), of each cell's
//! test, and how many more baseline runs a thin history needs before the plan reaches its
//! design power. The gate says `pass` only when the MDE is at most `design_effect`.
//!
//! Power of the plan at a uniform log change `δ` (worse, positive), with `σ` the boot-to-boot
//! SD of the run effect, `K` the level runs and `F` the reference t's CDF:
//! - one boot: `P = F(δ/se₁ − q_α)`, `se₁ = σ·√(1 + 1/K)`;
//! - two boots: `P = F(δ/se₁ − q_f)² · F(δ/se₂ − q_α)`, `se₂ = σ·√(1/2 + 1/K)`: each boot must
//!   lean worse past the futility bound `q_f` and both together cross the boundary `q_α`
//!   (the boots share the baseline level, which only raises the true power: conservative).
//!
//! The MDE solves `P = design_power`. A longer history changes two things: the level averages
//! more runs (up to `level_runs`), and σ's estimate gains a degree of freedom per run (up to
//! `noise_runs`).

use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::verdict::{CellSensitivity, Sensitivity};

use super::compare::Look;
use super::interval::LogChange;
use super::rule::{DecisionRule, FUTILITY_P, MATRIX_MARGIN};

/// The longest projection tried: a history that needs more than this many further runs is
/// reported as unable to reach the design effect at its noise.
const MAX_EXTRA_RUNS: usize = 200;

/// The matrix-wide test's noise, as fitted.
pub(crate) struct MatrixDesign {
    /// Boot-to-boot SD of the run effect (log).
    pub run_sigma: f64,
    /// Its degrees of freedom.
    pub df: f64,
    /// Baseline runs the level averaged.
    pub level_runs_used: usize,
    /// Candidate runs of one look without a plan (repetitions of one boot); the two-boot plan
    /// measures each boot once.
    pub candidate_runs: usize,
}

fn t_dist(df: f64) -> Option<StudentsT> {
    StudentsT::new(0.0, 1.0, df.clamp(0.5, 1e7)).ok()
}

/// The plan's MDE in log units (positive) for `boots` boots of `runs` candidate runs each,
/// `level` level runs and `df`.
fn plan_mde_runs(
    sigma: f64,
    df: f64,
    level: usize,
    boots: usize,
    runs: usize,
    alpha: f64,
    power: f64,
) -> f64 {
    let Some(t) = t_dist(df) else {
        return f64::INFINITY;
    };
    let k = level.max(1) as f64;
    let j = runs.max(1) as f64;
    let se1 = sigma * (1.0 / j + 1.0 / k).sqrt();
    let q_a = super::interval::t_quantile(1.0 - alpha, df);
    let margin = -(1.0 - MATRIX_MARGIN).ln();
    let power_at = |d: f64| match boots {
        0 | 1 => t.cdf(d / se1 - q_a.max(margin / se1)),
        _ => {
            let se2 = sigma * (0.5 / j + 1.0 / k).sqrt();
            let q_f = super::interval::t_quantile(1.0 - FUTILITY_P, df);
            t.cdf(d / se1 - q_f).powi(2) * t.cdf(d / se2 - q_a.max(margin / se2))
        }
    };
    if !(sigma.is_finite() && sigma >= 0.0) {
        return f64::INFINITY;
    }
    let (mut lo, mut hi) = (0.0, 2.0);
    if power_at(hi) < power {
        return f64::INFINITY;
    }
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if power_at(mid) >= power {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// A log-unit MDE as the relative slowdown it stands for (negative: `exp(−m) − 1`).
fn as_relative_slowdown(m: f64) -> f64 {
    (-m).exp_m1()
}

/// The MDE of one cell's own test at its alpha (log units): `(q_α + q_power)·scale` in its
/// reference t (heavy tails included).
fn cell_mde(c: &LogChange, alpha: f64, power: f64) -> f64 {
    c.scale() * (c.quantile(1.0 - alpha) + c.quantile(power))
}

/// What the plan can detect now, and whether that reaches the rule's design effect.
/// `history` = baseline runs the model was fitted on; `cells` = each compared cell's own test;
/// `cell_alpha` = a cell's alpha at the first look.
pub(crate) fn assess(
    rule: &DecisionRule,
    look: &Look,
    history: usize,
    matrix: Option<MatrixDesign>,
    cells: Vec<((u32, u64), LogChange)>,
    cell_alpha: f64,
) -> Sensitivity {
    let per_cell: Vec<CellSensitivity> = cells
        .iter()
        .map(|((concurrency, context_tokens), c)| CellSensitivity {
            concurrency: *concurrency,
            context_tokens: *context_tokens,
            mde: as_relative_slowdown(cell_mde(c, cell_alpha.max(1e-12), rule.design_power)),
        })
        .collect();
    let target = -(1.0 - rule.design_effect).ln();
    let mde_with = |m: &MatrixDesign, extra: usize| {
        let level = (m.level_runs_used + extra)
            .min(rule.level_runs.max(1))
            .max(m.level_runs_used);
        let df_gain = extra.min(rule.noise_runs.saturating_sub(history)) as f64;
        let runs = if look.design_boots <= 1 {
            m.candidate_runs
        } else {
            1
        };
        plan_mde_runs(
            m.run_sigma,
            m.df + df_gain,
            level,
            look.design_boots,
            runs,
            rule.matrix_alpha(),
            rule.design_power,
        )
    };
    let (now, runs_needed) = match &matrix {
        Some(m) => (
            mde_with(m, 0),
            (0..=MAX_EXTRA_RUNS).find(|&k| mde_with(m, k) <= target),
        ),
        None => (f64::INFINITY, None),
    };
    Sensitivity {
        design_effect: rule.design_effect,
        design_power: rule.design_power,
        history_runs: history,
        matrix_mde: matrix.is_some().then(|| as_relative_slowdown(now)),
        mde: as_relative_slowdown(now),
        runs_needed,
        sufficient: runs_needed == Some(0),
        cells: per_cell,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_distr::{Distribution, Normal};

    fn design(sigma: f64, df: f64, level: usize) -> MatrixDesign {
        MatrixDesign {
            run_sigma: sigma,
            df,
            level_runs_used: level,
            candidate_runs: 1,
        }
    }

    fn look(boots: usize) -> Look {
        let rule = DecisionRule::default();
        Look {
            design_boots: boots,
            ..Look::single(&rule)
        }
    }

    #[test]
    fn the_two_boot_mde_is_found_at_the_design_power() {
        // Simulate the plan at its own MDE: boot 1 and boot 2 each lean past the futility
        // bound, and their mean crosses the boundary, about 80% of the time (a little more:
        // the shared level correlates the boots).
        let rule = DecisionRule::default();
        let (sigma, df, k) = (0.01, 1e6, 5usize);
        let m = plan_mde_runs(sigma, df, k, 2, 1, rule.matrix_alpha(), 0.8);
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let n = Normal::new(0.0, sigma).unwrap_or_else(|_| unreachable!());
        let z = |p: f64| {
            statrs::distribution::Normal::new(0.0, 1.0)
                .unwrap()
                .inverse_cdf(p)
        };
        let (q_f, q_a) = (z(1.0 - FUTILITY_P), z(1.0 - rule.matrix_alpha()));
        let trials = 20_000;
        let found = (0..trials)
            .filter(|_| {
                let level: f64 = (0..k).map(|_| n.sample(&mut rng)).sum::<f64>() / k as f64;
                let b1 = -m + n.sample(&mut rng) - level;
                let b2 = -m + n.sample(&mut rng) - level;
                let se1 = sigma * (1.0 + 1.0 / k as f64).sqrt();
                let se2 = sigma * (0.5 + 1.0 / k as f64).sqrt();
                b1 / se1 <= -q_f && b2 / se1 <= -q_f && (b1 + b2) / 2.0 / se2 <= -q_a
            })
            .count() as f64
            / trials as f64;
        assert!((0.79..0.86).contains(&found), "power {found} at {m}");
        // One boot needs a larger effect for the same power.
        assert!(plan_mde_runs(sigma, df, k, 1, 1, rule.matrix_alpha(), 0.8) > m);
    }

    #[test]
    fn a_two_run_history_is_insufficient_and_says_how_many_runs_it_needs() {
        let rule = DecisionRule::default();
        let s = assess(&rule, &look(2), 2, Some(design(0.01, 2.0, 2)), vec![], 1e-4);
        assert!(!s.sufficient, "{s:?}");
        let needed = s.runs_needed.unwrap_or(usize::MAX);
        assert!((1..=20).contains(&needed), "{s:?}");
        assert!(s.mde < -rule.design_effect, "{s:?}");
    }

    #[test]
    fn a_full_quiet_history_is_sufficient_and_a_loud_one_never() {
        let rule = DecisionRule::default();
        let s = assess(
            &rule,
            &look(2),
            20,
            Some(design(0.011, 13.9, 5)),
            vec![],
            1e-4,
        );
        assert!(s.sufficient, "{s:?}");
        assert_eq!(s.runs_needed, Some(0));
        let loud = assess(
            &rule,
            &look(2),
            20,
            Some(design(0.05, 13.9, 5)),
            vec![],
            1e-4,
        );
        assert!(!loud.sufficient);
        assert_eq!(loud.runs_needed, None, "{loud:?}");
    }

    #[test]
    fn cells_get_their_own_mde_at_their_alpha_and_heavy_tails_widen_it() {
        let rule = DecisionRule::default();
        let cell = |se, tail_df| LogChange {
            estimate: 0.0,
            se,
            df: 200.0,
            tail_df,
        };
        let s = assess(
            &rule,
            &look(2),
            20,
            None,
            vec![
                ((8, 1024), cell(0.01, f64::INFINITY)),
                ((8, 2048), cell(0.03, f64::INFINITY)),
                ((8, 4096), cell(0.01, 3.0)),
            ],
            1e-4,
        );
        assert!(s.cells[0].mde > s.cells[1].mde, "{s:?}");
        assert!(s.cells[2].mde < s.cells[0].mde, "{s:?}");
        assert!(!s.sufficient && s.matrix_mde.is_none());
    }
}
