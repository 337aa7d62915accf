//! The statistics of a bisection: which cells moved between the good and the bad build (the
//! per-cell evidence), and the culprit posterior over the commits from the boots' matrix
//! values ([`culprit_posterior`]), which [`search::Search`] decides by.
//!
//! The per-cell model, on the log scale of each cell's aggregate throughput: a boot's value of
//! a cell is `level + boot + within`, where `within` is the measurement's own noise (the spread
//! of its sub-window samples over their count) and `boot` the boot-to-boot factor, which one
//! boot cannot measure; its size is a prior CV (`[bisect] noise_cv`, default the rule's
//! `prior_cv`).

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal};

use infergate_schema::results::{CellResult, CellStatus, RunResults};
use infergate_schema::verdict::Metric;

use super::build::{self, mean};
use super::changepoint::{Scope, coords_of, series_of, value_at};
use super::interval::t_quantile;

pub mod search;

/// The bisection's test settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BisectSettings {
    /// Boot-to-boot CV assumed for one boot (log scale), e.g. 0.03.
    pub noise_cv: f64,
    /// Smallest relative change between good and bad that counts as a move.
    pub min_effect: f64,
    /// Two-sided confidence of each decision (moved cells and each step), e.g. 0.999.
    pub confidence: f64,
}

impl BisectSettings {
    fn z(&self, tests: usize) -> f64 {
        let alpha = (1.0 - self.confidence) / tests.max(1) as f64;
        Normal::standard().inverse_cdf(1.0 - alpha / 2.0)
    }
}

/// A cell's level in a set of boots of one build: mean of the boots' log throughput and its
/// variance (boot factor plus each boot's own noise, over the number of boots).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct Level {
    /// Mean ln(aggregate tokens/s) over the boots.
    pub log_mean: f64,
    /// Variance of the mean from the boots' own noise only (sub-window spread).
    pub within_var: f64,
    /// Boots that measured the cell.
    pub boots: usize,
}

/// The cell of `run` at `coord` when it was measured `ok` with a positive, finite throughput
/// (one that has a log).
fn ok_cell(run: &RunResults, coord: (u32, u64)) -> Option<&CellResult> {
    run.cells
        .iter()
        .find(|c| c.coord() == coord && c.status == CellStatus::Ok)
        .filter(|c| c.aggregate_tps.is_finite() && c.aggregate_tps > 0.0)
}

/// The level of cell `coord` over `runs` (boots measuring it `ok`); `None` when none did.
pub(crate) fn level(runs: &[RunResults], coord: (u32, u64)) -> Option<Level> {
    let (logs, within): (Vec<f64>, Vec<f64>) = runs
        .iter()
        .filter_map(|run| ok_cell(run, coord))
        .map(|cell| {
            (
                cell.aggregate_tps.ln(),
                build::within_run_var(&cell.samples),
            )
        })
        .unzip();
    let n = logs.len();
    (n > 0).then(|| Level {
        log_mean: mean(&logs),
        within_var: within.iter().sum::<f64>() / (n * n) as f64,
        boots: n,
    })
}

/// A cell compared between good and bad, moved or not (the evidence of the selection).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellMove {
    /// Concurrent streams of the cell.
    pub concurrency: u32,
    /// Prompt (context) length of the cell, in tokens.
    pub context_tokens: u64,
    /// Relative change bad / good − 1; `None` when one side did not measure it.
    pub change: Option<f64>,
    /// Its two-sided interval, when both sides measured it.
    pub interval: Option<(f64, f64)>,
    /// Whether the change is significant and at least `min_effect`.
    pub moved: bool,
}

fn var(l: &Level, s: &BisectSettings) -> f64 {
    (s.noise_cv * s.noise_cv) / l.boots as f64 + l.within_var
}

/// Every cell of the good and bad boots compared; a cell moved when its change is significant
/// at the bisection's confidence (Bonferroni over the cells) and at least `min_effect`.
pub fn moved_cells(good: &[RunResults], bad: &[RunResults], s: &BisectSettings) -> Vec<CellMove> {
    let coords = build::coords(good.iter().chain(bad));
    let z = s.z(coords.len());
    coords
        .into_iter()
        .map(|coord| {
            // (log change, interval), when both sides measured the cell.
            let diff = level(good, coord).zip(level(bad, coord)).map(|(g, b)| {
                let d = b.log_mean - g.log_mean;
                let sd = (var(&g, s) + var(&b, s)).sqrt();
                (d, d - z * sd, d + z * sd)
            });
            CellMove {
                concurrency: coord.0,
                context_tokens: coord.1,
                change: diff.map(|(d, _, _)| d.exp_m1()),
                interval: diff.map(|(_, lo, hi)| (lo.exp_m1(), hi.exp_m1())),
                moved: diff.is_some_and(|(d, lo, hi)| {
                    let significant = lo > 0.0 || hi < 0.0;
                    significant && d.abs() >= s.min_effect.ln_1p()
                }),
            }
        })
        .collect()
}

