//! The noise model from the baseline history.
//!
//! Each metric's log value in run `r`, cell `c` is decomposed as
//! `y[r][c] = cell_center[c] + run_effect[r] + residual[r][c]`:
//! the run effect is what all cells of one run share (clocks, thermals, the boot) and cancels
//! out of any comparison of a cell with the rest of its own run; the residual is the cell's own
//! run-to-run noise. Both are estimated robustly (trimmed means, median/MAD screening), so one
//! outlier run neither hides regressions nor raises false alarms. Per-cell noise is shrunk
//! toward the pooled noise of all cells (a prior worth `shrinkage_df` degrees of freedom), so a
//! thin or lucky history cannot make one cell look quieter than the runner is.

/// Log values of one metric: rows are baseline runs (oldest → newest), columns are cells;
/// `NaN` marks a missing entry (cell not measured, not `ok`, or metric absent in that run).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LogTable {
    pub runs: usize,
    pub cells: usize,
    /// Row-major values, `runs * cells` long.
    pub values: Vec<f64>,
}

impl LogTable {
    /// An all-missing table.
    pub(crate) fn new(runs: usize, cells: usize) -> Self {
        LogTable {
            runs,
            cells,
            values: vec![f64::NAN; runs * cells],
        }
    }

    /// Entry of run `r`, cell `c` (`NaN` when missing).
    pub(crate) fn get(&self, r: usize, c: usize) -> f64 {
        self.values[r * self.cells + c]
    }

    /// Sets entry of run `r`, cell `c`.
    pub(crate) fn set(&mut self, r: usize, c: usize, v: f64) {
        self.values[r * self.cells + c] = v;
    }
}

/// Settings of the noise fit (taken from the [`DecisionRule`](super::DecisionRule)).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NoiseSettings {
    /// Prior weight (degrees of freedom) of the pooled noise in each cell's noise.
    pub shrinkage_df: f64,
    /// Noise CV assumed before any history is seen.
    pub prior_cv: f64,
    /// Weight (degrees of freedom) of `prior_cv`: small, so two runs of history already dominate.
    pub prior_df: f64,
    /// Robust z-score beyond which a run (or one entry) is set aside as an outlier.
    pub outlier_z: f64,
}

/// The fitted decomposition and the noise estimates of one metric.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct NoiseModel {
    /// Robust centre of each cell (log), with run effects removed.
    pub cell_center: Vec<f64>,
    /// Run effect of each run (log); `NaN` for a run without data.
    pub run_effect: Vec<f64>,
    /// Runs set aside as outliers (their run effect is far from the others').
    pub outlier_run: Vec<bool>,
    /// Entries used (not missing, not an outlier run, not an outlier entry).
    pub kept: Vec<bool>,
    /// Per-cell noise (SD of the log residual of one run), shrunk toward the pooled value.
    pub cell_sigma: Vec<f64>,
    /// Degrees of freedom of `cell_sigma`.
    pub cell_df: Vec<f64>,
    /// Pooled per-cell noise across all cells and its degrees of freedom.
    pub pooled_sigma: f64,
    pub pooled_df: f64,
    /// Run-to-run SD of the run effect (the matrix-wide noise of one run), from successive
    /// differences (a trend or a step does not inflate it), and its df.
    pub run_sigma: f64,
    pub run_df: f64,
}

impl NoiseModel {
    /// Whether entry (r, c) is used.
    pub(crate) fn is_kept(&self, r: usize, c: usize) -> bool {
        self.kept[r * self.cell_center.len() + c]
    }
}

/// Mean after dropping the lowest and highest 20% (none when fewer than 5 values). Sorts `v`.
pub(crate) fn trimmed_mean(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let cut = if v.len() >= 5 { v.len() / 5 } else { 0 };
    let kept = &v[cut..v.len() - cut];
    kept.iter().sum::<f64>() / kept.len() as f64
}

/// Median (via statrs). `NaN` for an empty slice.
pub(crate) fn median(v: &mut [f64]) -> f64 {
    use statrs::statistics::{Data, OrderStatistics};
    if v.is_empty() {
        return f64::NAN;
    }
    Data::new(v).median()
}

