//! How sensitive the gate's plan is: the minimum detectable effect (MDE) of the matrix-wide
//! test as the plan makes it (one boot, or two boots with the futility screen), of each cell's
//! test, and how many more baseline runs a thin history needs before the plan reaches its
//! design power. The gate says `pass` only when the MDE is at most `design_effect`.
//!
//! Power of the plan at a uniform log change `δ` (worse, positive), with `σ` the boot-to-boot
//! SD of the run effect, `K` the level runs, `λ²` the level's lag behind a slowing runner
//! ([`MatrixDesign::level_lag_var`]) and `F` the reference t's CDF:
//! - one boot: `P = F(δ/se₁ − q_α)`, `se₁ = √(σ²·(1 + 1/K) + λ²)`;
//! - two boots: each boot must lean worse past the futility bound (`d₁, d₂ ≥ q_f·se₁`) and
//!   their mean cross the boundary (`m ≥ q_α·se₂`, `se₂ = √(σ²·(1/2 + 1/K) + λ²)`). The boots
//!   share the baseline level, so they are written as their mean `m = δ + se₂·Z` and half
//!   their difference `h = σ·√(1/2)·W`, independent:
//!   `P = ∫_{m ≥ q_α·se₂} f(m) · P(|h| ≤ m − q_f·se₁) dm` (`PlanNoise::power`).
//!
//! With 10 or more history runs the boots are drawn from the history's own ([`boot_draws`]:
//! its shape at σ's scale) and the level's error is normal, `√(σ²/K + λ²)`
//! (`PlanNoise::empirical_power`): a runner whose slow boots are rare is not read as one whose
//! every boot is wide.
//!
//! The MDE solves `P = design_power`. A longer history changes two things: the level averages
//! more runs (up to the level's third of `history_runs`), and σ's estimate gains a degree of
//! freedom per run (up to `history_runs`).

use statrs::distribution::{Continuous, ContinuousCDF, StudentsT};

use infergate_schema::verdict::{CellSensitivity, Sensitivity, SensitivityUnit};

use super::build::{mean, var};
use super::interval::{GL16, LogChange, log_margin, relative, std_t, t_quantile};
use super::noise::{RunNoise, median};
use super::rule::{DecisionRule, FUTILITY_P, MATRIX_MARGIN, level_window};

/// The longest projection tried: a history that needs more than this many further runs is
/// reported as unable to reach the design effect at its noise.
const MAX_EXTRA_RUNS: usize = 200;

/// Fewest history runs whose own boots the plan's power draws from ([`boot_draws`]); a
/// shorter history's shape is too coarse, and the reference t carries the uncertainty of its
/// few runs' scatter.
const EMPIRICAL_MIN_RUNS: usize = 10;

/// Runs whose median is a boot's local level in [`boot_draws`] (the boot and two on each
/// side): a median of five follows a drift or a step and ignores one slow boot among them
/// (two in a row would move it).
const LOCAL_LEVEL_RUNS: usize = 5;

/// The boots the plan's power draws from: each history run's effect against the median of
/// its [`LOCAL_LEVEL_RUNS`] neighbours (itself included; the local level follows a drift or a
/// step, not a slow boot), worse positive, rescaled to the boot-to-boot SD `sigma` the test
/// uses. Their shape is the runner's: with one boot in twenty 4% slow, nineteen draws are tight
/// and one is far, where a normal of the same SD spreads every boot. `None` when they do not
/// scatter.
fn boot_draws(effects: &[f64], sigma: f64) -> Option<Vec<f64>> {
    let n = effects.len();
    let deviations: Vec<f64> = (0..n)
        .map(|r| {
            let half = LOCAL_LEVEL_RUNS / 2;
            let from = r
                .saturating_sub(half)
                .min(n.saturating_sub(LOCAL_LEVEL_RUNS));
            median(&mut effects[from..(from + LOCAL_LEVEL_RUNS).min(n)].to_vec()) - effects[r]
        })
        .collect();
    let rms = (deviations.iter().map(|d| d * d).sum::<f64>() / n as f64).sqrt();
    (rms > 0.0).then(|| deviations.iter().map(|d| d * sigma / rms).collect())
}

