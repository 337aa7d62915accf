//! The series' noise model as generalised least squares: white run noise of SD `w` plus the
//! runner's random-walk drift of SD `d` per run (the local-level model of
//! `docs/changes.md`). Two things need it beyond a rank test:
//!
//! - the **creep test** ([`creep_scan`]): is the series declining at its newest runs, more
//!   than the drift's own wander explains? A slow decline is its own alternative: a hinge
//!   (flat, then a straight decline from an onset to the newest run), its slope tested by its
//!   GLS z, the most negative over the onsets against a threshold;
//! - the **location interval** ([`location_interval`]): how sure the history is of *where* a
//!   step (or a creep's onset) is: the posterior of the location over the runs, from the GLS
//!   likelihood of each candidate place with the levels (and slope) integrated out under flat
//!   priors, and the shortest run of places holding `confidence` of it.
//!
//! Outlier runs (a throttled night, −8%) would dominate a least-squares fit: runs more than
//! [`OUTLIER_SD`] noise SDs off the running median of five are left out of both.

use super::{CREEP_MIN_FLAT, CREEP_MIN_RUNS, ChangeKind, median, robust_sd};

/// Runs this many noise SDs off the running median of five are left out of the GLS fits.
const OUTLIER_SD: f64 = 4.0;

/// The white run noise `w` for the creep test: the SD of the successive differences (centred
/// on their median) that lie within 3.5 robust SDs of it, `Var = 2 w² + d²` with the drift `d`
/// taken out. The MAD of the differences (`noise_sd`, 37% efficient) is robust but its ≈ 16%
/// relative error at 60 runs makes the creep z's null wider than N(0, 1) (a history whose `w`
/// came out low alerts on several nights); the trimmed SD is nearly efficient (≈ 10%) and the
/// trim still drops an outlier run's two differences. `None` with fewer than 6 runs.
pub(crate) fn white_sd(logs: &[f64], d: f64) -> Option<f64> {
    if logs.len() < 6 {
        return None;
    }
    let diffs: Vec<f64> = logs.windows(2).map(|w| w[1] - w[0]).collect();
    let centre = median(&mut diffs.clone());
    let robust = robust_sd(&diffs);
    if robust.is_nan() || robust <= 0.0 {
        return None;
    }
    let kept: Vec<f64> = diffs
        .iter()
        .map(|x| x - centre)
        .filter(|x| x.abs() <= 3.5 * robust)
        .collect();
    let n = kept.len() as f64;
    // A normal truncated at ±3.5 SD keeps 99.5% of its variance.
    let var = kept.iter().map(|x| x * x).sum::<f64>() / (n - 1.0).max(1.0) / 0.9951;
    Some(((var - d * d) / 2.0).max(var / 8.0).sqrt())
}

/// A whitened design over the kept runs (positions relative to the first): the covariance
/// `w² I + d² min(t_i, t_j)` is a local-level model (white noise around a random walk that
/// starts at the first kept run), so its Cholesky factor's `L⁻¹ v` is the Kalman filter's
/// standardised one-step prediction errors of `v`: O(n) per vector and memory, where the
/// `n × n` factor was O(n³) to build (a 2,000-run stretch took seconds, 10,000 runs 800 MB).
struct Whitened {
    /// Positions (in the series) of the kept runs.
    pos: Vec<usize>,
    /// Per kept run: the SD of its prediction error (`L`'s diagonal) and the filter's gain.
    pred_sd: Vec<f64>,
    gain: Vec<f64>,
    one: Vec<f64>,
    y: Vec<f64>,
    /// `Σ ln pred_sd`: `ln det L`, the covariance's share of the likelihood's normaliser
    /// (models over different runs are compared in [`location_interval`]).
    ln_sd: f64,
}

impl Whitened {
    /// The model of `logs[a..b]` with outlier runs left out; `None` when fewer than 4 runs stay
    /// or the covariance is singular (`w` 0).
    fn new(logs: &[f64], a: usize, b: usize, w: f64, d: f64) -> Option<Whitened> {
        Whitened::over(logs, kept(logs, a, b, w), w, d)
    }

