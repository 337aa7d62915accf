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

use infergate_schema::verdict::Against;
use infergate_schema::verdict::{CellVerdict, signed_percent};

/// Which state a cell is judged for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// `capacity_limited`: the engine could not admit every stream.
    Capacity,
    /// `saturated`: the engine admitted every stream but preempted or retracted requests.
    Saturation,
}

impl Limit {
    pub fn words(self) -> &'static str {
        match self {
            Limit::Capacity => "capacity-limited",
            Limit::Saturation => "saturated",
        }
    }
}

/// How often the cell was in the state: in its history, and on the candidate's boots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitCounts {
    /// History runs that measured the cell.
    pub runs: usize,
    /// Of those, the runs in the state.
    pub hits: usize,
    /// Candidate boots (runs) that measured the cell.
    pub boots: usize,
    /// Of those, the boots in the state (at least one: otherwise there is nothing to judge).
    pub boot_hits: usize,
}

/// The decision on one cell that cannot be compared for speed: its verdict, why, whether it is
/// a provisional alarm (one more boot in the state would make it a regression), and whether
/// the history was too short to judge it at all (the gate waits for runs: `insufficient`).
#[derive(Debug, Clone, PartialEq)]
pub struct LimitDecision {
    pub verdict: CellVerdict,
    pub reason: String,
    pub provisional: bool,
    pub history_too_short: bool,
}

