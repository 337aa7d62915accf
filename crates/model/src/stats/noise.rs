//! The noise model from the baseline history.
//!
//! Each metric's log value in run `r`, cell `c` of context row `g` is decomposed as
//! `y[r][c] = cell_center[c] + run_effect[r] + row effect[r][g] + residual[r][c]`:
//! the run effect is what all cells of one run share (clocks, thermals, the boot) and cancels
//! out of any comparison of a cell with the rest of its own run; the run × row effect is what
//! the cells of one context row share on one boot beyond that (a row running hot or cold), a
//! variance component `row_sigma` read from the history's row contrasts; the residual is the
//! cell's own run-to-run noise. The effects are estimated robustly (trimmed means), a slow boot
//! of the history is one more draw of the run effect (no run is set aside), and heavy-tailed
//! residuals get a fitted Student t. Per-cell noise is shrunk toward the pooled noise of all
//! cells, so a thin or lucky history cannot make one cell look quieter than the runner is.

use super::build::mean;

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
    pub fn new(runs: usize, cells: usize) -> Self {
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

/// Least weight (degrees of freedom) of the pooled noise in one cell's noise: a cell's own 19
/// df from a 20-run history are too few to trust a lucky quiet cell, and the pool's weight is
/// estimated from how far the cells' variances spread (more when they share one level).
const SHRINKAGE_MIN_DF: f64 = 10.0;
/// Noise CV assumed before any history is seen (a typical GPU runner's cell), worth
/// [`PRIOR_DF`]: it only matters for a history of one or two runs.
pub const PRIOR_CV: f64 = 0.03;
/// Weight of [`PRIOR_CV`] in degrees of freedom: small, so two runs of history dominate it.
const PRIOR_DF: f64 = 1.0;
/// A successive difference of run effects beyond this many robust SDs is a step in the
/// history (an accepted change, a new driver), not noise: left out of the run-level noise.
const STEP_Z: f64 = 4.0;
/// Runs needed before the run × row effect is fitted (as for the tail, [`TAIL_MIN_RUNS`]): its
/// variance rests on the history's `(runs − 1)·(rows − 1)` row contrasts (21 with 8 runs of 4
/// rows). With fewer runs a row factor stays in the cells' noise, as without the term.
const ROW_MIN_RUNS: usize = 8;
/// Where a row's Huber mean (the run × row effect taken out of its cells' residuals) stops
/// counting a cell fully, in robust SDs of the cells' noise: beyond it a cell counts as if it
/// were this far. A plain mean would spread a wild cell of a heavy-tailed runner over its
/// row's other cells and hide its tail from the tail fit (t3 cells fitted with 3.5–5 df); a
/// trimmed mean of a row's few cells would make Gaussian residuals look heavy-tailed; at 2
/// SDs, Gaussian cells are centred almost by their mean.
const ROW_HUBER_K: f64 = 2.0;

/// The fitted two-way model of one metric's history.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct NoiseModel {
    /// Robust centre of each cell (log), with run effects removed.
    pub cell_center: Vec<f64>,
    /// Run effect of each run (log); `NaN` for a run without data.
    pub run_effect: Vec<f64>,
    /// Per-cell noise (SD of the log residual of one run, the run × row effect removed),
    /// shrunk toward the pooled value.
    pub cell_sigma: Vec<f64>,
    /// Degrees of freedom of `cell_sigma`.
    pub cell_df: Vec<f64>,
    /// Run-to-run noise of the run effect (the matrix-wide noise of one boot).
    pub run: RunNoise,
    /// Tail degrees of freedom of the per-cell residuals (a Student t fitted by maximum
    /// likelihood to all of them, `f64::INFINITY` when they look Gaussian or the history is
    /// too short to tell): a cell test on a heavy-tailed runner uses this t.
    pub tail_df: f64,
    /// SD of a context row's effect on one run relative to that run's effect (the run × row
    /// effect): 0 when the history does not show one, or has fewer than [`ROW_MIN_RUNS`] runs
    /// or a single row (the term is then not fitted and a row factor is in `cell_sigma`).
    pub row_sigma: f64,
}

/// Run-to-run noise of the run effect: the successive differences of the history's run effects
/// (a trend or a step does not inflate them) pooled with a prior worth [`PRIOR_DF`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct RunNoise {
    /// Mean squared successive difference over 2 (0 without a difference).
    observed_var: f64,
    /// Successive differences behind it (steps left out).
    differences: usize,
}

impl RunNoise {
    /// The noise of the history's run effects (oldest → newest; a run without data, `NaN`, is
    /// skipped) from their successive differences (the mean square successive difference, von
    /// Neumann): `Σ (x[k+1] − x[k])² / (2 m)` over the `m` differences, with a difference beyond
    /// [`STEP_Z`] robust SDs of the differences (a step) set aside. A slow trend or a level
    /// shift moves the series' spread a lot and its successive differences hardly at all. No
    /// difference (fewer than two runs): variance 0 over 0 differences, the prior's alone.
    fn from_effects(effects: &[f64]) -> Self {
        let finite: Vec<f64> = effects.iter().copied().filter(|v| v.is_finite()).collect();
        // Outlier runs set aside first ([`outlier_runs`]): such a run's two jumps, each nearly
        // its whole offset, can stay within the step screen below on a noisy runner, and one
        // −8% run doubled the SD of a 1% runner (issue 56).
        let finite: Vec<f64> = if finite.len() >= 5 {
            let outliers = outlier_runs(&finite);
            finite
                .iter()
                .zip(outliers)
                .filter_map(|(&x, out)| (!out).then_some(x))
                .collect()
        } else {
            finite
        };
        let mut diffs: Vec<f64> = finite.windows(2).map(|w| w[1] - w[0]).collect();
        if diffs.len() >= 5 {
            let mut abs: Vec<f64> = diffs.iter().map(|d| d.abs()).collect();
            let scale = mad_sd(&mut abs);
            if scale > 0.0 {
                diffs.retain(|d| d.abs() <= STEP_Z * scale);
            }
        }
        let differences = diffs.len();
        RunNoise {
            observed_var: if differences == 0 {
                0.0
            } else {
                diffs.iter().map(|d| d * d).sum::<f64>() / (2.0 * differences as f64)
            },
            differences,
        }
    }

