//! The interval of a relative change (on the log scale) and the margin rule that turns it into
//! a verdict: statistically AND practically significant.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::Hash;
use std::thread::LocalKey;

use statrs::distribution::{ContinuousCDF, StudentsT};

use infergate_schema::verdict::{
    Against, CellVerdict, Check, CheckOutcome, DecidedChange, Direction, Found,
};

/// An estimated log ratio (candidate / baseline) with its standard error and degrees of freedom.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct LogChange {
    /// ln(candidate / baseline).
    pub estimate: f64,
    /// Standard error of `estimate`.
    pub se: f64,
    /// Degrees of freedom of the noise estimate behind `se` (Student t).
    pub df: f64,
    /// Tail degrees of freedom of the noise itself (`f64::INFINITY`: Gaussian): with heavy
    /// tails a p-value is the larger of the estimation t's and that of a unit-variance t of
    /// these df, so one wild cell of a heavy-tailed runner is not a regression.
    pub tail_df: f64,
}

impl LogChange {
    /// Degrees of freedom of the reference t: the estimation df, or the noise's own tail df
    /// when that is heavier.
    pub(crate) fn reference_df(&self) -> f64 {
        let tail = if self.tail_df.is_finite() && self.tail_df > 2.0 {
            self.tail_df
        } else {
            f64::INFINITY
        };
        self.df.min(tail).max(0.5)
    }

    /// The scale that makes `estimate / scale` a standard t of [`reference_df`]: the standard
    /// error, shrunk by `sqrt((ν − 2) / ν)` when a heavy tail of ν df binds (a t of ν df has
    /// variance ν / (ν − 2)).
    pub(crate) fn scale(&self) -> f64 {
        let nu = self.reference_df();
        if nu < self.df && nu > 2.0 {
            self.se * ((nu - 2.0) / nu).sqrt()
        } else {
            self.se
        }
    }

    /// The standardized change, `estimate / scale` (0 when there is no noise at all).
    pub(crate) fn statistic(&self) -> f64 {
        let s = self.scale();
        if s > 0.0 {
            self.estimate / s
        } else if self.estimate == 0.0 {
            0.0
        } else {
            self.estimate.signum() * 1e9
        }
    }

    /// The reference distribution in words: `t(13.9)`.
    pub(crate) fn reference(&self) -> String {
        let nu = self.reference_df();
        if nu.is_finite() && nu < 1e6 {
            format!("t({nu:.1})")
        } else {
            "normal".into()
        }
    }

    /// Quantile `p` of the reference distribution (∞ when degenerate).
    pub fn quantile(&self, p: f64) -> f64 {
        t_quantile(p, self.reference_df())
    }

    /// Two-sided interval of the log ratio at `confidence`: the wider of the heavy tail's and
    /// the estimation t's. A t(3) of the same variance is narrower than a Gaussian at 90%
    /// (1.36 against 1.64 SD), and a mean of boots is less heavy-tailed than one, so the tail's
    /// alone would be too narrow there (a −10% cell passed the cell bound 5.2% of the time
    /// on t(3) cells, not 5%); at the tests' small alphas the tail's is the wider.
    pub(crate) fn interval(&self, confidence: f64) -> (f64, f64) {
        let s = self.scale();
        if s <= 0.0 {
            return (self.estimate, self.estimate);
        }
        let p = 1.0 - (1.0 - confidence) / 2.0;
        let half = (self.quantile(p) * s).max(t_quantile(p, self.df) * self.se);
        (self.estimate - half, self.estimate + half)
    }

    /// One-sided p-value of "no change or better" against "worse" (for the metric's direction).
    pub(crate) fn p_worse(&self, direction: Direction) -> f64 {
        let z = signed(self.statistic(), direction);
        std_t(self.reference_df()).map_or(0.5, |t| t.cdf(z))
    }

    /// Whether the interval at `confidence` lies within ±`margin` (log units).
    pub(crate) fn within_margin(&self, confidence: f64, margin: f64) -> bool {
        let (lo, hi) = self.interval(confidence);
        lo >= -margin && hi <= margin
    }
}

