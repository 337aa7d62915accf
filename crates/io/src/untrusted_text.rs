//! The one gate every piece of external text passes before it is printed or posted: engine
//! output, model ids, error text, config strings, artifact fields.
//!
//! [`neutralise`] first masks known secrets ([`crate::redact`]), then makes the text inert for
//! its sink:
//!
//! - [`Sink::Console`] (stdout/stderr, which the Actions runner scans for workflow commands):
//!   a line that would start a command (`::name::`, after leading whitespace, as the runner's
//!   `TrimStart` sees it) gets a space between the colons, and the legacy `##[` prefix (matched
//!   anywhere in a line) becomes `# #[`; `\r`, NEL and Unicode line separators count as line
//!   breaks (the runner splits on `\r` too); control and bidi-override characters are shown as
//!   `\x1b`/`\u{202e}` escapes so they cannot move the cursor or reorder a line.
//! - [`Sink::Markdown`] (check runs, PR comments, job summaries): Markdown and HTML
//!   metacharacters escaped (a model named ``a|b<script>`` cannot break a table or inject
//!   HTML), line breaks folded to spaces, and mentions (`@user`), issue references (`#12`) and
//!   autolinks (`https://…`, `www.…`) defused with a zero-width space, so a crafted string
//!   notifies nobody and links nowhere. (The same trick Dependabot uses for release notes.)
//!
//! Bidi controls are the embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069) and
//! the marks (U+200E, U+200F, U+061C); invisible characters are the zero-width ones (U+200B–
//! U+200D, U+2060–U+2064, U+FEFF, U+180E). Markdown also defuses `GH-1` references.
//!
//! Files are as inert as the console: every text file infergate writes for people or tools
//! (`changes --out` in every format, `export --out`, `summary.md`) passes [`file_sink`], the
//! console's last guard, so `cat`-ing one in a CI log or opening it in an editor runs no
//! workflow command and shows no hidden character.
//!
//! The gate's own workflow commands never pass through here: they are built by
//! `infergate_report::report::actions::command`, whose data escaping keeps them one line.

/// Zero-width space: breaks GitHub's mention, reference and autolink detection, invisible.
const ZWSP: char = '\u{200B}';

/// Where the text goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sink {
    /// A terminal or the Actions log (stdout, stderr).
    Console,
    /// GitHub-flavoured Markdown (one line: tables, lists, headings).
    Markdown,
}

/// External `text` made safe for `sink`: secrets masked, then encoded (see the module docs).
pub(crate) fn neutralise(text: &str, sink: Sink) -> String {
    let text = crate::redact::redact(text);
    match sink {
        Sink::Console => console_inert(&text),
        Sink::Markdown => markdown_inert(&text),
    }
}

/// [`neutralise`] for stdout/stderr.
pub fn console(text: &str) -> String {
    neutralise(text, Sink::Console)
}

/// [`neutralise`] for Markdown.
pub fn markdown(text: &str) -> String {
    neutralise(text, Sink::Markdown)
}

/// The last guard on every text file infergate writes (text, Markdown, HTML, JSON, CSV, XML):
/// the same as the console's, [`console_sink`], so a file holds no byte the console would not
/// print (JSON stays valid JSON, the zero-width spaces [`markdown`] adds stay).
pub fn file_sink(text: &str) -> String {
    console_sink(text)
}

/// The last guard on stdout and stderr: [`crate::stdio`] passes everything the binary prints
/// through here (the gate's own workflow commands excepted, which
/// [`crate::stdio::write_workflow_command`] writes), so a path that forgot [`console`] still
/// prints no workflow command and no control byte. Secrets are masked; control characters,
/// line breaks other than `\n` (`\r`, NEL, U+2028/9) and bidi controls become `\uXXXX`
/// escapes, which keep JSON output valid JSON; a line that would start a workflow command gets
/// a space between its colons and `##[` becomes `# #[`. Idempotent, and text [`console`] already
/// made inert passes unchanged.
pub(crate) fn console_sink(text: &str) -> String {
    let text = crate::redact::redact(text);
    // The zero-width space is the one invisible character kept: it is how [`markdown`] defuses
    // mentions and references in the documents that pass here.
    let plain = |c: char| {
        (c == '\n' || c == '\t' || c == ZWSP)
            || !(c.is_control() || is_line_break(c) || is_bidi_control(c) || is_invisible(c))
    };
    if text.chars().all(plain) && !text.contains("::") && !text.contains("##[") {
        return text;
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if plain(c) {
            escaped.push(c);
        } else {
            escaped.push_str(&format!("\\u{:04x}", c as u32));
        }
    }
    escaped
        .split('\n')
        .map(defuse_line)
        .collect::<Vec<_>>()
        .join("\n")
}