/// What a step's measurement says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepAnswer {
    /// Measures like the good build: the change came later.
    Good,
    /// Measures like the bad build: the change is here or earlier.
    Bad,
    /// Cannot be told apart at the confidence asked: measure again.
    Uncertain,
}

impl StepAnswer {
    /// The word written in `bisect.json` and the report.
    pub fn as_str(self) -> &'static str {
        match self {
            StepAnswer::Good => "good",
            StepAnswer::Bad => "bad",
            StepAnswer::Uncertain => "uncertain",
        }
    }
}

/// The evidence behind one step's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepEvidence {
    /// Good, bad or uncertain.
    pub answer: StepAnswer,
    /// Where the step's matrix value lies between the ends' means: 0 = good, 1 = bad; `None`
    /// when the ends' means are equal.
    pub position: Option<f64>,
    /// Probit of the posterior probability that the step is bad.
    pub z: f64,
    /// The threshold |z| had to reach (the probit of `confidence`).
    pub z_needed: f64,
    /// Cells the reference (first good) boot measured `ok`.
    pub cells: usize,
    /// Boots of the step pooled.
    pub boots: usize,
}

/// One boot's matrix value for the culprit posterior: where its revision lies (`None`: the
/// known-good revision; `Some(i)`: commit `i` of the list, the last one being the known-bad
/// revision) and the mean over the cells it measured of the log of the bisected metric
/// (`ln(tokens/s)` by default) minus that cell's value on the first good boot. The run factor is common to the cells of a boot, so it stays
/// whole in the value; the cell terms average over the matrix (the mean of `m` cells has
/// `1/m` of one cell's cell-term variance).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BootValue {
    /// `None` = the known-good revision, else its index in the commit list.
    pub commit: Option<usize>,
    /// Mean over cells of the metric's log relative to the first good boot.
    pub value: f64,
}

/// The matrix value of `metric` in `run` against the reference boot `reference` (the first
/// good boot): the mean over the cells (a layer's: its contexts, its burst) where both have the
/// figure as the gate takes it ([`value_at`]: a clean cell, a tail the host did not run late
/// on) of the log ratio; `None` when they share none.
pub fn matrix_value(run: &RunResults, reference: &RunResults, metric: Metric) -> Option<f64> {
    let logs: Vec<f64> = coords_of(std::slice::from_ref(reference), metric)
        .into_iter()
        .filter_map(|c| Some((value_at(run, c, metric)?, value_at(reference, c, metric)?)))
        .map(|(v, r)| v.ln() - r.ln())
        .collect();
    (!logs.is_empty()).then(|| mean(&logs))
}

/// Smallest boot-to-boot SD the posterior assumes (log units): two boots of one build that
/// measure alike to the fourth digit do not make a gap of 0.1% certain.
pub(crate) const BOOT_SD_FLOOR: f64 = 0.0005;

/// What the gate knows of the runner's boot-to-boot noise before the bisection boots anything:
/// the SD of one boot's matrix value (log units) as a scaled-inverse-χ² prior worth `df`
/// boots' degrees of freedom (from the baseline history's run-to-run noise, or `[bisect]
/// noise_cv`). The bisection's own replicates then add to it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NoisePrior {
    /// Prior SD of one boot's matrix value (log units).
    pub sd: f64,
    /// Its weight in degrees of freedom (0: Jeffreys' prior, the boots alone).
    pub df: f64,
}

/// A noise prior's degrees of freedom and sum of squares (`df · sd²`); both 0 without one
/// (Jeffreys' prior, the boots alone).
fn prior_terms(prior: Option<NoisePrior>) -> (f64, f64) {
    prior.map_or((0.0, 0.0), |p| (p.df, p.df * p.sd * p.sd))
}

