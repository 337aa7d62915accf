//! The interval of a relative change (on the log scale) and the margin rule that turns it into
//! a verdict: statistically AND practically significant.

use statrs::distribution::{ContinuousCDF, StudentsT};

use infergate_schema::verdict::{CellVerdict, Check, DecidedChange, Direction};

/// An estimated log ratio (candidate / baseline) with its standard error and degrees of freedom.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LogChange {
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
    pub fn reference_df(&self) -> f64 {
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
    pub fn scale(&self) -> f64 {
        let nu = self.reference_df();
        if nu < self.df && nu > 2.0 {
            self.se * ((nu - 2.0) / nu).sqrt()
        } else {
            self.se
        }
    }

    /// The standardized change, `estimate / scale` (0 when there is no noise at all).
    pub fn statistic(&self) -> f64 {
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
    pub fn reference(&self) -> String {
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

    /// Two-sided interval of the log ratio at `confidence`.
    pub fn interval(&self, confidence: f64) -> (f64, f64) {
        let s = self.scale();
        if s <= 0.0 {
            return (self.estimate, self.estimate);
        }
        let q = self.quantile(1.0 - (1.0 - confidence) / 2.0);
        (self.estimate - q * s, self.estimate + q * s)
    }

    /// One-sided p-value of "no change or better" against "worse" (for the metric's direction).
    pub fn p_worse(&self, direction: Direction) -> f64 {
        let z = signed(self.statistic(), direction);
        std_t(self.reference_df()).map_or(0.5, |t| t.cdf(z))
    }

    /// Whether the interval at `confidence` lies within ±`margin` (log units).
    pub fn within_margin(&self, confidence: f64, margin: f64) -> bool {
        let (lo, hi) = self.interval(confidence);
        lo >= -margin && hi <= margin
    }
}

/// The standard Student t of `df` degrees of freedom, `df` clamped to [0.5, 1e7] (`None` for a
/// NaN `df`).
pub fn std_t(df: f64) -> Option<StudentsT> {
    StudentsT::new(0.0, 1.0, df.clamp(0.5, 1e7)).ok()
}

/// Quantile `p` of a standard Student t with `df` degrees of freedom (∞ when degenerate),
/// remembered per thread: statrs inverts the CDF numerically, and one gate asks for the same
/// few (alpha, df) pairs many times.
pub fn t_quantile(p: f64, df: f64) -> f64 {
    use std::cell::RefCell;
    use std::collections::HashMap;
    thread_local! {
        static CACHE: RefCell<HashMap<(u64, u64), f64>> = RefCell::new(HashMap::new());
    }
    let df = df.clamp(0.5, 1e7);
    let key = (p.to_bits(), df.to_bits());
    if let Some(q) = CACHE.with(|c| c.borrow().get(&key).copied()) {
        return q;
    }
    let q = std_t(df).map_or(f64::INFINITY, |t| t.inverse_cdf(p));
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() > 4096 {
            c.clear();
        }
        c.insert(key, q);
    });
    q
}

/// The change expressed so that positive is better.
pub fn signed(log_change: f64, direction: Direction) -> f64 {
    match direction {
        Direction::HigherIsBetter => log_change,
        Direction::LowerIsBetter => -log_change,
    }
}

/// Relative change from a log ratio (`exp(x) − 1`).
pub fn relative(log_change: f64) -> f64 {
    log_change.exp_m1()
}

/// Margin on the point estimate in log units (a relative margin `m` is `−ln(1 − m)`).
pub fn log_margin(m: f64) -> f64 {
    -(1.0 - m).ln()
}

