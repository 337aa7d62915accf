//! Capacity-limited and saturated candidate cells, judged against how often the cell was so in
//! its baseline history.
//!
//! Why statistics here: a cell that sits at its capacity limit tips over at random in some runs.
//! Calling one capacity-limited candidate a regression fails about one clean PR in ten when such
//! a cell is limited in 10% of runs. The question is the same for a cell that is `saturated`
//! (the engine preempted or retracted requests): is this candidate's state evidence of a change?
//!
//! The test: of the `runs` history runs that measured the cell, `hits` were in the state
//! (capacity-limited, or saturated); the candidate is in it on all of its `boots`. If the build
//! did not change the cell's chance `p` of being in the state, the chance of a history with at
//! most `hits` such runs *and* every candidate boot in it is `F(hits; runs, p) · p^boots`
//! (independent runs and boots, `F` the binomial distribution function). Its largest value over
//! every `p` ([`false_alarm_bound`]) bounds the false-alarm rate of calling it a regression,
//! whatever the cell's true flip rate; the rule calls it only when that bound is at most
//! `capacity_alpha`. With a 20-run history that never saw the state, one boot gives a bound of
//! 1.8% (never enough: a provisional alarm, confirmed by a second boot), two boots 0.12%.

use infergate_schema::verdict::{
    Against, CellReason, CellVerdict, Limit, LimitCounts, LimitFinding, LimitReason,
};

/// The decision on one cell that cannot be compared for speed: its verdict, why, whether it is
/// a provisional alarm (one more boot in the state would make it a regression), and whether
/// the history was too short to judge it at all (the gate waits for runs: `insufficient`).
#[derive(Debug, Clone, PartialEq)]
pub struct LimitDecision {
    pub verdict: CellVerdict,
    pub reason: CellReason,
    pub provisional: bool,
    pub history_too_short: bool,
}

impl LimitDecision {
    /// A decision that waits for nothing: neither a second boot nor a longer history.
    pub(crate) fn settled(verdict: CellVerdict, reason: CellReason) -> Self {
        LimitDecision {
            verdict,
            reason,
            provisional: false,
            history_too_short: false,
        }
    }
}

/// Boots of one gate: the first and the confirmation boot (`stats::confirm`).
const MAX_BOOTS: usize = 2;

/// Binomial distribution function `P(X ≤ k)`, `X ~ Bin(n, p)`, summed term by term (n is a
/// history length: tens of runs).
fn binomial_cdf(k: usize, n: usize, p: f64) -> f64 {
    if k >= n || p <= 0.0 {
        return 1.0;
    }
    if p >= 1.0 {
        return 0.0;
    }
    let q = 1.0 - p;
    let mut term = q.powi(n as i32); // P(X = 0)
    let mut sum = term;
    for i in 1..=k {
        term *= (n - i + 1) as f64 / i as f64 * p / q;
        sum += term;
    }
    sum.min(1.0)
}

/// `sup_p F(hits; runs, p) · p^boots`: the largest chance, over every flip rate `p` a cell that
/// did not change could have, that its history shows at most `hits` runs in the state while all
/// `boots` candidate boots are in it. A grid over `p` refined around its best point (the
/// function is smooth and unimodal in `p`).
pub(crate) fn false_alarm_bound(hits: usize, runs: usize, boots: usize) -> f64 {
    if hits >= runs {
        return 1.0;
    }
    let f = |p: f64| binomial_cdf(hits, runs, p) * p.powi(boots as i32);
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    let mut best = 0.0f64;
    for _ in 0..4 {
        let steps = 200;
        let mut best_p = lo;
        for i in 0..=steps {
            let p = lo + (hi - lo) * i as f64 / steps as f64;
            let v = f(p);
            if v > best {
                best = v;
                best_p = p;
            }
        }
        let w = (hi - lo) / steps as f64;
        lo = (best_p - w).max(0.0);
        hi = (best_p + w).min(1.0);
    }
    best
}

/// The fewest history runs, all out of the state, that let `boots` boots in it be called a
/// regression at `alpha` (`None` beyond 10 000 runs).
pub(crate) fn runs_needed(boots: usize, alpha: f64) -> Option<usize> {
    (1..=10_000).find(|&n| false_alarm_bound(0, n, boots) <= alpha)
}