/// The standard Student t of `df` degrees of freedom, `df` clamped to [0.5, 1e7] (`None` for a
/// NaN `df`).
pub(crate) fn std_t(df: f64) -> Option<StudentsT> {
    StudentsT::new(0.0, 1.0, df.clamp(0.5, 1e7)).ok()
}

/// Quantile `p` of a standard Student t with `df` degrees of freedom (∞ when degenerate),
/// remembered per thread: statrs inverts the CDF numerically, and one gate asks for the same
/// few (alpha, df) pairs many times.
pub fn t_quantile(p: f64, df: f64) -> f64 {
    thread_local! {
        static CACHE: RefCell<HashMap<(u64, u64), f64>> = RefCell::new(HashMap::new());
    }
    let df = df.clamp(0.5, 1e7);
    remembered(&CACHE, (p.to_bits(), df.to_bits()), || {
        std_t(df).map_or(f64::INFINITY, |t| t.inverse_cdf(p))
    })
}

/// `compute()`, remembered in the thread's `cache` under `key` (emptied past 4,096 entries).
fn remembered<K: Copy + Eq + Hash>(
    cache: &'static LocalKey<RefCell<HashMap<K, f64>>>,
    key: K,
    compute: impl FnOnce() -> f64,
) -> f64 {
    if let Some(q) = cache.with(|c| c.borrow().get(&key).copied()) {
        return q;
    }
    let q = compute();
    cache.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() > 4096 {
            c.clear();
        }
        c.insert(key, q);
    });
    q
}

/// The change expressed so that positive is better.
pub(crate) fn signed(log_change: f64, direction: Direction) -> f64 {
    match direction {
        Direction::HigherIsBetter => log_change,
        Direction::LowerIsBetter => -log_change,
    }
}

/// Relative change from a log ratio (`exp(x) − 1`).
pub(crate) fn relative(log_change: f64) -> f64 {
    log_change.exp_m1()
}

/// Margin on the point estimate in log units (a relative margin `m` is `−ln(1 − m)`).
pub(crate) fn log_margin(m: f64) -> f64 {
    -(1.0 - m).ln()
}

/// One test at its boundary: the verdict (regression or improvement only when the statistic
/// crosses the boundary AND the change is beyond the margin) and its [`Check`] for people,
/// whose boundary is the one the verdict crossed (the improvement side's for an improvement,
/// else the regression side's).
pub(crate) fn judge(
    change: &LogChange,
    direction: Direction,
    alpha: f64,
    margin: f64,
    look: &str,
) -> (CellVerdict, Check) {
    let q = change.quantile(1.0 - alpha);
    let stat = change.statistic();
    let good = signed(stat, direction);
    let moved = signed(change.estimate, direction);
    let verdict = if good <= -q && moved < -margin {
        CellVerdict::Regression
    } else if good >= q && moved > margin {
        CellVerdict::Improvement
    } else {
        CellVerdict::Unchanged
    };
    let outcome = match verdict {
        CellVerdict::Regression => CheckOutcome::Regression,
        CellVerdict::Improvement => CheckOutcome::Improvement,
        _ if good <= -q => CheckOutcome::WithinMargin,
        _ => CheckOutcome::NoRegression,
    };
    let check = Check {
        look: look.to_string(),
        statistic: stat,
        reference: change.reference(),
        ..at_boundary(verdict, q, direction, alpha, outcome)
    };
    (verdict, check)
}

/// A test's [`Check`] at its bound `q` (on the standardized statistic) for `verdict`: the
/// boundary the verdict crossed (the improvement side's for an improvement, else the regression
/// side's), its alpha and outcome; the look, statistic and reference are the caller's.
fn at_boundary(
    verdict: CellVerdict,
    q: f64,
    direction: Direction,
    alpha: f64,
    outcome: CheckOutcome,
) -> Check {
    Check {
        look: String::new(),
        statistic: 0.0,
        reference: String::new(),
        boundary: if verdict == CellVerdict::Improvement {
            signed(q, direction)
        } else {
            signed(-q, direction)
        },
        alpha,
        screen: false,
        rejected: verdict == CellVerdict::Regression,
        outcome,
    }
}