/// Most degrees of freedom a history's noise prior is worth: the history's runner (and its
/// noise) need not be today's, so the bisection's own boots soon outweigh it.
pub(crate) const HISTORY_PRIOR_MAX_DF: f64 = 10.0;

/// The boot-to-boot noise a baseline history shows (`runs` oldest first, one group): the SD of
/// one run's matrix value (each run a fresh boot, its run factor whole, the cell terms averaged
/// over the matrix), from the median absolute successive difference (× `MAD_TO_SD` / √2, so a step
/// or a slow drift in the history moves it little), worth `0.37 (runs − 1)` degrees of freedom
/// (that estimator's efficiency), at most [`HISTORY_PRIOR_MAX_DF`]; of `metric`'s matrix
/// series, the bisected one. `None` with fewer than 6 runs.
pub fn history_prior(runs: &[RunResults], metric: Metric) -> Option<NoisePrior> {
    let (_, values) = series_of(runs, &Scope::Matrix, metric);
    let logs = build::positive_logs(values);
    if logs.len() < 6 {
        return None;
    }
    let mut diffs: Vec<f64> = logs.windows(2).map(|w| (w[1] - w[0]).abs()).collect();
    let sd = super::noise::mad_sd(&mut diffs) / std::f64::consts::SQRT_2;
    (sd.is_finite() && sd > 0.0).then(|| NoisePrior {
        sd: sd.max(BOOT_SD_FLOOR),
        df: (0.37 * (logs.len() - 1) as f64).min(HISTORY_PRIOR_MAX_DF),
    })
}

/// The posterior probability of each commit of `n` being the first bad one, from the boots'
/// matrix values. Given culprit `k`, a boot's value is `level + gap · [commit ≥ k] + noise`
/// (the known-good revision: `[·] = 0`; the known-bad, commit `n − 1`: 1) with the level, the
/// gap and the noise's SD unknown. Each `k` is weighted by its marginal likelihood with the
/// level and gap integrated out under flat priors and the SD under Jeffreys' prior,
/// `|XᵀX|^{−1/2} · (RSS_k + (N − 2) floor²)^{−(N − 2)/2}`, commits equally likely a priori:
/// the boots themselves measure the runner's noise (the good and bad replicates, booted
/// interleaved), as `ab` does. Uniform when fewer than 3 boots.
///
/// With a noise SD prior `prior` (scaled-inverse-χ² with `df` degrees of freedom at `sd`) the
/// weight is `|XᵀX|^{−1/2} · (RSS_k + (N − 2) floor² + df sd²)^{−(N − 2 + df)/2}`; `None` or
/// `df = 0`: Jeffreys' prior.
pub(crate) fn culprit_posterior(
    n: usize,
    boots: &[BootValue],
    prior: Option<NoisePrior>,
) -> Vec<f64> {
    let big_n = boots.len();
    if n == 0 {
        return Vec::new();
    }
    if big_n < 3 {
        return vec![1.0 / n as f64; n];
    }
    let df = (big_n - 2) as f64;
    let (pdf, pss) = prior_terms(prior);
    let power = (df + pdf) / 2.0;
    let floor = df * BOOT_SD_FLOOR.powi(2) + pss;
    let nf = big_n as f64;
    let sy: f64 = boots.iter().map(|b| b.value).sum();
    let logs: Vec<f64> = (0..n)
        .map(|k| {
            let x: Vec<f64> = boots
                .iter()
                .map(|b| f64::from(u8::from(b.commit.is_some_and(|c| c >= k))))
                .collect();
            let (sx, sxx) = (x.iter().sum::<f64>(), x.iter().map(|v| v * v).sum::<f64>());
            let sxy: f64 = boots.iter().zip(&x).map(|(b, xi)| b.value * xi).sum();
            let det = nf * sxx - sx * sx;
            if det <= 0.0 {
                // Every boot on one side of k: the gap is not identified; k is as likely as
                // the data without a gap say.
                let mean = sy / nf;
                let rss: f64 = boots.iter().map(|b| (b.value - mean).powi(2)).sum();
                return -0.5 * nf.ln() - power * (rss + floor).ln();
            }
            let gap = (nf * sxy - sx * sy) / det;
            let level = (sy - gap * sx) / nf;
            let rss: f64 = boots
                .iter()
                .zip(&x)
                .map(|(b, xi)| (b.value - level - gap * xi).powi(2))
                .sum();
            -0.5 * det.ln() - power * (rss + floor).ln()
        })
        .collect();
    let top = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let w: Vec<f64> = logs.iter().map(|l| (l - top).exp()).collect();
    let total: f64 = w.iter().sum();
    w.iter().map(|v| v / total).collect()
}

