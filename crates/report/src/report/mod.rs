//! Reporting: turns results and verdicts into text for people and machines. A report never
//! measures and never decides.

pub mod ab;
pub mod actions;
pub mod bisect;
pub mod changes;
pub mod console;
pub mod github;
pub mod history;
pub mod layout;
pub mod merged;
pub mod mermaid;
pub mod trend_html;
pub mod verdict_table;

/// A commit as a table shows it: a full 40-digit SHA as its first 12 digits (git's own
/// abbreviation for a large repository; `bisect` and git take it), anything else (`v1.2`,
/// `HEAD~3`) as given. A full SHA wraps a 100-column table over four lines.
pub(crate) fn short_commit(rev: &str) -> &str {
    if rev.len() == 40 && rev.bytes().all(|b| b.is_ascii_hexdigit()) {
        &rev[..12]
    } else {
        rev
    }
}

#[cfg(test)]
mod tests {
    use super::short_commit;

    #[test]
    fn a_full_sha_is_shown_by_its_first_twelve_digits_and_other_revisions_whole() {
        let sha = format!("23{}", "ab".repeat(19));
        assert_eq!(short_commit(&sha), "23ababababab");
        assert_eq!(short_commit("v1.2"), "v1.2");
        assert_eq!(short_commit("HEAD~3"), "HEAD~3");
        // 40 characters that are not all hex digits are not a SHA.
        let name = "release-branch-with-a-forty-char-name-xx";
        assert_eq!(name.len(), 40);
        assert_eq!(short_commit(name), name);
    }
}
