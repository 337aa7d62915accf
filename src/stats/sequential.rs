//! Alpha spending for repeated looks at the same comparison (adaptive re-measurement).
//!
//! Design: a Lan–DeMets alpha-spending function over at most `max_looks` looks with equally
//! spaced information `t = k / K`. Look `k` (0-based) tests at the increment
//! `A(t_{k+1}) − A(t_k)`; the increments add up to `alpha`, so by the union bound the chance of
//! any false alarm over all looks stays at most `alpha` whatever the correlation between looks
//! (conservative: real looks are positively correlated).
//!
//! - Pocock type (default), `A(t) = α ln(1 + (e − 1) t)`: spends about half of alpha at the first
//!   look, which is the ordinary gate run and decides most cells;
//! - O'Brien–Fleming type, `A(t) = 2 − 2 Φ(z_{1−α/2} / √t)`: spends almost nothing early and keeps
//!   alpha for the last look (use when every cell is expected to be re-measured).
//!
//! What is spent is the local families' alpha (rows, columns, cells): the matrix-wide test
//! is the two-boot plan's (`super::confirm`), untouched by re-measuring cells on one boot.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal};

/// The shape of the spending function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SpendingShape {
    /// `A(t) = α ln(1 + (e − 1) t)`: front-loaded.
    #[default]
    Pocock,
    /// `A(t) = 2 − 2 Φ(z_{1−α/2} / √t)`: back-loaded.
    OBrienFleming,
}

/// Splits a test's alpha across at most `max_looks` looks so that re-measuring inconclusive
/// cells and testing again keeps the overall false-alarm rate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AlphaSpending {
    /// Total alpha to spend across all looks.
    pub alpha: f64,
    /// Most looks that will ever be made (look 0 is the first measurement).
    pub max_looks: u32,
    /// Spending function.
    #[serde(default)]
    pub shape: SpendingShape,
}

impl AlphaSpending {
    /// A Pocock-type plan spending `alpha` over at most `max_looks` looks (at least 1).
    pub fn new(alpha: f64, max_looks: u32) -> Self {
        AlphaSpending {
            alpha,
            max_looks: max_looks.max(1),
            shape: SpendingShape::Pocock,
        }
    }

    /// The same plan with another spending shape.
    pub fn with_shape(mut self, shape: SpendingShape) -> Self {
        self.shape = shape;
        self
    }

    /// Cumulative alpha spent by the end of look `look` (0-based); `alpha` at the last look.
    pub fn spent_through(&self, look: u32) -> f64 {
        if look + 1 >= self.max_looks {
            return self.alpha;
        }
        let t = f64::from(look + 1) / f64::from(self.max_looks);
        match self.shape {
            SpendingShape::Pocock => self.alpha * (1.0 + (std::f64::consts::E - 1.0) * t).ln(),
            SpendingShape::OBrienFleming => {
                let Ok(n) = Normal::new(0.0, 1.0) else {
                    return self.alpha * t;
                };
                let z = n.inverse_cdf(1.0 - self.alpha / 2.0);
                (2.0 - 2.0 * n.cdf(z / t.sqrt())).min(self.alpha)
            }
        }
    }

    /// Alpha available to the test at look `look` (0-based): the increment of the spending
    /// function. Zero after the last look.
    pub fn alpha_at(&self, look: u32) -> f64 {
        if look >= self.max_looks {
            return 0.0;
        }
        let before = if look == 0 {
            0.0
        } else {
            self.spent_through(look - 1)
        };
        (self.spent_through(look) - before).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn increments_add_up_to_alpha() {
        for shape in [SpendingShape::Pocock, SpendingShape::OBrienFleming] {
            let s = AlphaSpending::new(0.01, 3).with_shape(shape);
            let parts: Vec<f64> = (0..3).map(|k| s.alpha_at(k)).collect();
            assert!(
                (parts.iter().sum::<f64>() - 0.01).abs() < 1e-12,
                "{shape:?}"
            );
            assert!(parts.iter().all(|p| *p > 0.0));
        }
        let obf = AlphaSpending::new(0.01, 3).with_shape(SpendingShape::OBrienFleming);
        assert!(obf.alpha_at(0) < obf.alpha_at(1) && obf.alpha_at(1) < obf.alpha_at(2));
        let pocock = AlphaSpending::new(0.01, 3);
        assert!(pocock.alpha_at(0) > pocock.alpha_at(1) && pocock.alpha_at(1) > pocock.alpha_at(2));
        let s = pocock;
        assert_eq!(s.alpha_at(3), 0.0);
        // One look: everything at once.
        assert!((AlphaSpending::new(0.01, 1).alpha_at(0) - 0.01).abs() < 1e-15);
    }
}