    /// The model of the runs at `pos` (increasing positions in `logs`).
    fn over(logs: &[f64], pos: Vec<usize>, w: f64, d: f64) -> Option<Whitened> {
        let n = pos.len();
        if n < 4 {
            return None;
        }
        let (mut pred_sd, mut gain) = (Vec::with_capacity(n), Vec::with_capacity(n));
        // The level's variance given the runs before (0 at the first: the walk starts there).
        let mut p = 0.0;
        for i in 0..n {
            if i > 0 {
                p += d * d * (pos[i] - pos[i - 1]) as f64;
            }
            let f = p + w * w;
            if f <= 1e-300 {
                return None;
            }
            pred_sd.push(f.sqrt());
            gain.push(p / f);
            p *= w * w / f;
        }
        let ln_sd = pred_sd.iter().map(|s| s.ln()).sum();
        let mut m = Whitened {
            pos,
            pred_sd,
            gain,
            one: Vec::new(),
            y: Vec::new(),
            ln_sd,
        };
        m.one = m.whiten(&vec![1.0; n]);
        m.y = m.whiten(&m.pos.iter().map(|&p| logs[p]).collect::<Vec<_>>());
        Some(m)
    }

    /// `L⁻¹ v`: each value's prediction error from the ones before it, over its SD.
    fn whiten(&self, v: &[f64]) -> Vec<f64> {
        let mut level = 0.0;
        v.iter()
            .zip(self.pred_sd.iter().zip(&self.gain))
            .map(|(x, (sd, k))| {
                let e = x - level;
                level += k * e;
                e / sd
            })
            .collect()
    }

    /// The GLS fit of `level + beta × x` (`x` over the kept runs, in their order): (beta, its
    /// SD, the generalised residual sum of squares, ln det of the whitened normal matrix).
    fn fit(&self, x: &[f64]) -> Option<Fit> {
        let xw = self.whiten(x);
        let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(p, q)| p * q).sum::<f64>();
        let (a11, a12, a22) = (
            dot(&self.one, &self.one),
            dot(&self.one, &xw),
            dot(&xw, &xw),
        );
        let (b1, b2) = (dot(&self.one, &self.y), dot(&xw, &self.y));
        let det = a11 * a22 - a12 * a12;
        if det <= 1e-12 * a11 * a22.max(1e-300) {
            return None;
        }
        let beta = (a11 * b2 - a12 * b1) / det;
        let level = (a22 * b1 - a12 * b2) / det;
        let q = dot(&self.y, &self.y) - level * b1 - beta * b2;
        Some(Fit {
            beta,
            sd: (a11 / det).sqrt(),
            rss: q.max(0.0),
            ln_det: det.ln(),
        })
    }
}

impl Whitened {
    /// Per place, the log marginal likelihood of the runs with a change of `kind` there, the
    /// level and the change integrated out under flat priors: `−(n−2)/2 ln 2π − ln det L −
    /// ln det(XᵀΣ⁻¹X)/2 − RSS/2` (`None` where the fit is singular). Comparable across
    /// models over different runs, which the mixture over outlier runs needs.
    fn place_evidence(&self, places: &[usize], kind: ChangeKind) -> Vec<Option<f64>> {
        let free = self.pos.len() as f64 - 2.0;
        let norm = -0.5 * free * (2.0 * std::f64::consts::PI).ln() - self.ln_sd;
        places
            .iter()
            .map(|&tau| {
                let x = match kind {
                    ChangeKind::Step => step(&self.pos, tau),
                    ChangeKind::Creep => hinge(&self.pos, tau),
                };
                self.fit(&x).map(|f| norm - f.ln_det / 2.0 - f.rss / 2.0)
            })
            .collect()
    }