/// A heavy-tailed cell's test on two boots, each alone: a regression (an improvement) only when
/// each boot's own change is beyond the margin and its statistic beyond `q`, where `q` makes
/// "both boots past it" as likely as `alpha` under no change ([`each_boot_quantile`]). On a
/// t(3) runner the mean of two boots is as heavy-tailed as one, so its test needs a change of
/// about 15 scales at a cell's Bonferroni alpha; asking each boot to show it squares the tail
/// instead: one wild draw cannot carry it, and a −10% cell of 2% noise is found (issue 56).
/// `first`, `second`: each boot's own change; `pooled`: both boots' (for the share of their
/// variance the boots have in common: the history's level). The check's statistic is the
/// boot nearer no change.
pub(crate) fn judge_each_boot(
    first: &LogChange,
    second: &LogChange,
    pooled: &LogChange,
    direction: Direction,
    alpha: f64,
    margin: f64,
    look: &str,
) -> (CellVerdict, Check) {
    let (nu, rho) = each_boot_reference(first, second, pooled);
    let q = each_boot_quantile(alpha, nu, rho);
    let goods = [first, second].map(|c| signed(c.statistic(), direction));
    let moved = [first, second].map(|c| signed(c.estimate, direction));
    let worse = goods.iter().all(|&g| g <= -q) && moved.iter().all(|&m| m < -margin);
    let better = goods.iter().all(|&g| g >= q) && moved.iter().all(|&m| m > margin);
    let verdict = if worse {
        CellVerdict::Regression
    } else if better {
        CellVerdict::Improvement
    } else {
        CellVerdict::Unchanged
    };
    // The boot that decides: the one nearer no change on the side the pair leans.
    let lean_worse = goods[0] + goods[1] <= 0.0;
    let nearer = if lean_worse {
        goods[0].max(goods[1])
    } else {
        goods[0].min(goods[1])
    };
    let outcome = match verdict {
        CellVerdict::Regression => CheckOutcome::RegressionOnEachBoot,
        CellVerdict::Improvement => CheckOutcome::ImprovementOnEachBoot,
        _ if lean_worse && nearer <= -q => CheckOutcome::WithinMargin,
        _ => CheckOutcome::NoRegressionOnEachBoot,
    };
    let check = Check {
        look: look.to_string(),
        statistic: signed(nearer, direction),
        // The ν and common share the bound was solved for, so it can be redone by hand.
        reference: format!("t({nu:.1}) each boot, {:.0}% common", 100.0 * rho),
        ..at_boundary(verdict, q, direction, alpha, outcome)
    };
    (verdict, check)
}

/// The share of one boot's variance the two boots have in common (the history's level they
/// are both compared with): `pooled = S + (I₁ + I₂)/2` and `boot = S + I` give
/// `S = (4·V_pooled − V₁ − V₂) / 2`; the larger boot's share of it, in [0, 0.9].
fn shared_share(first: &LogChange, second: &LogChange, pooled: &LogChange) -> f64 {
    let (v1, v2) = (first.se.powi(2), second.se.powi(2));
    let shared = ((4.0 * pooled.se.powi(2) - v1 - v2) / 2.0).max(0.0);
    let v = v1.min(v2);
    if v > 0.0 && shared.is_finite() {
        (shared / v).clamp(0.0, 0.9)
    } else {
        0.0
    }
}

