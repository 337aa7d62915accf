//! The baseline history a gate is judged on: the runs of the run's profile and suite, loaded
//! from the store once (the judge itself is `stats::judge`).

use std::path::Path;
use std::sync::Arc;

use infergate_model::stats::History;
use infergate_schema::results::RunResults;
use infergate_store::baseline::BaselineStore;

/// Why the comparison could not be made (the run itself may be fine).
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("{0}")]
    Baseline(#[from] infergate_store::baseline::BaselineError),
    #[error("{0}")]
    Stats(#[from] infergate_model::stats::StatsError),
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// The baseline history of one run's profile and suite, loaded once per gate: every look of
/// the judge is made on it (and the charts drawn from it).
#[derive(Debug, Clone)]
pub struct LoadedHistory {
    /// The baseline runs (oldest → newest) with the models fitted on them; empty when there
    /// is nothing to compare with.
    pub history: Arc<History<'static>>,
    /// Things people should know (duplicate baseline files, an accepted change point).
    pub notices: Vec<String>,
    /// Why there is nothing to compare with ("NO BASELINE YET …, the gate passes"), when
    /// so: said only where the gate does pass ([`nothing_compared`]).
    pub no_baseline: Option<String>,
}

impl LoadedHistory {
    /// Whether there is no baseline to compare with.
    pub(crate) fn is_empty(&self) -> bool {
        self.history.runs().is_empty()
    }
}

/// Loads the baseline runs of `results`' profile and suite from the store in `store_dir`.
pub(crate) fn load_history(
    results: &RunResults,
    store_dir: &Path,
) -> Result<LoadedHistory, GateError> {
    let suite = results.suite.as_deref();
    let mut notices = Vec::new();
    let empty = |notices, why| LoadedHistory {
        history: Arc::new(History::new(Vec::new())),
        notices,
        no_baseline: Some(why),
    };
    if !store_dir.exists() {
        // Only reached when the run creates the first baseline (`--update-baseline`): the gate
        // refuses a store directory that does not exist otherwise (see `GatePlan::new`).
        let why = format!(
            "NO BASELINE YET: the store {} does not exist; it is created with this run (the first baseline of profile `{}` suite `{}`): nothing compared, the gate passes",
            store_dir.display(),
            results.profile.key,
            suite.unwrap_or(infergate_store::baseline::ADHOC_SUITE),
        );
        return Ok(empty(notices, why));
    }
    // A directory that is not a store root is an error, never "no baseline yet".
    let store = BaselineStore::open_existing(store_dir)?;
    let current = store.load_current(&results.profile.key, suite)?;
    let loaded = current.loaded;
    for (dup, counted) in &loaded.duplicates {
        notices.push(format!(
            "baseline file {} repeats the run of {}: counted once",
            dup.display(),
            counted.display()
        ));
    }
    notices.extend(current.since.map(|a| {
        format!(
            "baseline: runs since the accepted change point at run `{}` only",
            a.since_run_id
        )
    }));
    // A metric restarted alone is said by the verdict's Details (`baseline.metric_since`), in
    // every report of it: no notice repeats it.
    if loaded.runs.is_empty() {
        let holds = if store.holds_no_runs()? {
            "holds no runs (of any profile)"
        } else {
            "has no runs of them"
        };
        let why = format!(
            "NO BASELINE YET for profile `{}` suite `{}`: the store {} {holds}, so nothing was compared and the gate passes. Record one with `infergate run --update-baseline` (on the main branch) or `infergate baseline add RESULTS`",
            results.profile.key,
            suite.unwrap_or(infergate_store::baseline::ADHOC_SUITE),
            store_dir.display()
        );
        return Ok(empty(notices, why));
    }
    Ok(LoadedHistory {
        history: Arc::new(History::with_metric_since(
            loaded.runs,
            current.metric_since,
        )),
        notices,
        no_baseline: None,
    })
}

/// The one rule for a gate that compared nothing (`run` and `report --trusted-config`): on a
/// pull request or merge queue (`pull_request`, the event's name) it fails, unless the config
/// says it is bootstrapping (`[baseline] allow_no_baseline`): a required check that compares
/// nothing must not pass. `Err` is that failure, for people.
pub fn nothing_compared(
    store_dir: &Path,
    results: &RunResults,
    allow_no_baseline: bool,
    pull_request: Option<&str>,
    config_path: &str,
) -> Result<(), String> {
    let Some(event) = pull_request.filter(|_| !allow_no_baseline) else {
        return Ok(());
    };
    let suite = results
        .suite
        .as_deref()
        .unwrap_or(infergate_store::baseline::ADHOC_SUITE);
    let held = BaselineStore::open(store_dir)
        .map(|s| s.profile_differences(&results.profile))
        .unwrap_or_default();
    let held = if held.is_empty() {
        "the store holds no profile".to_string()
    } else {
        format!("the store holds {}", held.join("; "))
    };
    Err(format!(
        "no baseline for profile `{}` suite `{suite}` in {} on a `{event}` event: nothing was compared, and a pull-request gate that compares nothing must not pass; {held}. Record a baseline of this profile on the default branch (`infergate run --update-baseline`), fix the runner or the matrix so the profile matches, or set `[baseline] allow_no_baseline = true` in {config_path} while bootstrapping",
        results.profile.key,
        store_dir.display(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_schema::verdict::GateVerdict;

    #[test]
    fn after_accepting_a_step_the_new_level_passes_and_a_further_drop_is_caught() {
        use rand::SeedableRng;
        let tmp = tempfile::tempdir().unwrap();
        let store = BaselineStore::open(tmp.path()).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(17);
        let mut night = |i: i64, factor: f64| {
            let mut r = infergate_model::synthetic::synthetic_run(
                &format!("night-{i:02}"),
                &mut rng,
                0.005,
                0.01,
                &|_| factor,
            );
            r.started_at += chrono::Duration::days(i);
            r
        };
        for i in 0..36 {
            store
                .add(&night(i, if i < 30 { 1.0 } else { 0.97 }))
                .unwrap();
        }
        let at_new_level = night(36, 0.97);
        let further_drop = night(37, 0.97 * 0.95);
        let key = at_new_level.profile.key.clone();
        store
            .accept(&key, at_new_level.suite.as_deref(), "night-30", None, &[])
            .unwrap();
        let rule = infergate_model::stats::DecisionRule::default();
        let decide = |run: &RunResults| {
            let loaded = load_history(run, tmp.path()).unwrap();
            let v = infergate_model::stats::compare_on(
                &loaded.history,
                std::slice::from_ref(run),
                &rule,
                &infergate_model::stats::Look::single(&rule),
            )
            .unwrap();
            (loaded.notices, v)
        };
        let (notices, v) = decide(&at_new_level);
        assert_eq!(v.baseline.noise_runs, 6, "only the runs since the step");
        assert!(notices.iter().any(|n| n.contains("night-30")));
        assert_ne!(v.gate, GateVerdict::Regression, "{:?}", v.matrix_test);
        let (_, v) = decide(&further_drop);
        assert_eq!(v.gate, GateVerdict::Regression, "{:?}", v.matrix_test);
    }
}