/// The commit whose boot halves the posterior best: the `r` with `P(culprit ≤ r)` nearest ½
/// (booting it answers "bad" with that probability), never the known-bad last commit unless
/// it is the only one.
pub(crate) fn next_commit(posterior: &[f64]) -> usize {
    let n = posterior.len();
    if n <= 1 {
        return 0;
    }
    let mut cdf = 0.0;
    let mut best = (0, f64::INFINITY);
    for (r, p) in posterior.iter().enumerate().take(n - 1) {
        cdf += p;
        let d = (cdf - 0.5).abs();
        if d < best.1 - 1e-12 {
            best = (r, d);
        }
    }
    best.0
}

/// The gap between the good and the bad boots (mean of the bad values − mean of the good
/// ones, log units) and its two-sided Student-t interval at `confidence` over the pooled
/// boot-to-boot SD (at least [`BOOT_SD_FLOOR`]); `None` with fewer than one boot a side or
/// fewer than 3 in all. A noise SD prior's `df` add to the pooled SD's and the t's degrees of
/// freedom.
pub(crate) fn end_gap(
    boots: &[BootValue],
    bad: usize,
    confidence: f64,
    prior: Option<NoisePrior>,
) -> Option<(f64, f64, f64)> {
    let good: Vec<f64> = boots
        .iter()
        .filter(|b| b.commit.is_none())
        .map(|b| b.value)
        .collect();
    let worse: Vec<f64> = boots
        .iter()
        .filter(|b| b.commit == Some(bad))
        .map(|b| b.value)
        .collect();
    let (n1, n2) = (good.len(), worse.len());
    if n1 == 0 || n2 == 0 || n1 + n2 < 3 {
        return None;
    }
    let (m1, m2) = (mean(&good), mean(&worse));
    let ss: f64 = good.iter().map(|v| (v - m1).powi(2)).sum::<f64>()
        + worse.iter().map(|v| (v - m2).powi(2)).sum::<f64>();
    let (pdf, pss) = prior_terms(prior);
    let df = (n1 + n2 - 2) as f64 + pdf;
    let sd = ((ss + pss) / df).sqrt().max(BOOT_SD_FLOOR);
    let se = sd * (1.0 / n1 as f64 + 1.0 / n2 as f64).sqrt();
    let t = t_quantile(0.5 + confidence / 2.0, df);
    Some((m2 - m1, m2 - m1 - t * se, m2 - m1 + t * se))
}

/// What one boot of a bisection measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BootRole {
    /// The known-good revision (`--good`).
    Good,
    /// The known-bad revision (`--bad`).
    Bad,
    /// A commit between them.
    Step,
}

impl BootRole {
    /// The word written in `bisect.json` and the report.
    pub fn as_str(self) -> &'static str {
        match self {
            BootRole::Good => "good",
            BootRole::Bad => "bad",
            BootRole::Step => "step",
        }
    }
}

/// One boot of a bisection, in the order they ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BisectBoot {
    /// 1-based boot number.
    pub boot: u32,
    /// The revision booted.
    pub rev: String,
    /// Why it was booted (the good or bad end, or a step).
    pub role: BootRole,
    /// The build's output (`{build}`), when the build ran.
    pub build: Option<String>,
    /// The boot's results file, relative to the output directory.
    pub results: Option<String>,
    /// Cells measured `ok`.
    pub cells_measured: usize,
    /// Seconds from spawn to ready, when the engine became ready.
    pub boot_s: Option<f64>,
    /// Why the build or boot failed.
    pub failure: Option<String>,
}

/// One intermediate commit asked about, and the answer its boots gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BisectStep {
    /// The commit asked about.
    pub rev: String,
    /// 1-based position in the commit list.
    pub index: usize,
    /// The boots (numbers) pooled for the answer.
    pub boots: Vec<u32>,
    /// What its boots showed.
    pub evidence: StepEvidence,
    /// Commits still suspected after this answer (first, last: 1-based, inclusive).
    pub suspects: (usize, usize),
}

/// The first bad commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Culprit {
    /// The first bad commit.
    pub rev: String,
    /// 1-based position in the commit list.
    pub index: usize,
    /// The commit before it (the last good one; `--good` when it is the first).
    pub last_good: String,
}

