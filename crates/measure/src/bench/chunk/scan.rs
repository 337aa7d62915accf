//! The fast read of a chunk: one validating walk over the JSON that reads `choices[].text`,
//! `choices[].delta.content` / `reasoning_content`, `choices[].finish_reason` and `usage`'s
//! two counts, and skips everything else without building it.
//!
//! It is strict where `serde_json` is lenient and never the other way round: it answers only
//! for JSON it checked completely (UTF-8, grammar, escapes, nesting) and whose answer is the
//! one `serde_json` gives, and returns `None` for anything else (an `error` member, a
//! duplicate field, an escaped key, a surrogate escape, a number that is not a plain `u64`
//! where a count belongs, a value of another type than the field's, malformed JSON), which
//! the caller then deserialises in full.

use super::{ChunkInfo, Finish};

/// Deeper nesting than this is left to `serde_json` (whose own limit is 128).
const MAX_DEPTH: u32 = 64;

/// What the chunk says, when the scan is certain; `None` leaves it to `serde_json`.
pub(super) fn chunk(payload: &[u8]) -> Option<ChunkInfo> {
    // Every string is then valid UTF-8; outside strings the grammar admits ASCII only.
    std::str::from_utf8(payload).ok()?;
    let mut s = Scan {
        b: payload,
        i: 0,
        depth: 0,
    };
    let info = s.top()?;
    s.ws();
    (s.i == s.b.len()).then_some(info)
}

struct Scan<'a> {
    b: &'a [u8],
    i: usize,
    depth: u32,
}

