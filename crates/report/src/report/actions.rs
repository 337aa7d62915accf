//! GitHub Actions files and workflow commands: the job summary (`$GITHUB_STEP_SUMMARY`), step
//! outputs (`$GITHUB_OUTPUT`) and `::error`/`::warning` lines on stdout.
//!
//! These need no token, so they work for pull requests from forks too: the verdict always
//! reaches the job page and the next steps. Escaping follows `@actions/core`: in data `%`, CR
//! and LF are percent-encoded (`%` first); in properties also `:` and `,`.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

use crate::report::layout::{cell_message, cell_title};
use infergate_schema::verdict::{CellVerdict, ComparisonReport, Metric};

/// Escapes the message part of a workflow command.
pub(crate) fn escape_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a property value of a workflow command (`title=...`).
pub(crate) fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

/// One workflow command line: `::name k=v,k2=v2::message`. Message and properties may quote
/// external text: they pass [`infergate_io::untrusted_text::console`] first (secrets masked, a legacy
/// `##[` defused), and escaping keeps the whole command on one line.
pub fn command(name: &str, properties: &[(&str, &str)], message: &str) -> String {
    let message = &infergate_io::untrusted_text::console(message);
    let props: Vec<String> = properties
        .iter()
        .map(|(k, v)| {
            format!(
                "{k}={}",
                escape_property(&infergate_io::untrusted_text::console(v))
            )
        })
        .collect();
    if props.is_empty() {
        format!("::{name}::{}", escape_data(message))
    } else {
        format!("::{name} {}::{}", props.join(","), escape_data(message))
    }
}

/// `::error` per regressed or capacity-regressed cell and `::warning` per inconclusive one.
pub(crate) fn workflow_commands(report: &ComparisonReport) -> Vec<String> {
    let mut out = Vec::new();
    for cell in &report.cells {
        let level = match cell.verdict {
            v if v.is_regression() => "error",
            CellVerdict::Inconclusive => "warning",
            _ => continue,
        };
        out.push(command(
            level,
            &[("title", &format!("infergate {}", cell_title(cell)))],
            &cell_message(cell, report.rule.confidence),
        ));
    }
    out
}

/// The step output `not-gated`: the metric keys of [`ComparisonReport::not_gated_metrics`]
/// over `reports` (one gate's, or every profile's of a merge), each once, comma-separated;
/// `unknown` for a reason an older file holds only in words.
pub(crate) fn not_gated_output<'a>(
    reports: impl IntoIterator<Item = &'a ComparisonReport>,
) -> String {
    let mut keys: Vec<&str> = Vec::new();
    for m in reports
        .into_iter()
        .flat_map(ComparisonReport::not_gated_metrics)
    {
        let key = m.map_or("unknown", Metric::as_str);
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys.join(",")
}

/// Appends Markdown to the job summary file. Opened in append mode: earlier steps' summaries
/// (and earlier suites of this step) are kept.
pub(crate) fn append_step_summary(path: &Path, markdown: &str) -> std::io::Result<()> {
    let mut text = markdown.to_string();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    append(path, &text)
}

/// Appends `text` to the file at `path`, creating it when missing.
fn append(path: &Path, text: &str) -> std::io::Result<()> {
    let mut f = OpenOptions::new().create(true).append(true).open(path)?;
    f.write_all(text.as_bytes())?;
    f.flush()
}

/// One output entry in the `$GITHUB_OUTPUT` format: `name=value`, or the heredoc form
/// `name<<DELIM` … `DELIM` when the value spans lines. The delimiter is random and checked not
/// to occur in the value, so a value cannot end the block early and inject other outputs.
pub(crate) fn format_output(name: &str, value: &str) -> String {
    if !value.contains(['\n', '\r']) {
        return format!("{name}={value}\n");
    }
    let mut delimiter;
    loop {
        delimiter = format!("ghadelimiter_{:032x}", rand::random::<u128>());
        if !value.contains(&delimiter) {
            break;
        }
    }
    format!("{name}<<{delimiter}\n{value}\n{delimiter}\n")
}

/// Appends step outputs to the `$GITHUB_OUTPUT` file.
pub(crate) fn write_outputs(path: &Path, outputs: &[(&str, String)]) -> std::io::Result<()> {
    let text: String = outputs.iter().map(|(n, v)| format_output(n, v)).collect();
    append(path, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_matches_the_toolkit() {
        assert_eq!(escape_data("50% of\r\nit"), "50%25 of%0D%0Ait");
        // `%` first: an already-escaped-looking input is not double-decoded later.
        assert_eq!(escape_data("%0A"), "%250A");
        assert_eq!(
            escape_property("C=8 / 32k: −7.4%, bad"),
            "C=8 / 32k%3A −7.4%25%2C bad"
        );
        assert_eq!(
            command("error", &[("title", "a:b")], "line1\nline2"),
            "::error title=a%3Ab::line1%0Aline2"
        );
        assert_eq!(command("warning", &[], "x"), "::warning::x");
    }

    #[test]
    fn outputs_use_heredoc_for_multiline_values() {
        assert_eq!(format_output("verdict", "pass"), "verdict=pass\n");
        let multi = format_output("summary", "a\nb");
        let mut lines = multi.lines();
        let head = lines.next().unwrap();
        let delim = head.strip_prefix("summary<<").unwrap();
        assert!(delim.starts_with("ghadelimiter_"));
        assert_eq!(lines.next(), Some("a"));
        assert_eq!(lines.next(), Some("b"));
        assert_eq!(lines.next(), Some(delim));
        assert_eq!(lines.next(), None);
    }

    #[test]
    fn summary_is_appended_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("summary.md");
        std::fs::write(&p, "earlier step\n").unwrap();
        append_step_summary(&p, "## ours").unwrap();
        append_step_summary(&p, "## second").unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "earlier step\n## ours\n## second\n"
        );
    }
}