/// Decides a cell that is in the state on at least one candidate boot (see the module docs).
///
/// - in the state in every history run: not evidence (`not_comparable` for capacity: it never
///   fit; `saturated` for saturation);
/// - the bound with every boot in the state is at most `alpha`: a regression
///   (`capacity_regression`, `saturation_regression`);
/// - one more boot in the state would make it one: a provisional alarm (`inconclusive` for
///   capacity, `saturated` for saturation), which `run` confirms with a second boot;
/// - otherwise not evidence: a cell that flips in its history (capacity: `inconclusive`,
///   "capacity_flaky", with its history rate) or on the candidate's boots, or a history too
///   short to tell.
pub fn decide(
    limit: Limit,
    n: LimitCounts,
    alpha: f64,
    detail: &str,
    against: Against,
) -> LimitDecision {
    let v = LimitVerdicts::of(limit);
    let decision = |verdict, finding, provisional| LimitDecision {
        provisional,
        ..LimitDecision::settled(
            verdict,
            CellReason::Limit(LimitReason {
                limit,
                counts: n,
                detail: detail.to_string(),
                against,
                alpha,
                finding,
            }),
        )
    };
    if n.hits >= n.runs {
        return decision(v.both_sides, LimitFinding::BothSides, false);
    }
    if n.boot_hits < n.boots {
        return decision(v.not_evidence, LimitFinding::NotEveryBoot, false);
    }
    let bound = false_alarm_bound(n.hits, n.runs, n.boots);
    if bound <= alpha {
        return decision(v.regression, LimitFinding::Regression { bound }, false);
    }
    // `run` boots at most twice: only the first boot's alarm can be provisional.
    let next = false_alarm_bound(n.hits, n.runs, n.boots + 1);
    if n.boots < MAX_BOOTS && next <= alpha {
        return decision(v.not_evidence, LimitFinding::Provisional { bound }, true);
    }
    if n.hits > 0 {
        return decision(v.not_evidence, LimitFinding::Flaky, false);
    }
    // A gate boots at most twice against a history; an A/B adds an A boot with each B boot.
    let needed = match against {
        Against::Baseline => runs_needed(MAX_BOOTS, alpha),
        Against::PairedAb => (2..=10_000).find(|&n| false_alarm_bound(0, n, n) <= alpha),
    };
    LimitDecision {
        history_too_short: true,
        ..decision(v.not_evidence, LimitFinding::TooShort { needed }, false)
    }
}

/// A limit's verdicts: not evidence, a regression, in the state on both sides.
struct LimitVerdicts {
    not_evidence: CellVerdict,
    regression: CellVerdict,
    both_sides: CellVerdict,
}