/// A whole bisection: `bisect.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BisectRecord {
    /// The known-good revision (`--good`).
    pub good: String,
    /// The known-bad revision (`--bad`).
    pub bad: String,
    /// The suite measured at every boot.
    pub suite: String,
    /// The commits after good up to bad, oldest first (`[bisect] revs`).
    pub commits: Vec<String>,
    /// Every cell compared between good and bad; the moved ones are the ones measured at steps.
    pub cells: Vec<CellMove>,
    /// Every boot, in the order they ran.
    pub boots: Vec<BisectBoot>,
    /// Every step, in the order they were asked.
    pub steps: Vec<BisectStep>,
    /// The first bad commit, when the bisection found one.
    pub culprit: Option<Culprit>,
    /// Why the bisection stopped without a culprit.
    pub failure: Option<String>,
    /// Commits still suspected when it stopped (all of them before the first answer).
    pub suspects: Vec<String>,
    /// The culprit posterior when it stopped ([`culprit_posterior`]): each commit with a
    /// probability of at least 0.1% of being the first bad one, most likely first.
    #[serde(default)]
    pub suspect_probabilities: Vec<(String, f64)>,
    /// Engine-seconds spent: every boot's build, boot, measurement and teardown.
    #[serde(default)]
    pub engine_s: f64,
    /// The boot noise's prior from the baseline history (`bisect --from-change`), when one
    /// was read ([`history_prior`]); else the boots alone measure it.
    #[serde(default)]
    pub noise_prior: Option<NoisePrior>,
    /// The metric bisected (`--metric`): each boot's matrix value is its. Files of older
    /// versions bisected aggregate tok/s.
    #[serde(default = "aggregate_tps")]
    pub metric: Metric,
}

