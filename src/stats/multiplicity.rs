//! Holm's multiplicity adjustment, for the paired A/B comparison's cells x metrics (the gate
//! against a store uses fixed Bonferroni shares instead, so each boundary can be printed).

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

/// Holm within families, for both directions at once: test `i` belongs to family `gating[i]`
/// (the gating metrics form one family, the reported-only metrics another, so a noisy latency
/// metric cannot dilute the throughput tests), and the worse- and better-direction p-values
/// are adjusted separately. Returns `(worse, better)` adjusted.
pub(crate) fn adjust_by_family(
    gating: &[bool],
    p_worse: &[f64],
    p_better: &[f64],
) -> (Vec<f64>, Vec<f64>) {
    let mut adj_worse = vec![1.0; gating.len()];
    let mut adj_better = vec![1.0; gating.len()];
    for family in [true, false] {
        let members: Vec<usize> = (0..gating.len()).filter(|&i| gating[i] == family).collect();
        let worse: Vec<f64> = members.iter().map(|&i| p_worse[i]).collect();
        let better: Vec<f64> = members.iter().map(|&i| p_better[i]).collect();
        for (k, (w, b)) in holm(&worse).into_iter().zip(holm(&better)).enumerate() {
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
        assert!(close(&holm(&[0.5, 0.9]), &[1.0, 1.0]));
        assert!(holm(&[]).is_empty());
    }

    #[test]
    fn families_are_adjusted_separately_and_per_direction() {
        let gating = [true, false, true];
        let worse = [0.01, 0.01, 0.04];
        let better = [0.5, 0.9, 0.2];
        let (w, b) = adjust_by_family(&gating, &worse, &better);
        assert!((w[0] - 0.02).abs() < 1e-12, "smallest of 2: x2");
        assert!((w[2] - 0.04).abs() < 1e-12, "largest of 2: x1, monotone");
        assert!((w[1] - 0.01).abs() < 1e-12, "alone in its family");
        assert!((b[2] - 0.4).abs() < 1e-12 && (b[0] - 0.5).abs() < 1e-12);
        assert!((b[1] - 0.9).abs() < 1e-12);
    }
}