/// The matrix-wide test's noise, as fitted.
#[derive(Debug)]
pub(crate) struct MatrixDesign {
    /// Boot-to-boot noise of the run effect (log).
    pub run_noise: RunNoise,
    /// Baseline runs the level averaged.
    pub level_runs_used: usize,
    /// Candidate runs of one look without a plan (repetitions of one boot); the two-boot plan
    /// measures each boot once.
    pub candidate_runs: usize,
    /// The history's fitted run effects (log), oldest first: the shape of its boots
    /// ([`boot_draws`]) and the level's lag ([`MatrixDesign::level_lag_var`]).
    pub run_effects: Vec<f64>,
}

/// The matrix-wide test's standard error of a change: `√(σ²·(1/j + 1/K) + λ²)` for `j`
/// candidate runs against a level of `K` runs, `λ²` its lag ([`MatrixDesign::level_lag_var`]).
/// One formula for the test (`compare`) and for the plan that predicts it (`PlanNoise`).
pub(crate) fn matrix_se(sigma: f64, candidate_runs: f64, level_runs: f64, lag_var: f64) -> f64 {
    (sigma * sigma * (1.0 / candidate_runs + 1.0 / level_runs) + lag_var).sqrt()
}

impl MatrixDesign {
    /// The design of a fitted model: its run effects without the runs it could not fit
    /// (`NaN`), which are neither a boot's shape nor a lag.
    pub fn new(
        run_noise: RunNoise,
        level_runs_used: usize,
        candidate_runs: usize,
        run_effect: &[f64],
    ) -> MatrixDesign {
        MatrixDesign {
            run_noise,
            level_runs_used,
            candidate_runs,
            run_effects: run_effect
                .iter()
                .copied()
                .filter(|a| a.is_finite())
                .collect(),
        }
    }

    /// The level's lag behind a drift, as a variance (`λ²`): the level (the mean of the newest
    /// `K` runs) forecasts the next boot, and its backtest over the window (each run against
    /// the mean of the `K` before it) errs on average by the lag a drift gives it, which the
    /// boot-to-boot noise (from successive runs) does not see. The squared mean error less its
    /// own sampling noise; `0` when the runs come in faster than their level, without a
    /// systematic lag, or with fewer than 3 backtests. The matrix test's standard error and
    /// the plan's power both count it.
    pub(crate) fn level_lag_var(&self) -> f64 {
        self.backtest_lag()
            .filter(|(lag, _)| *lag < 0.0)
            .map_or(0.0, |(_, v)| v)
    }

    /// The level's lead on a runner that speeds up, as a variance: [`Self::level_lag_var`]'s
    /// backtest where the runs come in faster than their level. It cannot raise a false alarm
    /// (the level sits below the next boot), so the tests leave it out, but it hides a
    /// slowdown: a cell's total change, whose bound vouches that no cell slowed beyond
    /// `cell_effect`, counts it (a −10% cell under a +3% drift passed that bound 5.3% of the
    /// time without it).
    pub(crate) fn level_lead_var(&self) -> f64 {
        self.backtest_lag()
            .filter(|(lag, _)| *lag > 0.0)
            .map_or(0.0, |(_, v)| v)
    }

    /// The backtest's mean error (negative: the runs come in slower than their level) and its
    /// square less its own sampling noise; `None` with fewer than 3 backtests.
    fn backtest_lag(&self) -> Option<(f64, f64)> {
        let (effects, k) = (&self.run_effects, self.level_runs_used);
        if k == 0 || effects.len() < k + 3 {
            return None;
        }
        let errors: Vec<f64> = (k..effects.len())
            .map(|r| effects[r] - mean(&effects[r - k..r]))
            .collect();
        let (m, lag) = (errors.len() as f64, mean(&errors));
        Some((lag, (lag.powi(2) - var(&errors) / m).max(0.0)))
    }
}