/// Weight (degrees of freedom) of the pooled noise in each cell's noise: estimated from how much
/// the cells' variances spread beyond what sampling alone explains (method of moments, as in
/// limma's moderated t): when they scatter only as chi-square sampling would, the cells share
/// one noise level and the pool gets all its weight; when they differ, the pool's weight falls,
/// but never below `min_weight`.
fn shrinkage_weight(ss: &[f64], dof: &[f64], pooled_var: f64, min_weight: f64, cap: f64) -> f64 {
    let ratios: Vec<(f64, f64)> = ss
        .iter()
        .zip(dof)
        .filter(|(_, d)| **d >= 2.0)
        .map(|(ss, d)| (ss / d / pooled_var, *d))
        .collect();
    if ratios.len() < 3 || pooled_var <= 0.0 {
        return min_weight.min(cap);
    }
    let n = ratios.len() as f64;
    let mean = ratios.iter().map(|r| r.0).sum::<f64>() / n;
    let observed = ratios.iter().map(|r| (r.0 - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let sampling = ratios.iter().map(|r| 2.0 / r.1).sum::<f64>() / n;
    let extra = observed - sampling;
    let d0 = if extra <= 0.0 { cap } else { 4.0 + 2.0 / extra };
    d0.clamp(min_weight.min(cap), cap)
}

/// Variance of a series' noise from its successive differences (the mean square successive
/// difference, von Neumann): `Σ (x[k+1] − x[k])² / (2 m)` over the `m` differences, with a
/// difference beyond `outlier_z` robust SDs of the differences (a step) set aside. A slow trend
/// or a level shift moves the series' spread a lot and its successive differences hardly at
/// all. Returns the variance and its equivalent chi-square degrees of freedom,
/// `2 m² / (3 m − 1)` (for Gaussian noise `Var(δ²) = σ⁴ (3m − 1) / m²`); `(0, 0)` with fewer
/// than two values.
pub(crate) fn successive_difference_var(x: &[f64], outlier_z: f64) -> (f64, f64) {
    let mut diffs: Vec<f64> = x.windows(2).map(|w| w[1] - w[0]).collect();
    if diffs.is_empty() {
        return (0.0, 0.0);
    }
    if diffs.len() >= 5 {
        let mut abs: Vec<f64> = diffs.iter().map(|d| d.abs()).collect();
        let scale = 1.4826 * median(&mut abs);
        if scale > 0.0 {
            diffs.retain(|d| d.abs() <= outlier_z * scale);
        }
    }
    let m = diffs.len() as f64;
    let var = diffs.iter().map(|d| d * d).sum::<f64>() / (2.0 * m);
    (var, 2.0 * m * m / (3.0 * m - 1.0))
}

/// Alternating trimmed-mean fit of cell centres and run effects over the entries in `use_entry`.
fn fit_effects(t: &LogTable, use_entry: &[bool]) -> (Vec<f64>, Vec<f64>) {
    let (nr, nc) = (t.runs, t.cells);
    let mut buf = Vec::with_capacity(nr.max(nc));
    let mut center = vec![f64::NAN; nc];
    for (c, ctr) in center.iter_mut().enumerate() {
        buf.clear();
        buf.extend(
            (0..nr)
                .filter(|&r| use_entry[r * nc + c])
                .map(|r| t.get(r, c)),
        );
        *ctr = median(&mut buf);
    }
    let mut effect = vec![f64::NAN; nr];
    for _ in 0..4 {
        for (r, eff) in effect.iter_mut().enumerate() {
            buf.clear();
            buf.extend(
                (0..nc)
                    .filter(|&c| use_entry[r * nc + c] && center[c].is_finite())
                    .map(|c| t.get(r, c) - center[c]),
            );
            *eff = trimmed_mean(&mut buf);
        }
        for (c, ctr) in center.iter_mut().enumerate() {
            buf.clear();
            buf.extend(
                (0..nr)
                    .filter(|&r| use_entry[r * nc + c] && effect[r].is_finite())
                    .map(|r| t.get(r, c) - effect[r]),
            );
            if !buf.is_empty() {
                *ctr = trimmed_mean(&mut buf);
            }
        }
    }
    (center, effect)
}

/// Fits the decomposition and the noise of one metric's history.
pub(crate) fn fit(t: &LogTable, s: &NoiseSettings) -> NoiseModel {
    let (nr, nc) = (t.runs, t.cells);
    let mut kept: Vec<bool> = t.values.iter().map(|v| v.is_finite()).collect();
    let (_, first_effect) = fit_effects(t, &kept);

    // Outlier runs: run effect beyond outlier_z robust SDs of the others (needs >= 5 runs).
    let mut outlier_run = vec![false; nr];
    let mut effects: Vec<f64> = first_effect
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .collect();
    if effects.len() >= 5 {
        let med = median(&mut effects);
        let mut dev: Vec<f64> = effects.iter().map(|v| (v - med).abs()).collect();
        let scale = (1.4826 * median(&mut dev)).max(1e-3);
        for (r, flag) in outlier_run.iter_mut().enumerate() {
            if first_effect[r].is_finite() && (first_effect[r] - med).abs() > s.outlier_z * scale {
                *flag = true;
                for c in 0..nc {
                    kept[r * nc + c] = false;
                }
            }
        }
    }
    let (mut center, mut effect) = fit_effects(t, &kept);

    // Outlier entries: residual beyond outlier_z robust SDs of all residuals; refit without.
    let mut resid: Vec<f64> = (0..nr * nc)
        .filter(|&i| kept[i])
        .map(|i| t.values[i] - center[i % nc] - effect[i / nc])
        .filter(|v| v.is_finite())
        .map(f64::abs)
        .collect();
    if resid.len() >= 10 {
        let scale = (1.4826 * median(&mut resid)).max(1e-4);
        let mut any = false;
        for i in 0..nr * nc {
            if kept[i] {
                let e = t.values[i] - center[i % nc] - effect[i / nc];
                if e.abs() > s.outlier_z * scale * 1.5 {
                    kept[i] = false;
                    any = true;
                }
            }
        }
        if any {
            (center, effect) = fit_effects(t, &kept);
        }
    }

    // Per-cell residual variance with its share of the two-way degrees of freedom.
    let runs_with_data = (0..nr)
        .filter(|&r| (0..nc).any(|c| kept[r * nc + c]))
        .count();
    let cells_with_data = (0..nc)
        .filter(|&c| (0..nr).any(|r| kept[r * nc + c]))
        .count();
    let cell_factor = if cells_with_data > 1 {
        (cells_with_data as f64 - 1.0) / cells_with_data as f64
    } else {
        0.0
    };
    let mut cell_ss = vec![0.0; nc];
    let mut cell_dof = vec![0.0; nc];
    for c in 0..nc {
        let mut n = 0usize;
        for r in 0..nr {
            if kept[r * nc + c] && effect[r].is_finite() {
                let e = t.get(r, c) - center[c] - effect[r];
                cell_ss[c] += e * e;
                n += 1;
            }
        }
        cell_dof[c] = if n > 1 && runs_with_data > 1 {
            (n as f64 - 1.0) * cell_factor
        } else {
            0.0
        };
    }
    let prior_var = s.prior_cv * s.prior_cv;
    let total_df: f64 = cell_dof.iter().sum();
    let total_ss: f64 = (0..nc)
        .filter(|&c| cell_dof[c] > 0.0)
        .map(|c| cell_ss[c])
        .sum();
    let pooled_df = total_df + s.prior_df;
    let pooled_var = (total_ss + s.prior_df * prior_var) / pooled_df;
    let prior_w = shrinkage_weight(&cell_ss, &cell_dof, pooled_var, s.shrinkage_df, pooled_df);
    let mut cell_sigma = vec![pooled_var.sqrt(); nc];
    let mut cell_df = vec![pooled_df; nc];
    for c in 0..nc {
        let (df, ss) = if cell_dof[c] > 0.0 {
            (cell_dof[c], cell_ss[c])
        } else {
            (0.0, 0.0)
        };
        let var = (ss + prior_w * pooled_var) / (df + prior_w).max(1e-9);
        cell_sigma[c] = var.sqrt();
        cell_df[c] = (df + prior_w).min(pooled_df).max(s.prior_df);
    }

    // Run-level noise from successive differences of the kept run effects (oldest → newest),
    // so a trend or a step in the history is not counted as noise.
    let kept_effects: Vec<f64> = (0..nr)
        .filter(|&r| !outlier_run[r] && effect[r].is_finite())
        .map(|r| effect[r])
        .collect();
    let (var, df) = successive_difference_var(&kept_effects, s.outlier_z);
    // A run effect averages many cells, so its prior is taken as half the cell prior's CV.
    let run_prior_var = prior_var / 4.0;
    let run_df = df + s.prior_df;
    let run_sigma = ((df * var + s.prior_df * run_prior_var) / run_df).sqrt();

    NoiseModel {
        cell_center: center,
        run_effect: effect,
        outlier_run,
        kept,
        cell_sigma,
        cell_df,
        pooled_sigma: pooled_var.sqrt(),
        pooled_df,
        run_sigma,
        run_df,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_distr::{Distribution, Normal};

    fn settings() -> NoiseSettings {
        NoiseSettings {
            shrinkage_df: 10.0,
            prior_cv: 0.03,
            prior_df: 2.0,
            outlier_z: 4.0,
        }
    }

    fn synthetic(runs: usize, cells: usize, run_cv: f64, cell_cv: f64, seed: u64) -> LogTable {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let run_n = Normal::new(0.0, run_cv).unwrap_or_else(|_| unreachable!());
        let cell_n = Normal::new(0.0, cell_cv).unwrap_or_else(|_| unreachable!());
        let mut t = LogTable::new(runs, cells);
        for r in 0..runs {
            let a = run_n.sample(&mut rng);
            for c in 0..cells {
                t.set(
                    r,
                    c,
                    (100.0 + 10.0 * c as f64).ln() + a + cell_n.sample(&mut rng),
                );
            }
        }
        t
    }

    #[test]
    fn separates_run_and_cell_noise() {
        let t = synthetic(40, 20, 0.01, 0.02, 1);
        let m = fit(&t, &settings());
        assert!(
            (m.pooled_sigma - 0.02).abs() < 0.003,
            "pooled {}",
            m.pooled_sigma
        );
        // Run effects include the average of 20 cell terms: sqrt(0.01^2 + 0.02^2/20) ~ 0.011.
        assert!((0.007..0.016).contains(&m.run_sigma), "run {}", m.run_sigma);
    }

    #[test]
    fn one_outlier_run_is_set_aside() {
        let mut t = synthetic(20, 20, 0.01, 0.02, 2);
        for c in 0..20 {
            let v = t.get(17, c);
            t.set(17, c, v + (0.92f64).ln());
        }
        let m = fit(&t, &settings());
        assert!(m.outlier_run[17]);
        assert_eq!(m.outlier_run.iter().filter(|x| **x).count(), 1);
        assert!(
            m.run_sigma < 0.02,
            "run sigma {} inflated by the outlier",
            m.run_sigma
        );
    }

    #[test]
    fn identical_runs_have_little_noise_and_one_run_falls_back_to_the_prior() {
        let one = synthetic(1, 5, 0.01, 0.02, 3);
        let mut t = LogTable::new(3, 5);
        for r in 0..3 {
            for c in 0..5 {
                t.set(r, c, one.get(0, c));
            }
        }
        let m = fit(&t, &settings());
        assert!(m.pooled_sigma < 0.015, "{}", m.pooled_sigma);
        let single = fit(&one, &settings());
        assert!((single.pooled_sigma - 0.03).abs() < 1e-9);
        assert!(single.pooled_df <= 2.0 + 1e-9);
    }

    #[test]
    fn a_trend_or_a_step_does_not_inflate_the_run_level_noise() {
        let plain = synthetic(20, 20, 0.01, 0.02, 5);
        let mut trend = plain.clone();
        let mut step = plain.clone();
        for r in 0..20 {
            for c in 0..20 {
                trend.set(r, c, plain.get(r, c) + 0.03 * r as f64 / 19.0);
                step.set(r, c, plain.get(r, c) + if r >= 12 { 0.03 } else { 0.0 });
            }
        }
        let base = fit(&plain, &settings()).run_sigma;
        for t in [&trend, &step] {
            let s = fit(t, &settings()).run_sigma;
            assert!((s - base).abs() < 0.15 * base, "{s} vs {base}");
        }
        // The plain SD of the trend's run effects would be ~40% larger.
        let (var, df) = successive_difference_var(&[0.0, 1.0, 0.0, 1.0], 4.0);
        assert!((var - 0.5).abs() < 1e-12 && (df - 18.0 / 8.0).abs() < 1e-12);
        assert_eq!(successive_difference_var(&[1.0], 4.0), (0.0, 0.0));
    }

    #[test]
    fn trimmed_mean_resists_one_wild_value() {
        let mut v = vec![1.0, 1.1, 0.9, 1.0, 50.0];
        assert!((trimmed_mean(&mut v) - 1.0333).abs() < 1e-3);
        let mut m = vec![3.0, 1.0, 2.0];
        assert_eq!(median(&mut m), 2.0);
    }
}
