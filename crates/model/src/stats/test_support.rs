//! Helpers the unit tests of [`crate::stats`] share.

use infergate_schema::answer::first_line;
use infergate_schema::verdict::{ComparisonReport, GateVerdict};

/// Asserts the report's gate is `gate`, printing its first line when it is not.
#[track_caller]
pub(crate) fn assert_gate(report: &ComparisonReport, gate: GateVerdict) {
    assert_eq!(report.gate, gate, "{}", first_line(report));
}

/// Asserts the report's gate is not `gate`, printing its first line when it is.
#[track_caller]
pub(crate) fn assert_not_gate(report: &ComparisonReport, gate: GateVerdict) {
    assert_ne!(report.gate, gate, "{}", first_line(report));
}