    /// The boot-to-boot SD of the run effect and its degrees of freedom.
    pub(crate) fn sigma_df(&self) -> (f64, f64) {
        self.after(0)
    }

    /// Noise observed as `sd` over `differences` successive differences (tests' histories).
    #[cfg(test)]
    pub(crate) fn observed(sd: f64, differences: usize) -> Self {
        RunNoise {
            observed_var: sd * sd,
            differences,
        }
    }

    /// The SD and df once `extra` more runs are in the history, if they scatter as its runs
    /// do (the prior's, when one run shows no scatter yet): what a thin store projects for
    /// "n more baseline runs". Both the prior's weight and the observed variance shrink as
    /// the differences grow, so keeping today's SD would overstate the runs needed.
    pub(crate) fn after(&self, extra: usize) -> (f64, f64) {
        // A run effect averages many cells, so its prior is taken as half the cell prior's CV.
        let prior_var = PRIOR_CV * PRIOR_CV / 4.0;
        let m = (self.differences + extra) as f64;
        let observed_df = if m > 0.0 {
            // The MSSD's equivalent chi-square df for m differences (for Gaussian noise
            // `Var(δ²) = σ⁴ (3m − 1) / m²`).
            2.0 * m * m / (3.0 * m - 1.0)
        } else {
            0.0
        };
        let observed_var = if self.differences > 0 {
            self.observed_var
        } else {
            prior_var
        };
        let df = observed_df + PRIOR_DF;
        (
            ((observed_df * observed_var + PRIOR_DF * prior_var) / df).sqrt(),
            df,
        )
    }
}

/// A run effect this many robust scales ([`qn_scale`]) off its neighbours' median is an
/// outlier run (measured in [`outlier_runs`]).
const OUTLIER_RUN_SD: f64 = 3.1;

/// Neighbours on each side whose median an outlier run is measured from ([`outlier_runs`]).
/// Two a side let two outlier runs near each other hide both (one in five of their
/// neighbours' medians, and their residuals widen the scale): three or more such runs are in
/// 7.5% of 20-run histories at one in 20; four a side keep the median where the runs are
/// (a simulation on 3,000 such histories, 1.1% noise, 0.1%/run drift, with the MAD's scale:
/// −8% runs flagged 90.7% → 96.9% at 3 scales).
const OUTLIER_NEIGHBOURS: usize = 4;

/// Which runs of the history are outliers (a throttled night, −8% everywhere): the run effect
/// more than [`OUTLIER_RUN_SD`] robust scales off the median of its eight neighbours
/// ([`OUTLIER_NEIGHBOURS`] each side where there are; a drift or a step moves that median with
/// it), the scale the [`qn_scale`] of every run's such residual (one outlier is one residual
/// of twenty, where it is two jumps of nineteen successive differences), looked at again
/// without the runs flagged until none is added. On a simulation of the rule (3,000 20-run
/// series each): iid runs flagged 0.39%, a run 5 SDs off 78% of the time, 6 SDs 93%; the
/// outlier runner's −8% runs (1 in 20, 1.1% noise, 0.1%/run drift) 98.3%, histories left
/// with an unflagged one 0.6%; a runner's 4% slow boots 34.1%, which a candidate's boot can be
/// as well, so no more of them than before. (The rule before, the MAD's scale at 3.3 in one
/// pass: 0.62%, 76%, 91%; 95.7%, 2.5%; 35.2%. The MAD's noise over twenty residuals put a −8%
/// run under the cut on noisy histories, and several such runs widened it for each other. At
/// 3.0 scales this rule flags 37.6% of slow boots and the slow-boot runner's clean gates
/// alarmed 1.05%.) The boot-to-boot noise and
/// the level a candidate is compared with leave them out: one such run in a 20-run history
/// doubled a 1% runner's SD on some histories and moved the level 1.1% when it was among the
/// seven level runs, and a uniform −5% was found in 71% of gates instead of 97% (issue 56).
/// `NaN` effects (runs without data) are not outliers; none is with fewer than five runs or
/// no scatter.
pub(crate) fn outlier_runs(effects: &[f64]) -> Vec<bool> {
    let mut out = vec![false; effects.len()];
    // Flagged runs leave the neighbours' medians and the scale, and the rest is looked at
    // again, until no run is added: three throttled nights in a history no longer hide each
    // other (in one another's medians and widening the scale). At most once per run.
    for _ in 0..effects.len() {
        let kept: Vec<usize> = (0..effects.len())
            .filter(|&r| effects[r].is_finite() && !out[r])
            .collect();
        let added: Vec<usize> = outliers_once(effects, &kept);
        if added.is_empty() {
            break;
        }
        added.into_iter().for_each(|r| out[r] = true);
    }
    out
}

/// One pass of [`outlier_runs`] over the runs `kept` (indices into `effects`, in order): those
/// more than [`OUTLIER_RUN_SD`] [`qn_scale`]s of the residuals off their neighbours' median.
fn outliers_once(effects: &[f64], kept: &[usize]) -> Vec<usize> {
    let n = kept.len();
    if n < 5 {
        return Vec::new();
    }
    let width = n.min(2 * OUTLIER_NEIGHBOURS + 1);
    let residuals: Vec<f64> = (0..n)
        .map(|k| {
            let from = k.saturating_sub(OUTLIER_NEIGHBOURS).min(n - width);
            let mut around: Vec<f64> = (from..from + width)
                .filter(|&i| i != k)
                .map(|i| effects[kept[i]])
                .collect();
            effects[kept[k]] - median(&mut around)
        })
        .collect();
    let scale = qn_scale(&residuals);
    if !(scale.is_finite() && scale > 0.0) {
        return Vec::new();
    }
    kept.iter()
        .zip(&residuals)
        .filter(|(_, res)| res.abs() > OUTLIER_RUN_SD * scale)
        .map(|(&r, _)| r)
        .collect()
}

