//! Helpers the unit tests of this crate share.

/// Asserts `text` contains `part`, printing both when it does not.
#[track_caller]
pub(crate) fn assert_contains(text: &str, part: &str) {
    assert!(text.contains(part), "no {part:?} in:\n{text}");
}

/// Asserts `text` does not contain `part`, printing both when it does.
#[track_caller]
pub(crate) fn assert_lacks(text: &str, part: &str) {
    assert!(!text.contains(part), "{part:?} in:\n{text}");
}

/// Asserts `text` starts with `prefix`, printing both when it does not.
#[track_caller]
pub(crate) fn assert_starts_with(text: &str, prefix: &str) {
    assert!(
        text.starts_with(prefix),
        "not starting with {prefix:?}:\n{text}"
    );
}

/// Asserts `text` ends with `suffix`, printing both when it does not.
#[track_caller]
pub(crate) fn assert_ends_with(text: &str, suffix: &str) {
    assert!(
        text.ends_with(suffix),
        "not ending with {suffix:?}:\n{text}"
    );
}