/// The bound `q` on each boot's t(`nu`) statistic at which both boots pass it with probability
/// `alpha` under no change, when a share `rho` of each boot's variance is common to both
/// (Gaussian: the level, a mean of many runs) and the rest is each boot's own t(`nu`) noise:
/// `∫ φ(u) · F((−q − u·√ρ/k) / √(1 − ρ))² du = alpha`, `k` the t's scale per SD. With `rho` = 0
/// it is the t's quantile at `√alpha`. Remembered per thread: a gate asks for a few, `stats-eval`
/// for many (its callers round `nu` and `rho` to their safe sides first, [`each_boot_reference`],
/// so few are distinct).
pub(crate) fn each_boot_quantile(alpha: f64, nu: f64, rho: f64) -> f64 {
    thread_local! {
        static CACHE: RefCell<HashMap<(u64, u64, u64), f64>> = RefCell::new(HashMap::new());
    }
    let key = (alpha.to_bits(), nu.to_bits(), rho.to_bits());
    remembered(&CACHE, key, || solve_each_boot_quantile(alpha, nu, rho))
}

/// `nu` rounded down to 0.1 and `rho` up to 0.02: the safe sides, and few distinct bounds.
fn safe_side(nu: f64, rho: f64) -> (f64, f64) {
    let nu = if nu.is_finite() {
        ((nu * 10.0).floor() / 10.0).clamp(0.5, 1e7)
    } else {
        1e7
    };
    (nu, ((rho.clamp(0.0, 0.9) * 50.0).ceil() / 50.0).min(0.9))
}

/// [`each_boot_quantile`] by bisection on the joint tail ([`each_boot_tail`]).
fn solve_each_boot_quantile(alpha: f64, nu: f64, rho: f64) -> f64 {
    if !(alpha > 0.0 && alpha < 1.0) || std_t(nu).is_none() {
        return f64::INFINITY;
    }
    if rho <= 0.0 {
        return t_quantile(1.0 - alpha.sqrt(), nu);
    }
    // The independent boots' bound is a floor: the common part only adds to the joint tail.
    let (mut lo, mut hi) = (t_quantile(1.0 - alpha.sqrt(), nu), 1.0);
    while each_boot_tail(hi, nu, rho) > alpha && hi < 1e6 {
        hi *= 2.0;
    }
    hi = hi.max(lo);
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if each_boot_tail(mid, nu, rho) > alpha {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-6 * hi.max(1.0) {
            break;
        }
    }
    hi
}

/// The chance under no change that both boots' t(`nu`) statistics are at or beyond `q` on one
/// side, a share `rho` of each boot's variance common to both (Gaussian) and the rest each
/// boot's own t(`nu`) noise: `∫ φ(u) · F((−q − u·√ρ/k) / √(1 − ρ))² du`, `k` the t's scale per
/// SD, on two 16-point Gauss–Legendre panels over the common part's ±8 SD.
pub(crate) fn each_boot_tail(q: f64, nu: f64, rho: f64) -> f64 {
    let Some(t) = std_t(nu) else {
        return f64::NAN;
    };
    if rho <= 0.0 {
        return t.cdf(-q).powi(2);
    }
    let k = if nu > 2.0 {
        ((nu - 2.0) / nu).sqrt()
    } else {
        1.0
    };
    let (common, own) = (rho.sqrt() / k, (1.0 - rho).sqrt());
    let phi = |u: f64| (-0.5 * u * u).exp() / (2.0 * std::f64::consts::PI).sqrt();
    let inner = |u: f64| phi(u) * t.cdf((-q - u * common) / own).powi(2);
    let panel = |a: f64, b: f64| {
        let (mid, half) = (0.5 * (a + b), 0.5 * (b - a));
        GL16.iter()
            .map(|&(x, w)| w * (inner(mid - half * x) + inner(mid + half * x)))
            .sum::<f64>()
            * half
    };
    panel(-8.0, 0.0) + panel(0.0, 8.0)
}

/// The one-sided p-value of [`judge_each_boot`]'s test ("worse" for the metric's direction):
/// the chance under no change that both boots read at least as worse as the boot nearer no
/// change did, so the p printed beside the cell is that of the test that decided it.
pub(crate) fn each_boot_p(
    first: &LogChange,
    second: &LogChange,
    pooled: &LogChange,
    direction: Direction,
) -> f64 {
    let (nu, rho) = each_boot_reference(first, second, pooled);
    let nearer = signed(first.statistic(), direction).max(signed(second.statistic(), direction));
    each_boot_tail(-nearer, nu, rho).clamp(0.0, 1.0)
}

