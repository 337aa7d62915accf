//! Accepted change points: a person's statement that a group's level moved on purpose (a new
//! driver, an accepted trade-off) from a given run on. The comparison then takes its level and
//! noise only from the runs since the newest accepted change, so a deliberate step neither
//! inflates the noise nor hides the next regression.
//!
//! Stored as `<dir>/<profile key>/accepted.json` (one file per profile, entries per suite),
//! written atomically like the run files. A file that cannot be read fails the load: silently
//! falling back to the whole history would compare against the wrong level.

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use infergate_schema::verdict::{Metric, MetricSince};
use serde::{Deserialize, Serialize};

use super::{ADHOC_SUITE, BaselineError, BaselineStore, LoadedBaseline, component, write_atomic};

/// File name of the accepted change points in a profile directory.
pub(crate) const ACCEPTED_FILE: &str = "accepted.json";

/// One accepted change: the group's level is what it is from `since_run_id` on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcceptedChange {
    /// Suite directory name (`adhoc` for runs without a suite).
    pub(crate) suite: String,
    /// The first run at the new level.
    pub since_run_id: String,
    /// Its start time: runs started at or after it are used (this survives pruning the run).
    pub since_started_at: DateTime<Utc>,
    /// When the change was accepted.
    pub(crate) accepted_at: DateTime<Utc>,
    /// Why, for people (free text, shown as data).
    #[serde(default)]
    pub(crate) note: Option<String>,
    /// The metrics whose level is new (`baseline accept --metric`); empty: the whole group's
    /// (aggregate tok/s is the group's level: naming it is a whole-group accept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<Metric>,
}

impl AcceptedChange {
    /// Whether this accept restarts every metric of the group.
    pub fn whole_group(&self) -> bool {
        self.metrics.is_empty() || self.metrics.contains(&Metric::AggregateTps)
    }
}

/// The runs a comparison uses ([`BaselineStore::load_current`]).
#[derive(Debug)]
pub struct CurrentBaseline {
    /// The runs since the newest whole-group accept (every run where there is none).
    pub loaded: LoadedBaseline,
    /// That accept.
    pub since: Option<AcceptedChange>,
    /// The metrics accepted since it, each from its newest accept: compared with the runs
    /// since that one alone (`History::with_metric_since`).
    pub metric_since: Vec<MetricSince>,
}

/// The file's content.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AcceptedFile {
    schema_version: u32,
    accepted: Vec<AcceptedChange>,
}

impl BaselineStore {
    fn accepted_path(&self, profile_key: &str) -> PathBuf {
        self.root.join(component(profile_key)).join(ACCEPTED_FILE)
    }