/// The plan's noise at one look: what its power at a uniform change depends on.
struct PlanNoise {
    t: StudentsT,
    /// Boots of the plan (1, or 2 with the futility screen of each).
    boots: usize,
    /// Standard error of one boot's matrix change against the level.
    se1: f64,
    /// Standard error of the two boots' mean against the level.
    se2: f64,
    /// Standard error of half the two boots' difference (independent of their mean: the
    /// level is common to both and cancels).
    se_half: f64,
    /// One boot's futility bound on its statistic.
    q_f: f64,
    /// The final boundary on the change itself (log): `q_α · se` or the matrix margin.
    boundary: f64,
    /// The boots the power draws from ([`boot_draws`]: the history's own, when it has enough
    /// runs and each boot is one run); `None`: the reference t.
    draws: Option<Vec<f64>>,
    /// Standard error of the level the boots are compared with.
    se_level: f64,
}

impl PlanNoise {
    /// `lag_var`: the level's error beyond its runs' noise (its lag behind a drift, as the
    /// test adds it: [`MatrixDesign::level_lag_var`]). `None` when `sigma` is not a finite SD
    /// or `df` is NaN.
    fn new(
        sigma: f64,
        df: f64,
        level: usize,
        boots: usize,
        runs: usize,
        alpha: f64,
        lag_var: f64,
    ) -> Option<Self> {
        if !(sigma.is_finite() && sigma >= 0.0) {
            return None;
        }
        let t = std_t(df)?;
        let k = level.max(1) as f64;
        let j = runs.max(1) as f64;
        let se1 = matrix_se(sigma, j, k, lag_var);
        let se2 = matrix_se(sigma, 2.0 * j, k, lag_var);
        let q_a = t_quantile(1.0 - alpha, df);
        let margin = log_margin(MATRIX_MARGIN);
        let final_se = if boots <= 1 { se1 } else { se2 };
        Some(PlanNoise {
            t,
            boots,
            se1,
            se2,
            se_half: sigma * (0.5 / j).sqrt(),
            q_f: t_quantile(1.0 - FUTILITY_P, df),
            boundary: (q_a * final_se).max(margin),
            draws: None,
            se_level: (sigma * sigma / k + lag_var).sqrt(),
        })
    }

    /// The power of the plan with its boots drawn from the history's own boots (each pair
    /// equally likely) and the level's error normal: a slow boot in twenty is one draw in
    /// twenty, not a wider normal.
    fn empirical_power(&self, d: f64, draws: &[f64]) -> f64 {
        let normal = statrs::distribution::Normal::standard();
        let lean = self.q_f * self.se1;
        let p = |u: f64| {
            if self.se_level > 0.0 {
                normal.cdf(u / self.se_level)
            } else {
                f64::from(u8::from(u >= 0.0))
            }
        };
        let n = draws.len() as f64;
        if self.boots <= 1 {
            return draws.iter().map(|e| p(d + e - self.boundary)).sum::<f64>() / n;
        }
        let mut sum = 0.0;
        for a in draws {
            for b in draws {
                let u = (d + a - lean)
                    .min(d + b - lean)
                    .min(d + 0.5 * (a + b) - self.boundary);
                sum += p(u);
            }
        }
        sum / (n * n)
    }