/// Rousseeuw and Croux's Qn scale of `v` (a Gaussian's SD): the `h choose 2`-th smallest of
/// the pairwise distances, `h = n/2 + 1`, times 2.2219 and their small-sample factor. As robust
/// as the MAD (half the values may be wild) and 82% efficient where the MAD is 37%: over 20
/// residuals its noise is about two thirds of the MAD's, so the cut sits nearer its intent.
/// `NaN` with fewer than two values.
fn qn_scale(v: &[f64]) -> f64 {
    let n = v.len();
    if n < 2 {
        return f64::NAN;
    }
    let mut d: Vec<f64> = (0..n)
        .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
        .map(|(i, j)| (v[i] - v[j]).abs())
        .collect();
    let h = n / 2 + 1;
    let k = h * (h - 1) / 2;
    let (_, kth, _) = d.select_nth_unstable_by(k - 1, f64::total_cmp);
    // Croux and Rousseeuw (1992): exact factors to n = 9, then their fitted ones.
    const SMALL: [f64; 8] = [0.399, 0.994, 0.512, 0.844, 0.611, 0.857, 0.669, 0.872];
    let nf = n as f64;
    let factor = match n {
        2..=9 => SMALL[n - 2],
        _ if n % 2 == 1 => nf / (nf + 1.4),
        _ => nf / (nf + 3.8),
    };
    2.2219 * factor * *kth
}

/// Huber's M-estimate of location of `v`: values within `k` of it count fully, those beyond as
/// if at `k` (iterated from the median; the median itself when `k` is 0).
fn huber_mean(v: &[f64], k: f64) -> f64 {
    let mut m = median(&mut v.to_vec());
    if k.is_nan() || k <= 0.0 {
        return m;
    }
    for _ in 0..20 {
        let (mut num, mut den) = (0.0, 0.0);
        for &x in v {
            let w = (k / (x - m).abs()).min(1.0);
            num += w * x;
            den += w;
        }
        let next = num / den;
        let done = (next - m).abs() < 1e-12;
        m = next;
        if done {
            break;
        }
    }
    m
}

/// Mean after dropping the lowest and highest 20% (none when fewer than 5 values). Sorts `v`.
pub(crate) fn trimmed_mean(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let cut = if v.len() >= 5 { v.len() / 5 } else { 0 };
    mean(&v[cut..v.len() - cut])
}

/// Gaussian SD per unit of median absolute deviation (1 / Φ⁻¹(3/4)): what turns a MAD, which a
/// few wild values cannot move, into an SD the tests can use.
const MAD_TO_SD: f64 = 1.4826;

/// The Gaussian-equivalent SD of a sample's absolute deviations: their median times
/// [`MAD_TO_SD`]. Sorts `abs_dev`.
pub fn mad_sd(abs_dev: &mut [f64]) -> f64 {
    MAD_TO_SD * median(abs_dev)
}

/// The robust SD of `v`: [`mad_sd`] of its deviations from its median.
pub(crate) fn robust_sd(v: &[f64]) -> f64 {
    let centre = median(&mut v.to_vec());
    let mut dev: Vec<f64> = v.iter().map(|x| (x - centre).abs()).collect();
    mad_sd(&mut dev)
}