/// The reference of the two boots' test: the heavier of their tails, and the share of their
/// variance they have in common ([`shared_share`]), each rounded to its safe side
/// ([`safe_side`]): the values the bound, the p and the check line all use.
fn each_boot_reference(first: &LogChange, second: &LogChange, pooled: &LogChange) -> (f64, f64) {
    safe_side(
        first.reference_df().min(second.reference_df()),
        shared_share(first, second, pooled),
    )
}

/// Gauss–Legendre nodes and weights on [−1, 1] (16 points, by symmetry 8 pairs): the smooth
/// integrals over a Gaussian or t density here and in the plan's two-boot power (whose two
/// panels agree with a 20,000-point Simpson rule to 3e-5: `the_power_integral_agrees_with_a_fine_rule`).
pub(super) const GL16: [(f64, f64); 8] = [
    (0.095_012_509_837_637_44, 0.189_450_610_455_068_5),
    (0.281_603_550_779_258_9, 0.182_603_415_044_923_6),
    (0.458_016_777_657_227_4, 0.169_156_519_395_002_5),
    (0.617_876_244_402_643_7, 0.149_595_988_816_576_7),
    (0.755_404_408_355_003, 0.124_628_971_255_533_9),
    (0.865_631_202_387_831_8, 0.095_158_511_682_492_78),
    (0.944_575_023_073_232_6, 0.062_253_523_938_647_89),
    (0.989_400_934_991_649_9, 0.027_152_459_411_754_09),
];

/// Whether a change whose sign in the better direction is `good` (see [`signed`]) points the
/// way of `verdict`: worse for a regression, better for an improvement (never for others).
pub(crate) fn points(verdict: CellVerdict, good: f64) -> bool {
    match verdict {
        CellVerdict::Regression => good < 0.0,
        CellVerdict::Improvement => good > 0.0,
        _ => false,
    }
}

/// A cell's own test whose outcome is not the cell's verdict says why, so that its line never
/// contradicts the verdict: one that found a regression or an improvement the cell's total
/// change does not agree with, and one that found nothing in a cell that moved with its row,
/// its column or the matrix (`decided` says which). `against` says what the test compared
/// with (the rest of its run, the other cells of its pairs).
pub(crate) fn note_overruled(
    check: &mut Check,
    judged: CellVerdict,
    verdict: CellVerdict,
    total: &LogChange,
    against: Against,
    decided: &DecidedChange,
) {
    if verdict == judged {
        return;
    }
    if let Some(found) = Found::of(judged) {
        check.outcome = CheckOutcome::OverruledByTotal {
            found,
            against,
            total: relative(total.estimate),
            verdict,
        };
    } else if let Some(verdict) = Found::of(verdict) {
        check.outcome = CheckOutcome::DecidedByBroader {
            own: Box::new(check.outcome.clone()),
            against,
            verdict,
            decided: *decided,
        };
    }
}

