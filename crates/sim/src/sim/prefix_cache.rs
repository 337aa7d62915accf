//! Automatic prefix caching, as vLLM does it by default: prompts are split into full blocks of
//! [`BLOCK_TOKENS`] tokens, each identified by a hash chained over all blocks before it; a new
//! request only prefills the tokens after its longest cached prefix. This is what makes the
//! seed's shared-prefix prompts (75% shared) cheap to restart.

use std::collections::{HashSet, VecDeque};

/// Tokens per cache block (vLLM's default block size).
pub(crate) const BLOCK_TOKENS: u64 = 16;

/// Chained hash of one block given the previous block's hash.
pub(crate) fn chain(prev: u64, block: impl IntoIterator<Item = u32>) -> u64 {
    let mut h = prev ^ 0xcbf2_9ce4_8422_2325;
    for x in block {
        h ^= x as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // final avalanche so neighbouring blocks spread over the set
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

/// The set of cached blocks, bounded (oldest inserted evicted first).
#[derive(Debug, Clone)]
pub(crate) struct PrefixCache {
    blocks: HashSet<u64>,
    order: VecDeque<u64>,
    capacity_blocks: usize,
}

impl PrefixCache {
    /// A cache holding at most `capacity_tokens` tokens' worth of blocks.
    pub(crate) fn new(capacity_tokens: u64) -> Self {
        PrefixCache {
            blocks: HashSet::new(),
            order: VecDeque::new(),
            capacity_blocks: (capacity_tokens / BLOCK_TOKENS) as usize,
        }
    }

    /// Number of leading blocks of `prompt_blocks` already cached; then caches all of them.
    pub(crate) fn lookup_and_insert(&mut self, prompt_blocks: &[u64]) -> usize {
        let hit = prompt_blocks
            .iter()
            .take_while(|b| self.blocks.contains(b))
            .count();
        for &b in &prompt_blocks[hit..] {
            if self.capacity_blocks == 0 {
                break;
            }
            if self.blocks.insert(b) {
                self.order.push_back(b);
                while self.order.len() > self.capacity_blocks {
                    if let Some(old) = self.order.pop_front() {
                        self.blocks.remove(&old);
                    }
                }
            }
        }
        hit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(seed: u32, n: usize, shared: usize) -> Vec<u64> {
        let mut prev = 0;
        (0..n)
            .map(|i| {
                let v = if i < shared {
                    i as u32
                } else {
                    seed * 1000 + i as u32
                };
                prev = chain(prev, [v]);
                prev
            })
            .collect()
    }

    #[test]
    fn second_prompt_hits_the_shared_prefix_only() {
        let mut c = PrefixCache::new(1_000_000);
        assert_eq!(c.lookup_and_insert(&blocks(1, 100, 75)), 0);
        assert_eq!(c.lookup_and_insert(&blocks(2, 100, 75)), 75);
        assert_eq!(c.lookup_and_insert(&blocks(2, 100, 75)), 100);
    }

    #[test]
    fn capacity_bounds_the_cache() {
        let mut c = PrefixCache::new(10 * BLOCK_TOKENS);
        c.lookup_and_insert(&blocks(1, 100, 0));
        assert_eq!(
            c.lookup_and_insert(&blocks(1, 100, 0)),
            0,
            "the prefix was evicted"
        );
        let mut none = PrefixCache::new(0);
        none.lookup_and_insert(&blocks(1, 5, 0));
        assert_eq!(none.lookup_and_insert(&blocks(1, 5, 0)), 0);
    }
}
