//! How a finished gate ends: the one place that turns (failure, cancellation, verdict,
//! `fail_on`) into the exit code, the check-run conclusion and the `verdict` step output, so
//! the three can never disagree (a required check must block exactly when the job fails).
//!
//! | outcome | `fail_on` | exit | check | `verdict` |
//! |---|---|---|---|---|
//! | the gate failed (engine, measurement, comparison, unreadable store) | any | 3 | `failure` | `error` |
//! | unmeasured (coverage below `min_measured_share`) | any | 3 | `failure` | `error` |
//! | the run was cancelled | any | 3 | `cancelled` | `error` |
//! | pass | any | 0 | `success` | `pass` |
//! | no baseline | any | 0 | `neutral` | `no_baseline` |
//! | regression | `regression`, `inconclusive` | 1 | `failure` | `regression` |
//! | regression | `never` (report only) | 0 | `neutral` | `regression` |
//! | inconclusive | `inconclusive` | 1 | `failure` | `inconclusive` |
//! | inconclusive | `regression`, `never` | 0 | `neutral` | `inconclusive` |

use serde::Deserialize;

use crate::exit::GateExit;
use crate::verdict::GateVerdict;

/// What fails the gate (`[thresholds] fail_on`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum FailOn {
    /// Regressions fail (exit 1); inconclusive passes (default).
    #[default]
    Regression,
    /// Regressions and inconclusive verdicts fail.
    Inconclusive,
    /// Report only: never fail on a verdict (a regression is a `neutral` check and exit 0;
    /// engine failures still exit 3).
    Never,
}

/// How the check run ends (the GitHub API's words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conclusion {
    /// The gate passed.
    Success,
    /// The gate failed: a verdict it fails on, or nothing could be measured or compared.
    Failure,
    /// Neither: a verdict the policy does not fail on (report-only, inconclusive), or no baseline.
    Neutral,
    /// The run was cancelled before it finished.
    Cancelled,
}

impl Conclusion {
    /// The API word.
    pub fn as_str(self) -> &'static str {
        match self {
            Conclusion::Success => "success",
            Conclusion::Failure => "failure",
            Conclusion::Neutral => "neutral",
            Conclusion::Cancelled => "cancelled",
        }
    }
}

/// The gate policy of one run: what fails it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GatePolicy {
    /// Which verdicts fail the gate.
    pub fail_on: FailOn,
}

/// How one gate ended, in every form it is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GateEnding {
    /// The process exit code.
    pub exit: GateExit,
    /// The check-run conclusion.
    pub conclusion: Conclusion,
    /// The `verdict` step output: the verdict's word, or `error` when there is no verdict
    /// to trust (the gate failed or was cancelled).
    pub verdict_word: &'static str,
}

impl GateEnding {
    /// Whether this ending may stand on a verdict nobody recomputed (a `verdict.json` read
    /// from an artifact the pull request produced): only one that fails the gate does, so a
    /// forged file can fail its own pull request but never pass it (`infergate report`
    /// without `--trusted-config`).
    pub fn stands_unverified(&self) -> bool {
        self.exit != GateExit::Pass
    }
}

impl GatePolicy {
    /// The policy of a `fail_on` setting.
    pub fn new(fail_on: FailOn) -> GatePolicy {
        GatePolicy { fail_on }
    }

