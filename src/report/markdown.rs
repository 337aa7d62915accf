//! Markdown helpers shared by every Markdown renderer: escaping of engine- and config-supplied
//! strings so a model named ``a|b<script>`` cannot break a table or inject HTML.

/// Escapes text for use inside Markdown (tables included): `|`, backticks, `<`, `>`, `&`,
/// `*`, `_`, `[`, `]`, `#`, `\` and line breaks.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '|' => out.push_str("\\|"),
            '`' => out.push_str("\\`"),
            '*' | '_' | '[' | ']' | '#' | '\\' | '~' => {
                out.push('\\');
                out.push(ch);
            }
            '\r' => {}
            '\n' => out.push(' '),
            c => out.push(c),
        }
    }
    out
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