    /// Probability that the plan finds a uniform worse log change `d` (the integral of the
    /// module docs).
    fn power(&self, d: f64) -> f64 {
        if let Some(draws) = &self.draws {
            return self.empirical_power(d, draws);
        }
        if self.boots <= 1 {
            return self.t.cdf((d - self.boundary) / self.se1);
        }
        let lean = self.q_f * self.se1;
        if self.se2 <= 0.0 || self.se_half <= 0.0 {
            return f64::from(u8::from(d >= self.boundary.max(lean)));
        }
        // The standardized mean from where both conditions can hold (or 8 below its centre)
        // to 8 above: two 16-point Gauss–Legendre panels. What lies beyond 8 is 0.2% of a
        // t(3), less of lighter tails, and counted as failing (the power is never overstated).
        let lo = ((self.boundary.max(lean) - d) / self.se2).max(-8.0);
        let hi = lo.max(0.0) + 8.0;
        let inner = |z: f64| self.two_boot_density(d, lean, z);
        let width = 0.5 * (hi - lo);
        let panel = |a: f64| {
            let (mid, half) = (a + 0.5 * width, 0.5 * width);
            GL16.iter()
                .map(|&(x, w)| w * (inner(mid - half * x) + inner(mid + half * x)))
                .sum::<f64>()
                * half
        };
        (panel(lo) + panel(lo + width)).clamp(0.0, 1.0)
    }

    /// The integrand of the two-boot power at a worse log change `d`: the density of the boots'
    /// standardized mean at `z` times the chance that half their difference leaves both boots
    /// past the futility bound `lean` (log units).
    fn two_boot_density(&self, d: f64, lean: f64, z: f64) -> f64 {
        let room = (d + self.se2 * z - lean) / self.se_half;
        self.t.pdf(z) * (2.0 * self.t.cdf(room) - 1.0).max(0.0)
    }