/// [`BisectRecord::metric`] of files that do not name one.
fn aggregate_tps() -> Metric {
    Metric::AggregateTps
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_schema::results::CellResult;

    /// A run of the synthetic 20-cell profile at `factor` times its levels, sub-windows of 1%.
    fn run(factor: f64) -> RunResults {
        let mut rng = rand::SeedableRng::seed_from_u64((factor * 1e6) as u64);
        crate::synthetic::synthetic_run("r", &mut rng, 0.0, 0.0, &|_| factor)
    }

    fn settings() -> BisectSettings {
        BisectSettings {
            noise_cv: 0.03,
            min_effect: 0.03,
            confidence: 0.999,
        }
    }

    /// Each boot's matrix value is the bisected metric's: a tail ×1.5 in every cell reads
    /// ln 1.5 on ITL p99 and nothing on tok/s, and a boot whose tail the gate's probe read the
    /// host late on gives none (it is booted again, never compared).
    #[test]
    fn a_boots_matrix_value_is_the_bisected_metrics() {
        let tail = |p99: f64, late: f64| {
            let mut r = run(1.0);
            for c in &mut r.cells {
                crate::synthetic::set_itl_tail(c, p99, late);
            }
            r
        };
        let (good, bad) = (tail(0.02, 0.02), tail(0.03, 0.02));
        let itl = matrix_value(&bad, &good, Metric::ItlP99).expect("tails");
        assert!((itl - 1.5f64.ln()).abs() < 1e-12, "{itl}");
        let tps = matrix_value(&bad, &good, Metric::AggregateTps).expect("tok/s");
        assert!(tps.abs() < 1e-12, "{tps}");
        assert_eq!(matrix_value(&tail(0.03, 0.3), &good, Metric::ItlP99), None);
        assert_eq!(matrix_value(&bad, &good, Metric::PrefillTps), None);
    }

    #[test]
    fn a_large_step_moves_every_cell() {
        let s = settings();
        let all = moved_cells(&[run(1.0)], &[run(1.0 / 1.5)], &s);
        assert_eq!(all.len(), 20);
        assert!(all.iter().all(|c| c.moved));
        assert!(
            all.iter()
                .all(|c| c.change.is_some_and(|d| (d + 1.0 / 3.0).abs() < 0.02))
        );
    }

    #[test]
    fn unchanged_and_unmeasured_cells_do_not_move() {
        let s = settings();
        let good = vec![run(1.0)];
        let mut bad = vec![run(1.0)];
        bad[0].cells[0].aggregate_tps *= 0.6;
        bad[0].cells[1] = CellResult::unmeasured(
            bad[0].cells[1].concurrency,
            bad[0].cells[1].context_tokens,
            CellStatus::Error,
            "boom",
        );
        let all = moved_cells(&good, &bad, &s);
        assert_eq!(all.iter().filter(|c| c.moved).count(), 1);
        assert_eq!(all.iter().filter(|c| c.change.is_none()).count(), 1);
        assert!(!all[2].moved);
    }

    fn bv(commit: Option<usize>, value: f64) -> BootValue {
        BootValue { commit, value }
    }

    #[test]
    fn the_posterior_finds_a_three_percent_step_from_a_few_boots() {
        // 32 commits, culprit 20, a −3% gap, boot noise 0.3%: good, bad, bad, good, then the
        // halving boots (16: good, 24: bad, 20: bad, 18: good, 19: good).
        let gap = (0.97f64).ln();
        let noise = [
            0.001, -0.002, 0.003, -0.001, 0.002, -0.003, 0.001, 0.0, -0.002,
        ];
        let plan = [
            None,
            Some(31),
            Some(31),
            None,
            Some(16),
            Some(24),
            Some(20),
            Some(18),
            Some(19),
        ];
        let boots: Vec<BootValue> = plan
            .iter()
            .zip(noise)
            .map(|(c, e)| bv(*c, e + if c.is_some_and(|c| c >= 20) { gap } else { 0.0 }))
            .collect();
        let (g, lo, hi) = end_gap(&boots[..4], 31, 0.95, None).unwrap();
        assert!(
            (g - gap).abs() < 0.005 && hi < 0.0 && lo < g,
            "{g} {lo} {hi}"
        );
        let p = culprit_posterior(32, &boots[..4], None);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        assert_eq!(next_commit(&p), 15, "the middle of 32: {p:?}");
        let p = culprit_posterior(32, &boots, None);
        let (best, pb) = p
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .unwrap();
        assert_eq!(best, 20, "{p:?}");
        assert!(*pb > 0.999, "{pb}");
        // Before the last boot, 19 and 20 share the posterior.
        let p = culprit_posterior(32, &boots[..8], None);
        assert!(p[19] > 0.2 && p[20] > 0.2 && p[19] + p[20] > 0.99, "{p:?}");
        assert_eq!(next_commit(&p), 19);
    }

    #[test]
    fn a_gap_the_noise_could_make_leaves_the_posterior_wide() {
        // −0.5% against 1% boot noise after two pairs: no commit stands out.
        let boots = [
            bv(None, 0.01),
            bv(Some(31), -0.012),
            bv(Some(31), 0.004),
            bv(None, -0.008),
        ];
        let (_, lo, hi) = end_gap(&boots, 31, 0.999, None).unwrap();
        assert!(lo < 0.0 && hi > 0.0);
        let p = culprit_posterior(32, &boots, None);
        assert!(p.iter().all(|v| *v < 0.2), "{p:?}");
        assert_eq!(culprit_posterior(4, &boots[..2], None), vec![0.25; 4]);
    }

    #[test]
    fn a_history_gives_the_boot_noise_prior_a_step_in_it_does_not_inflate() {
        let mut rng = rand::SeedableRng::seed_from_u64(3);
        // 40 nightly runs, 1% run factor, 2% per cell (0.45% over 20 cells), −3% from run 25.
        let runs: Vec<RunResults> = (0..40)
            .map(|i| {
                let f = if i >= 25 { 0.97 } else { 1.0 };
                crate::synthetic::synthetic_run(&format!("n{i}"), &mut rng, 0.01, 0.02, &|_| f)
            })
            .collect();
        let p = history_prior(&runs, Metric::AggregateTps).expect("prior");
        assert!((0.007..0.016).contains(&p.sd), "{p:?}");
        assert!((p.df - HISTORY_PRIOR_MAX_DF).abs() < 1e-9, "{p:?}");
        assert_eq!(history_prior(&runs[..5], Metric::AggregateTps), None);
        // A 6-run history is worth less than 2 degrees of freedom.
        assert!(history_prior(&runs[..6], Metric::AggregateTps).is_some_and(|p| p.df < 2.0));
    }

    #[test]
    fn a_small_change_below_min_effect_is_not_a_move() {
        let mut s = settings();
        s.noise_cv = 0.001;
        let all = moved_cells(&[run(1.0)], &[run(0.99)], &s);
        assert!(all.iter().all(|c| !c.moved));
    }
}