    /// Per place, the log evidence that the change's first run is there, whatever its shape.
    /// A step's place is weighed as a step *or* as the onset of a creep that runs to the newest
    /// run: a few runs after a step, a creep that began some runs before it fits them as well,
    /// and a creep first told as a step (binary segmentation splits a young creep where its
    /// mean moved, inside it) had an interval after its onset: the first alert's 90% interval
    /// held a −0.3%/night creep's onset in 61.5% of `changes-eval`'s matrix histories and in
    /// 45% of one cell's. The two shapes are compared on the same size, the change so far (a
    /// step's size; a hinge's slope times its runs, hence `+ ln runs`), with equal priors, for
    /// onsets within [`STEP_OR_CREEP_RUNS`] of the newest run. A creep keeps its own evidence.
    fn first_run_evidence(&self, places: &[usize], kind: ChangeKind) -> Vec<Option<f64>> {
        let own = self.place_evidence(places, kind);
        if kind == ChangeKind::Creep {
            return own;
        }
        let newest = self.pos.last().map_or(0, |p| p + 1);
        let creep = self.place_evidence(places, ChangeKind::Creep);
        own.into_iter()
            .zip(creep)
            .zip(places)
            .map(|((step_e, creep_e), &tau)| {
                let runs = newest.saturating_sub(tau).max(1);
                let creep_e = creep_e
                    .filter(|_| runs <= STEP_OR_CREEP_RUNS)
                    .map(|e| e + (runs as f64).ln());
                log_add(step_e, creep_e)
            })
            .collect()
    }
}

/// How far back from the newest run a step's place is also weighed as a creep's onset
/// ([`Whitened::first_run_evidence`]): the creep test's default window. An older step has
/// shown it stays flat after it; without the bound, hinges from far before a step kept weight
/// 19 runs after it (`changes-eval`: a −3% matrix step's interval at night 59 was 26 runs wide
/// at the 90th percentile, against 5 without the mixture and 12 with the bound).
const STEP_OR_CREEP_RUNS: usize = super::CREEP_WINDOW;

/// One GLS fit of a level plus one regressor.
#[derive(Debug)]
struct Fit {
    beta: f64,
    sd: f64,
    rss: f64,
    ln_det: f64,
}

/// Positions in `a..b` that are not outlier runs: within [`OUTLIER_SD`] × `w` of the median of
/// five runs around them (at the ends of the range, the five nearest: two throttled nights
/// at the newest runs are outliers, not a level).
fn kept(logs: &[f64], a: usize, b: usize, w: f64) -> Vec<usize> {
    let limit = OUTLIER_SD * w;
    (a..b)
        .filter(|&i| {
            limit <= 0.0 || limit.is_nan() || (logs[i] - local_median(logs, a, b, i)).abs() <= limit
        })
        .collect()
}

/// The median of the five runs of `logs[a..b]` around `i` (at the ends of the range, the five
/// nearest).
fn local_median(logs: &[f64], a: usize, b: usize, i: usize) -> f64 {
    let lo = i.saturating_sub(2).max(a).min(b.saturating_sub(5).max(a));
    let hi = (lo + 5).min(b);
    median(&mut logs[lo..hi].to_vec())
}

/// The hinge regressor of onset `tau` over positions: 0 before, `t − tau + 1` from it on.
pub(super) fn hinge(pos: &[usize], tau: usize) -> Vec<f64> {
    pos.iter()
        .map(|&t| if t >= tau { (t + 1 - tau) as f64 } else { 0.0 })
        .collect()
}

/// The step regressor at `tau`: 0 before, 1 from it on.
fn step(pos: &[usize], tau: usize) -> Vec<f64> {
    pos.iter().map(|&t| f64::from(u8::from(t >= tau))).collect()
}

/// The creep test's answer: the onset with the most negative slope z.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct CreepScan {
    /// First run that moved.
    pub onset: usize,
    /// Slope per run (log units) and its SD under the model.
    pub slope: f64,
    pub sd: f64,
    /// `slope / sd`: negative = declining.
    pub z: f64,
}

/// The creep test over `logs[a..]`: for every onset leaving at least [`CREEP_MIN_FLAT`] kept
/// runs before it and [`CREEP_MIN_RUNS`] from it to the newest run (and at most `max_runs`),
/// the GLS slope of the hinge and its z; the onset with the most negative z. `None` when no
/// onset fits.
pub(crate) fn creep_scan(
    logs: &[f64],
    a: usize,
    w: f64,
    d: f64,
    max_runs: usize,
) -> Option<CreepScan> {
    let b = logs.len();
    let m = Whitened::new(logs, a, b, w, d)?;
    let mut best: Option<CreepScan> = None;
    let first = m.pos.get(CREEP_MIN_FLAT).copied()?;
    for tau in first.max(b.saturating_sub(max_runs))..=b.saturating_sub(CREEP_MIN_RUNS) {
        let Some(f) = m.fit(&hinge(&m.pos, tau)) else {
            continue;
        };
        let z = f.beta / f.sd;
        if best.is_none_or(|c| z < c.z) {
            best = Some(CreepScan {
                onset: tau,
                slope: f.beta,
                sd: f.sd,
                z,
            });
        }
    }
    best
}

