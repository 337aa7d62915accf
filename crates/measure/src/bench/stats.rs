//! Percentiles of latency and rate observations.

use hdrhistogram::Histogram;

use infergate_model::stats::quantile;
use infergate_schema::results::Percentiles;

/// Exact percentiles (linear interpolation between closest ranks) of a small sample.
pub(crate) fn exact(values: &[f64]) -> Option<Percentiles> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let q = |p: f64| quantile(&v, p);
    Some(Percentiles {
        mean: v.iter().sum::<f64>() / v.len() as f64,
        p50: q(0.5),
        p90: q(0.9),
        p99: q(0.99),
        count: v.len() as u64,
    })
}

/// Nanosecond histogram (3 significant digits) of inter-token gaps: constant memory however
/// many tokens stream.
pub(crate) fn new_latency_histogram() -> Histogram<u64> {
    // `new(3)` auto-resizes; construction cannot fail for sigfig 3.
    Histogram::<u64>::new(3).unwrap_or_else(|_| unreachable!("sigfig 3 is valid"))
}

/// Percentiles of a nanosecond histogram, in seconds; `mean_s` is the exact mean.
pub(crate) fn from_histogram(h: &Histogram<u64>, mean_s: Option<f64>) -> Option<Percentiles> {
    if h.is_empty() {
        return None;
    }
    let s = |ns: u64| ns as f64 / 1e9;
    Some(Percentiles {
        mean: mean_s.unwrap_or_else(|| h.mean() / 1e9),
        p50: s(h.value_at_quantile(0.5)),
        p90: s(h.value_at_quantile(0.9)),
        p99: s(h.value_at_quantile(0.99)),
        count: h.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_percentiles_interpolate() {
        let p = exact(&[1.0, 2.0, 3.0, 4.0, 5.0, f64::NAN]).unwrap();
        assert_eq!(p.count, 5);
        assert_eq!(p.p50, 3.0);
        assert!((p.p90 - 4.6).abs() < 1e-9);
        assert_eq!(p.mean, 3.0);
        assert!(exact(&[]).is_none());
    }

    #[test]
    fn histogram_percentiles_in_seconds() {
        let mut h = new_latency_histogram();
        for i in 1..=100u64 {
            h.record(i * 1_000_000).unwrap();
        }
        let p = from_histogram(&h, None).unwrap();
        assert!((p.p50 - 0.050).abs() < 0.001, "{p:?}");
        assert!((p.p99 - 0.099).abs() < 0.001, "{p:?}");
        assert_eq!(p.count, 100);
    }
}
