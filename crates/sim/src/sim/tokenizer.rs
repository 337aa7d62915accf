//! The deterministic tokenizer: a fixed number of characters per token, so clients can
//! calibrate prompt sizes exactly (real tokenizers range from ~1 to ~6 chars per token).

use super::prefix_cache::{BLOCK_TOKENS, chain};

/// Output vocabulary: output token `i` of a request is one of these words (with a leading
/// space), chosen deterministically from the request and position.
const WORDS: &[&str] = &[
    "the", "engine", "decodes", "tokens", "steady", "batch", "cache", "stream", "model", "latency",
    "kernel", "block", "queue", "prefix", "sample", "window", "rate", "step", "draft", "accept",
];

/// Tokenizer with `chars_per_token` characters (Unicode scalar values) per token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SimTokenizer {
    chars_per_token: f64,
}

/// Tokens the chat template adds per message (role markers), like a real template does.
pub(crate) const CHAT_TOKENS_PER_MESSAGE: u64 = 4;
/// Tokens the chat template adds to open the assistant's turn.
pub(crate) const CHAT_GENERATION_PROMPT_TOKENS: u64 = 3;

impl SimTokenizer {
    /// A tokenizer with this density (> 0).
    pub(crate) fn new(chars_per_token: f64) -> Self {
        SimTokenizer { chars_per_token }
    }

    /// Token count of a text: `ceil(chars / chars_per_token)` (0 for the empty text).
    pub(crate) fn count(&self, text: &str) -> u64 {
        let chars = text.chars().count() as f64;
        // the small epsilon keeps exact multiples (e.g. 12 chars at 4.0) from rounding up
        (chars / self.chars_per_token - 1e-9).ceil().max(0.0) as u64
    }

    /// Token count of a chat conversation: each message's content plus the template overhead
    /// ([`CHAT_TOKENS_PER_MESSAGE`] per message, [`CHAT_GENERATION_PROMPT_TOKENS`] once).
    pub(crate) fn count_chat<'a>(&self, contents: impl IntoIterator<Item = &'a str>) -> u64 {
        let per_message = |c| CHAT_TOKENS_PER_MESSAGE + self.count(c);
        CHAT_GENERATION_PROMPT_TOKENS + contents.into_iter().map(per_message).sum::<u64>()
    }

    /// Token ids of a text, one per token: a cheap hash of the characters each token covers,
    /// so equal texts give equal ids.
    pub(crate) fn token_ids(&self, text: &str) -> Vec<u32> {
        let n = self.count(text) as usize;
        let mut ids = Vec::with_capacity(n);
        let mut chars = text.chars();
        let mut consumed = 0u64;
        for i in 0..n {
            let end = (((i + 1) as f64) * self.chars_per_token).round() as u64;
            let mut h: u32 = 2_166_136_261;
            while consumed < end {
                match chars.next() {
                    Some(c) => h = (h ^ c as u32).wrapping_mul(16_777_619),
                    None => break,
                }
                consumed += 1;
            }
            ids.push(h % 150_000);
        }
        ids
    }

    /// Chained hashes of the full [`BLOCK_TOKENS`]-token blocks of a text (for the prefix
    /// cache); block `k` covers the characters of tokens `16k..16k+16`.
    pub(crate) fn block_hashes(&self, text: &str) -> Vec<u64> {
        let total = text.chars().count() as u64;
        let mut out = Vec::new();
        let mut chars = text.chars();
        let mut consumed = 0u64;
        let mut prev = 0u64;
        loop {
            let k = out.len() as u64 + 1;
            let end = ((k * BLOCK_TOKENS) as f64 * self.chars_per_token).round() as u64;
            if end > total || end <= consumed {
                return out;
            }
            let n = (end - consumed) as usize;
            prev = chain(prev, chars.by_ref().take(n).map(|c| c as u32));
            consumed = end;
            out.push(prev);
        }
    }
}

/// Chained hashes of the full blocks of a pre-tokenized prompt.
pub(crate) fn token_block_hashes(ids: &[u32]) -> Vec<u64> {
    let mut prev = 0u64;
    ids.chunks_exact(BLOCK_TOKENS as usize)
        .map(|b| {
            prev = chain(prev, b.iter().copied());
            prev
        })
        .collect()
}

/// Text of output token `pos` of request `request_seed` (one word with a leading space).
pub(crate) fn output_word(request_seed: u64, pos: u64) -> &'static str {
    let h = request_seed
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(pos.wrapping_mul(1_442_695_040_888_963_407));
    WORDS[((h >> 33) % WORDS.len() as u64) as usize]
}

/// Appends output tokens `from..to` of a request to `out`.
pub(crate) fn push_output_text(out: &mut String, request_seed: u64, from: u64, to: u64) {
    for pos in from..to {
        out.push(' ');
        out.push_str(output_word(request_seed, pos));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_ceil_of_chars_over_density() {
        let t4 = SimTokenizer::new(4.0);
        assert_eq!(t4.count(""), 0);
        assert_eq!(t4.count("a"), 1);
        assert_eq!(t4.count("abcd"), 1);
        assert_eq!(t4.count("abcde"), 2);
        assert_eq!(t4.count(&"x".repeat(4000)), 1000);
        assert_eq!(SimTokenizer::new(1.0).count("hello"), 5);
        assert_eq!(SimTokenizer::new(6.0).count(&"y".repeat(600)), 100);
        assert_eq!(SimTokenizer::new(6.25).count(&"z".repeat(51_188)), 8191);
        // characters, not bytes
        assert_eq!(t4.count("éééé"), 1);
    }

    #[test]
    fn token_ids_match_the_count_and_are_deterministic() {
        let t = SimTokenizer::new(4.0);
        let text = "The quick brown fox jumps over the lazy dog";
        let ids = t.token_ids(text);
        assert_eq!(ids.len() as u64, t.count(text));
        assert_eq!(ids, t.token_ids(text));
        assert_eq!(t.count_chat(["hi", "abcdefgh"]), 3 + 4 + 1 + 4 + 2);
    }

    #[test]
    fn block_hashes_cover_full_blocks_and_share_prefixes() {
        let t = SimTokenizer::new(4.0);
        let a = format!("{}{}", "s".repeat(640), "a".repeat(100));
        let b = format!("{}{}", "s".repeat(640), "b".repeat(100));
        let (ha, hb) = (t.block_hashes(&a), t.block_hashes(&b));
        assert_eq!(ha.len(), 740 / 64);
        assert_eq!(ha[..10], hb[..10]);
        assert_ne!(ha[10], hb[10]);
        assert_eq!(token_block_hashes(&[1; 40]).len(), 2);
    }

    #[test]
    fn output_words_are_deterministic() {
        let mut a = String::new();
        push_output_text(&mut a, 9, 0, 5);
        let mut b = String::new();
        push_output_text(&mut b, 9, 0, 2);
        push_output_text(&mut b, 9, 2, 5);
        assert_eq!(a, b);
        assert_eq!(a.split_whitespace().count(), 5);
    }
}