/// One line with its workflow command defused: a space between the colons of a leading `::`
/// (after whitespace, as the runner's `TrimStart` sees it), and `##[` as `# #[`.
fn defuse_line(line: &str) -> String {
    let lead = line.len() - line.trim_start().len();
    let mut line = line.to_string();
    if line[lead..].starts_with("::") {
        line.insert(lead + 1, ' ');
    }
    line.replace("##[", "# #[")
}

fn is_line_break(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// Bidi embeddings, overrides, isolates and marks: they can make a line read differently than
/// it is.
pub fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}'
    )
}

/// Zero-width and invisible formatting characters: they hide text or split a word (a mention,
/// a reference) without showing.
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{200B}'..='\u{200D}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}' | '\u{180E}'
    )
}

fn console_inert(text: &str) -> String {
    let mut lines = Vec::new();
    let mut chars = text.chars().peekable();
    let mut line = String::new();
    while let Some(c) = chars.next() {
        if is_line_break(c) {
            if c == '\r' && chars.peek() == Some(&'\n') {
                chars.next();
            }
            lines.push(defuse_line(&std::mem::take(&mut line)));
        } else if c.is_control() && c != '\t' {
            line.push_str(&format!("\\x{:02x}", c as u32));
        } else if is_bidi_control(c) || is_invisible(c) {
            line.push_str(&format!("\\u{{{:04x}}}", c as u32));
        } else {
            line.push(c);
        }
    }
    lines.push(defuse_line(&line));
    lines.join("\n")
}

