//! How a finished gate ends: the one place that turns (failure, cancellation, verdict,
//! `fail_on`) into the exit code, the check-run conclusion and the `verdict` step output, so
//! the three can never disagree (a required check must block exactly when the job fails).
//!
//! | outcome | `fail_on` | exit | check | `verdict` |
//! |---|---|---|---|---|
//! | the gate failed (engine, measurement, comparison, unreadable store) | any | 3 | `failure` | `error` |
//! | unmeasured (a cell the baseline measured was not measured) | any | 3 | `failure` | `error` |
//! | the run was cancelled | any | 3 | `cancelled` | `error` |
//! | pass (no regression found, and sensitive enough to find `design_effect`) | any | 0 | `success` | `pass` |
//! | insufficient (no regression found, not sensitive enough) | without `insufficient` | 0 | `neutral` | `insufficient` |
//! | insufficient | with `insufficient` | 1 | `failure` | `insufficient` |
//! | no baseline | any | 0 | `neutral` | `no_baseline` |
//! | regression | `regression`, `insufficient` | 1 | `failure` | `regression` |
//! | regression | `never` (report only) | 0 | `neutral` | `regression` |

use crate::exit::{FailOn, GateExit};
use crate::verdict::GateVerdict;

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
    /// The setting it was decided under.
    pub fail_on: FailOn,
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

    /// The policy every subcommand decides by: `--fail-on` (the action passes its `fail-on`
    /// input), else the (trusted) config's `[thresholds] fail_on`, else `regression`. One rule,
    /// so the step's exit and the check run never follow two sources.
    pub fn chosen(flag: Option<FailOn>, config: Option<FailOn>) -> GatePolicy {
        GatePolicy::new(flag.or(config).unwrap_or_default())
    }

    /// How a gate ends: `failed` = it could not measure or compare; `cancelled` = the run
    /// was cancelled; `verdict` = the comparison's answer (`None`: nothing to compare).
    pub fn ending(self, failed: bool, cancelled: bool, verdict: Option<GateVerdict>) -> GateEnding {
        let verdict = verdict.unwrap_or(GateVerdict::NoBaseline);
        let blocks = match verdict {
            GateVerdict::Regression => self.fail_on.regression,
            GateVerdict::Insufficient => self.fail_on.insufficient,
            GateVerdict::Pass | GateVerdict::NoBaseline | GateVerdict::Unmeasured => false,
        };
        // An unmeasured candidate is not a verdict on the build but the lack of one: a
        // measurement failure under every `fail_on`, like an engine that did not start.
        let (exit, conclusion) = if cancelled && !failed {
            (GateExit::Failure, Conclusion::Cancelled)
        } else if failed || verdict == GateVerdict::Unmeasured {
            (GateExit::Failure, Conclusion::Failure)
        } else if blocks {
            (GateExit::Regression, Conclusion::Failure)
        } else if verdict == GateVerdict::Pass {
            (GateExit::Pass, Conclusion::Success)
        } else {
            (GateExit::Pass, Conclusion::Neutral)
        };
        GateEnding {
            exit,
            conclusion,
            // No verdict to trust where the gate failed or was cancelled.
            verdict_word: match exit {
                GateExit::Failure => "error",
                _ => verdict.as_str(),
            },
            fail_on: self.fail_on,
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
        use {Conclusion as C, GateExit as E, GateVerdict as V};
        for (v, expected) in [
            (V::Regression, (E::Pass, C::Neutral, "regression")),
            (V::Insufficient, (E::Pass, C::Neutral, "insufficient")),
            (V::Pass, (E::Pass, C::Success, "pass")),
        ] {
            assert_eq!(end(FailOn::NEVER, Some(v)), expected);
        }
        let failed = GatePolicy::new(FailOn::NEVER).ending(true, false, None);
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
            Some(GateVerdict::Insufficient),
            Some(GateVerdict::NoBaseline),
            Some(GateVerdict::Unmeasured),
        ];
        for fail_on in [FailOn::REGRESSION, FailOn::INSUFFICIENT, FailOn::NEVER] {
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
        assert!(stands(FailOn::REGRESSION, GateVerdict::Regression));
        assert!(stands(FailOn::REGRESSION, GateVerdict::Unmeasured));
        assert!(stands(FailOn::INSUFFICIENT, GateVerdict::Insufficient));
        assert!(!stands(FailOn::REGRESSION, GateVerdict::Pass));
        assert!(!stands(FailOn::REGRESSION, GateVerdict::Insufficient));
        assert!(!stands(FailOn::REGRESSION, GateVerdict::NoBaseline));
        assert!(!stands(FailOn::NEVER, GateVerdict::Regression));
    }

    #[test]
    fn an_unmeasured_candidate_is_a_measurement_failure_under_every_fail_on() {
        for fail_on in [FailOn::REGRESSION, FailOn::INSUFFICIENT, FailOn::NEVER] {
            assert_eq!(
                end(fail_on, Some(GateVerdict::Unmeasured)),
                (GateExit::Failure, Conclusion::Failure, "error")
            );
        }
    }

    #[test]
    fn the_default_policy_fails_regressions_only_and_insufficient_is_neutral() {
        use {Conclusion as C, GateExit as E, GateVerdict as V};
        let (regression, insufficient) = (FailOn::REGRESSION, FailOn::INSUFFICIENT);
        for (fail_on, v, expected) in [
            (
                regression,
                Some(V::Regression),
                (E::Regression, C::Failure, "regression"),
            ),
            (
                regression,
                Some(V::Insufficient),
                (E::Pass, C::Neutral, "insufficient"),
            ),
            (
                insufficient,
                Some(V::Insufficient),
                (E::Regression, C::Failure, "insufficient"),
            ),
            (regression, None, (E::Pass, C::Neutral, "no_baseline")),
        ] {
            assert_eq!(end(fail_on, v), expected);
        }
    }

    #[test]
    fn the_flag_wins_over_the_config_and_regression_is_the_default() {
        assert_eq!(
            GatePolicy::chosen(Some(FailOn::NEVER), Some(FailOn::INSUFFICIENT)).fail_on,
            FailOn::NEVER
        );
        assert_eq!(
            GatePolicy::chosen(None, Some(FailOn::INSUFFICIENT)).fail_on,
            FailOn::INSUFFICIENT
        );
        assert_eq!(GatePolicy::chosen(None, None).fail_on, FailOn::REGRESSION);
    }
}
