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

/// Asserts `holds` of the report's first line, printing the line when it does not.
#[track_caller]
pub(crate) fn assert_first_line(report: &ComparisonReport, holds: impl Fn(&str) -> bool) {
    let line = first_line(report);
    assert!(holds(&line), "{line}");
}
