//! Alpha spending for repeated looks at the same comparison (adaptive re-measurement).
//!
//! Design: one Lan–DeMets alpha-spending function of the Pocock type, `A(t) = α ln(1 + (e − 1) t)`,
//! over at most `max_looks` looks with equally spaced information `t = k / K`, declared up
//! front. Look `k` (0-based) tests at the increment `A(t_{k+1}) − A(t_k)`; the increments add up
//! to `alpha`, so by the union bound the chance of any false alarm over all looks stays at most
//! `alpha` whatever the correlation between looks (conservative: real looks are positively
//! correlated). Pocock's shape spends about half of alpha at the first look, which is the
//! ordinary gate run and decides most cells; the rest waits for the cells re-measured.
//!
//! What is spent is the local families' alpha (rows, columns, cells): the matrix-wide test
//! is the two-boot plan's (`super::confirm`), untouched by re-measuring cells on one boot.

/// Splits a test's alpha across at most `max_looks` looks so that re-measuring inconclusive
/// cells and testing again keeps the overall false-alarm rate.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AlphaSpending {
    /// Total alpha to spend across all looks.
    pub alpha: f64,
    /// Most looks that will ever be made (look 0 is the first measurement).
    pub max_looks: u32,
}

impl AlphaSpending {
    /// The plan spending `alpha` over at most `max_looks` looks (at least 1).
    pub fn new(alpha: f64, max_looks: u32) -> Self {
        AlphaSpending {
            alpha,
            max_looks: max_looks.max(1),
        }
    }

    /// Alpha available to the test at look `look` (0-based): the increment of the spending
    /// function. Zero after the last look.
    pub(crate) fn alpha_at(&self, look: u32) -> f64 {
        if look >= self.max_looks {
            return 0.0;
        }
        // Alpha spent before look `k`: `A(k / K)`, 0 before the first, `alpha` after the last.
        let spent = |k: u32| {
            if k >= self.max_looks {
                return self.alpha;
            }
            let t = f64::from(k) / f64::from(self.max_looks);
            self.alpha * (1.0 + (std::f64::consts::E - 1.0) * t).ln()
        };
        (spent(look + 1) - spent(look)).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn increments_add_up_to_alpha_front_loaded() {
        let s = AlphaSpending::new(0.01, 3);
        let parts: Vec<f64> = (0..3).map(|k| s.alpha_at(k)).collect();
        assert!((parts.iter().sum::<f64>() - 0.01).abs() < 1e-12);
        assert!(parts.iter().all(|p| *p > 0.0));
        // Pocock: ln(1 + (e − 1)/3) = 45.3% of alpha at the first look, less at each later one.
        assert!((parts[0] - 0.01 * 0.452_9).abs() < 1e-6, "{parts:?}");
        assert!(parts[0] > parts[1] && parts[1] > parts[2]);
        assert_eq!(s.alpha_at(3), 0.0);
        // One look: everything at once.
        assert!((AlphaSpending::new(0.01, 1).alpha_at(0) - 0.01).abs() < 1e-15);
    }
}