    /// The smallest worse log change found with probability `power` (the MDE), by bisection;
    /// infinite when even a halving is not found that often.
    fn mde(&self, power: f64) -> f64 {
        let (mut lo, mut hi) = (0.0, 2.0);
        if self.power(hi) < power {
            return f64::INFINITY;
        }
        for _ in 0..32 {
            let mid = 0.5 * (lo + hi);
            if self.power(mid) >= power {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        hi
    }
}

/// The sensitivity of a plan whose matrix-wide MDE is `mde` (a worse log change) with
/// `history` runs of `unit`: sufficient when it needs no more runs. No cells and no level lag
/// (a store's [`assess`] adds them).
fn sensitivity(
    rule: &DecisionRule,
    unit: SensitivityUnit,
    history: usize,
    mde: f64,
    runs_needed: Option<usize>,
) -> Sensitivity {
    // A worse log change `m` is the relative slowdown `exp(−m) − 1` (negative).
    let slowdown = relative(-mde);
    Sensitivity {
        design_effect: rule.design_effect,
        design_power: rule.design_power,
        history_runs: history,
        unit,
        matrix_mde: Some(slowdown),
        mde: slowdown,
        runs_needed,
        sufficient: runs_needed == Some(0),
        cells: Vec::new(),
        level_lag: 0.0,
    }
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
    design_boots: usize,
    history: usize,
    matrix: Option<&MatrixDesign>,
    cells: Vec<((u32, u64), LogChange)>,
    cell_alpha: f64,
) -> Sensitivity {
    let per_cell: Vec<CellSensitivity> = cells
        .iter()
        .map(|((concurrency, context_tokens), c)| CellSensitivity {
            concurrency: *concurrency,
            context_tokens: *context_tokens,
            mde: relative(-cell_mde(c, cell_alpha.max(1e-12), rule.design_power)),
        })
        .collect();
    let target = log_margin(rule.design_effect);
    let lag_var = matrix.map_or(0.0, MatrixDesign::level_lag_var);
    let plan_with = |m: &MatrixDesign, extra: usize| {
        let level = (m.level_runs_used + extra)
            .min(level_window(rule.history_runs))
            .max(m.level_runs_used);
        // The noise is fitted on at most the rule's history window of runs.
        let (sigma, df) = m
            .run_noise
            .after(extra.min(rule.history_runs.saturating_sub(history)));
        let runs = if design_boots <= 1 {
            m.candidate_runs
        } else {
            1
        };
        let mut p = PlanNoise::new(
            sigma,
            df,
            level,
            design_boots,
            runs,
            rule.matrix_alpha(),
            lag_var,
        )?;
        // The history's own boots: its runs as they are (more runs are projected with the
        // reference t), a boot measured once.
        if extra == 0 && runs == 1 && m.run_effects.len() >= EMPIRICAL_MIN_RUNS {
            p.draws = boot_draws(&m.run_effects, sigma);
        }
        Some(p)
    };
    let reaches = |m: &MatrixDesign, extra: usize| {
        plan_with(m, extra).is_some_and(|p| p.power(target) >= rule.design_power)
    };
    let (now, runs_needed) = match matrix {
        Some(m) => {
            let now = plan_with(m, 0).map_or(f64::INFINITY, |p| p.mde(rule.design_power));
            // One run shows no scatter: a count would be the prior's guess, not the data's
            // (`Sensitivity::needs` asks for more runs instead). Otherwise the fewest runs, by
            // a scan: power is not quite monotone in them (where the runs scatter more than
            // the prior, its fading weight raises σ while the level and the df grow).
            let needed = if reaches(m, 0) {
                Some(0)
            } else if history < 2 || !reaches(m, MAX_EXTRA_RUNS) {
                None
            } else {
                (1..=MAX_EXTRA_RUNS).find(|&extra| reaches(m, extra))
            };
            (now, needed)
        }
        None => (f64::INFINITY, None),
    };
    let all = sensitivity(
        rule,
        SensitivityUnit::BaselineRuns,
        history,
        now,
        runs_needed,
    );
    Sensitivity {
        matrix_mde: all.matrix_mde.filter(|_| matrix.is_some()),
        cells: per_cell,
        level_lag: lag_var.sqrt().exp_m1(),
        ..all
    }
}

/// What a paired A/B run's matrix-wide test can detect, as the gate's [`assess`] says it for a
/// store: the paired t's MDE at the test's `alpha` (the matrix alpha, or its share where the
/// gating latencies' matrix-wide tests take theirs) and the design power, and how many more
/// pairs would bring it to the design effect (the pairs' scatter shrinks as `1/√pairs`, its t's
/// df grows). `pairs` = the pairs behind `matrix`. An A/B run that passes could have seen a
/// uniform `design_effect`; one that could not is `insufficient`.
pub(crate) fn assess_pairs(
    rule: &DecisionRule,
    matrix: &LogChange,
    pairs: usize,
    alpha: f64,
) -> Sensitivity {
    let target = log_margin(rule.design_effect);
    let mde_with = |p: usize| {
        let c = LogChange {
            se: matrix.se * (pairs as f64 / p as f64).sqrt(),
            df: (p as f64 - 1.0).max(0.5),
            ..*matrix
        };
        cell_mde(&c, alpha, rule.design_power)
    };
    let now = mde_with(pairs);
    let runs_needed = (pairs..=pairs + MAX_EXTRA_RUNS)
        .find(|&p| mde_with(p) <= target)
        .map(|p| p - pairs);
    sensitivity(rule, SensitivityUnit::Pairs, pairs, now, runs_needed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_distr::{Distribution, Normal};

    /// A history whose run effects scatter by `sd` over `differences` successive differences.
    fn design(sd: f64, differences: usize, level: usize) -> MatrixDesign {
        MatrixDesign {
            run_noise: RunNoise::observed(sd, differences),
            level_runs_used: level,
            candidate_runs: 1,
            run_effects: Vec::new(),
        }
    }

    /// A history slowing 0.15% a run: its level, the mean of the newest 7, stands 4 runs
    /// (0.6%) behind the next boot, and the backtest reads exactly that; a runner getting
    /// faster, a flat one and a window too short for 3 backtests add nothing.
    #[test]
    fn the_level_lag_of_a_slowing_history_is_its_backtest_error() {
        let lag_var = |effects: &[f64], k: usize| {
            MatrixDesign::new(RunNoise::observed(0.01, 19), k, 1, effects).level_lag_var()
        };
        let slowing: Vec<f64> = (0..20).map(|r| -0.0015 * r as f64).collect();
        let lag = lag_var(&slowing, 7).sqrt();
        assert!((lag - 0.006).abs() < 1e-12, "{lag}");
        // Less the backtests' own scatter: a jagged slowing (21 runs: its 14 backtests
        // alternate evenly, so their mean is still −0.6%) reads less lag than a clean one.
        let jagged: Vec<f64> = (0..21)
            .map(|r| -0.0015 * r as f64 + if r % 2 == 0 { 0.004 } else { -0.004 })
            .collect();
        let less = lag_var(&jagged, 7);
        assert!(less > 0.0 && less < 0.006f64.powi(2), "{less}");
        let faster: Vec<f64> = slowing.iter().map(|a| -a).collect();
        assert_eq!(lag_var(&faster, 7), 0.0);
        // A runner getting faster: the level leads by as much, which only a cell's total
        // change counts (it hides a slowdown); a slowing one has no lead.
        let lead = |effects: &[f64]| {
            MatrixDesign::new(RunNoise::observed(0.01, 19), 7, 1, effects).level_lead_var()
        };
        assert!((lead(&faster).sqrt() - 0.006).abs() < 1e-12);
        assert_eq!(lead(&slowing), 0.0);
        assert_eq!(lag_var(&[0.0; 20], 7), 0.0);
        assert_eq!(lag_var(&slowing[..9], 7), 0.0);
        // Unfitted runs (NaN) are skipped, not read as a lag.
        let mut gaps = slowing.clone();
        gaps[3] = f64::NAN;
        assert!(lag_var(&gaps, 7) > 0.0);
    }

    /// The plan's MDE (log units) for `boots` boots of one run each.
    fn plan_mde(sigma: f64, df: f64, level: usize, boots: usize, alpha: f64) -> f64 {
        PlanNoise::new(sigma, df, level, boots, 1, alpha, 0.0).map_or(f64::INFINITY, |p| p.mde(0.8))
    }

    #[test]
    fn the_two_boot_mde_is_found_at_the_design_power() {
        // Simulate the plan at its own MDE: boot 1 and boot 2 each lean past the futility
        // bound, and their mean crosses the boundary, 80% of the time (the shared level and
        // the mean's test correlate the three; their product undercounted it: 0.79..0.86).
        let rule = DecisionRule::default();
        let (sigma, df, k) = (0.01, 1e6, 5usize);
        let m = plan_mde(sigma, df, k, 2, rule.matrix_alpha());
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
        assert!((0.785..0.815).contains(&found), "power {found} at {m}");
        // One boot needs a larger effect for the same power.
        assert!(plan_mde(sigma, df, k, 1, rule.matrix_alpha()) > m);
    }

    /// The plan's power with the history's own boots is what drawing two boots from them and
    /// the level from its normal finds, at the MDE it reports.
    #[test]
    fn the_power_from_the_historys_boots_is_what_drawing_them_finds() {
        let rule = DecisionRule::default();
        let (sigma, k) = (0.01, 7usize);
        let mut p = PlanNoise::new(sigma, 1e6, k, 2, 1, rule.matrix_alpha(), 0.0).unwrap();
        // Twenty boots, one of them 4% slow, rescaled to sigma.
        let mut effects: Vec<f64> = (0..20)
            .map(|r| 0.004 * ((r * 7 % 5) as f64 - 2.0))
            .collect();
        effects[12] -= 0.04;
        let draws = boot_draws(&effects, sigma).unwrap();
        let rms = (draws.iter().map(|d| d * d).sum::<f64>() / 20.0).sqrt();
        assert!((rms - sigma).abs() < 1e-12, "{rms}");
        assert!(
            draws[12] > 3.0 * sigma,
            "the slow boot is the far draw: {draws:?}"
        );
        p.draws = Some(draws.clone());
        let m = p.mde(0.8);
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let level = Normal::new(0.0, sigma / (k as f64).sqrt()).unwrap_or_else(|_| unreachable!());
        let lean = p.q_f * p.se1;
        let trials = 40_000;
        let found = (0..trials)
            .filter(|_| {
                let pick = |rng: &mut rand::rngs::StdRng| draws[rng.random_range(0..draws.len())];
                let e = level.sample(&mut rng);
                let d1 = m + pick(&mut rng) - e;
                let d2 = m + pick(&mut rng) - e;
                d1 >= lean && d2 >= lean && 0.5 * (d1 + d2) >= p.boundary
            })
            .count() as f64
            / trials as f64;
        assert!((0.79..0.81).contains(&found), "power {found} at {m}");
        // Nineteen tight boots and one far: a smaller effect is found as often as a normal of
        // the same SD would need.
        let normal = plan_mde(sigma, 1e6, k, 2, rule.matrix_alpha());
        assert!(m < normal, "{m} vs {normal}");
    }

    /// The two 16-point panels against a 20,000-point Simpson rule of the same integral out
    /// to 60 standard units, around the MDE where the bisection reads it.
    #[test]
    fn the_power_integral_agrees_with_a_fine_rule() {
        for df in [8.0, 19.0, 1e6] {
            let p = PlanNoise::new(0.01, df, 10, 2, 1, 0.004, 0.0).unwrap();
            let lean = p.q_f * p.se1;
            let fine = |d: f64| {
                let (a, b) = ((p.boundary.max(lean) - d) / p.se2, 60.0);
                let n = 20_000;
                let h = (b - a) / n as f64;
                let f = |z: f64| p.two_boot_density(d, lean, z);
                let inner: f64 = (1..n)
                    .map(|i| f(a + i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 })
                    .sum();
                (f(a) + f(b) + inner) * h / 3.0
            };
            for d in [0.02, 0.03, 0.04] {
                let (got, want) = (p.power(d), fine(d));
                assert!((got - want).abs() < 1e-4, "df {df}, d {d}: {got} vs {want}");
            }
        }
    }

    #[test]
    fn a_two_run_history_is_insufficient_and_says_how_many_runs_it_needs() {
        let rule = DecisionRule::default();
        let s = assess(&rule, 2, 2, Some(&design(0.01, 1, 2)), vec![], 1e-4);
        assert!(!s.sufficient, "{s:?}");
        let needed = s.runs_needed.unwrap_or(usize::MAX);
        assert!((1..=20).contains(&needed), "{s:?}");
        assert!(s.mde < -rule.design_effect, "{s:?}");
    }

    /// The runs a thin history is told it needs are the runs that make it sufficient, when
    /// they scatter as its own did: not more (the prior's weight and the surer estimate both
    /// count), not fewer.
    #[test]
    fn a_thin_history_is_told_exactly_the_runs_that_make_it_sufficient() {
        let rule = DecisionRule::default();
        for (sd, runs) in [(0.0, 2), (0.002, 2), (0.004, 3), (0.006, 4)] {
            let at = |n: usize| {
                let d = design(sd, n - 1, n.min(level_window(rule.history_runs)));
                assess(&rule, 1, n, Some(&d), vec![], 1e-4)
            };
            let needed = at(runs)
                .runs_needed
                .unwrap_or_else(|| panic!("sd {sd}: {:?}", at(runs)));
            assert!(needed > 0, "sd {sd}");
            assert!(at(runs + needed).sufficient, "sd {sd}: {needed}");
            assert!(!at(runs + needed - 1).sufficient, "sd {sd}: {needed}");
        }
    }

    #[test]
    fn a_full_quiet_history_is_sufficient_and_a_loud_one_never() {
        let rule = DecisionRule::default();
        let s = assess(&rule, 2, 20, Some(&design(0.011, 19, 5)), vec![], 1e-4);
        assert!(s.sufficient, "{s:?}");
        assert_eq!(s.runs_needed, Some(0));
        let loud = assess(&rule, 2, 20, Some(&design(0.05, 19, 5)), vec![], 1e-4);
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
            2,
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