/// A reported-only metric's test never decides the gate: its line says which way the metric
/// moved and that it does not gate, instead of `regression`, and it is not `rejected` (so it is
/// not listed among the tests that decided the gate).
pub(crate) fn reported_only(check: &mut Check, own: CellVerdict, dir: Direction) {
    check.rejected = false;
    let higher = match (own, dir) {
        (CellVerdict::Regression, Direction::LowerIsBetter)
        | (CellVerdict::Improvement, Direction::HigherIsBetter) => true,
        (CellVerdict::Regression | CellVerdict::Improvement, _) => false,
        _ => return,
    };
    check.outcome = CheckOutcome::ReportedOnly { higher };
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_distr::{Distribution, Normal};

    /// A change of Gaussian noise (no heavy tail).
    fn gaussian(estimate: f64, se: f64, df: f64) -> LogChange {
        LogChange {
            estimate,
            se,
            df,
            tail_df: f64::INFINITY,
        }
    }

    #[test]
    fn interval_covers_the_truth_at_its_level() {
        // 4000 intervals from known-variance normal estimates: 90% should cover, within MC error.
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let noise = Normal::new(0.0, 0.02).unwrap_or_else(|_| unreachable!());
        let covered = (0..4000)
            .filter(|_| {
                let c = gaussian(-0.05 + noise.sample(&mut rng), 0.02, 1e6);
                let (lo, hi) = c.interval(0.90);
                lo <= -0.05 && -0.05 <= hi
            })
            .count();
        let rate = covered as f64 / 4000.0;
        assert!((0.88..=0.92).contains(&rate), "coverage {rate}");
    }

    #[test]
    fn margin_rule_cases() {
        let c = |estimate| gaussian(estimate, 0.01, 100.0);
        assert!(c(0.0).within_margin(0.95, 0.03));
        // Beyond the margin either way, or straddling it: not within.
        assert!(!c(-0.10).within_margin(0.95, 0.03));
        assert!(!c(0.10).within_margin(0.95, 0.03));
        assert!(!c(-0.03).within_margin(0.95, 0.03));
        // Latency: higher is worse.
        let lo = Direction::LowerIsBetter;
        assert!(c(0.10).p_worse(lo) < 1e-6);
    }

    #[test]
    fn each_boots_bound_holds_the_joint_tail_at_alpha() {
        // Independent boots: the t's quantile at √alpha.
        let q0 = each_boot_quantile(1e-4, 3.0, 0.0);
        assert!((q0 - t_quantile(1.0 - 0.01, 3.0)).abs() < 1e-9, "{q0}");
        // A common Gaussian part (the level) fattens the joint tail: the bound moves out, and
        // 400,000 simulated pairs of t(3) boots with 10% of their variance in common cross it
        // together at about alpha.
        let (alpha, nu, rho) = (2e-3, 3.0, 0.1);
        let q = each_boot_quantile(alpha, nu, rho);
        assert!(q > each_boot_quantile(alpha, nu, 0.0));
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let t = rand_distr::StudentT::new(nu).unwrap_or_else(|_| unreachable!());
        let z = Normal::new(0.0, 1.0).unwrap_or_else(|_| unreachable!());
        // Each boot: unit variance, `rho` of it common; its statistic on the t's scale.
        let k = ((nu - 2.0) / nu).sqrt();
        let n = 400_000;
        let both = (0..n)
            .filter(|_| {
                let common = rho.sqrt() * z.sample(&mut rng);
                let mut boot = || (common + (1.0 - rho).sqrt() * k * t.sample(&mut rng)) / k;
                boot() <= -q && boot() <= -q
            })
            .count();
        let rate = both as f64 / n as f64;
        assert!(
            (0.8 * alpha..=1.2 * alpha).contains(&rate),
            "{rate} vs {alpha}"
        );
    }

    #[test]
    fn a_heavy_tailed_cell_regresses_only_when_each_boot_shows_it() {
        let hi = Direction::HigherIsBetter;
        let m = log_margin(0.03);
        let boot = |estimate| LogChange {
            estimate,
            se: 0.02,
            df: 200.0,
            tail_df: 3.0,
        };
        let pooled = LogChange {
            se: 0.02 * 0.5_f64.sqrt() * 1.05,
            ..boot(0.0)
        };
        // −10% on both boots of 2% noise: found; one wild boot alone (−40% and 0%): not.
        let (v, check) = judge_each_boot(&boot(-0.105), &boot(-0.105), &pooled, hi, 1e-3, m, "b");
        assert_eq!(v, CellVerdict::Regression, "{check:?}");
        assert!(
            matches!(check.outcome, CheckOutcome::RegressionOnEachBoot),
            "{check:?}"
        );
        // The line names the ν and common share its bound was solved for: redone by hand
        // from them, the bound is the one printed.
        assert!(check.rejected, "{check:?}");
        assert_eq!(check.reference, "t(3.0) each boot, 12% common");
        assert_eq!(check.boundary, -each_boot_quantile(1e-3, 3.0, 0.12));
        let (v, check) = judge_each_boot(&boot(-0.51), &boot(0.0), &pooled, hi, 1e-3, m, "b");
        assert_eq!(v, CellVerdict::Unchanged, "{check:?}");
        assert!(
            matches!(check.outcome, CheckOutcome::NoRegressionOnEachBoot),
            "{check:?}"
        );
        assert_eq!(check.statistic, boot(0.0).statistic());
        // The pooled mean of those two (−25%) on the t(3) reference at the same alpha would
        // call it: the mean of two heavy-tailed boots is no proof.
        let mean = LogChange {
            estimate: -0.255,
            ..pooled
        };
        assert_eq!(judge(&mean, hi, 1e-3, m, "b").0, CellVerdict::Regression);
        // The test's p: at its bound it is alpha (the bound's rounding to the safe side is
        // the p's too), below it smaller, and one boot at no change leaves it large.
        let (nu, rho) = each_boot_reference(&boot(0.0), &boot(0.0), &pooled);
        let q = each_boot_quantile(1e-3, nu, rho);
        let at = |stat: f64| LogChange {
            estimate: -stat * boot(0.0).scale(),
            ..boot(0.0)
        };
        let p = each_boot_p(&at(q), &at(q + 1.0), &pooled, hi);
        assert!((p / 1e-3 - 1.0).abs() < 1e-3, "{p}");
        assert!(each_boot_p(&at(q + 0.5), &at(q + 1.0), &pooled, hi) < 1e-3);
        assert!(each_boot_p(&at(q + 3.0), &at(0.0), &pooled, hi) > 0.2);
        // Both better beyond the bound: an improvement.
        let (v, check) = judge_each_boot(&boot(0.105), &boot(0.11), &pooled, hi, 1e-3, m, "b");
        assert_eq!(v, CellVerdict::Improvement);
        assert!(
            matches!(check.outcome, CheckOutcome::ImprovementOnEachBoot),
            "{check:?}"
        );
    }

    #[test]
    fn a_regression_needs_the_boundary_and_the_margin() {
        let c = |estimate, se| gaussian(estimate, se, 1e6);
        let hi = Direction::HigherIsBetter;
        let m = log_margin(0.03);
        // t = −5 beyond the 0.1% boundary (−3.09), −10% beyond the 3% margin.
        let (v, check) = judge(&c(-0.10, 0.02), hi, 1e-3, m, "first boot");
        assert_eq!(v, CellVerdict::Regression);
        assert!((check.statistic + 5.0).abs() < 1e-9 && (check.boundary + 3.090).abs() < 1e-3);
        assert!(check.rejected && matches!(check.outcome, CheckOutcome::Regression));
        // Beyond the boundary but within the margin: not a regression, and the line says why.
        let (v, check) = judge(&c(-0.02, 0.002), hi, 1e-3, m, "first boot");
        assert_eq!(v, CellVerdict::Unchanged);
        assert!(
            matches!(check.outcome, CheckOutcome::WithinMargin),
            "{check:?}"
        );
        // Beyond the margin but not the boundary.
        let (v, check) = judge(&c(-0.10, 0.05), hi, 1e-3, m, "first boot");
        assert_eq!(v, CellVerdict::Unchanged);
        assert!(
            matches!(check.outcome, CheckOutcome::NoRegression),
            "{check:?}"
        );
        // Lower is better: the boundary is on the other side.
        let (v, check) = judge(&c(0.10, 0.02), Direction::LowerIsBetter, 1e-3, m, "x");
        assert!(v == CellVerdict::Regression && check.boundary > 0.0);
        // An improvement's line shows the boundary it crossed: t = +5 ≥ +3.09.
        let (v, check) = judge(&c(0.10, 0.02), hi, 1e-3, m, "x");
        assert_eq!(v, CellVerdict::Improvement);
        assert!((check.boundary - 3.090).abs() < 1e-3 && check.beyond() && !check.rejected);
        assert_eq!(
            check.line("cell"),
            "cell: t = +5.00 ≥ +3.09 (normal, one-sided α = 1.00e-3, x) → improvement"
        );
    }

    /// A cell's own test that the cell's verdict overrules says why, as what was found and
    /// what decided instead; one that agrees is left as it was.
    #[test]
    fn an_overruled_own_test_says_what_it_found_and_what_decided() {
        let c = |estimate| gaussian(estimate, 0.02, 1e6);
        let hi = Direction::HigherIsBetter;
        let m = log_margin(0.03);
        let total = gaussian(-0.05, 0.01, 30.0);
        let decided = DecidedChange {
            basis: infergate_schema::verdict::DecisionBasis::WithMatrix,
            change: -0.05,
            ci_low: -0.07,
            ci_high: -0.03,
            matrix_change: Some(-0.09),
        };
        let overruled = |check: &mut Check, own, verdict, against| {
            note_overruled(check, own, verdict, &total, against, &decided);
        };
        // Faster than the rest of its run, slower than its baseline: the total decides.
        let (own, mut check) = judge(&c(0.10), hi, 1e-3, m, "both boots");
        assert_eq!(own, CellVerdict::Improvement);
        let overrule = CellVerdict::Regression;
        overruled(&mut check, own, overrule, Against::Baseline);
        assert!(
            matches!(
                check.outcome,
                CheckOutcome::OverruledByTotal {
                    found: Found::Improvement,
                    against: Against::Baseline,
                    total: t,
                    verdict: CellVerdict::Regression,
                } if t == relative(-0.05)
            ),
            "{check:?}"
        );
        // Nothing found against the other cells of its pairs, the matrix moved: it decided.
        let (own, mut check) = judge(&c(-0.01), hi, 1e-3, m, "both boots");
        assert!(matches!(check.outcome, CheckOutcome::NoRegression));
        overruled(&mut check, own, overrule, Against::PairedAb);
        assert!(
            matches!(
                &check.outcome,
                CheckOutcome::DecidedByBroader {
                    own,
                    against: Against::PairedAb,
                    verdict: Found::Regression,
                    decided: d,
                } if matches!(**own, CheckOutcome::NoRegression) && *d == decided
            ),
            "{check:?}"
        );
        // The verdict is the test's own: its outcome stands.
        let (own, mut check) = judge(&c(-0.10), hi, 1e-3, m, "both boots");
        overruled(&mut check, own, own, Against::Baseline);
        assert!(matches!(check.outcome, CheckOutcome::Regression));
        // Found nothing and the cell is unchanged: nothing to say either.
        let (own, mut check) = judge(&c(-0.01), hi, 1e-3, m, "both boots");
        let inconclusive = CellVerdict::Inconclusive;
        overruled(&mut check, own, inconclusive, Against::Baseline);
        assert!(matches!(check.outcome, CheckOutcome::NoRegression));
    }

    /// A metric that does not gate says which way its value moved, never `regression`.
    #[test]
    fn a_reported_only_test_says_which_way_its_value_moved() {
        let m = log_margin(0.03);
        let lo = Direction::LowerIsBetter;
        let (own, mut check) = judge(&gaussian(0.10, 0.02, 1e6), lo, 1e-3, m, "x");
        assert_eq!(own, CellVerdict::Regression);
        reported_only(&mut check, own, lo);
        assert!(!check.rejected);
        assert!(matches!(
            check.outcome,
            CheckOutcome::ReportedOnly { higher: true }
        ));
        let (own, mut check) = judge(&gaussian(-0.10, 0.02, 1e6), lo, 1e-3, m, "x");
        assert_eq!(own, CellVerdict::Improvement);
        reported_only(&mut check, own, lo);
        assert!(matches!(
            check.outcome,
            CheckOutcome::ReportedOnly { higher: false }
        ));
        let (own, mut check) = judge(&gaussian(0.0, 0.02, 1e6), lo, 1e-3, m, "x");
        reported_only(&mut check, own, lo);
        assert!(matches!(check.outcome, CheckOutcome::NoRegression));
    }
}
