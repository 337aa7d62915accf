//! Markdown helpers shared by every Markdown renderer: escaping of engine- and config-supplied
//! strings so a model named ``a|b<script>`` cannot break a table, inject HTML, mention anyone
//! or post a link.

/// Escapes text for use inside Markdown (tables included): secrets masked, `|`, backticks,
/// `<`, `>`, `&`, `*`, `_`, `[`, `]`, `#`, `\`, `~` escaped, line breaks folded, and mentions
/// and autolinks defused. One implementation: [`infergate_io::untrusted_text::markdown`].
pub fn escape(text: &str) -> String {
    infergate_io::untrusted_text::markdown(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_table_breakers_and_html() {
        assert_eq!(escape("a|b"), "a\\|b");
        assert_eq!(escape("<script>"), "&lt;script&gt;");
        assert_eq!(escape("`x`"), "\\`x\\`");
        assert_eq!(escape("Qwen/Qwen3-8B"), "Qwen/Qwen3-8B");
        assert_eq!(escape("line1\nline2"), "line1 line2");
    }
}