/// Median (via statrs). `NaN` for an empty slice.
pub fn median(v: &mut [f64]) -> f64 {
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
/// but never below [`SHRINKAGE_MIN_DF`].
fn shrinkage_weight(ss: &[f64], dof: &[f64], pooled_var: f64, cap: f64) -> f64 {
    let ratios: Vec<(f64, f64)> = ss
        .iter()
        .zip(dof)
        .filter(|(_, d)| **d >= 2.0)
        .map(|(ss, d)| (ss / d / pooled_var, *d))
        .collect();
    if ratios.len() < 3 || pooled_var <= 0.0 {
        return SHRINKAGE_MIN_DF.min(cap);
    }
    let n = ratios.len() as f64;
    let m = ratios.iter().map(|r| r.0).sum::<f64>() / n;
    let observed = ratios.iter().map(|r| (r.0 - m).powi(2)).sum::<f64>() / (n - 1.0);
    let sampling = ratios.iter().map(|r| 2.0 / r.1).sum::<f64>() / n;
    let extra = observed - sampling;
    let d0 = if extra <= 0.0 { cap } else { 4.0 + 2.0 / extra };
    d0.clamp(SHRINKAGE_MIN_DF.min(cap), cap)
}

/// Alternating trimmed-mean fit of cell centres and run effects over the entries present.
fn fit_effects(t: &LogTable) -> (Vec<f64>, Vec<f64>) {
    let (nr, nc) = (t.runs, t.cells);
    let mut buf = Vec::with_capacity(nr.max(nc));
    let mut center = vec![f64::NAN; nc];
    for (c, ctr) in center.iter_mut().enumerate() {
        buf.clear();
        buf.extend((0..nr).map(|r| t.get(r, c)).filter(|v| v.is_finite()));
        *ctr = median(&mut buf);
    }
    let mut effect = vec![f64::NAN; nr];
    for _ in 0..4 {
        for (r, eff) in effect.iter_mut().enumerate() {
            buf.clear();
            buf.extend(
                (0..nc)
                    .filter(|&c| t.get(r, c).is_finite() && center[c].is_finite())
                    .map(|c| t.get(r, c) - center[c]),
            );
            *eff = trimmed_mean(&mut buf);
        }
        for (c, ctr) in center.iter_mut().enumerate() {
            buf.clear();
            buf.extend(
                (0..nr)
                    .filter(|&r| t.get(r, c).is_finite() && effect[r].is_finite())
                    .map(|r| t.get(r, c) - effect[r]),
            );
            if !buf.is_empty() {
                *ctr = trimmed_mean(&mut buf);
            }
        }
    }
    (center, effect)
}

/// Cells (columns) of each context row with data, from each column's row label.
fn row_groups(t: &LogTable, row: &[u64]) -> Vec<Vec<usize>> {
    let mut groups: Vec<(u64, Vec<usize>)> = Vec::new();
    for c in (0..t.cells).filter(|&c| (0..t.runs).any(|r| t.get(r, c).is_finite())) {
        let label = row.get(c).copied().unwrap_or(u64::MAX);
        match groups.iter_mut().find(|(l, _)| *l == label) {
            Some((_, cells)) => cells.push(c),
            None => groups.push((label, vec![c])),
        }
    }
    groups.into_iter().map(|(_, cells)| cells).collect()
}

/// Fits the decomposition and the noise of one metric's history; `row[c]` labels the context
/// row of column `c` (cells with one label share a run × row effect).
pub(crate) fn fit(t: &LogTable, row: &[u64]) -> NoiseModel {
    let (nr, nc) = (t.runs, t.cells);
    let (center, effect) = fit_effects(t);
    let runs_with_data = (0..nr).filter(|&r| effect[r].is_finite()).count();
    let groups = row_groups(t, row);
    let cells_with_data: usize = groups.iter().map(Vec::len).sum();

    // Residuals of the two-way fit; with the run × row term, each less its row's Huber mean in
    // its run (the row effect's estimate). Each cell's share of the residual degrees of
    // freedom: `(m − 1)/m` of its runs' in a row of `m` cells (each run's row centre is
    // fitted), `(C − 1)/C` without the term.
    let mut resid: Vec<f64> = (0..nr * nc)
        .map(|i| t.values[i] - center[i % nc] - effect[i / nc])
        .collect();
    let with_rows =
        runs_with_data >= ROW_MIN_RUNS && groups.len() >= 2 && groups.iter().any(|g| g.len() >= 2);
    let rows = if with_rows {
        RowEffects::take_out(&mut resid, &groups, nr, nc)
    } else {
        RowEffects::none(&groups, nc, cells_with_data)
    };
    let tail = tail_fit(t, &resid, &rows.blocks, runs_with_data);
    let tail_df = tail.as_ref().map_or(f64::INFINITY, |f| f.df);

    let noise = CellResiduals::of(&resid, nr, nc, &rows.cell_factor, runs_with_data);
    let (mut cell_sigma, cell_df) = noise.shrunk_sigmas();
    if let Some(f) = &tail {
        noise.heavy_tailed_sigmas(f, &mut cell_sigma);
    }
    let row_sigma = if with_rows && !rows.dev.is_empty() {
        row_effect_sigma(
            &rows.dev,
            &groups,
            &cell_sigma,
            runs_with_data,
            cells_with_data,
        )
    } else {
        0.0
    };

    NoiseModel {
        cell_center: center,
        // Successive differences of the run effects: a trend or a step is not noise.
        run: RunNoise::from_effects(&effect),
        run_effect: effect,
        cell_sigma,
        cell_df,
        tail_df,
        row_sigma,
    }
}

/// The run × row effects of a fit ([`fit`]): each run's row (its group and its cells' mean
/// residual, for the row effect's variance and the cells' scale within their rows) with
/// those cells' entries, and each cell's share of its residual degrees of freedom.
struct RowEffects {
    dev: Vec<(usize, f64)>,
    blocks: Vec<Vec<usize>>,
    cell_factor: Vec<f64>,
}

impl RowEffects {
    /// Without the run × row term: no rows, and each cell's share `(C − 1)/C` of its runs'.
    fn none(groups: &[Vec<usize>], nc: usize, cells_with_data: usize) -> RowEffects {
        let mut cell_factor = vec![0.0; nc];
        if cells_with_data > 1 {
            let f = (cells_with_data as f64 - 1.0) / cells_with_data as f64;
            for g in groups {
                for &c in g {
                    cell_factor[c] = f;
                }
            }
        }
        RowEffects {
            dev: Vec::new(),
            blocks: Vec::new(),
            cell_factor,
        }
    }

    /// With the run × row term: each run's rows, and their effects taken out of `resid`.
    fn take_out(resid: &mut [f64], groups: &[Vec<usize>], nr: usize, nc: usize) -> RowEffects {
        let mut dev: Vec<(usize, f64)> = Vec::new();
        let mut blocks: Vec<Vec<usize>> = Vec::new();
        let mut cell_factor = vec![0.0; nc];
        for (g, members) in groups.iter().enumerate() {
            for &c in members {
                cell_factor[c] = (members.len() as f64 - 1.0) / members.len() as f64;
            }
            for r in 0..nr {
                let here: Vec<usize> = members
                    .iter()
                    .map(|&c| r * nc + c)
                    .filter(|&i| resid[i].is_finite())
                    .collect();
                if !here.is_empty() {
                    let d = here.iter().map(|&i| resid[i]).sum::<f64>() / here.len() as f64;
                    dev.push((g, d));
                    blocks.push(here);
                }
            }
        }
        let rows = RowEffects {
            dev,
            blocks,
            cell_factor,
        };
        rows.subtract_huber_means(resid);
        rows
    }

    /// The row effect taken out of the residuals is the row's Huber mean (one wild cell does
    /// not move its row's other cells, which would hide its tail from the tail fit), on the
    /// cells' robust scale within their rows.
    fn subtract_huber_means(&self, resid: &mut [f64]) {
        let mut within: Vec<f64> = Vec::new();
        let mut shrink = 0.0;
        for (here, &(_, m)) in self
            .blocks
            .iter()
            .zip(&self.dev)
            .filter(|(b, _)| b.len() >= 2)
        {
            within.extend(here.iter().map(|&i| (resid[i] - m).abs()));
            shrink += here.len() as f64 - 1.0;
        }
        let scale = if within.is_empty() {
            0.0
        } else {
            let kept = shrink / within.len() as f64;
            mad_sd(&mut within) / kept.sqrt()
        };
        for here in &self.blocks {
            let values: Vec<f64> = here.iter().map(|&i| resid[i]).collect();
            // An entry alone in its row this run holds no cell noise: left out (`NaN`).
            let centre = if here.len() >= 2 {
                huber_mean(&values, ROW_HUBER_K * scale)
            } else {
                f64::NAN
            };
            here.iter().for_each(|&i| resid[i] -= centre);
        }
    }
}

/// Per-cell residual sums of squares with their share of the degrees of freedom (a cell
/// without any holds no noise of its own: its sum of squares is left out), and the residuals
/// each cell has.
struct CellResiduals {
    ss: Vec<f64>,
    dof: Vec<f64>,
    n: Vec<usize>,
}

impl CellResiduals {
    fn of(
        resid: &[f64],
        nr: usize,
        nc: usize,
        cell_factor: &[f64],
        runs_with_data: usize,
    ) -> CellResiduals {
        let mut cell_ss = vec![0.0; nc];
        let mut cell_dof = vec![0.0; nc];
        let mut cell_n = vec![0usize; nc];
        for c in 0..nc {
            for r in 0..nr {
                let e = resid[r * nc + c];
                if e.is_finite() {
                    cell_ss[c] += e * e;
                    cell_n[c] += 1;
                }
            }
            if cell_n[c] > 1 && runs_with_data > 1 {
                cell_dof[c] = (cell_n[c] as f64 - 1.0) * cell_factor[c];
            }
            if cell_dof[c] <= 0.0 {
                cell_ss[c] = 0.0;
            }
        }
        CellResiduals {
            ss: cell_ss,
            dof: cell_dof,
            n: cell_n,
        }
    }

    /// Each cell's noise `(σ, df)`: its variance shrunk toward the pooled one (with the
    /// prior), by [`shrinkage_weight`].
    fn shrunk_sigmas(&self) -> (Vec<f64>, Vec<f64>) {
        let (cell_ss, cell_dof) = (&self.ss, &self.dof);
        let prior_var = PRIOR_CV * PRIOR_CV;
        let total_df: f64 = cell_dof.iter().sum();
        let total_ss: f64 = cell_ss.iter().sum();
        let pooled_df = total_df + PRIOR_DF;
        let pooled_var = (total_ss + PRIOR_DF * prior_var) / pooled_df;
        let prior_w = shrinkage_weight(cell_ss, cell_dof, pooled_var, pooled_df);
        (0..cell_ss.len())
            .map(|c| {
                let (df, ss) = (cell_dof[c], cell_ss[c]);
                let var = (ss + prior_w * pooled_var) / (df + prior_w).max(1e-9);
                (var.sqrt(), (df + prior_w).min(pooled_df).max(PRIOR_DF))
            })
            .unzip()
    }

    /// Heavy tails: the sample SD of a cell's few residuals is mostly set by whether a wild
    /// one happened to fall in the history (its spread is far wider than chi-square's), so a
    /// cell's scale is the fitted t's instead (a weighted fit that wild residuals barely
    /// move), as the SD that t implies, scaled back by the share of the variance the fitted
    /// effects took out of the residuals (`dof / n`, as the sample SD's divisor does).
    fn heavy_tailed_sigmas(&self, f: &TailFit, cell_sigma: &mut [f64]) {
        for (c, sigma) in cell_sigma.iter_mut().enumerate() {
            let kept_share = if self.dof[c] > 0.0 {
                self.dof[c] / self.n[c] as f64
            } else {
                1.0
            };
            *sigma = f.scale * f.cell_scale[c] * (f.df / (f.df - 2.0) / kept_share).sqrt();
        }
    }
}

/// The run × row effect's SD, by moments from the row contrasts `row_dev`: a row's mean
/// residual in run `r` holds its row effect plus the cells' noise averaged over the row
/// less its share in the run effect, `S_g/m² − 2·S_g/(m·C) + S/C²` (`S_g`, `S`: the sums of
/// the row's and all cells' variances), and both lose `1/R` to the fitted cell centres.
fn row_effect_sigma(
    row_dev: &[(usize, f64)],
    groups: &[Vec<usize>],
    cell_sigma: &[f64],
    runs_with_data: usize,
    cells_with_data: usize,
) -> f64 {
    let rf = runs_with_data as f64;
    let all: f64 = groups
        .iter()
        .flatten()
        .map(|&c| cell_sigma[c].powi(2))
        .sum();
    let n_all = cells_with_data as f64;
    let excess = row_dev
        .iter()
        .map(|&(g, dev)| {
            let m = groups[g].len() as f64;
            let s_g: f64 = groups[g].iter().map(|&c| cell_sigma[c].powi(2)).sum();
            let noise = s_g / (m * m) - 2.0 * s_g / (m * n_all) + all / (n_all * n_all);
            dev * dev * rf / (rf - 1.0) - noise
        })
        .sum::<f64>()
        / row_dev.len() as f64;
    excess.max(0.0).sqrt()
}

/// A Student t fitted to the residuals of a heavy-tailed history.
struct TailFit {
    /// Its degrees of freedom (above 2).
    df: f64,
    /// Its scale, in units of each cell's robust scale.
    scale: f64,
    /// Each cell's robust scale (log units).
    cell_scale: Vec<f64>,
}

/// The residuals' tail: each residual of the least-squares fit (mean polish of the robust
/// one's, over runs — or each run's rows, with the run × row term — and cells) in units of its
/// cell's robust scale (shrunk toward the pooled one, so cells of different noise do not pass
/// for a heavy tail), one Student t fitted to all ([`fit_student_t`]); `None` when Gaussian or
/// too few to tell. `runs` = the runs with data.
fn tail_fit(
    t: &LogTable,
    resid: &[f64],
    row_blocks: &[Vec<usize>],
    runs: usize,
) -> Option<TailFit> {
    let (nr, nc) = (t.runs, t.cells);
    let mut abs: Vec<f64> = resid
        .iter()
        .filter(|v| v.is_finite())
        .map(|v| v.abs())
        .collect();
    if runs < TAIL_MIN_RUNS || abs.len() < TAIL_MIN_RESIDUALS {
        return None;
    }
    let pooled_scale = mad_sd(&mut abs).max(1e-4);
    let cell_scale: Vec<f64> = (0..nc)
        .map(|c| {
            let mut a: Vec<f64> = (0..nr)
                .map(|r| resid[r * nc + c].abs())
                .filter(|v| v.is_finite())
                .collect();
            let n = a.len() as f64;
            let own = if a.is_empty() {
                pooled_scale
            } else {
                mad_sd(&mut a)
            };
            ((n * own * own + TAIL_SCALE_PRIOR * pooled_scale * pooled_scale)
                / (n + TAIL_SCALE_PRIOR))
                .sqrt()
                .max(1e-4)
        })
        .collect();
    // The robust fit leaves a wild entry whole and absorbs moderate ones, which alone makes
    // Gaussian residuals look heavy-tailed: whether the tail is heavy is read from
    // least-squares residuals (Gaussian on a Gaussian runner, so the test keeps its level).
    // How heavy, with the run × row term, from the residuals about each row's Huber mean
    // (`resid`): a row's plain mean spreads a wild cell over its few other cells, which makes
    // a t3 look like a t4 or t5.
    let columns = (0..nc).map(|c| (0..nr).map(|r| r * nc + c).collect());
    let runs_or_rows: Vec<Vec<usize>> = if row_blocks.is_empty() {
        (0..nr).map(|r| (r * nc..(r + 1) * nc).collect()).collect()
    } else {
        row_blocks.to_vec()
    };
    let standardized = |lines: &[Vec<usize>]| {
        let mut polished = resid.to_vec();
        for _ in 0..3 {
            for line in lines {
                let finite: Vec<f64> = line
                    .iter()
                    .map(|&i| polished[i])
                    .filter(|v| v.is_finite())
                    .collect();
                if !finite.is_empty() {
                    let m = mean(&finite);
                    line.iter().for_each(|&i| polished[i] -= m);
                }
            }
        }
        (0..nr * nc)
            .map(|i| polished[i] / cell_scale[i % nc])
            .filter(|v| v.is_finite())
            .collect::<Vec<f64>>()
    };
    let least_squares: Vec<Vec<usize>> = runs_or_rows.into_iter().chain(columns.clone()).collect();
    let (mut df, mut scale) = fit_student_t(&standardized(&least_squares));
    if df.is_finite() && !row_blocks.is_empty() {
        let (robust_df, robust_scale) = fit_student_t(&standardized(&columns.collect::<Vec<_>>()));
        if robust_df.is_finite() {
            (df, scale) = (robust_df, robust_scale);
        }
    }
    (df.is_finite() && df > 2.0).then_some(TailFit {
        df,
        scale,
        cell_scale,
    })
}

/// Runs needed before the residuals' tail is estimated.
const TAIL_MIN_RUNS: usize = 8;
/// Residuals needed before the residuals' tail is estimated: with fewer, one wild entry is
/// enough to make a t beat the Gaussian, and the gross-entry trim would then keep it.
const TAIL_MIN_RESIDUALS: usize = 150;
/// Weight (in residuals) of the pooled robust scale in each cell's, for the tail fit.
const TAIL_SCALE_PRIOR: f64 = 40.0;
/// Tail degrees of freedom tried by [`fit_student_t`]; above the last, the residuals are taken
/// as Gaussian (the tests change by well under a tenth of their p-values there).
const TAIL_DF_GRID: [f64; 12] = [
    2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0, 50.0,
];

/// Likelihood-ratio statistic (2 Δ log-likelihood) a t must beat the Gaussian by: the 1% level
/// of the boundary test (half χ²₀, half χ²₁), so a Gaussian history keeps its Gaussian test in
/// 99 of 100 cases and pays no power for the tail model.
const TAIL_LR_CRITICAL: f64 = 5.41;

/// Log-likelihood a heavier tail may give up against the best-fitting df and still be chosen:
/// half the 99% point of χ²₁, so the chosen df is a one-sided 99% lower bound on the tail's df.
/// A cell's boundary (~1e-4) is far in the tail, where a t3 read as a t3.5 doubles the false
/// alarms; at 95% (1.92), t3 cells with Gaussian sub-window noise were read as t3.5–t5 in a
/// quarter of simulated rough histories.
const TAIL_DF_SLACK: f64 = 3.32;

/// Fits a Student t (location 0) to `x` by maximum likelihood over [`TAIL_DF_GRID`] and the
/// Gaussian, the scale by the EM iteration of Lange, Little & Taylor (1989) at each df.
/// Returns `(df, scale)`; `df` is `f64::INFINITY` unless a t fits significantly better than
/// the Gaussian ([`TAIL_LR_CRITICAL`]).
fn fit_student_t(x: &[f64]) -> (f64, f64) {
    use statrs::function::gamma::ln_gamma;
    let n = x.len() as f64;
    let ss = x.iter().map(|v| v * v).sum::<f64>();
    if n < 2.0 || ss <= 0.0 {
        return (f64::INFINITY, (ss / n.max(1.0)).sqrt());
    }
    let gauss_var = ss / n;
    let gauss_ll = -0.5 * n * ((2.0 * std::f64::consts::PI * gauss_var).ln() + 1.0);
    let mut best = (
        f64::INFINITY,
        gauss_var.sqrt(),
        gauss_ll + TAIL_LR_CRITICAL / 2.0,
    );
    let mut fits = Vec::with_capacity(TAIL_DF_GRID.len());
    for df in TAIL_DF_GRID {
        let mut var = gauss_var;
        for _ in 0..50 {
            let next = x
                .iter()
                .map(|v| (df + 1.0) * v * v / (df + v * v / var))
                .sum::<f64>()
                / n;
            let done = (next / var - 1.0).abs() < 1e-9;
            var = next.max(1e-300);
            if done {
                break;
            }
        }
        let ll = n
            * (ln_gamma((df + 1.0) / 2.0)
                - ln_gamma(df / 2.0)
                - 0.5 * (df * std::f64::consts::PI * var).ln())
            - (df + 1.0) / 2.0 * x.iter().map(|v| (v * v / (df * var)).ln_1p()).sum::<f64>();
        fits.push((df, var.sqrt(), ll));
        if ll > best.2 {
            best = (df, var.sqrt(), ll);
        }
    }
    if best.0.is_finite() {
        // The heaviest tail the residuals do not reject (log-likelihood within TAIL_DF_SLACK of
        // the best, which is among `fits`): a boundary at a cell's share of alpha (~1e-4) lies
        // deep in the tail, where a df a little too large would put it far too close.
        best = *fits
            .iter()
            .find(|f| f.2 >= best.2 - TAIL_DF_SLACK)
            .unwrap_or(&best);
    }
    (best.0, best.1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_distr::{Distribution, Normal};

    /// Row labels of a 20-cell matrix of 4 context rows of 5 cells (a 5-cell table: one row).
    const ROWS: [u64; 20] = [0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3];

    /// A `runs` x `cells` history of run noise 1% and cell terms of SD 2% (Gaussian, or a
    /// Student t of `cell_df` scaled to that SD), plus a Gaussian factor of SD `row_cv` per run
    /// and context row ([`ROWS`]).
    fn history(
        runs: usize,
        cells: usize,
        seed: u64,
        row_cv: f64,
        cell_df: Option<f64>,
    ) -> LogTable {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let std = Normal::new(0.0, 1.0).unwrap_or_else(|_| unreachable!());
        let t3 = cell_df.and_then(|d| rand_distr::StudentT::new(d).ok().map(|t| (d, t)));
        let mut t = LogTable::new(runs, cells);
        for r in 0..runs {
            let a = 0.01 * std.sample(&mut rng);
            let rows: Vec<f64> = if row_cv > 0.0 {
                (0..4).map(|_| row_cv * std.sample(&mut rng)).collect()
            } else {
                vec![0.0; 4]
            };
            for c in 0..cells {
                let e = match &t3 {
                    Some((d, dist)) => 0.02 * ((d - 2.0) / d).sqrt() * dist.sample(&mut rng),
                    None => 0.02 * std.sample(&mut rng),
                };
                t.set(r, c, (100.0 + 10.0 * c as f64).ln() + a + rows[c / 5] + e);
            }
        }
        t
    }

    /// A Gaussian [`history`] without a row factor.
    fn synthetic(runs: usize, cells: usize, seed: u64) -> LogTable {
        history(runs, cells, seed, 0.0, None)
    }

    /// The models of twenty 20-run, 20-cell [`history`]s, seeds `from..from + 20`.
    fn fits(from: u64, row_cv: f64, cell_df: Option<f64>) -> Vec<NoiseModel> {
        (from..from + 20)
            .map(|seed| fit(&history(20, 20, seed, row_cv, cell_df), &ROWS))
            .collect()
    }

    #[test]
    fn separates_run_and_cell_noise() {
        let t = synthetic(40, 20, 1);
        let m = fit(&t, &ROWS);
        let mean_sigma = m.cell_sigma.iter().sum::<f64>() / 20.0;
        assert!((mean_sigma - 0.02).abs() < 0.003, "cells {mean_sigma}");
        // Run effects include the average of 20 cell terms: sqrt(0.01^2 + 0.02^2/20) ~ 0.011.
        let run_sigma = m.run.sigma_df().0;
        assert!((0.007..0.016).contains(&run_sigma), "run {run_sigma}");
    }

    #[test]
    fn one_slow_run_stays_in_the_history_and_only_widens_the_run_noise() {
        let mut t = synthetic(20, 20, 2);
        for c in 0..20 {
            let v = t.get(17, c);
            t.set(17, c, v + (0.96f64).ln());
        }
        let m = fit(&t, &ROWS);
        // The run effect takes the slow boot whole; the cells' noise does not see it.
        assert!((m.run_effect[17] - m.run_effect[16] - (0.96f64).ln()).abs() < 0.03);
        let mean_sigma = m.cell_sigma.iter().sum::<f64>() / 20.0;
        assert!((mean_sigma - 0.02).abs() < 0.004, "cells {mean_sigma}");
    }

    #[test]
    fn identical_runs_have_little_noise_and_one_run_falls_back_to_the_prior() {
        let one = synthetic(1, 5, 3);
        let t = LogTable {
            runs: 3,
            cells: 5,
            values: one.values.repeat(3),
        };
        let m = fit(&t, &ROWS);
        assert!(
            m.cell_sigma.iter().all(|s| *s < 0.015),
            "{:?}",
            m.cell_sigma
        );
        let single = fit(&one, &ROWS);
        assert!(
            single
                .cell_sigma
                .iter()
                .all(|s| (s - PRIOR_CV).abs() < 1e-9)
        );
        assert!(single.cell_df.iter().all(|d| *d <= PRIOR_DF + 1e-9));
    }

    #[test]
    fn a_trend_or_a_step_does_not_inflate_the_run_level_noise() {
        let plain = synthetic(20, 20, 5);
        let mut trend = plain.clone();
        let mut step = plain.clone();
        for r in 0..20 {
            for c in 0..20 {
                trend.set(r, c, plain.get(r, c) + 0.03 * r as f64 / 19.0);
                step.set(r, c, plain.get(r, c) + if r >= 12 { 0.03 } else { 0.0 });
            }
        }
        let base = fit(&plain, &ROWS).run.sigma_df().0;
        for t in [&trend, &step] {
            let s = fit(t, &ROWS).run.sigma_df().0;
            assert!((s - base).abs() < 0.15 * base, "{s} vs {base}");
        }
        // The plain SD of the trend's run effects would be ~40% larger.
        let zigzag = RunNoise::from_effects(&[0.0, 1.0, 0.0, 1.0]);
        assert!((zigzag.observed_var - 0.5).abs() < 1e-12 && zigzag.differences == 3);
        let (_, df) = zigzag.sigma_df();
        assert!((df - 18.0 / 8.0 - PRIOR_DF).abs() < 1e-12);
        assert_eq!(RunNoise::from_effects(&[1.0]), RunNoise::observed(0.0, 0));
    }

    #[test]
    fn a_row_factor_is_its_own_term_and_leaves_the_cells_noise_alone() {
        // Four rows of iid factors of SD 1.5%: a row's effect relative to its run's (which
        // takes their mean) has SD 1.5% * sqrt(3/4) = 1.3%.
        let factor = fits(200, 0.015, None);
        let mean = |v: &dyn Fn(&NoiseModel) -> f64| factor.iter().map(v).sum::<f64>() / 20.0;
        let row = mean(&|m| m.row_sigma);
        assert!((row - 0.013).abs() < 0.002, "row sigma {row}");
        let cells = mean(&|m| m.cell_sigma.iter().sum::<f64>() / 20.0);
        assert!((cells - 0.02).abs() < 0.0015, "cells {cells}");
        // Without the row factor the term is about nothing.
        let none: Vec<f64> = fits(300, 0.0, None).iter().map(|m| m.row_sigma).collect();
        let mean_none = none.iter().sum::<f64>() / 20.0;
        assert!(mean_none < 0.003, "no row factor, row sigma {none:?}");
        // A short history does not fit it; one row has none.
        let short = synthetic(5, 20, 9);
        assert_eq!(fit(&short, &ROWS).row_sigma, 0.0);
        assert_eq!(
            fit(&history(20, 20, 7, 0.015, None), &[0; 20]).row_sigma,
            0.0
        );
    }

    #[test]
    fn with_a_row_factor_the_tail_fit_sees_the_cells_own_tail() {
        // A Gaussian row factor plus t3 cells: one t fitted to their sum would have 4-6 df;
        // the cells' own term, the row effect removed, is fitted near its 3.
        let dfs: Vec<f64> = fits(400, 0.015, Some(3.0))
            .iter()
            .map(|m| m.tail_df)
            .collect();
        assert!(
            dfs.iter().filter(|d| **d <= 4.0).count() >= 17,
            "tail df {dfs:?}"
        );
        // And Gaussian cells under a row factor stay Gaussian.
        let gaussian = fits(500, 0.015, None)
            .iter()
            .filter(|m| m.tail_df.is_infinite())
            .count();
        assert!(gaussian >= 18, "{gaussian}/20");
    }

    /// One run 8% slow in a 1% runner's history is set aside: from the boot-to-boot noise,
    /// which it doubled on some histories, and flagged for the level; a clean history keeps
    /// nearly every run.
    #[test]
    fn an_outlier_run_is_set_aside_from_the_boot_noise() {
        use rand::SeedableRng;
        use rand_distr::{Distribution, Normal};
        let n = Normal::new(0.0, 0.01).unwrap_or_else(|_| unreachable!());
        let (mut flagged, mut false_flags, mut worst_ratio) = (0, 0, 0.0_f64);
        for seed in 0..40 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut e: Vec<f64> = (0..20).map(|_| n.sample(&mut rng)).collect();
            false_flags += outlier_runs(&e).iter().filter(|&&f| f).count();
            let clean = RunNoise::from_effects(&e).sigma_df().0;
            let at = (seed as usize * 7) % 20;
            e[at] += (-0.08_f64).ln_1p();
            let flags = outlier_runs(&e);
            flagged += usize::from(flags[at]);
            let with = RunNoise::from_effects(&e).sigma_df().0;
            worst_ratio = worst_ratio.max(with / clean);
        }
        assert!(flagged >= 36, "flagged {flagged} of 40");
        assert!(
            false_flags <= 24,
            "{false_flags} false flags in 800 clean runs"
        );
        assert!(
            worst_ratio < 1.6,
            "the outlier moved the SD {worst_ratio:.2}x"
        );
        // Three throttled nights among the newest five (one in 20 makes three or more in 7.5%
        // of 20-run histories): each is flagged, where two neighbours a side hid them.
        let mut rng = rand::rngs::StdRng::seed_from_u64(28);
        let mut e: Vec<f64> = (0..20).map(|_| n.sample(&mut rng)).collect();
        for at in [15, 18, 19] {
            e[at] += (-0.07_f64).ln_1p();
        }
        let flags = outlier_runs(&e);
        assert!(flags[15] && flags[18] && flags[19], "{flags:?}");
        // Too few runs, or no scatter: nothing is an outlier.
        assert!(outlier_runs(&[0.0, -0.08, 0.0, 0.0]).iter().all(|f| !f));
        assert!(outlier_runs(&[0.0; 8]).iter().all(|f| !f));
    }

    /// Qn reads a Gaussian's SD; 10% of the values wild (two runs in 20) raise it by a
    /// quarter, not to them; a small sample takes its exact factor.
    #[test]
    fn qn_is_the_sd_of_a_gaussian_and_robust_to_wild_values() {
        use rand::SeedableRng;
        use rand_distr::{Distribution, Normal};
        let n = Normal::new(0.0, 2.0).unwrap_or_else(|_| unreachable!());
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut v: Vec<f64> = (0..2000).map(|_| n.sample(&mut rng)).collect();
        let q = qn_scale(&v);
        assert!((q - 2.0).abs() < 0.1, "{q}");
        for x in v.iter_mut().take(200) {
            *x += 50.0;
        }
        assert!(qn_scale(&v) < 2.6, "{}", qn_scale(&v));
        // Five values: 2.2219 · 0.844 · the 3rd smallest (h = 3, 3 choose 2) of the ten
        // distances of 1..=5, four of them 1.
        let small = qn_scale(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert!((small - 2.2219 * 0.844).abs() < 1e-12, "{small}");
        assert!(qn_scale(&[1.0]).is_nan());
    }

    #[test]
    fn heavy_tailed_cells_are_recognised_and_gaussian_ones_are_not() {
        let gaussian_as_such = fits(0, 0.0, None)
            .iter()
            .filter(|m| m.tail_df.is_infinite())
            .count();
        // The likelihood-ratio screen is at 1%: a Gaussian history keeps its Gaussian test.
        assert!(gaussian_as_such >= 19, "{gaussian_as_such}/20");
        let heavy: Vec<f64> = fits(100, 0.0, Some(3.0))
            .iter()
            .map(|m| m.tail_df)
            .collect();
        assert!(
            heavy.iter().filter(|d| **d <= 5.0).count() >= 18,
            "t3 cells fitted as {heavy:?}"
        );
        // Too short a history to tell: Gaussian.
        let short = synthetic(5, 20, 9);
        assert!(fit(&short, &ROWS).tail_df.is_infinite());
    }

    #[test]
    fn the_tail_fit_finds_the_df_it_was_given() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let t4 = rand_distr::StudentT::new(4.0).unwrap_or_else(|_| unreachable!());
        let x: Vec<f64> = (0..4000).map(|_| 0.5 * t4.sample(&mut rng)).collect();
        let (df, scale) = fit_student_t(&x);
        // The heaviest tail not rejected: at most the true df, a little below it.
        assert!((2.5..=4.0).contains(&df), "df {df}");
        assert!((scale / 0.5 - 1.0).abs() < 0.25, "scale {scale}");
    }

    #[test]
    fn trimmed_mean_resists_one_wild_value() {
        let mut v = vec![1.0, 1.1, 0.9, 1.0, 50.0];
        assert!((trimmed_mean(&mut v) - 1.0333).abs() < 1e-3);
        let mut m = vec![3.0, 1.0, 2.0];
        assert_eq!(median(&mut m), 2.0);
    }
}