    /// How a gate ends: `failed` = it could not measure or compare; `cancelled` = the run
    /// was cancelled; `verdict` = the comparison's answer (`None`: nothing to compare).
    pub fn ending(self, failed: bool, cancelled: bool, verdict: Option<GateVerdict>) -> GateEnding {
        if failed || cancelled {
            return GateEnding {
                exit: GateExit::Failure,
                conclusion: if failed {
                    Conclusion::Failure
                } else {
                    Conclusion::Cancelled
                },
                verdict_word: "error",
            };
        }
        let verdict = verdict.unwrap_or(GateVerdict::NoBaseline);
        if verdict == GateVerdict::Unmeasured {
            // Not a verdict on the build but the lack of one: a measurement failure under
            // every `fail_on`, like an engine that did not start.
            return GateEnding {
                exit: GateExit::Failure,
                conclusion: Conclusion::Failure,
                verdict_word: "error",
            };
        }
        let blocks = match verdict {
            GateVerdict::Regression => self.fail_on != FailOn::Never,
            GateVerdict::Inconclusive => self.fail_on == FailOn::Inconclusive,
            GateVerdict::Pass | GateVerdict::NoBaseline | GateVerdict::Unmeasured => false,
        };
        let (exit, conclusion) = match (blocks, verdict) {
            (true, _) => (GateExit::Regression, Conclusion::Failure),
            (false, GateVerdict::Pass) => (GateExit::Pass, Conclusion::Success),
            (false, _) => (GateExit::Pass, Conclusion::Neutral),
        };
        GateEnding {
            exit,
            conclusion,
            verdict_word: verdict.as_str(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(fail_on: FailOn, verdict: Option<GateVerdict>) -> (GateExit, Conclusion, &'static str) {
        let e = GatePolicy::new(fail_on).ending(false, false, verdict);
        (e.exit, e.conclusion, e.verdict_word)
    }

    #[test]
    fn report_only_mode_never_fails_the_check_or_the_job() {
        assert_eq!(
            end(FailOn::Never, Some(GateVerdict::Regression)),
            (GateExit::Pass, Conclusion::Neutral, "regression")
        );
        assert_eq!(
            end(FailOn::Never, Some(GateVerdict::Inconclusive)),
            (GateExit::Pass, Conclusion::Neutral, "inconclusive")
        );
        assert_eq!(
            end(FailOn::Never, Some(GateVerdict::Pass)),
            (GateExit::Pass, Conclusion::Success, "pass")
        );
        // Engine failures still fail.
        let failed = GatePolicy::new(FailOn::Never).ending(true, false, None);
        assert_eq!(
            (failed.exit, failed.conclusion, failed.verdict_word),
            (GateExit::Failure, Conclusion::Failure, "error")
        );
    }

    #[test]
    fn exit_code_and_conclusion_agree_for_every_outcome() {
        let verdicts = [
            None,
            Some(GateVerdict::Pass),
            Some(GateVerdict::Regression),
            Some(GateVerdict::Inconclusive),
            Some(GateVerdict::NoBaseline),
            Some(GateVerdict::Unmeasured),
        ];
        for fail_on in [FailOn::Regression, FailOn::Inconclusive, FailOn::Never] {
            for failed in [false, true] {
                for cancelled in [false, true] {
                    for v in verdicts {
                        let e = GatePolicy::new(fail_on).ending(failed, cancelled, v);
                        let check_fails =
                            matches!(e.conclusion, Conclusion::Failure | Conclusion::Cancelled);
                        assert_eq!(
                            check_fails,
                            e.exit != GateExit::Pass,
                            "{fail_on:?} failed={failed} cancelled={cancelled} {v:?}: {e:?}"
                        );
                        assert_eq!(e.verdict_word == "error", e.exit == GateExit::Failure);
                    }
                }
            }
        }
    }

    #[test]
    fn only_an_ending_that_fails_stands_on_an_unverified_verdict() {
        let stands = |fail_on: FailOn, v: GateVerdict| {
            GatePolicy::new(fail_on)
                .ending(false, false, Some(v))
                .stands_unverified()
        };
        assert!(stands(FailOn::Regression, GateVerdict::Regression));
        assert!(stands(FailOn::Regression, GateVerdict::Unmeasured));
        assert!(stands(FailOn::Inconclusive, GateVerdict::Inconclusive));
        assert!(!stands(FailOn::Regression, GateVerdict::Pass));
        assert!(!stands(FailOn::Regression, GateVerdict::Inconclusive));
        assert!(!stands(FailOn::Regression, GateVerdict::NoBaseline));
        assert!(!stands(FailOn::Never, GateVerdict::Regression));
    }

    #[test]
    fn an_unmeasured_candidate_is_a_measurement_failure_under_every_fail_on() {
        for fail_on in [FailOn::Regression, FailOn::Inconclusive, FailOn::Never] {
            assert_eq!(
                end(fail_on, Some(GateVerdict::Unmeasured)),
                (GateExit::Failure, Conclusion::Failure, "error")
            );
        }
    }

    #[test]
    fn the_default_policy_fails_regressions_only() {
        assert_eq!(
            end(FailOn::Regression, Some(GateVerdict::Regression)),
            (GateExit::Regression, Conclusion::Failure, "regression")
        );
        assert_eq!(
            end(FailOn::Regression, Some(GateVerdict::Inconclusive)),
            (GateExit::Pass, Conclusion::Neutral, "inconclusive")
        );
        assert_eq!(
            end(FailOn::Inconclusive, Some(GateVerdict::Inconclusive)),
            (GateExit::Regression, Conclusion::Failure, "inconclusive")
        );
        assert_eq!(
            end(FailOn::Regression, None),
            (GateExit::Pass, Conclusion::Neutral, "no_baseline")
        );
    }
}