/// Whether the decline [`creep_scan`] found over `logs[a..]` is better told as a step: the
/// GLS evidence of the likeliest step from the scan's first onset to the newest run against
/// the likeliest hinge over the scan's onsets (one regressor each), the step needing
/// [`STEP_EVIDENCE`] more. A step a few nights old is a steep young decline to the hinge,
/// which placed it some runs early (at night 43 a −3% step at 40 was "a creep since 36" in
/// 10% of `changes-eval`'s histories). The step's place and its GLS z when the step wins.
pub(crate) fn step_over_hinge(
    logs: &[f64],
    a: usize,
    w: f64,
    d: f64,
    max_runs: usize,
) -> Option<(usize, f64)> {
    let b = logs.len();
    let m = Whitened::new(logs, a, b, w, d)?;
    let first = m
        .pos
        .get(CREEP_MIN_FLAT)
        .copied()?
        .max(b.saturating_sub(max_runs));
    let onsets: Vec<usize> = (first..=b.saturating_sub(CREEP_MIN_RUNS)).collect();
    let places: Vec<usize> = (first..b).collect();
    let hinge_e = m
        .place_evidence(&onsets, ChangeKind::Creep)
        .into_iter()
        .flatten()
        .reduce(f64::max)?;
    let (at, step_e) = places
        .iter()
        .zip(m.place_evidence(&places, ChangeKind::Step))
        .filter_map(|(&p, e)| e.map(|e| (p, e)))
        .max_by(|x, y| x.1.total_cmp(&y.1))?;
    if step_e <= hinge_e + STEP_EVIDENCE {
        return None;
    }
    let f = m.fit(&step(&m.pos, at))?;
    Some((at, f.beta / f.sd))
}

/// How much likelier (log evidence) a step must be than a hinge for [`step_over_hinge`]: at 1.1%
/// noise, of young declines a 12-run −0.5%/night creep is told as a step 13 times in 100 (25
/// at 0, 5 at 2) and a 4-night −4% step as a creep 8 times (3 at 0, 16 at 2); `changes-eval`'s
/// figures moved by at most 1 point between 0, 1 and 2.
const STEP_EVIDENCE: f64 = 1.0;

