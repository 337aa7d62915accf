#!/usr/bin/env python3
"""Generate a tiny random-weight llama-architecture GGUF that llama.cpp's `llama-server` loads.

Why: no model can be downloaded in CI, yet the gate must be proven against a real engine. The
weights are random, so the text is gibberish, but the compute per token is that of a real
(small) transformer: 512 wide, 8 layers, ~56 MB in f16, a few hundred tok/s on 2 CPU threads.

Properties the gate relies on:
- Deterministic: the same seed and shape give a byte-identical file.
- Streams always run to `max_tokens`: EOS (and every non-printable byte token) is made
  unsamplable. The embedding writes a constant into one residual channel that no layer writes
  (the rows of `attn_output` and `ffn_down` for that channel are zero), so after the final RMS
  norm that channel is always positive; the output rows of the suppressed tokens read only that
  channel, with a large negative weight, so their logits are always about -1e4.
- Tokenizer: `gpt2` byte-level BPE over all 256 bytes (so any input tokenizes) plus a few
  hundred merges learnt from a small built-in English text; only printable ASCII (and newline)
  can be generated, so every streamed chunk is valid UTF-8.

Usage: gen_tiny_gguf.py [--out PATH] [--cache DIR] [--seed N] [--width 512] [--layers 8]
Prints the model path as the last line of stdout; reuses an existing file with the same name.
Needs the `gguf` and `numpy` packages (scripts/llama/requirements.txt).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from collections import Counter

try:
    import numpy as np
    import gguf
except ImportError as exc:  # pragma: no cover - message for humans
    sys.exit(
        f"gen_tiny_gguf: missing package ({exc}); run it with the venv python printed by "
        "`scripts/llama/build-llama-server.sh --print-venv`, or pip install -r "
        "scripts/llama/requirements.txt"
    )

GENERATOR_VERSION = 2
EOS_TEXT = "<|endoftext|>"

# Built-in training text for the merges: plain English about serving models.
CORPUS = """
The quick brown fox jumps over the lazy dog. A language model reads a prompt and writes the
next token, one token at a time, until it reaches the maximum number of tokens or the end of
the text. The server batches many requests together so that the hardware stays busy, and the
time to the first token, the time between tokens and the throughput in tokens per second are
the numbers that matter to the people who run it. When a change to the engine makes one of these
numbers worse, the performance gate should notice it before the change is merged, and it should
say which cell of the matrix got slower, by how much, and how sure it is. Noise is the enemy of
every benchmark: the same configuration, started again on the same machine, will not give the
same result, so the gate measures the noise and only reports a regression that is larger than
what the noise could explain. This is the story of the tokens, the threads and the time they
take; there is nothing here but words that are common in the English language, and the numbers
one, two, three, four, five, six, seven, eight, nine and ten, in the order that they come.
"""

# GPT-2's reversible byte -> printable unicode mapping (bytes_to_unicode in the GPT-2 repo).
def bytes_to_unicode() -> dict[int, str]:
    bs = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("\xa1"), ord("\xac") + 1))
        + list(range(ord("\xae"), ord("\xff") + 1))
    )
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


PRETOKENIZE = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+""")


def learn_merges(n_merges: int) -> list[tuple[str, str]]:
    """Plain BPE training over the built-in text (deterministic: ties broken by the pair)."""
    b2u = bytes_to_unicode()
    words = Counter(
        tuple(b2u[b] for b in piece.encode("utf-8")) for piece in PRETOKENIZE.findall(CORPUS)
    )
    merges: list[tuple[str, str]] = []
    known = set(b2u.values())
    while len(merges) < n_merges:
        pairs: Counter = Counter()
        for word, freq in words.items():
            for a, b in zip(word, word[1:]):
                pairs[(a, b)] += freq
        if not pairs:
            break
        best = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        merged = best[0] + best[1]
        merges.append(best)
        known.add(merged)
        new_words: Counter = Counter()
        for word, freq in words.items():
            out = []
            i = 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(merged)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            new_words[tuple(out)] += freq
        words = new_words
    return merges


def build_vocab(n_merges: int):
    b2u = bytes_to_unicode()
    tokens = [b2u[b] for b in range(256)]
    # Samplable: printable ASCII and newline; everything else only appears in prompts.
    samplable = [0x20 <= b <= 0x7E or b == 0x0A for b in range(256)]
    merges = learn_merges(n_merges)
    for a, b in merges:
        tokens.append(a + b)
        samplable.append(True)  # merges are built from printable ASCII text
    token_types = [gguf.TokenType.NORMAL] * len(tokens)
    eos_id = len(tokens)
    tokens.append(EOS_TEXT)
    token_types.append(gguf.TokenType.CONTROL)
    samplable.append(False)
    merge_strings = [f"{a} {b}" for a, b in merges]
    return tokens, token_types, merge_strings, eos_id, samplable