impl LimitVerdicts {
    fn of(limit: Limit) -> LimitVerdicts {
        match limit {
            Limit::Capacity => LimitVerdicts {
                not_evidence: CellVerdict::Inconclusive,
                regression: CellVerdict::CapacityRegression,
                both_sides: CellVerdict::NotComparable,
            },
            Limit::Saturation => LimitVerdicts {
                not_evidence: CellVerdict::Saturated,
                regression: CellVerdict::SaturationRegression,
                both_sides: CellVerdict::Saturated,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`decide`] in a gate (against a baseline history).
    fn at_gate(limit: Limit, n: LimitCounts, alpha: f64, detail: &str) -> LimitDecision {
        decide(limit, n, alpha, detail, Against::Baseline)
    }

    fn counts(runs: usize, hits: usize, boots: usize, boot_hits: usize) -> LimitCounts {
        LimitCounts {
            runs,
            hits,
            boots,
            boot_hits,
        }
    }

    #[test]
    fn the_bound_is_the_closed_form_when_the_history_never_saw_the_state() {
        // sup_p (1 − p)^n p^k is reached at p = k / (n + k).
        for (n, k) in [(20usize, 1usize), (20, 2), (10, 2), (5, 2), (16, 2)] {
            let p = k as f64 / (n + k) as f64;
            let exact = (1.0 - p).powi(n as i32) * p.powi(k as i32);
            let b = false_alarm_bound(0, n, k);
            assert!(
                (b - exact).abs() < 1e-6 * exact,
                "n={n} k={k}: {b} vs {exact}"
            );
        }
        assert!((false_alarm_bound(0, 20, 2) - 0.001_230).abs() < 2e-6);
        assert!((false_alarm_bound(0, 20, 1) - 0.017_95).abs() < 1e-4);
        assert_eq!(false_alarm_bound(3, 3, 2), 1.0);
        // A history that saw the state is weaker evidence.
        assert!(false_alarm_bound(1, 20, 2) > 3.0 * false_alarm_bound(0, 20, 2));
        assert_eq!(runs_needed(2, 0.002), Some(16));
        assert_eq!(runs_needed(1, 0.002), Some(184));
    }

    /// Monte Carlo of the rule for a cell that is in the state in 10% of runs (and the worst
    /// rate for a 20-run history, 1/11): the rate of regressions over two boots stays under
    /// the bound.
    #[test]
    fn the_false_alarm_rate_of_a_flipping_cell_stays_under_the_bound() {
        use rand::rngs::StdRng;
        use rand::{RngExt, SeedableRng};
        let mut rng = StdRng::seed_from_u64(16);
        for p in [0.1, 1.0 / 11.0, 0.3] {
            let trials = 20_000;
            let mut alarms = 0;
            for _ in 0..trials {
                let hits = (0..20).filter(|_| rng.random::<f64>() < p).count();
                let first = rng.random::<f64>() < p;
                if !first {
                    continue;
                }
                let d = at_gate(Limit::Capacity, counts(20, hits, 1, 1), 0.002, "");
                if !d.provisional {
                    assert_ne!(d.verdict, CellVerdict::CapacityRegression);
                    continue;
                }
                let second = rng.random::<f64>() < p;
                let d = at_gate(
                    Limit::Capacity,
                    counts(20, hits, 2, 1 + usize::from(second)),
                    0.002,
                    "",
                );
                alarms += usize::from(d.verdict == CellVerdict::CapacityRegression);
            }
            let rate = alarms as f64 / trials as f64;
            // Expected (1 − p)^20 p² (0.12% at p = 0.1); the bound is 0.2%.
            assert!(rate < 0.002, "p = {p}: {rate}");
        }
    }

    /// What the rule found, with the counts it found it on.
    fn finding(d: &LimitDecision) -> (LimitFinding, LimitCounts) {
        match &d.reason {
            CellReason::Limit(r) => (r.finding, r.counts),
            other => panic!("not a limit's reason: {other:?}"),
        }
    }

    #[test]
    fn each_history_gets_its_verdict() {
        let a = 0.002;
        // Never fit: stays capacity-limited, not comparable.
        let d = at_gate(Limit::Capacity, counts(20, 20, 1, 1), a, "5/8 running");
        assert_eq!(d.verdict, CellVerdict::NotComparable);
        assert_eq!(finding(&d).0, LimitFinding::BothSides);
        assert!(matches!(&d.reason, CellReason::Limit(r) if r.detail == "5/8 running"));
        // Fit in every run, limited on the first boot: provisional.
        let d = at_gate(Limit::Capacity, counts(20, 0, 1, 1), a, "");
        assert!(d.provisional, "{d:?}");
        assert_eq!(d.verdict, CellVerdict::Inconclusive);
        assert!(matches!(finding(&d).0, LimitFinding::Provisional { .. }));
        // ... and on both boots: a regression.
        let d = at_gate(Limit::Capacity, counts(20, 0, 2, 2), a, "");
        assert_eq!(d.verdict, CellVerdict::CapacityRegression, "{d:?}");
        assert!(
            matches!(finding(&d).0, LimitFinding::Regression { bound } if (bound - 0.00123).abs() < 1e-5),
            "{d:?}"
        );
        // ... and on one of two boots: not evidence.
        let d = at_gate(Limit::Capacity, counts(20, 0, 2, 1), a, "");
        assert_eq!(d.verdict, CellVerdict::Inconclusive);
        assert!(!d.provisional);
        assert_eq!(finding(&d).0, LimitFinding::NotEveryBoot);
        // Flips in a minority of the history: flaky with the rate, even on both boots.
        let d = at_gate(Limit::Capacity, counts(20, 2, 2, 2), a, "");
        assert_eq!(d.verdict, CellVerdict::Inconclusive);
        assert!(!d.provisional);
        assert_eq!(finding(&d), (LimitFinding::Flaky, counts(20, 2, 2, 2)));
        // Too short a history: said, with the runs it needs.
        let d = at_gate(Limit::Capacity, counts(5, 0, 2, 2), a, "");
        assert_eq!(d.verdict, CellVerdict::Inconclusive);
        assert!(d.history_too_short);
        assert_eq!(finding(&d).0, LimitFinding::TooShort { needed: Some(16) });
        // An A/B counts pairs.
        let d = decide(
            Limit::Capacity,
            counts(2, 0, 2, 2),
            a,
            "",
            Against::PairedAb,
        );
        assert!(matches!(
            finding(&d).0,
            LimitFinding::TooShort { needed: Some(_) }
        ));
        // Saturation: the same rule with its own verdicts.
        let d = at_gate(Limit::Saturation, counts(20, 0, 1, 1), a, "12 preemptions");
        assert!(d.provisional);
        assert_eq!(d.verdict, CellVerdict::Saturated);
        let d = at_gate(Limit::Saturation, counts(20, 0, 2, 2), a, "");
        assert_eq!(d.verdict, CellVerdict::SaturationRegression);
        let d = at_gate(Limit::Saturation, counts(20, 20, 2, 2), a, "");
        assert_eq!(d.verdict, CellVerdict::Saturated);
        assert!(!d.provisional);
    }
}