/// One test at its boundary: the verdict (regression or improvement only when the statistic
/// crosses the boundary AND the change is beyond the margin) and its [`Check`] for people,
/// whose boundary is the one the verdict crossed (the improvement side's for an improvement,
/// else the regression side's).
pub fn judge(
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
        CellVerdict::Regression => "regression",
        CellVerdict::Improvement => "improvement",
        _ if good <= -q => "within the margin",
        _ => "no regression",
    };
    (
        verdict,
        Check {
            look: look.to_string(),
            statistic: stat,
            reference: change.reference(),
            boundary: if verdict == CellVerdict::Improvement {
                signed(q, direction)
            } else {
                signed(-q, direction)
            },
            alpha,
            screen: false,
            rejected: verdict == CellVerdict::Regression,
            outcome: outcome.into(),
        },
    )
}

/// Whether a change whose sign in the better direction is `good` (see [`signed`]) points the
/// way of `verdict`: worse for a regression, better for an improvement (never for others).
pub fn points(verdict: CellVerdict, good: f64) -> bool {
    match verdict {
        CellVerdict::Regression => good < 0.0,
        CellVerdict::Improvement => good > 0.0,
        _ => false,
    }
}

/// A cell's own test whose outcome is not the cell's verdict says why, so that its line never
/// contradicts the verdict: one that found a regression or an improvement the cell's total
/// change does not agree with, and one that found nothing in a cell that moved with its row,
/// its column or the matrix (`decided` says which). `against` names what the test compared
/// with (`the rest of its run`).
pub fn note_overruled(
    check: &mut Check,
    judged: CellVerdict,
    verdict: CellVerdict,
    total: &LogChange,
    against: &str,
    decided: &DecidedChange,
) {
    let found = |v: CellVerdict| matches!(v, CellVerdict::Regression | CellVerdict::Improvement);
    if verdict == judged {
        return;
    }
    if found(judged) {
        check.outcome = format!(
            "{} against {against}, but its total change is {}: {}",
            judged.as_str(),
            infergate_schema::verdict::signed_percent(relative(total.estimate)),
            verdict.as_str()
        );
    } else if found(verdict) {
        check.outcome = format!(
            "{} against {against}; {} {}",
            check.outcome,
            verdict.as_str(),
            decided.label()
        );
    }
}

/// A reported-only metric's test never decides the gate: its line says which way the metric
/// moved and that it does not gate, instead of `regression`, and it is not `rejected` (so it is
/// not listed among the tests that decided the gate).
pub fn reported_only(check: &mut Check, own: CellVerdict, dir: Direction) {
    check.rejected = false;
    let moved = match (own, dir) {
        (CellVerdict::Regression, Direction::LowerIsBetter)
        | (CellVerdict::Improvement, Direction::HigherIsBetter) => "higher",
        (CellVerdict::Regression | CellVerdict::Improvement, _) => "lower",
        _ => return,
    };
    check.outcome = format!("{moved}, reported only (this metric does not gate)");
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
    fn a_regression_needs_the_boundary_and_the_margin() {
        let c = |estimate, se| gaussian(estimate, se, 1e6);
        let hi = Direction::HigherIsBetter;
        let m = log_margin(0.03);
        // t = −5 beyond the 0.1% boundary (−3.09), −10% beyond the 3% margin.
        let (v, check) = judge(&c(-0.10, 0.02), hi, 1e-3, m, "first boot");
        assert_eq!(v, CellVerdict::Regression);
        assert!((check.statistic + 5.0).abs() < 1e-9 && (check.boundary + 3.090).abs() < 1e-3);
        assert!(check.rejected && check.outcome == "regression");
        // Beyond the boundary but within the margin: not a regression, and the line says why.
        let (v, check) = judge(&c(-0.02, 0.002), hi, 1e-3, m, "first boot");
        assert_eq!(v, CellVerdict::Unchanged);
        assert_eq!(check.outcome, "within the margin");
        // Beyond the margin but not the boundary.
        let (v, check) = judge(&c(-0.10, 0.05), hi, 1e-3, m, "first boot");
        assert_eq!(
            (v, check.outcome.as_str()),
            (CellVerdict::Unchanged, "no regression")
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
}