impl<'a> Scan<'a> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    #[inline]
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    #[inline]
    fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// Walks the members of an object whose `{` is next: `member(self, key)` reads each value
    /// (the key is the raw bytes between its quotes, never escaped).
    fn object(&mut self, mut member: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        self.enter()?;
        self.ws();
        if self.peek()? == b'}' {
            self.i += 1;
            self.depth -= 1;
            return Some(());
        }
        loop {
            self.ws();
            let key = self.key()?;
            self.eat(b':')?;
            self.ws();
            member(self, key)?;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    self.depth -= 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// Walks the elements of an array whose `[` is next; returns how many there were.
    fn array(&mut self, mut element: impl FnMut(&mut Self) -> Option<()>) -> Option<usize> {
        self.eat(b'[')?;
        self.enter()?;
        self.ws();
        if self.peek()? == b']' {
            self.i += 1;
            self.depth -= 1;
            return Some(0);
        }
        let mut n = 0;
        loop {
            self.ws();
            element(self)?;
            n += 1;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    self.depth -= 1;
                    return Some(n);
                }
                _ => return None,
            }
        }
    }

    fn enter(&mut self) -> Option<()> {
        self.depth += 1;
        (self.depth <= MAX_DEPTH).then_some(())
    }

    /// The top-level object.
    fn top(&mut self) -> Option<ChunkInfo> {
        let mut info = ChunkInfo::default();
        let (mut choices, mut usage, mut error) = (false, false, false);
        self.object(|s, key| match key {
            b"choices" => {
                once(&mut choices)?;
                let n = s.array(|s| s.choice(&mut info))?;
                info.has_choices = n > 0;
                Some(())
            }
            b"usage" => {
                once(&mut usage)?;
                if s.null() {
                    return Some(());
                }
                s.usage(&mut info)
            }
            // `"error": null` is no error; any other is read (and reported) by serde_json.
            b"error" => {
                once(&mut error)?;
                s.null().then_some(())
            }
            _ => s.skip_value(),
        })?;
        Some(info)
    }

    /// A text member (`text`, `delta.content`, `delta.reasoning_content`), seen at most once:
    /// a non-empty string marks the chunk as carrying text.
    fn text_field(&mut self, seen: &mut bool, info: &mut ChunkInfo) -> Option<()> {
        once(seen)?;
        info.has_text |= self.nullable_string()?.unwrap_or(false);
        Some(())
    }

    /// One element of `choices`.
    fn choice(&mut self, info: &mut ChunkInfo) -> Option<()> {
        let (mut text, mut delta, mut finish) = (false, false, false);
        self.object(|s, key| match key {
            b"text" => s.text_field(&mut text, info),
            b"finish_reason" => {
                once(&mut finish)?;
                if s.null() {
                    return Some(());
                }
                let start = s.i;
                s.string()?;
                let raw = &s.b[start + 1..s.i - 1];
                // An escaped reason is left to serde_json, which unescapes it first.
                if raw.contains(&b'\\') {
                    return None;
                }
                if info.finish.is_none() {
                    info.finish = Some(Finish::of(raw));
                }
                Some(())
            }
            b"delta" => {
                once(&mut delta)?;
                if s.null() {
                    return Some(());
                }
                let (mut content, mut reasoning) = (false, false);
                s.object(|s, key| match key {
                    b"content" => s.text_field(&mut content, info),
                    b"reasoning_content" => s.text_field(&mut reasoning, info),
                    _ => s.skip_value(),
                })
            }
            _ => s.skip_value(),
        })
    }

    /// The `usage` object.
    fn usage(&mut self, info: &mut ChunkInfo) -> Option<()> {
        let (mut prompt, mut completion) = (false, false);
        self.object(|s, key| match key {
            b"prompt_tokens" => {
                once(&mut prompt)?;
                info.prompt_tokens = s.nullable_count()?;
                Some(())
            }
            b"completion_tokens" => {
                once(&mut completion)?;
                info.completion_tokens = s.nullable_count()?;
                Some(())
            }
            _ => s.skip_value(),
        })
    }

    /// `null` next (consumed) or not.
    fn null(&mut self) -> bool {
        let yes = self.b[self.i..].starts_with(b"null");
        if yes {
            self.i += 4;
        }
        yes
    }

    /// A string or `null`: `Some(non-empty)` for a string, `None` for `null`.
    fn nullable_string(&mut self) -> Option<Option<bool>> {
        if self.null() {
            return Some(None);
        }
        let start = self.i;
        self.string()?;
        Some(Some(self.i - start > 2))
    }

    /// A `u64` written as a plain integer, or `null`.
    fn nullable_count(&mut self) -> Option<Option<u64>> {
        if self.null() {
            return Some(None);
        }
        let start = self.i;
        let mut n: u64 = 0;
        while let Some(d @ b'0'..=b'9') = self.peek() {
            n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
            self.i += 1;
        }
        let digits = self.i - start;
        let leading_zero = digits > 1 && self.b[start] == b'0';
        if digits == 0 || leading_zero || matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        Some(Some(n))
    }

    /// An object key: the raw bytes between its quotes (a key with an escape is left to
    /// `serde_json`, which would unescape it before matching).
    fn key(&mut self) -> Option<&'a [u8]> {
        if self.peek()? != b'"' {
            return None;
        }
        let start = self.i + 1;
        let end = start + memchr::memchr2(b'"', b'\\', &self.b[start..])?;
        if self.b[end] != b'"' || self.b[start..end].iter().any(|&c| c < 0x20) {
            return None;
        }
        self.i = end + 1;
        Some(&self.b[start..end])
    }

    /// A string whose `"` is next, escapes checked (surrogate escapes are left to
    /// `serde_json`); raw control characters are invalid JSON.
    fn string(&mut self) -> Option<()> {
        if self.peek()? != b'"' {
            return None;
        }
        self.i += 1;
        loop {
            let at = self.i + memchr::memchr2(b'"', b'\\', &self.b[self.i..])?;
            if self.b[self.i..at].iter().any(|&c| c < 0x20) {
                return None;
            }
            self.i = at + 1;
            if self.b[at] == b'"' {
                return Some(());
            }
            match self.peek()? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 1,
                b'u' => {
                    let hex = self.b.get(self.i + 1..self.i + 5)?;
                    let hex = std::str::from_utf8(hex).ok()?;
                    if !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
                        return None;
                    }
                    let unit = u16::from_str_radix(hex, 16).ok()?;
                    if (0xD800..=0xDFFF).contains(&unit) {
                        return None;
                    }
                    self.i += 5;
                }
                _ => return None,
            }
        }
    }

    /// Any JSON value, checked and skipped.
    fn skip_value(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.string(),
            b'{' => self.object(|s, _| s.skip_value()),
            b'[' => self.array(|s| s.skip_value()).map(|_| ()),
            b'n' => self.literal(b"null"),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.b[self.i..]
            .starts_with(word)
            .then(|| self.i += word.len())
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            self.some_digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            self.some_digits()?;
        }
        // A number runs to a delimiter ("01" or "1x" are invalid).
        match self.peek() {
            None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') => Some(()),
            _ => None,
        }
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
    }

    fn some_digits(&mut self) -> Option<()> {
        let start = self.i;
        self.digits();
        (self.i > start).then_some(())
    }
}

/// Marks a field seen; a second occurrence is a duplicate field (an error for `serde_json`).
fn once(seen: &mut bool) -> Option<()> {
    (!std::mem::replace(seen, true)).then_some(())
}