/// The location interval of a change of `kind` in `logs[a..b]` (`a..b` the stretch between
/// its neighbouring changes): candidate places leave `min_seg` runs before and from them;
/// each place's posterior weight is its GLS likelihood with the level and the step (or slope)
/// integrated out under flat priors, `exp(−RSS/2) / sqrt(det)`, the places weighted equally
/// a priori; the answer is the shortest run of consecutive places holding at least
/// `confidence` of the weight (of two as short, the heavier), the estimate `at` included
/// (first, last place; both positions in the series). `None` when the stretch is too short to
/// fit.
///
/// Runs are not all Gaussian: a throttled night inside [`OUTLIER_SD`] (−8% beside a −3% step,
/// the night before it) pulled the whole weight onto its own place, and the interval held the
/// true place in 64% of such histories where 90% was claimed. So the weight of a place is
/// averaged over the models "every run is regular" and "the runs of `S` are outliers" (each
/// with prior share [`OUTLIER_PRIOR`] or the matrix's, its value spread [`OUTLIER_SCALE`] noise
/// SDs around its neighbours' median) for every subset `S` of the suspects: runs near the
/// Gaussian interval more than [`SUSPECT_SD`] noise SDs off their neighbours (at most
/// [`MAX_SUSPECTS`]). Subsets, not each suspect alone: with two outlier nights side by side
/// before a step, leaving out either one lets the other take the step's place. A regular run's
/// leave-out weight is negligible, so on the model's own histories the interval does not change.
#[allow(clippy::too_many_arguments)]
pub(crate) fn location_interval(
    logs: &[f64],
    a: usize,
    b: usize,
    at: usize,
    kind: ChangeKind,
    w: f64,
    d: f64,
    min_seg: usize,
    confidence: f64,
    outlier_prior: &[f64],
) -> Option<(usize, usize)> {
    let m = Whitened::new(logs, a, b, w, d)?;
    let lo = a + min_seg;
    let hi = b.saturating_sub(min_seg);
    if lo > hi {
        return None;
    }
    let places: Vec<usize> = (lo..=hi).collect();
    let mut logw = m.first_run_evidence(&places, kind);
    let (first, last) = shortest(&places, &logw, at, confidence)?;
    let near = first.saturating_sub(SUSPECT_REACH)..=last + SUSPECT_REACH;
    // A night the matrix series marks as an outlier is one here, however this series' noise
    // hides it; else the run's own distance from its neighbours decides.
    let prior_of = |j: usize| {
        outlier_prior
            .get(j)
            .copied()
            .unwrap_or(0.0)
            .clamp(OUTLIER_PRIOR, 0.99)
    };
    let mut suspects: Vec<(usize, f64)> = m
        .pos
        .iter()
        .copied()
        .filter(|&j| {
            near.contains(&j)
                && (prior_of(j) > OUTLIER_PRIOR
                    || (logs[j] - local_median(logs, a, b, j)).abs() > SUSPECT_SD * w)
        })
        .map(|j| {
            // ln(prior odds × the run's density as an outlier): what leaving it out weighs.
            let spread = OUTLIER_SCALE * w;
            let z = (logs[j] - local_median(logs, a, b, j)) / spread;
            let odds = (prior_of(j) / (1.0 - prior_of(j))).ln()
                - 0.5 * z * z
                - spread.ln()
                - 0.5 * (2.0 * std::f64::consts::PI).ln();
            (j, odds)
        })
        .collect();
    // Outlier nights come in pairs too (a throttled night beside the one before a step): every
    // subset of the likeliest suspects is a model, not each suspect alone.
    suspects.sort_by(|x, y| y.1.total_cmp(&x.1));
    suspects.truncate(MAX_SUSPECTS);
    for subset in 1u32..(1 << suspects.len()) {
        let out: Vec<(usize, f64)> = (0..suspects.len())
            .filter(|k| subset & (1 << k) != 0)
            .map(|k| suspects[k])
            .collect();
        let pos = m
            .pos
            .iter()
            .copied()
            .filter(|p| out.iter().all(|o| o.0 != *p))
            .collect();
        let Some(without) = Whitened::over(logs, pos, w, d) else {
            continue;
        };
        let prior: f64 = out.iter().map(|o| o.1).sum();
        for (total, e) in logw
            .iter_mut()
            .zip(without.first_run_evidence(&places, kind))
        {
            *total = log_add(*total, e.map(|e| e + prior));
        }
    }
    shortest(&places, &logw, at, confidence)
}

/// Prior share of outlier runs in [`location_interval`]'s mixture (one night in 20).
const OUTLIER_PRIOR: f64 = 0.05;
/// An outlier run's spread around its neighbours' median, in white-noise SDs.
const OUTLIER_SCALE: f64 = 8.0;
/// Runs this many noise SDs off their neighbours' median are tried as outliers: below it a
/// leave-out model's weight (`OUTLIER_PRIOR / OUTLIER_SCALE · e^{z²/2}`) is under 2%.
const SUSPECT_SD: f64 = 2.5;
/// At most this many suspects enter [`location_interval`]'s mixture (the likeliest outliers):
/// each subset of them is one model, so 2^4 − 1 fits beside the Gaussian one.
const MAX_SUSPECTS: usize = 4;
/// How many runs beyond the Gaussian interval a suspect may lie and still move it.
const SUSPECT_REACH: usize = 3;

/// Per run, the posterior probability that it is an outlier under [`location_interval`]'s
/// mixture (prior [`OUTLIER_PRIOR`], spread [`OUTLIER_SCALE`] noise SDs `w`), from its distance
/// to its neighbours' median: a whole-night outlier is plain on the matrix series, so the
/// cells' intervals learn it there.
pub(crate) fn outlier_posterior(logs: &[f64], w: f64) -> Vec<f64> {
    (0..logs.len())
        .map(|j| {
            if logs.len() < 5 || w.is_nan() || w <= 0.0 {
                return 0.0;
            }
            let z = (logs[j] - local_median(logs, 0, logs.len(), j)) / w;
            let odds = OUTLIER_PRIOR / (1.0 - OUTLIER_PRIOR) / OUTLIER_SCALE
                * (0.5 * z * z * (1.0 - 1.0 / (OUTLIER_SCALE * OUTLIER_SCALE)))
                    .min(700.0)
                    .exp();
            odds / (1.0 + odds)
        })
        .collect()
}