impl LimitDecision {
    /// A decision that waits for nothing: neither a second boot nor a longer history.
    pub fn settled(verdict: CellVerdict, reason: String) -> Self {
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
pub fn false_alarm_bound(hits: usize, runs: usize, boots: usize) -> f64 {
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
pub fn runs_needed(boots: usize, alpha: f64) -> Option<usize> {
    (1..=10_000).find(|&n| false_alarm_bound(0, n, boots) <= alpha)
}

fn percent(x: f64) -> String {
    signed_percent(x).trim_start_matches('+').to_string()
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
    let words = limit.words();
    let v = LimitVerdicts::of(limit);
    let (history, now) = describe(limit, n, detail, against);
    let decision = |verdict, reason, provisional| LimitDecision {
        provisional,
        ..LimitDecision::settled(verdict, reason)
    };
    if n.hits >= n.runs {
        let reason = format!("{words} on both sides: {now}; {history}");
        return decision(v.both_sides, reason, false);
    }
    if n.boot_hits < n.boots {
        let reason = format!("{now}, not on every boot: not evidence of a change; {history}");
        return decision(v.not_evidence, reason, false);
    }
    let bound = false_alarm_bound(n.hits, n.runs, n.boots);
    if bound <= alpha {
        let reason = format!(
            "{now}; {history}: false-alarm bound {} ≤ capacity_alpha {}",
            percent(bound),
            percent(alpha)
        );
        return decision(v.regression, reason, false);
    }
    // `run` boots at most twice: only the first boot's alarm can be provisional.
    let next = false_alarm_bound(n.hits, n.runs, n.boots + 1);
    if n.boots < MAX_BOOTS && next <= alpha {
        let reason = format!(
            "provisional {}: {now}; {history}; one boot cannot prove it (false-alarm bound {} > capacity_alpha {}): a confirmation boot decides",
            v.regression.as_str(),
            percent(bound),
            percent(alpha)
        );
        return decision(v.not_evidence, reason, true);
    }
    if n.hits > 0 {
        let flaky = v.flaky;
        let reason = format!("{flaky}: {now}; {history}: not evidence of a change");
        return decision(v.not_evidence, reason, false);
    }
    let reason = too_short_reason(&now, &history, alpha, against);
    LimitDecision {
        history_too_short: true,
        ..decision(v.not_evidence, reason, false)
    }
}

/// A limit's verdicts: not evidence, a regression, in the state on both sides, and a flaky
/// cell's word.
struct LimitVerdicts {
    not_evidence: CellVerdict,
    regression: CellVerdict,
    both_sides: CellVerdict,
    flaky: &'static str,
}

impl LimitVerdicts {
    fn of(limit: Limit) -> LimitVerdicts {
        let (not_evidence, regression, both_sides, flaky) = match limit {
            Limit::Capacity => (
                CellVerdict::Inconclusive,
                CellVerdict::CapacityRegression,
                CellVerdict::NotComparable,
                "capacity_flaky",
            ),
            Limit::Saturation => (
                CellVerdict::Saturated,
                CellVerdict::SaturationRegression,
                CellVerdict::Saturated,
                "saturation_flaky",
            ),
        };
        LimitVerdicts {
            not_evidence,
            regression,
            both_sides,
            flaky,
        }
    }
}

/// The reasons' words for the history (`capacity-limited in 2 of 20 history runs (10%)`) and
/// for the candidate's boots, with `detail` (the candidate's first reason) where given.
fn describe(limit: Limit, n: LimitCounts, detail: &str, against: Against) -> (String, String) {
    let words = limit.words();
    let sides = against.sides();
    let detail = if detail.is_empty() {
        String::new()
    } else {
        format!(" ({detail})")
    };
    let history = format!(
        "{words} in {} of {} {} ({})",
        n.hits,
        n.runs,
        sides.history_runs,
        percent(n.hits as f64 / n.runs.max(1) as f64)
    );
    let now = if n.boots == 1 {
        format!("{words} now{detail}")
    } else {
        format!(
            "{words} on {} of {} {}{detail}",
            n.boot_hits, n.boots, sides.boots
        )
    };
    (history, now)
}

/// The reason of a history too short to tell a change from a cell at its limit, with the runs
/// (or pairs) it would take.
fn too_short_reason(now: &str, history: &str, alpha: f64, against: Against) -> String {
    // A gate boots at most twice against a history; an A/B adds an A boot with each B boot.
    let count = |n: Option<usize>| n.map_or_else(|| "more".to_string(), |n| n.to_string());
    let (few, needed) = match against {
        Against::Baseline => (
            "runs",
            format!(
                "two boots need {} history runs",
                count(runs_needed(MAX_BOOTS, alpha))
            ),
        ),
        Against::PairedAb => (
            "pairs",
            format!(
                "{} pairs are needed",
                count((2..=10_000).find(|&n| false_alarm_bound(0, n, n) <= alpha))
            ),
        ),
    };
    format!(
        "{now}; {history}: too few {few} to tell a change from a cell at its limit ({needed} at capacity_alpha {})",
        percent(alpha)
    )
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

    #[test]
    fn each_history_gets_its_verdict() {
        let a = 0.002;
        // Never fit: stays capacity-limited, not comparable.
        let d = at_gate(Limit::Capacity, counts(20, 20, 1, 1), a, "5/8 running");
        assert_eq!(d.verdict, CellVerdict::NotComparable);
        assert!(
            d.reason.starts_with("capacity-limited on both sides"),
            "{}",
            d.reason
        );
        assert!(d.reason.contains("5/8 running"), "{}", d.reason);
        // Fit in every run, limited on the first boot: provisional.
        let d = at_gate(Limit::Capacity, counts(20, 0, 1, 1), a, "");
        assert!(d.provisional, "{d:?}");
        assert_eq!(d.verdict, CellVerdict::Inconclusive);
        assert!(
            d.reason.starts_with("provisional capacity_regression"),
            "{}",
            d.reason
        );
        // ... and on both boots: a regression.
        let d = at_gate(Limit::Capacity, counts(20, 0, 2, 2), a, "");
        assert_eq!(d.verdict, CellVerdict::CapacityRegression, "{d:?}");
        assert!(d.reason.contains("0.1%"), "{}", d.reason);
        // ... and on one of two boots: not evidence.
        let d = at_gate(Limit::Capacity, counts(20, 0, 2, 1), a, "");
        assert_eq!(d.verdict, CellVerdict::Inconclusive);
        assert!(!d.provisional);
        // Flips in a minority of the history: capacity_flaky with the rate, even on both boots.
        let d = at_gate(Limit::Capacity, counts(20, 2, 2, 2), a, "");
        assert_eq!(d.verdict, CellVerdict::Inconclusive);
        assert!(!d.provisional);
        assert!(
            d.reason.starts_with("capacity_flaky")
                && d.reason.contains("2 of 20 history runs (10.0%)"),
            "{}",
            d.reason
        );
        // Too short a history: said, with the runs it needs.
        let d = at_gate(Limit::Capacity, counts(5, 0, 2, 2), a, "");
        assert_eq!(d.verdict, CellVerdict::Inconclusive);
        assert!(d.reason.contains("need 16 history runs"), "{}", d.reason);
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