    fn read_accepted(&self, profile_key: &str) -> Result<AcceptedFile, BaselineError> {
        let path = self.accepted_path(profile_key);
        let text = match infergate_io::fsio::read_input(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(AcceptedFile::default());
            }
            Err(source) => return Err(BaselineError::io("read", &path, source)),
        };
        serde_json::from_str(&text).map_err(|e| {
            let source = std::io::Error::other(format!(
                "{e}; fix or delete the file (it lists the accepted change points: {{\"schema_version\": 1, \"accepted\": [...]}})"
            ));
            BaselineError::io("parse", &path, source)
        })
    }

    /// Accepted changes of one profile and suite, oldest first.
    pub fn accepted(
        &self,
        profile_key: &str,
        suite: Option<&str>,
    ) -> Result<Vec<AcceptedChange>, BaselineError> {
        let want = component(suite.unwrap_or(ADHOC_SUITE));
        let mut out: Vec<AcceptedChange> = self
            .read_accepted(profile_key)?
            .accepted
            .into_iter()
            .filter(|a| component(&a.suite) == want)
            .collect();
        out.sort_by_key(|a| a.since_started_at);
        Ok(out)
    }

    /// Records that the group's level is new from run `run_id` on; the run must be in the
    /// group. Accepting the same run twice leaves one entry.
    pub fn accept(
        &self,
        profile_key: &str,
        suite: Option<&str>,
        run_id: &str,
        note: Option<&str>,
        metrics: &[Metric],
    ) -> Result<AcceptedChange, BaselineError> {
        // Read, change, write `accepted.json` under the store's lock: two accepts at once
        // both land.
        let _lock = self.write_lock()?;
        let loaded = self.load(profile_key, suite)?;
        let run = loaded
            .runs
            .iter()
            .find(|r| r.run_id == run_id)
            .ok_or_else(|| BaselineError::Rejected {
                run_id: run_id.to_string(),
                reason: format!(
                    "it is not a run of profile `{profile_key}` suite `{}` in {} (see `infergate baseline show`)",
                    suite.unwrap_or(ADHOC_SUITE),
                    self.root.display()
                ),
            })?;
        let suite_name = component(suite.unwrap_or(ADHOC_SUITE));
        let mut metrics = metrics.to_vec();
        metrics.sort();
        metrics.dedup();
        if metrics.contains(&Metric::AggregateTps) {
            metrics.clear();
        }
        let mut file = self.read_accepted(profile_key)?;
        if let Some(done) = file.accepted.iter().find(|a| {
            a.since_run_id == run_id && component(&a.suite) == suite_name && a.metrics == metrics
        }) {
            return Ok(done.clone());
        }
        let entry = AcceptedChange {
            suite: suite_name,
            since_run_id: run.run_id.clone(),
            since_started_at: run.started_at,
            accepted_at: Utc::now(),
            note: note.map(String::from),
            metrics,
        };
        file.schema_version = 1;
        file.accepted.push(entry.clone());
        let body = serde_json::to_vec_pretty(&file).map_err(|e| BaselineError::Serialize {
            run_id: run_id.to_string(),
            message: e.to_string(),
        })?;
        write_atomic(&self.accepted_path(profile_key), &body)?;
        Ok(entry)
    }

    /// The runs the comparison uses: [`load`](Self::load), keeping only the runs since the
    /// newest whole-group accept when there is one, and the metrics accepted since it, each
    /// from its newest accept.
    pub fn load_current(
        &self,
        profile_key: &str,
        suite: Option<&str>,
    ) -> Result<CurrentBaseline, BaselineError> {
        let mut loaded = self.load(profile_key, suite)?;
        let mut accepted = self.accepted(profile_key, suite)?;
        let group = accepted.iter().rposition(AcceptedChange::whole_group);
        let since = group.map(|i| accepted[i].clone());
        if let Some(a) = &since {
            loaded.runs.retain(|r| r.started_at >= a.since_started_at);
        }
        // Newest first: a metric's newest accept since the group's wins.
        accepted.drain(..group.map_or(0, |i| i + 1));
        let mut metric_since: Vec<MetricSince> = Vec::new();
        for a in accepted.iter().rev() {
            for &metric in &a.metrics {
                if metric_since.iter().all(|m| m.metric != metric) {
                    metric_since.push(MetricSince {
                        metric,
                        since_run_id: a.since_run_id.clone(),
                        since_started_at: a.since_started_at,
                    });
                }
            }
        }
        metric_since.sort_by_key(|m| m.metric);
        Ok(CurrentBaseline {
            loaded,
            since,
            metric_since,
        })
    }

    /// Groups (profile key, suite) holding a run with this id, among those matching the
    /// profile and suite a user named ([`BaselineStore::groups`]).
    pub fn groups_with_run(
        &self,
        run_id: &str,
        profile: Option<&str>,
        suite: Option<&str>,
    ) -> Result<Vec<(String, String)>, BaselineError> {
        let mut out = Vec::new();
        for (key, suite) in self.groups(profile, suite)? {
            if self
                .load(&key, Some(&suite))?
                .runs
                .iter()
                .any(|r| r.run_id == run_id)
            {
                out.push((key, suite));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_schema::asserts::assert_contains;
    use infergate_schema::results::RunResults;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn nightly(i: i64, factor: f64, rng: &mut StdRng) -> RunResults {
        let mut r = infergate_model::synthetic::synthetic_run(
            &format!("night-{i:02}"),
            rng,
            0.005,
            0.01,
            &|_| factor,
        );
        r.started_at += chrono::Duration::days(i);
        r.labels.insert("sha".into(), format!("sha{i:02}"));
        r
    }

    #[test]
    fn accept_records_once_and_load_current_follows_it() {
        let tmp = tempfile::tempdir().unwrap();
        let store = BaselineStore::open(tmp.path()).unwrap();
        let mut rng = StdRng::seed_from_u64(1);
        let runs: Vec<RunResults> = (0..8).map(|i| nightly(i, 1.0, &mut rng)).collect();
        for r in &runs {
            store.add(r).unwrap();
        }
        let key = runs[0].profile.key.clone();
        let suite = runs[0].suite.clone();
        let suite = suite.as_deref();
        // Labels survive the store.
        let loaded = store.load(&key, suite).unwrap();
        for (a, b) in loaded.runs.iter().zip(&runs) {
            let same = a.labels == b.labels && a.commit() == b.commit();
            assert!(same, "{}", a.run_id);
        }
        assert_eq!(
            store.load_current(&key, suite).unwrap().loaded.runs.len(),
            8
        );
        let err = store.accept(&key, suite, "nope", None, &[]).unwrap_err();
        assert!(err.to_string().contains("not a run of profile"), "{err}");
        let a = store
            .accept(&key, suite, "night-05", Some("new driver"), &[])
            .unwrap();
        assert_eq!(a.since_run_id, "night-05");
        store.accept(&key, suite, "night-05", None, &[]).unwrap();
        let accepted = store.accepted(&key, suite).unwrap();
        assert_eq!(accepted.len(), 1, "no duplicate");
        let current = store.load_current(&key, suite).unwrap();
        let ids: Vec<_> = current
            .loaded
            .runs
            .iter()
            .map(|r| r.run_id.as_str())
            .collect();
        assert_eq!(ids, ["night-05", "night-06", "night-07"]);
        assert_eq!(current.since.unwrap().note.as_deref(), Some("new driver"));
        assert!(current.metric_since.is_empty());
        // A metric's accept restarts that metric alone: the runs stay the group's, and the
        // newest accept of the metric since the group's wins; one older than it is moot.
        let metric = |id: &str, m: &[Metric]| store.accept(&key, suite, id, None, m).unwrap();
        metric("night-03", &[Metric::PrefillTps]);
        metric("night-06", &[Metric::ItlP99, Metric::BurstTtftP90]);
        metric("night-07", &[Metric::ItlP99]);
        let current = store.load_current(&key, suite).unwrap();
        assert_eq!(current.loaded.runs.len(), 3);
        assert_eq!(current.since.as_ref().unwrap().since_run_id, "night-05");
        let since: Vec<(Metric, &str)> = current
            .metric_since
            .iter()
            .map(|m| (m.metric, m.since_run_id.as_str()))
            .collect();
        assert_eq!(
            since,
            [
                (Metric::ItlP99, "night-07"),
                (Metric::BurstTtftP90, "night-06")
            ]
        );
        // Naming aggregate tok/s, the group's level, accepts the whole group.
        assert!(metric("night-06", &[Metric::AggregateTps, Metric::ItlP99]).whole_group());
        let current = store.load_current(&key, suite).unwrap();
        assert_eq!(current.loaded.runs.len(), 2);
        let since: Vec<&str> = current
            .metric_since
            .iter()
            .map(|m| m.since_run_id.as_str())
            .collect();
        assert_eq!(since, ["night-07"]);
        assert_eq!(
            store.groups_with_run("night-05", None, None).unwrap(),
            vec![(key.clone(), "stats-eval".to_string())]
        );
        // No temp file left; a corrupt file fails the load instead of using every run.
        let dir = tmp.path().join(component(&key));
        assert!(
            std::fs::read_dir(&dir)
                .unwrap()
                .filter_map(Result::ok)
                .all(|e| !e.file_name().to_string_lossy().starts_with(".tmp"))
        );
        std::fs::write(dir.join(ACCEPTED_FILE), "{\"accepted\": [").unwrap();
        let err = store.load_current(&key, suite).unwrap_err().to_string();
        assert_contains(&err, "accepted.json");
        assert_contains(&err, "fix or delete");
    }
}