/// `ln(e^x + e^y)` where a missing term is no weight.
fn log_add(x: Option<f64>, y: Option<f64>) -> Option<f64> {
    match (x, y) {
        (Some(x), Some(y)) => {
            let top = x.max(y);
            Some(top + ((x - top).exp() + (y - top).exp()).ln())
        }
        (x, None) => x,
        (None, y) => y,
    }
}

/// The shortest run of consecutive `places` holding `confidence` of the weight `exp(logw)`,
/// the place nearest `at` included (of two as short, the heavier); all places when rounding
/// leaves none; `None` when no place has a weight.
fn shortest(
    places: &[usize],
    logw: &[Option<f64>],
    at: usize,
    confidence: f64,
) -> Option<(usize, usize)> {
    let top = logw
        .iter()
        .flatten()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max);
    if !top.is_finite() {
        return None;
    }
    let weight: Vec<f64> = logw
        .iter()
        .map(|l| l.map_or(0.0, |l| (l - top).exp()))
        .collect();
    let total: f64 = weight.iter().sum();
    // The estimate's place (or the nearest fitted one) must lie in the interval.
    let anchor = (0..places.len())
        .filter(|&i| logw[i].is_some())
        .min_by_key(|&i| places[i].abs_diff(at))?;
    let fitted: Vec<usize> = (0..places.len()).filter(|&i| logw[i].is_some()).collect();
    let mut best: Option<(usize, usize, f64)> = None;
    for &i in fitted.iter().filter(|&&i| i <= anchor) {
        let mut mass = 0.0;
        for &j in fitted.iter().filter(|&&j| j >= i) {
            mass += weight[j] / total;
            if j < anchor {
                continue;
            }
            if mass >= confidence - 1e-12 {
                let width = places[j] - places[i];
                if best.is_none_or(|(bi, bj, bm)| {
                    let bw = places[bj] - places[bi];
                    width < bw || (width == bw && mass > bm)
                }) {
                    best = Some((i, j, mass));
                }
                break;
            }
        }
    }
    // Not even every place holds `confidence` around the anchor (rounding): all fitted ones.
    let (i, j) = best.map_or((fitted[0], fitted[fitted.len() - 1]), |(i, j, _)| (i, j));
    Some((places[i], places[j]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Noise alternating `+sd`, `−sd` from run 0.
    fn zigzag(t: usize, sd: f64) -> f64 {
        if t.is_multiple_of(2) { sd } else { -sd }
    }

    /// 40 runs with a step of `step` at run 25, plus a fixed pseudo-random noise spread
    /// evenly over `±amplitude`.
    fn noisy_step(amplitude: f64, step: f64) -> Vec<f64> {
        (0..40)
            .map(|t: usize| {
                let noise = amplitude * (((t * 7919) % 13) as f64 / 6.0 - 1.0);
                noise + if t >= 25 { step } else { 0.0 }
            })
            .collect()
    }

    /// A hinge's level at run `t`: 0 before `onset`, then `slope` a run (the onset moved).
    fn ramp(t: usize, onset: usize, slope: f64) -> f64 {
        if t >= onset {
            slope * (t + 1 - onset) as f64
        } else {
            0.0
        }
    }

    #[test]
    fn gls_without_drift_is_least_squares() {
        // Level 1, slope 0.02 from onset 4 on, no noise: the fit is exact.
        let logs: Vec<f64> = (0..10).map(|t| 1.0 + ramp(t, 4, 0.02)).collect();
        let m = Whitened::new(&logs, 0, 10, 0.1, 0.0).unwrap();
        assert_eq!(m.pos.len(), 10);
        let f = m.fit(&hinge(&m.pos, 4)).unwrap();
        assert!((f.beta - 0.02).abs() < 1e-9 && f.rss < 1e-12, "{f:?}");
        // The slope's SD is w / sqrt(Sxx) of ordinary least squares.
        let x = hinge(&m.pos, 4);
        let mean = x.iter().sum::<f64>() / 10.0;
        let sxx: f64 = x.iter().map(|v| (v - mean).powi(2)).sum();
        assert!((f.sd - 0.1 / sxx.sqrt()).abs() < 1e-9, "{}", f.sd);
    }

    #[test]
    fn the_kalman_whitening_is_the_cholesky_factors() {
        // `L⁻¹ v` by forward substitution on the dense Cholesky factor of the covariance
        // `w² I + d² min(t_i, t_j)`, with a gap where an outlier run was left out.
        let mut logs: Vec<f64> = (0..12)
            .map(|t| zigzag(t, 0.01) + 0.002 * t as f64)
            .collect();
        logs[6] = -0.2;
        let (w, d) = (0.01, 0.004);
        let m = Whitened::new(&logs, 0, 12, w, d).unwrap();
        let (pos, n) = (&m.pos, m.pos.len());
        assert_eq!(n, 11);
        let mut chol = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..=i {
                let mut s = d * d * (pos[j] - pos[0]) as f64 + if i == j { w * w } else { 0.0 };
                for k in 0..j {
                    s -= chol[i * n + k] * chol[j * n + k];
                }
                chol[i * n + j] = if i == j {
                    s.sqrt()
                } else {
                    s / chol[j * n + j]
                };
            }
        }
        let v: Vec<f64> = pos.iter().map(|&p| logs[p]).collect();
        let mut dense = vec![0.0; n];
        for i in 0..n {
            let s: f64 = (0..i).map(|k| chol[i * n + k] * dense[k]).sum();
            dense[i] = (v[i] - s) / chol[i * n + i];
        }
        for (k, f) in m.whiten(&v).iter().zip(&dense) {
            assert!((k - f).abs() < 1e-9 * f.abs().max(1.0), "{k} {f}");
        }
    }

    #[test]
    fn an_outlier_run_is_left_out() {
        let mut logs: Vec<f64> = (0..20).map(|t| zigzag(t, 0.01)).collect();
        logs[19] = -0.08;
        let k = kept(&logs, 0, 20, 0.01);
        assert_eq!(k.len(), 19);
        assert!(!k.contains(&19));
        // Two at the newest runs too.
        logs[18] = -0.08;
        assert_eq!(kept(&logs, 0, 20, 0.01).len(), 18);
        // A creep at the end does not mark its runs as outliers.
        let creep: Vec<f64> = (0..20).map(|t| ramp(t, 10, -0.002)).collect();
        assert_eq!(kept(&creep, 0, 20, 0.01).len(), 20);
    }

    #[test]
    fn a_clean_step_is_placed_tightly_and_a_weak_one_widely() {
        let logs: Vec<f64> = (0..40)
            .map(|t| zigzag(t, 0.001) + if t >= 25 { -0.05 } else { 0.0 })
            .collect();
        let place = location_interval(&logs, 0, 40, 25, ChangeKind::Step, 0.001, 0.0, 3, 0.9, &[]);
        assert_eq!(place, Some((25, 25)));
        // A step the size of the noise: the interval spans several runs.
        let weak = noisy_step(0.01, -0.01);
        let (lo, hi) =
            location_interval(&weak, 0, 40, 25, ChangeKind::Step, 0.01, 0.0, 3, 0.9, &[]).unwrap();
        assert!(lo <= 25 && 25 <= hi && hi > lo, "{lo} {hi}");
    }

    #[test]
    fn an_outlier_night_before_a_step_does_not_take_its_place() {
        // A −3% step at run 25 with noise of 1%, and run 24 a −6.5% night: 3.5 SD below its
        // neighbours' median, inside the 4 SD that leaves a run out of the fits, and alone it
        // puts the step at 24.
        let mut logs = noisy_step(0.005, -0.03);
        logs[24] = -0.065;
        let (lo, hi) =
            location_interval(&logs, 0, 40, 24, ChangeKind::Step, 0.01, 0.0, 3, 0.9, &[]).unwrap();
        assert!(lo <= 24 && 25 <= hi, "{lo} {hi}");
        // The same history without the outlier: the mixture leaves its interval as it was.
        logs[24] = logs[23];
        let clean = location_interval(&logs, 0, 40, 25, ChangeKind::Step, 0.01, 0.0, 3, 0.9, &[]);
        let m = Whitened::new(&logs, 0, 40, 0.01, 0.0).unwrap();
        let places: Vec<usize> = (3..=37).collect();
        let gaussian = shortest(
            &places,
            &m.place_evidence(&places, ChangeKind::Step),
            25,
            0.9,
        );
        assert_eq!(clean, gaussian);
    }

    #[test]
    fn two_outlier_nights_side_by_side_before_a_step_do_not_take_its_place() {
        // One cell's −3% step at run 25 in 2% noise; runs 23 and 24 are throttled nights the
        // matrix series is sure of. Leaving out either alone lets the other take the step's
        // place (the interval ends at 24); only the model with both left out holds run 25.
        let mut logs = noisy_step(0.01, -0.03);
        logs[23] = -0.07;
        logs[24] = -0.08;
        let mut nights = vec![0.0; 40];
        nights[23] = 0.99;
        nights[24] = 0.99;
        let (lo, hi) = location_interval(
            &logs,
            0,
            40,
            24,
            ChangeKind::Step,
            0.02,
            0.0,
            3,
            0.9,
            &nights,
        )
        .unwrap();
        assert!(lo <= 23 && 25 <= hi, "{lo} {hi}");
    }

    #[test]
    fn a_young_creep_told_as_a_step_has_an_interval_back_to_its_onset() {
        // 40 flat runs, then −0.4% a run for 12 runs (onset 40) in 1% noise. Told as a step
        // inside it (at run 46), the step's own evidence places it after the onset; weighed as
        // a creep too, the interval holds run 40.
        let logs: Vec<f64> = (0..52)
            .map(|t: usize| {
                let noise = 0.01 * (((t * 7919) % 13) as f64 / 6.0 - 1.0);
                noise - 0.004 * t.saturating_sub(39) as f64
            })
            .collect();
        let (lo, hi) =
            location_interval(&logs, 0, 52, 46, ChangeKind::Step, 0.01, 0.001, 3, 0.9, &[])
                .unwrap();
        assert!(lo <= 40 && 46 <= hi, "{lo} {hi}");
        let m = Whitened::new(&logs, 0, 52, 0.01, 0.001).unwrap();
        let places: Vec<usize> = (3..=49).collect();
        let (lo, _) = shortest(
            &places,
            &m.place_evidence(&places, ChangeKind::Step),
            46,
            0.9,
        )
        .unwrap();
        assert!(lo > 40, "the step's evidence alone starts at {lo}");
        // A step 15 runs old keeps its tight interval: a creep would have gone on declining.
        let old = noisy_step(0.005, -0.03);
        let (lo, hi) =
            location_interval(&old, 0, 40, 25, ChangeKind::Step, 0.01, 0.001, 3, 0.9, &[]).unwrap();
        assert!(lo >= 24 && hi <= 26, "{lo} {hi}");
    }

    #[test]
    fn a_night_far_off_its_neighbours_is_likely_an_outlier_and_a_step_is_not() {
        let mut logs: Vec<f64> = (0..30)
            .map(|t| zigzag(t, 0.005) + if t >= 20 { -0.03 } else { 0.0 })
            .collect();
        logs[12] = -0.05;
        let p = outlier_posterior(&logs, 0.01);
        assert!(p[12] > 0.9, "{}", p[12]);
        for (t, q) in p.iter().enumerate().filter(|(t, _)| *t != 12) {
            assert!(*q < 0.02, "run {t}: {q}");
        }
    }

    #[test]
    fn the_creep_scan_finds_a_decline_and_not_a_flat_series() {
        let flat: Vec<f64> = (0..40).map(|t| zigzag(t, 0.005)).collect();
        let s = creep_scan(&flat, 0, 0.005, 0.0, 30).unwrap();
        assert!(s.z.abs() < 2.0, "{s:?}");
        let creep: Vec<f64> = flat
            .iter()
            .enumerate()
            .map(|(t, v)| v + ramp(t, 30, -0.003))
            .collect();
        let s = creep_scan(&creep, 0, 0.005, 0.0, 30).unwrap();
        assert!(s.z < -4.0 && s.onset.abs_diff(30) <= 2, "{s:?}");
        assert!((s.slope + 0.003).abs() < 0.001, "{s:?}");
    }
}