fn markdown_inert(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 8);
    for (i, &ch) in chars.iter().enumerate() {
        let next = chars.get(i + 1).copied();
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '|' => out.push_str("\\|"),
            '`' => out.push_str("\\`"),
            '@' => {
                out.push('@');
                out.push(ZWSP);
            }
            '#' => {
                out.push_str("\\#");
                if next.is_some_and(|n| n.is_ascii_alphanumeric()) {
                    out.push(ZWSP);
                }
            }
            '*' | '_' | '[' | ']' | '\\' | '~' => {
                out.push('\\');
                out.push(ch);
            }
            ':' if chars.get(i + 1..i + 3) == Some(&['/', '/']) => {
                out.push(':');
                out.push(ZWSP);
            }
            '.' if i >= 3 && chars[i - 3..i].iter().all(|c| c.eq_ignore_ascii_case(&'w')) => {
                out.push(ZWSP);
                out.push('.');
            }
            // `GH-12` links issue 12 as `#12` does.
            'H' | 'h'
                if i >= 1
                    && chars[i - 1].eq_ignore_ascii_case(&'g')
                    && (i < 2 || !chars[i - 2].is_alphanumeric())
                    && next == Some('-')
                    && chars.get(i + 2).is_some_and(char::is_ascii_digit) =>
            {
                out.push(ch);
                out.push(ZWSP);
            }
            '\r' => {}
            c if is_line_break(c) => out.push(' '),
            c if c.is_control() || is_bidi_control(c) || is_invisible(c) => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sink_guard_defuses_commands_keeps_json_valid_and_is_idempotent() {
        let hostile = "id\0\x07\x1b[31m\r::warning::x\u{2028}::error::y\u{202e}##[group]";
        let json = serde_json::to_string_pretty(&serde_json::json!({ "run": hostile })).unwrap();
        let guarded = console_sink(&json);
        let back: serde_json::Value = serde_json::from_str(&guarded).expect("still JSON");
        // The escapes are JSON's own: the value reads back as it was (with `##[` defused).
        assert_eq!(
            back["run"].as_str(),
            Some(hostile.replace("##[", "# #[").as_str())
        );
        let text = console_sink(&format!("{hostile}\n  ::notice::z\n"));
        for line in text.split(['\n', '\r']) {
            assert!(!line.trim_start().starts_with("::"), "{line:?}");
            assert!(
                !line.chars().any(|c| c.is_control() && c != '\t'),
                "{line:?}"
            );
        }
        assert!(!text.contains("##["));
        assert_eq!(console_sink(&text), text);
        assert_eq!(console_sink("plain text\n"), "plain text\n");
        let inert = console(hostile);
        assert_eq!(console_sink(&inert), inert);
    }

    #[test]
    fn console_defuses_workflow_commands_on_every_kind_of_line_break() {
        let t = console(
            "model x\n::error title=pwned::owned\r::set-output name=a::b\r\n  ::warning::w",
        );
        for line in t.split(['\n', '\r']) {
            assert!(!line.trim_start().starts_with("::"), "{t:?}");
        }
        assert!(t.contains(": :error title=pwned::owned"), "{t:?}");
        assert_eq!(console("a\u{2028}::x::y"), "a\n: :x::y");
        assert_eq!(console("log ##[error]boom"), "log # #[error]boom");
        assert_eq!(console("plain text: fine"), "plain text: fine");
    }

    #[test]
    fn console_shows_control_and_bidi_characters_as_escapes() {
        assert_eq!(console("a\x1b[31mred"), "a\\x1b[31mred");
        assert_eq!(console("a\u{202e}b"), "a\\u{202e}b");
        assert_eq!(console("tab\tkept"), "tab\tkept");
    }

    #[test]
    fn markdown_escapes_table_breakers_and_html() {
        assert_eq!(markdown("a|b"), "a\\|b");
        assert_eq!(markdown("<script>"), "&lt;script&gt;");
        assert_eq!(markdown("`x`"), "\\`x\\`");
        assert_eq!(markdown("Qwen/Qwen3-8B"), "Qwen/Qwen3-8B");
        assert_eq!(markdown("line1\nline2"), "line1 line2");
    }

    #[test]
    fn markdown_defuses_mentions_references_and_autolinks() {
        let m = markdown("@octocat see https://evil.example and WWW.evil.example #12");
        assert!(!m.contains("@o"), "{m}");
        assert!(!m.contains("https://"), "{m}");
        assert!(!m.to_ascii_lowercase().contains("www."), "{m}");
        assert!(!m.contains("#12"), "{m}");
        assert_eq!(
            m.replace(ZWSP, ""),
            "@octocat see https://evil.example and WWW.evil.example \\#12"
        );
    }

    #[test]
    fn bidi_marks_and_invisible_characters_are_neutralised_in_every_sink() {
        let hostile = "a\u{200e}b\u{200f}c\u{061c}d\u{200b}e\u{200d}f\u{2060}g\u{feff}h\u{202e}i";
        let md = markdown(hostile);
        assert_eq!(
            md,
            "a\u{FFFD}b\u{FFFD}c\u{FFFD}d\u{FFFD}e\u{FFFD}f\u{FFFD}g\u{FFFD}h\u{FFFD}i"
        );
        let c = console(hostile);
        assert!(c.is_ascii(), "{c}");
        assert!(c.contains("\\u{200e}") && c.contains("\\u{feff}"), "{c}");
        // The last guard keeps the zero-width space (markdown's own defusing), nothing else.
        let sink = file_sink(hostile);
        assert!(sink.chars().all(|ch| ch.is_ascii() || ch == ZWSP), "{sink}");
        assert!(
            sink.contains("\\u200e") && sink.contains("\\u202e"),
            "{sink}"
        );
        // The zero-width spaces markdown adds to defuse a mention stay in a file.
        let defused = markdown("@octocat");
        assert_eq!(file_sink(&defused), defused);
        assert_eq!(console_sink(&sink), sink, "idempotent");
    }

    #[test]
    fn markdown_defuses_gh_references() {
        for r in ["GH-1", "gh-12", "see GH-3."] {
            let m = markdown(r);
            assert!(!m.to_ascii_uppercase().contains("GH-"), "{r}: {m}");
            assert_eq!(m.replace(ZWSP, ""), r);
        }
        assert_eq!(
            markdown("HIGH-5"),
            "HIGH-5",
            "a word ending in gh is no reference"
        );
        assert_eq!(markdown("GH-x"), "GH-x");
    }
}
