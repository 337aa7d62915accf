//! Assertions the unit tests of every crate share: each prints what it looked for and where,
//! and `#[track_caller]` points a failure at the test's own line.

use crate::answer::first_line;
use crate::verdict::{ComparisonReport, GateVerdict};

/// Asserts `text` contains `part`, printing both when it does not.
#[track_caller]
pub fn assert_contains(text: &str, part: &str) {
    assert!(text.contains(part), "no {part:?} in:\n{text}");
}

/// Asserts `text` does not contain `part`, printing both when it does.
#[track_caller]
pub fn assert_lacks(text: &str, part: &str) {
    assert!(!text.contains(part), "{part:?} in:\n{text}");
}

/// Asserts `text` starts with `prefix`, printing both when it does not.
#[track_caller]
pub fn assert_starts_with(text: &str, prefix: &str) {
    assert!(
        text.starts_with(prefix),
        "not starting with {prefix:?}:\n{text}"
    );
}

/// Asserts `text` ends with `suffix`, printing both when it does not.
#[track_caller]
pub fn assert_ends_with(text: &str, suffix: &str) {
    assert!(
        text.ends_with(suffix),
        "not ending with {suffix:?}:\n{text}"
    );
}

/// Asserts the report's gate is `gate`, printing its first line when it is not.
#[track_caller]
pub fn assert_gate(report: &ComparisonReport, gate: GateVerdict) {
    assert_eq!(report.gate, gate, "{}", first_line(report));
}

/// Asserts the report's gate is not `gate`, printing its first line when it is.
#[track_caller]
pub fn assert_not_gate(report: &ComparisonReport, gate: GateVerdict) {
    assert_ne!(report.gate, gate, "{}", first_line(report));
}

/// Asserts `holds` of the report's first line, printing the line when it does not.
#[track_caller]
pub fn assert_first_line(report: &ComparisonReport, holds: impl Fn(&str) -> bool) {
    let line = first_line(report);
    assert!(holds(&line), "{line}");
}