def default_cache() -> str:
    root = os.environ.get("INFERGATE_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "infergate"
    )
    return os.path.join(root, "llama.cpp", "models")


def generate(path: str, seed: int, width: int, layers: int, ff: int, heads: int,
             n_merges: int, ctx: int) -> None:
    rng = np.random.default_rng(seed)
    tokens, token_types, merges, eos_id, samplable = build_vocab(n_merges)
    n_vocab = len(tokens)
    gate_ch = width - 1  # the residual channel that no layer writes
    std = 0.02

    def rand(shape, scale=std):
        return (rng.standard_normal(shape, dtype=np.float32) * scale).astype(np.float32)

    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tiny-", suffix=".gguf.tmp", dir=directory)
    os.close(fd)
    try:
        w = gguf.GGUFWriter(tmp, "llama")
        w.add_name("infergate-tiny-random")
        w.add_context_length(ctx)
        w.add_embedding_length(width)
        w.add_block_count(layers)
        w.add_feed_forward_length(ff)
        w.add_head_count(heads)
        w.add_head_count_kv(heads)
        w.add_rope_dimension_count(width // heads)
        w.add_rope_freq_base(10000.0)
        w.add_layer_norm_rms_eps(1e-5)
        w.add_vocab_size(n_vocab)
        w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("gpt-2")  # llama.cpp's name for the GPT-2 pre-tokenizer
        w.add_token_list(tokens)
        w.add_token_types(token_types)
        w.add_token_merges(merges)
        w.add_bos_token_id(eos_id)
        w.add_eos_token_id(eos_id)
        w.add_add_bos_token(False)

        embd = rand((n_vocab, width), 1.0)
        embd[:, gate_ch] = 4.0  # constant in the reserved channel
        w.add_tensor("token_embd.weight", embd.astype(np.float16))
        for i in range(layers):
            p = f"blk.{i}."
            w.add_tensor(p + "attn_norm.weight", np.ones(width, dtype=np.float32))
            w.add_tensor(p + "attn_q.weight", rand((width, width), 0.1).astype(np.float16))
            w.add_tensor(p + "attn_k.weight", rand((width, width), 0.1).astype(np.float16))
            w.add_tensor(p + "attn_v.weight", rand((width, width)).astype(np.float16))
            wo = rand((width, width))
            wo[gate_ch, :] = 0.0  # no layer writes the reserved channel
            w.add_tensor(p + "attn_output.weight", wo.astype(np.float16))
            w.add_tensor(p + "ffn_norm.weight", np.ones(width, dtype=np.float32))
            w.add_tensor(p + "ffn_gate.weight", rand((ff, width)).astype(np.float16))
            w.add_tensor(p + "ffn_up.weight", rand((ff, width)).astype(np.float16))
            down = rand((width, ff))
            down[gate_ch, :] = 0.0
            w.add_tensor(p + "ffn_down.weight", down.astype(np.float16))
        w.add_tensor("output_norm.weight", np.ones(width, dtype=np.float32))
        out = rand((n_vocab, width), 0.05)
        out[:, gate_ch] = 0.0  # normal tokens ignore the reserved channel
        for tok, ok in enumerate(samplable):
            if not ok:
                out[tok, :] = 0.0
                out[tok, gate_ch] = -1.0e4  # logit ~ -1e4 * (positive) => never sampled
        w.add_tensor("output.weight", out)  # f32: small, and keeps the -1e4 exact

        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="output file (default: <cache>/tiny-llama-...gguf)")
    ap.add_argument("--cache", default=default_cache(), help="directory for the default output")
    ap.add_argument("--seed", type=int, default=20240611)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--ff", type=int, default=1536, help="feed-forward width")
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--merges", type=int, default=400)
    ap.add_argument("--ctx", type=int, default=4096, help="trained context length")
    ap.add_argument("--force", action="store_true", help="regenerate even if the file exists")
    a = ap.parse_args()
    if a.width % a.heads != 0 or a.width < 16 or a.layers < 1 or a.ff < 1 or a.ctx < 64:
        ap.error("need width divisible by heads, width >= 16, layers >= 1, ff >= 1, ctx >= 64")
    name = (f"tiny-llama-w{a.width}-l{a.layers}-ff{a.ff}-h{a.heads}-m{a.merges}-c{a.ctx}"
            f"-s{a.seed}-v{GENERATOR_VERSION}.gguf")
    path = os.path.abspath(a.out or os.path.join(a.cache, name))
    if os.path.isfile(path) and not a.force:
        print(f"gen_tiny_gguf: reusing {path}", file=sys.stderr)
    else:
        print(f"gen_tiny_gguf: writing {path}", file=sys.stderr)
        generate(path, a.seed, a.width, a.layers, a.ff, a.heads, a.merges, a.ctx)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
