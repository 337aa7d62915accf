//! Multiplicity adjustments across the cells x metrics of one matrix.
//!
//! statrs has no multiple-testing procedures, so Holm and Benjamini–Hochberg are written here;
//! both are a sort and a running max/min.

use super::Correction;

/// Adjusted p-values for `p` under `correction` (same order as the input). A hypothesis is
/// rejected at family level `alpha` when its adjusted p-value is below `alpha`.
pub(crate) fn adjust(p: &[f64], correction: Correction) -> Vec<f64> {
    match correction {
        Correction::Holm => holm(p),
        Correction::BenjaminiHochberg => benjamini_hochberg(p),
    }
}

/// Holm's step-down adjustment: controls the family-wise error rate under any dependence.
pub(crate) fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut out = vec![1.0; m];
    let mut running: f64 = 0.0;
    for (rank, &i) in order.iter().enumerate() {
        let v = ((m - rank) as f64 * p[i]).min(1.0);
        running = running.max(v);
        out[i] = running;
    }
    out
}

/// Weighted Holm (Holm 1979, with weights): hypothesis `i` gets the share `w[i] / Σw` of alpha,
/// and a rejected hypothesis hands its share on to the rest. Adjusted p-values: sorted by
/// `p / w`, `p_adj(k) = max over j <= k of p(j) · (Σ of the weights not yet rejected) / w(j)`.
/// Controls the family-wise error rate under any dependence, like plain Holm (equal weights).
/// A hypothesis with weight 0 is never rejected (adjusted p-value 1).
pub(crate) fn holm_weighted(p: &[f64], w: &[f64]) -> Vec<f64> {
    let m = p.len();
    let ratio = |i: usize| {
        if w[i] > 0.0 {
            p[i] / w[i]
        } else {
            f64::INFINITY
        }
    };
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| ratio(a).total_cmp(&ratio(b)));
    let mut remaining: f64 = w.iter().filter(|x| **x > 0.0).sum();
    let mut out = vec![1.0; m];
    let mut running: f64 = 0.0;
    for &i in &order {
        if w[i] <= 0.0 {
            continue;
        }
        let v = (p[i] * remaining / w[i]).min(1.0);
        running = running.max(v);
        out[i] = running;
        remaining -= w[i];
    }
    out
}

/// Benjamini–Hochberg step-up adjustment: controls the false discovery rate (independent or
/// positively dependent tests).
pub(crate) fn benjamini_hochberg(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut out = vec![1.0; m];
    let mut running: f64 = 1.0;
    for (rank, &i) in order.iter().enumerate().rev() {
        let v = (m as f64 / (rank + 1) as f64 * p[i]).min(1.0);
        running = running.min(v);
        out[i] = running;
    }
    out
}

/// Multiplicity correction within families, for both directions at once: test `i` belongs to
/// family `gating[i]` (the gating metrics form one family, the reported-only metrics another,
/// so a noisy latency metric cannot dilute the throughput tests), and the worse- and
/// better-direction p-values are adjusted separately. Returns `(worse, better)` adjusted.
/// `weight[i]` is test `i`'s share of its family's alpha under Holm (weighted Holm); BH ignores
/// the weights.
pub(crate) fn adjust_by_family(
    gating: &[bool],
    weight: &[f64],
    p_worse: &[f64],
    p_better: &[f64],
    correction: Correction,
) -> (Vec<f64>, Vec<f64>) {
    let mut adj_worse = vec![1.0; gating.len()];
    let mut adj_better = vec![1.0; gating.len()];
    for family in [true, false] {
        let members: Vec<usize> = (0..gating.len()).filter(|&i| gating[i] == family).collect();
        let worse: Vec<f64> = members.iter().map(|&i| p_worse[i]).collect();
        let better: Vec<f64> = members.iter().map(|&i| p_better[i]).collect();
        let weights: Vec<f64> = members.iter().map(|&i| weight[i]).collect();
        let adj = |p: &[f64]| match correction {
            Correction::Holm => holm_weighted(p, &weights),
            Correction::BenjaminiHochberg => adjust(p, correction),
        };
        for (k, (w, b)) in adj(&worse).into_iter().zip(adj(&better)).enumerate() {
            adj_worse[members[k]] = w;
            adj_better[members[k]] = b;
        }
    }
    (adj_worse, adj_better)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12)
    }

    #[test]
    fn holm_matches_hand_computed_values() {
        // Sorted p: 0.01, 0.02, 0.03, 0.04 (m = 4): 0.04, 0.06, 0.06 (monotone), 0.06.
        let p = [0.03, 0.01, 0.04, 0.02];
        assert!(close(&holm(&p), &[0.06, 0.04, 0.06, 0.06]));
        // Capped at 1.
        assert!(close(&holm(&[0.5, 0.9]), &[1.0, 1.0]));
        assert!(holm(&[]).is_empty());
    }

    #[test]
    fn bh_matches_hand_computed_values() {
        // Sorted 0.01, 0.02, 0.03, 0.04 (m = 4): 4*p/rank = 0.04 for all.
        let p = [0.03, 0.01, 0.04, 0.02];
        assert!(close(&benjamini_hochberg(&p), &[0.04, 0.04, 0.04, 0.04]));
        // 0.001, 0.5 (m = 2): 0.002, 0.5.
        assert!(close(&benjamini_hochberg(&[0.5, 0.001]), &[0.5, 0.002]));
    }

    #[test]
    fn weighted_holm_is_holm_with_equal_weights_and_hands_on_shares() {
        let p = [0.03, 0.01, 0.04, 0.02];
        assert!(close(&holm_weighted(&p, &[2.0; 4]), &holm(&p)));
        // Weights 3:1: the heavy test is judged at 3/4 of alpha, then the light one at all.
        let h = holm_weighted(&[0.006, 0.009], &[3.0, 1.0]);
        assert!(close(&h, &[0.008, 0.009]), "{h:?}");
        // A weightless test is never rejected.
        assert!(close(
            &holm_weighted(&[0.0, 0.01], &[0.0, 1.0]),
            &[1.0, 0.01]
        ));
    }

    #[test]
    fn holm_is_never_less_strict_than_bh() {
        let p = [0.001, 0.004, 0.02, 0.3, 0.011, 0.7];
        let h = holm(&p);
        let b = benjamini_hochberg(&p);
        assert!(h.iter().zip(&b).all(|(h, b)| h >= b));
    }

    #[test]
    fn families_are_adjusted_separately_and_per_direction() {
        // Two gating tests and one reported-only test: Holm within each family.
        let gating = [true, false, true];
        let worse = [0.01, 0.01, 0.04];
        let better = [0.5, 0.9, 0.2];
        let (w, b) = adjust_by_family(&gating, &[1.0; 3], &worse, &better, Correction::Holm);
        assert!((w[0] - 0.02).abs() < 1e-12, "smallest of 2: x2");
        assert!((w[2] - 0.04).abs() < 1e-12, "largest of 2: x1, monotone");
        assert!(
            (w[1] - 0.01).abs() < 1e-12,
            "alone in its family: unchanged"
        );
        assert!((b[2] - 0.4).abs() < 1e-12 && (b[0] - 0.5).abs() < 1e-12);
        assert!((b[1] - 0.9).abs() < 1e-12);
    }
}
