#!/usr/bin/env python3
"""The Cargo workspace cut (issue 55, deliverable 3), as a re-runnable transform.

Run from the repository root of a clean single-crate tree (the pre-cut layout: `src/lib.rs`
declares every top-level module). It

- maps every top-level module to a crate (CRATES below, bottom first; a module not listed stops
  the script before it changes anything), so files added later under `src/<module>/` follow;
- moves the files with `git mv` into `crates/<dir>/src/`, writes each crate's `lib.rs` and
  `Cargo.toml` (only the dependencies its code names, inherited from `[workspace.dependencies]`;
  test-only ones as dev-dependencies), and turns the root package into the binary plus a thin
  facade lib that re-exports every module under its old name (tests/, benches/ unchanged);
- rewrites paths: `crate::<module>` -> `<crate_ident>::<module>` where the module now lives in
  another crate (grouped `use crate::{..}` split per crate), doc links to crates that are not
  dependencies made plain text, `pub(crate)` -> `pub`, `env!("CARGO_MANIFEST_DIR")` and
  `include_str!` paths, insta snapshot file names;
- moves the synthetic-run generator the unit tests share (`eval::gate::{synthetic_run, ..}`) to
  `infergate_model::synthetic`, and puts the test fixtures other crates' tests use behind a
  `testkit` feature (dev-dependencies enable it);
- deletes `src/layering.rs`: the crate graph is the layer rule now. An upward `crate::` use is
  reported here and left unresolved, so the compiler points at it;
- applies FIXUPS (exact text, each must match once) and runs `cargo fmt --all`.

Python 3.11, stdlib only. `python3 scripts/cut/cut.py --dry-run` prints the plan only.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import textwrap
import tomllib
from pathlib import Path

# ---------------------------------------------------------------------------------------------
# The crate graph, bottom first. A crate may depend only on crates listed before it.
# (dir, modules, one-line description). Package name: infergate-<dir>, ident infergate_<dir>.
CRATES: list[tuple[str, list[str], str]] = [
    # `answer` (the verdict in words) has inherent impls on verdict types (`Against`, `Check`):
    # it stays beside them, so the model crate below has no words of its own.
    ("schema", ["results", "exit", "verdict", "policy", "answer"],
     "The plain data every layer talks through: `results.json` and `verdict.json` schemas, "
     "exit codes, the gate policy and the answer in words every report leads with (the two "
     "waists of the crate graph)."),
    ("io", ["stdio", "fsio", "redact", "untrusted_text"],
     "The process's edges: durable file writes, secrets masked, external text made inert, and "
     "printing that survives a closed pipe (`outln!`/`errln!`/`out!`)."),
    ("model", ["stats", "synthetic"],
     "The noise model and decision rule: pure decisions over plain data (no async runtime, no "
     "network, no files), and the synthetic runner profile its evaluations and tests draw "
     "from."),
    ("sim", ["sim"],
     "The simulated OpenAI-compatible engine (vLLM-style metrics, speed model, faults)."),
    ("config", ["config"], "The gate config (`infergate.toml`): parsing, defaults, validation."),
    ("telemetry", ["telemetry"], "Hardware fingerprint and NVML telemetry."),
    ("measure", ["bench"],
     "Measurement of the sustained-decode matrix against any OpenAI-compatible engine."),
    ("engine", ["engine"], "The supervised engine process: launch, isolation, readiness."),
    ("store", ["import", "baseline", "export"],
     "The baseline store and interop: readers of other tools' result files, the history and "
     "accepted baselines, and other tools' formats."),
    ("report", ["merge", "report"],
     "All rendering: terminal tables, Markdown, GitHub check runs, comments and job summaries; "
     "and shards merged into one run."),
    ("gate", ["run"], "The gate pipeline (`infergate run`): measure, decide, report."),
    ("eval", ["eval"],
     "The gate's error rates and power measured on synthetic runners (`stats-eval`, "
     "`changes-eval`, `ab-eval`)."),
    ("cli", ["doctor", "cli"],
     "Argument structs and the glue each subcommand runs (the binary stays thin)."),
]
PKG_PREFIX = "infergate"
# Modules the old lib.rs declares that do not move (deleted instead).
DELETED_MODULES = ["layering"]
# Printing macros (`#[macro_export]` in the crate that owns `stdio`).
MACROS = ["outln", "errln", "out"]
MACRO_CRATE = "io"

# The synthetic-run generator the unit tests of stats, baseline, report and run share: it lived
# in `eval::gate` (above all of them); moved into the model crate's `synthetic` module. Items
# marked test-only are gated by `cfg(any(test, feature = "testkit"))`.
SYNTHETIC_FROM = "src/eval/gate.rs"
SYNTHETIC_ITEMS = ["CONCURRENCY", "CONTEXTS", "cell_levels", "template", "CellDraw",
                   "synthetic_cell", "noisy_history", "synthetic_run"]
SYNTHETIC_TEST_ITEMS = ["noisy_history", "synthetic_run"]
SYNTHETIC_HEADER = '''//! The synthetic 20-cell runner profile (5 concurrency levels x 4 contexts, levels shaped like
//! the seed's RTX 5090 run): the template run and cell draws `stats-eval` and `ab-eval` build
//! their histories from, and the synthetic runs the unit tests of every crate above this one
//! share (`testkit` feature). Moved out of `eval::gate` by the workspace cut.

#[cfg(any(test, feature = "testkit"))]
use rand::rngs::StdRng;
#[cfg(any(test, feature = "testkit"))]
use rand_distr::{Distribution, Normal};
'''
# Old paths to the moved test items, rewritten before anything else.
SYNTHETIC_ALIASES = [
    (r"crate::eval::(\{\s*noisy_history,\s*synthetic_run\s*\}|synthetic_run\b|noisy_history\b)",
     r"crate::synthetic::\1"),
]

# Test fixtures other crates' unit tests use: `#[cfg(test)] pub(crate) mod|fn NAME` in FILE
# becomes `#[cfg(any(test, feature = "testkit"))] pub ...` (crate dir, file, item name).
TESTKIT_ITEMS = [
    ("schema", "src/verdict.rs", "fixtures"),
    ("store", "src/export/mod.rs", "fixture"),
]
# Extra dependencies a crate's testkit feature needs (made optional when not otherwise used).
TESTKIT_DEPS = {"model": ["rand", "rand_distr"]}
# Crates that keep `missing_docs` (every public item documented): it holds there because their
# items were public before the cut. In the others `pub(crate)` became `pub`, so the lint would
# ask for docs on ~every former internal item; the lead can widen this list crate by crate.
MISSING_DOCS = ["schema"]

# Crates whose whole normal dependency tree must not contain these packages (checked at the end).
NO_DEPS = {"model": ["tokio", "reqwest", "octocrab", "axum", "hyper"],
           "schema": ["tokio", "reqwest", "octocrab", "axum", "hyper"]}

# Content-keyed fix-ups for what no rule covers: (path after the cut, old text, new text, why).
# Each must match exactly once; a miss is reported (not fatal) so the lead can redo it by hand.
FIXUPS: list[tuple[str, str, str, str]] = [
    ("scripts/action/resolve.sh",
     "find Cargo.toml Cargo.lock src -type f",
     "find Cargo.toml Cargo.lock src crates -type f",
     "the action's source hash must cover the crates too"),
    ("docs/architecture.md",
     "infergate is a library crate with a thin binary (`src/main.rs`). The library is stacked in\n"
     "layers: a module may name (`crate::x`) only modules of lower layers. The order is written in\n"
     "the crate docs (`src/lib.rs`) and checked by a unit test (`src/layering.rs`, which reads each\n"
     "module's non-test `crate::` paths), so an import cycle or an upward import fails `cargo test`.",
     "infergate is a Cargo workspace: a thin binary (`src/main.rs`), a facade library (`src/lib.rs`,\n"
     "which re-exports every module under its old name) and the crates under `crates/`, stacked in\n"
     "layers: a crate may use only crates of lower layers, and its `Cargo.toml` lists which, so an\n"
     "import cycle or an upward import does not compile. The crate list, bottom first, is in the\n"
     "facade's docs (`src/lib.rs`); the diagram below shows the modules inside them.",
     "layering.rs is gone: the crate graph is the layer check"),
    ("docs/architecture.md",
     "top-level module also gets a row in `src/layering.rs` and the list in `src/lib.rs`.",
     "top-level module goes in the `lib.rs` of its layer's crate and in the facade's re-exports\n"
     "  (`src/lib.rs`).",
     "layering.rs is gone: a new module joins a crate instead"),
]
# Markdown files whose `src/<module>/` and `src/<module>.rs` paths follow the module's crate.
DOC_GLOBS = ["*.md"]

ROOT = Path.cwd()
DRY = "--dry-run" in sys.argv
LOG: list[str] = []


def say(msg: str) -> None:
    print(msg, flush=True)
    LOG.append(msg)


def sh(*args: str, check: bool = True) -> str:
    r = subprocess.run(args, cwd=ROOT, text=True, capture_output=True)
    if check and r.returncode != 0:
        sys.exit(f"command failed: {' '.join(args)}\n{r.stdout}{r.stderr}")
    return r.stdout


def ident(crate: str) -> str:
    return f"{PKG_PREFIX}_{crate}"


def pkg(crate: str) -> str:
    return f"{PKG_PREFIX}-{crate}"


CRATE_OF = {m: c for c, ms, _ in CRATES for m in ms}
ORDER = [c for c, _, _ in CRATES]


# ---------------------------------------------------------------------------------------------
# A small Rust lexer: which characters are code (not string, char literal or comment).

def code_mask(text: str) -> list[bool]:
    mask = [True] * len(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                mask[k] = False
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            for k in range(i, j):
                mask[k] = False
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            end = text.find('"' + m.group(1), i + len(m.group(0)))
            end = n if end < 0 else end + 1 + len(m.group(1))
            for k in range(i, end):
                mask[k] = False
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            for k in range(i, min(j + 1, n)):
                mask[k] = False
            i = j + 1
        elif c == "'":
            m = re.match(r"'(\\(x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|.)|[^\\'])'", text[i:i + 12])
            if m:
                for k in range(i, i + len(m.group(0))):
                    mask[k] = False
                i += len(m.group(0))
            else:
                i += 1  # a lifetime
        else:
            i += 1
    return mask


def line_starts(text: str) -> list[int]:
    starts = [0]
    for i, c in enumerate(text):
        if c == "\n":
            starts.append(i + 1)
    return starts


def item_end(text: str, mask: list[bool], start: int) -> int:
    """Offset just past the item that begins at `start` (its `;` or its matching `}`)."""
    depth = 0   # (), [] and {} together
    for i in range(start, len(text)):
        if not mask[i]:
            continue
        c = text[i]
        if c in "{([":
            depth += 1
        elif c in "})]":
            depth -= 1
            if depth == 0 and c == "}":
                return i + 1
        elif c == ";" and depth == 0:
            return i + 1
    return len(text)


def test_ranges(path: str, text: str, mask: list[bool]) -> list[tuple[int, int]]:
    """Offsets of test-only code: items after `#[cfg(test)]`, and whole test files."""
    name = os.path.basename(path)
    if name == "tests.rs" or "/tests/" in path:
        return [(0, len(text))]
    out = []
    for m in re.finditer(r'#\[cfg\((test|all\(test[^\]]*|any\(test, feature = "testkit"\))\)\]', text):
        if not mask[m.start()]:
            continue
        s = m.end()
        out.append((m.start(), item_end(text, mask, s)))
    return out


def in_ranges(pos: int, ranges: list[tuple[int, int]]) -> bool:
    return any(a <= pos < b for a, b in ranges)


def group_end(text: str, open_brace: int) -> int:
    depth = 0
    for i in range(open_brace, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError("unbalanced use group")


def split_top(s: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for c in s:
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += c
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def head_of(entry: str) -> str:
    m = re.match(r"\w+", entry)
    return m.group(0) if m else ""


# ---------------------------------------------------------------------------------------------
# Scanning: which modules, macros and external crates a file's code names (test / non-test).

def scan_file(path: str, text: str, ext_deps: list[str]):
    mask = code_mask(text)
    tests = test_ranges(path, text, mask)
    mods: dict[str, bool] = {}   # module -> used outside tests
    ext: dict[str, bool] = {}

    def note(d, key, pos):
        d[key] = d.get(key, False) or not in_ranges(pos, tests)

    for m in re.finditer(r"(?<![\w$])crate::(\{|\w+)", text):
        if not mask[m.start()]:
            continue
        if m.group(1) == "{":
            end = group_end(text, m.end() - 1)
            for e in split_top(text[m.end():end]):
                note(mods, head_of(e), m.start())
        else:
            note(mods, m.group(1), m.start())
    for m in re.finditer(r"(?<![\w:])(" + "|".join(MACROS) + r")!", text):
        if mask[m.start()]:
            note(mods, "!macro", m.start())
    # names the file binds itself (`mod csv;`, `use ..::{csv, ..}`) shadow a crate of that name
    local = set(re.findall(r"\bmod\s+(\w+)", text))
    for um in re.finditer(r"\buse\s+([^;]+);", text):
        body = um.group(1)
        local |= {x for x in re.findall(r"(\w+)\s*(?=[,}]|$)", body) if body.split("::")[0].strip() != x}
        local |= set(re.findall(r"\bas\s+(\w+)", body))
    for d in ext_deps:
        di = d.replace("-", "_")
        if di in local:
            pat = r"::" + di + r"::|\buse\s+" + di + r"\b"
            for m in re.finditer(pat, text):
                if mask[m.start()] and (m.group(0).startswith("use") or not re.match(r"\w", text[m.start() - 1])):
                    note(ext, d, m.start())
            continue
        for m in re.finditer(r"(?<![\w:])(?:::)?" + di + r"::|\buse\s+" + di + r"\b|\bextern\s+crate\s+" + di + r"\b", text):
            if mask[m.start()]:
                note(ext, d, m.start())
    return mods, ext


# ---------------------------------------------------------------------------------------------
# Rewriting one moved file.

def rewrite_file(path: str, text: str, crate: str, normal_deps: set[str], upward: list[str]) -> str:
    for pat, rep in SYNTHETIC_ALIASES:
        text = re.sub(pat, rep, text)

    def foreign(mod: str) -> str | None:
        c = CRATE_OF.get(mod)
        return c if c and c != crate else None

    # 1. Grouped `use crate::{..}` statements that name other crates' modules: one per crate.
    while True:
        mask = code_mask(text)
        changed = False
        for m in re.finditer(r"(?<![\w$])crate::\{", text):
            if not mask[m.start()]:
                continue
            end = group_end(text, m.end() - 1)
            entries = split_top(text[m.end():end])
            by: dict[str | None, list[str]] = {}
            for e in entries:
                by.setdefault(foreign(head_of(e)), []).append(e)
            if all(k is None for k in by):
                continue
            # Find the statement: `[vis] use crate::{...};` with its attribute lines above.
            ls = text.rfind("\n", 0, m.start()) + 1
            prefix = text[ls:m.start()]
            pm = re.fullmatch(r"(\s*)((?:pub(?:\([^)]*\))?\s+)?use\s+)", prefix)
            semi = text.find(";", end)
            if not pm or semi < 0 or text[end + 1:semi].strip():
                if len(by) == 1:   # one foreign crate, not a plain use: rewrite in place
                    (k,) = by
                    text = text[:m.start()] + ident(k) + "::{" + text[m.end():]
                    changed = True
                    break
                say(f"  WARN {path}: grouped crate:: path not in a plain use statement, left as is")
                continue
            indent, use_kw = pm.group(1), pm.group(2)
            # attribute lines directly above (e.g. #[cfg(test)]) apply to every new statement
            attr_start = ls
            attrs = ""
            while True:
                prev_end = attr_start - 1
                if prev_end <= 0:
                    break
                prev_start = text.rfind("\n", 0, prev_end) + 1
                line = text[prev_start:prev_end]
                if line.strip().startswith("#["):
                    attrs = line + "\n" + attrs
                    attr_start = prev_start
                else:
                    break
            stmts = []
            for k, es in by.items():
                root = "crate" if k is None else ident(k)
                body = es[0] if len(es) == 1 and "{" not in es[0] and " as " not in es[0] and es[0] != "self" else "{" + ", ".join(es) + "}"
                stmts.append(f"{attrs}{indent}{use_kw}{root}::{body};")
            text = text[:attr_start] + "\n".join(stmts) + text[semi + 1:]
            changed = True
            break
        if not changed:
            break

    # 2. Comment lines: links to crates this one does not depend on become plain code text.
    out_lines = []
    for line in text.split("\n"):
        if line.lstrip().startswith("//"):
            def plain(m):
                mod = m.group("mod")
                c = foreign(mod)
                if c and c not in normal_deps:
                    return "`" + (m.groupdict().get("text") or m.group("path")) + "`"
                return m.group(0)
            line = re.sub(r"\[`(?P<path>crate::(?P<mod>\w+)[\w:!()]*)`\](?:\([^)]*\))?", plain, line)
            line = re.sub(r"\[`?(?P<text>[^\]`]+)`?\]\((?P<path>crate::(?P<mod>\w+)[\w:!]*)\)", plain, line)
            line = re.sub(r"\[`(?P<text>[^`\]]+)`\]\((?:mod@|fn@|struct@)?(?P<path>crate::(?P<mod>\w+)[\w:!]*)\)", plain, line)
        out_lines.append(line)
    text = "\n".join(out_lines)

    # 3. Plain paths (code, comments, doc links) and the printing macros.
    mask = code_mask(text)
    pieces, last = [], 0
    for m in re.finditer(r"(?<![\w$])crate::(\w+)", text):
        name = m.group(1)
        c = foreign(name)
        if name in MACROS and crate != MACRO_CRATE:
            c = MACRO_CRATE
        if not c:
            continue
        in_string = not mask[m.start()] and not _in_comment(text, m.start())
        if in_string:
            continue
        if c not in normal_deps and ORDER.index(c) > ORDER.index(crate) and mask[m.start()]:
            ln = text.count("\n", 0, m.start()) + 1
            upward.append(f"{path}:{ln}: crate `{crate}` uses `{name}` of crate `{c}` above it")
        pieces.append(text[last:m.start()] + ident(c) + "::" + name)
        last = m.end()
    pieces.append(text[last:])
    text = "".join(pieces)

    # 4. Visibility: what was crate-wide is now used across crates.
    text = re.sub(r"\bpub\(crate\)", "pub", text)

    # 5. Paths relative to the package root: the crate's manifest is two levels down.
    text = text.replace('env!("CARGO_MANIFEST_DIR")', 'concat!(env!("CARGO_MANIFEST_DIR"), "/../..")')
    return text


def _in_comment(text: str, pos: int) -> bool:
    ls = text.rfind("\n", 0, pos) + 1
    return "//" in text[ls:pos]


def fix_includes(old_path: str, new_path: str, text: str) -> str:
    def rep(m):
        rel = m.group(2)
        target = os.path.normpath(os.path.join(os.path.dirname(old_path), rel))
        new_rel = os.path.relpath(target, os.path.dirname(new_path))
        return f'{m.group(1)}"{new_rel}"'
    return re.sub(r'(include_(?:str|bytes)!\(\s*)"([^"]+)"', rep, text)


# ---------------------------------------------------------------------------------------------
# The synthetic-run generator: items out of eval::gate into src/synthetic.rs.

def extract_synthetic() -> None:
    p = ROOT / SYNTHETIC_FROM
    text = p.read_text()
    mask = code_mask(text)
    spans, found = [], []
    for name in SYNTHETIC_ITEMS:
        m = re.search(r"(?m)^(pub(?:\(crate\))? )?(const|static|fn|struct|enum|type) " + re.escape(name) + r"\b", text)
        if not m:
            say(f"  WARN synthetic: item `{name}` not found in {SYNTHETIC_FROM} (not moved)")
            continue
        start = m.start()
        while True:   # doc comments and attributes above
            prev = text.rfind("\n", 0, start - 1) + 1
            if start > 0 and (text[prev:start].startswith("///") or text[prev:start].startswith("#[")):
                start = prev
            else:
                break
        spans.append((start, item_end(text, mask, m.end()), name))
        found.append(name)
    spans.sort()
    moved = []
    for s, e, name in spans:
        item = text[s:e]
        if name in SYNTHETIC_TEST_ITEMS:
            item = item.replace("#[cfg(test)]", '#[cfg(any(test, feature = "testkit"))]', 1)
        item = re.sub(r"(?m)^pub\(crate\) ", "pub ", item, count=1)
        item = re.sub(r"(?m)^(const|static|fn|struct|enum|type) ", r"pub \1 ", item, count=1)
        moved.append(item)
    rest = text
    for s, e, _ in reversed(spans):
        rest = rest[:s] + rest[e:]
    # imports the moved items need, from gate.rs's own `use crate::..` list
    moved_text = "\n\n".join(moved)
    imports = []
    for um in re.finditer(r"(?m)^use (crate::[\w:]+)::\{([^}]*)\};|^use (crate::[\w:]+)::(\w+);", text):
        base = um.group(1) or um.group(3)
        names = split_top(um.group(2)) if um.group(2) else [um.group(4)]
        used = [n for n in names if re.search(r"\b" + re.escape(n) + r"\b", moved_text)]
        if used:
            imports.append(f"use {base}::{{{', '.join(used)}}};")
    # what stays in gate.rs: prune `use crate::` leaves no longer named there
    def prune(um):
        base = um.group(1)
        names = split_top(um.group(2))
        body = rest[:um.start()] + rest[um.end():]
        keep = [n for n in names if re.search(r"\b" + re.escape(head_of(n.split("::")[-1]) if "::" in n else n) + r"\b", body)]
        if not keep:
            return ""
        return f"use {base}::{{{', '.join(keep)}}};"
    rest = re.sub(r"(?m)^use (crate::[\w:]+)::\{([^}]*)\};", prune, rest)
    non_test = [n for n in found if n not in SYNTHETIC_TEST_ITEMS]
    reexport = [n for n in non_test if not n.isupper()]
    private = [n for n in non_test if n.isupper() and re.search(r"\b" + n + r"\b", rest)]
    test_items = [n for n in found if n in SYNTHETIC_TEST_ITEMS]
    lines = []
    if reexport:
        lines.append(f"pub use crate::synthetic::{{{', '.join(reexport)}}};")
    if private:
        lines.append(f"use crate::synthetic::{{{', '.join(private)}}};")
    if test_items:
        lines.append(f"#[cfg(test)]\npub use crate::synthetic::{{{', '.join(test_items)}}};")
    # after the last top-level `use` line of the header
    uses = list(re.finditer(r"(?m)^use [^;]*;\n", rest))
    at = uses[-1].end() if uses else 0
    rest = rest[:at] + "\n".join(lines) + "\n" + rest[at:]
    p.write_text(rest)
    (ROOT / "src/synthetic.rs").write_text(SYNTHETIC_HEADER + "\n" + "\n".join(imports) + "\n\n" + moved_text + "\n")
    sh("git", "add", "src/synthetic.rs")
    say(f"  synthetic: moved {', '.join(found)} from {SYNTHETIC_FROM} to src/synthetic.rs")


def gate_testkit_items() -> None:
    for crate, path, name in TESTKIT_ITEMS:
        p = ROOT / path
        text = p.read_text()
        pat = r"#\[cfg\(test\)\]\n(\s*)pub\(crate\) (mod|fn) " + name + r"\b"
        new, n = re.subn(pat, r'#[cfg(any(test, feature = "testkit"))]\n\1#[allow(missing_docs)]\n\1pub(crate) \2 ' + name, text)
        if n != 1:
            say(f"  WARN testkit: `#[cfg(test)] pub(crate) mod|fn {name}` matched {n} times in {path}")
        p.write_text(new)


# ---------------------------------------------------------------------------------------------
# Cargo.toml writing.

def toml_value(v) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(v)


def lib_doc_bullets(old_lib: str, modules: list[str]) -> list[str]:
    """The old crate docs' bullets that name one of `modules`, links to others made plain."""
    doc = [l[4:] if l.startswith("//! ") else l[3:] for l in old_lib.split("\n") if l.startswith("//!")]
    bullets, cur = [], None
    for l in doc:
        if l.startswith("- "):
            cur = [l]
            bullets.append(cur)
        elif cur is not None and l.startswith("  "):
            cur.append(l)
        else:
            cur = None
    out = []
    for b in bullets:
        text = "\n".join(b)
        if any(f"[`{m}`]" in text for m in modules):
            def plain(m):
                return m.group(0) if m.group(1) in modules else f"`{m.group(1)}`"
            text = re.sub(r"\[`(\w+)`\](?:\((?:mod@)?\w+\))?", plain, text)
            text = re.sub(r"\[`(\w+::\w+)`\]", lambda m: f"`{m.group(1)}`", text)
            out.append(text)
    return out


def main() -> None:
    t0 = time.time()
    if not (ROOT / "src/lib.rs").is_file() or (ROOT / "crates").exists():
        sys.exit("run from the root of the single-crate tree (src/lib.rs, no crates/)")
    if sh("git", "status", "--porcelain").strip() and not DRY:
        sys.exit("the tree is not clean: commit or stash first")
    old_toml_text = (ROOT / "Cargo.toml").read_text()
    old = tomllib.loads(old_toml_text)
    old_lib = (ROOT / "src/lib.rs").read_text()
    declared = re.findall(r"(?m)^(?:pub(?:\(crate\))? )?mod (\w+);", old_lib)
    unknown = [m for m in declared if m not in CRATE_OF and m not in DELETED_MODULES]
    on_disk = {p.stem if p.is_file() else p.name for p in (ROOT / "src").iterdir()} - {"lib", "main"}
    unknown += [m for m in sorted(on_disk) if m not in CRATE_OF and m not in DELETED_MODULES and m not in unknown]
    if unknown:
        sys.exit(f"modules with no crate in CRATES (add them, bottom first): {unknown}")
    ext_normal = list(old.get("dependencies", {}))
    ext_dev = list(old.get("dev-dependencies", {}))
    all_ext = ext_normal + ext_dev
    say(f"crates: {', '.join(ORDER)}")
    if DRY:
        for c, ms, _ in CRATES:
            say(f"  {pkg(c)}: {', '.join(ms)}")
        return

    # --- content moves that happen before the file moves -------------------------------------
    extract_synthetic()
    gate_testkit_items()

    # --- files per crate -----------------------------------------------------------------------
    files: dict[str, list[tuple[str, str]]] = {c: [] for c in ORDER}   # (old, new)
    for c, ms, _ in CRATES:
        for m in ms:
            if (ROOT / f"src/{m}.rs").is_file():
                files[c].append((f"src/{m}.rs", f"crates/{c}/src/{m}.rs"))
            if (ROOT / f"src/{m}").is_dir():
                for p in sorted((ROOT / f"src/{m}").rglob("*")):
                    if p.is_file():
                        rel = p.relative_to(ROOT).as_posix()
                        files[c].append((rel, f"crates/{c}/src/" + rel[len("src/"):]))
    tracked = set(sh("git", "ls-files", "src").split())

    # --- scan ----------------------------------------------------------------------------------
    uses: dict[str, dict[str, bool]] = {c: {} for c in ORDER}   # crate -> module -> non-test
    ext_uses: dict[str, dict[str, bool]] = {c: {} for c in ORDER}
    for c in ORDER:
        for o, _ in files[c]:
            if not o.endswith(".rs"):
                continue
            text = (ROOT / o).read_text()
            for pat, rep in SYNTHETIC_ALIASES:
                text = re.sub(pat, rep, text)
            mods, ext = scan_file(o, text, all_ext)
            for k, v in mods.items():
                uses[c][k] = uses[c].get(k, False) or v
            for k, v in ext.items():
                ext_uses[c][k] = ext_uses[c].get(k, False) or v
    normal: dict[str, set[str]] = {}
    dev: dict[str, set[str]] = {}
    upward: list[str] = []
    for c in ORDER:
        n, d = set(), set()
        for m, nt in uses[c].items():
            dc = MACRO_CRATE if m == "!macro" else CRATE_OF.get(m)
            if not dc or dc == c:
                continue
            if ORDER.index(dc) > ORDER.index(c):
                continue   # reported (with its line) when rewriting; no dependency (no cycle)
            (n if nt else d).add(dc)
        normal[c], dev[c] = n, d - n
    testkit = {c for c, _, _ in TESTKIT_ITEMS} | set(TESTKIT_DEPS)

    # --- move ----------------------------------------------------------------------------------
    for c in ORDER:
        for o, nw in files[c]:
            (ROOT / nw).parent.mkdir(parents=True, exist_ok=True)
            if o in tracked:
                sh("git", "mv", o, nw)
            else:
                os.rename(ROOT / o, ROOT / nw)
    for d in sorted((ROOT / "src").glob("**/"), key=lambda p: -len(p.parts)):
        if d != ROOT / "src" and d.is_dir() and not any(d.iterdir()):
            d.rmdir()
    for m in DELETED_MODULES:
        if (ROOT / f"src/{m}.rs").exists():
            sh("git", "rm", "-q", f"src/{m}.rs")

    # --- rewrite -------------------------------------------------------------------------------
    for c in ORDER:
        for o, nw in files[c]:
            p = ROOT / nw
            if nw.endswith(".rs"):
                text = p.read_text()
                new = rewrite_file(nw, text, c, normal[c], upward)
                new = fix_includes(o, nw, new)
                if new != text:
                    p.write_text(new)
            elif nw.endswith(".snap") and os.path.basename(nw).startswith(f"{PKG_PREFIX}__"):
                renamed = os.path.join(os.path.dirname(nw), ident(c) + os.path.basename(nw)[len(PKG_PREFIX):])
                sh("git", "mv", nw, renamed)

    # --- crate lib.rs and Cargo.toml -----------------------------------------------------------
    for c, ms, desc in CRATES:
        present = [m for m in ms if (ROOT / f"crates/{c}/src/{m}.rs").is_file() or (ROOT / f"crates/{c}/src/{m}").is_dir()]
        lines = ["//! " + l for l in textwrap.wrap(f"{pkg(c)}: {desc}", 96)] + ["//!"]
        bullets = lib_doc_bullets(old_lib, present)
        for b in bullets:
            lines += ["//! " + l if l else "//!" for l in b.split("\n")]
        if bullets:
            lines.append("//!")
        lines.append("//! Part of the workspace cut of issue 55: this crate's `Cargo.toml` lists what it may use.")
        lines.append("")
        lines.append("// The library (non-test) build is the one that checks `unused_crate_dependencies`; its unit")
        lines.append("// tests use only some of the dev-dependencies, so they are exempt.")
        lines.append("#![cfg_attr(test, allow(unused_crate_dependencies))]")
        lines.append("#![deny(clippy::print_stdout, clippy::print_stderr)]")
        if c in MISSING_DOCS:
            lines.append("#![warn(missing_docs)]")
        lines.append("")
        if c != MACRO_CRATE and uses[c].get("!macro") is not None:
            if not uses[c]["!macro"]:
                lines.append("#[cfg(test)]")
            lines.append("// (used on some targets only, e.g. a non-Linux stub: never an unused-import error)")
            lines.append(f"#[allow(unused_imports)]\n#[macro_use]\nextern crate {ident(MACRO_CRATE)};\n")
        for m in sorted(present, key=lambda m: (m != "stdio", m)):
            if m == "stdio":
                lines.append("#[macro_use]")
            lines.append(f"pub mod {m};")
        (ROOT / f"crates/{c}/src/lib.rs").write_text("\n".join(lines) + "\n")
        sh("git", "add", f"crates/{c}/src/lib.rs")

        toml = [f"[package]", f'name = "{pkg(c)}"', "version.workspace = true", "edition.workspace = true",
                f'description = "{desc.split(":")[0].split(".")[0].replace(chr(96), "")}"', "publish = false", ""]
        toml += ["[lints]", "workspace = true", ""]
        ext_n = sorted(k for k, v in ext_uses[c].items() if v)
        ext_d = sorted(k for k, v in ext_uses[c].items() if not v)
        extra = [d for d in TESTKIT_DEPS.get(c, []) if d not in ext_n]
        if c in testkit:
            toml += ["[features]", "# Fixtures other crates' unit tests use (enabled by their dev-dependencies).",
                     "testkit = [" + ", ".join(f'"dep:{d}"' for d in extra) + "]", ""]
        toml.append("[dependencies]")
        for dc in sorted(normal[c], key=ORDER.index):
            toml.append(f"{pkg(dc)}.workspace = true")
        for d in ext_n:
            toml.append(f"{d}.workspace = true")
        for d in extra:
            toml.append(f"{d} = {{ workspace = true, optional = true }}")
        toml += ["", "[dev-dependencies]"]
        # test-only crates, and the testkit feature of every crate used that has one
        for dc in sorted(dev[c] | (normal[c] & testkit), key=ORDER.index):
            if dc in testkit:
                toml.append(f'{pkg(dc)} = {{ workspace = true, features = ["testkit"] }}')
            else:
                toml.append(f"{pkg(dc)}.workspace = true")
        for d in sorted(set(ext_d) | set(extra)):
            toml.append(f"{d}.workspace = true")
        (ROOT / f"crates/{c}/Cargo.toml").write_text("\n".join(toml) + "\n")
        sh("git", "add", f"crates/{c}/Cargo.toml")

    # --- the root package: binary + facade ----------------------------------------------------
    main_text = (ROOT / "src/main.rs").read_text()
    _, main_ext = scan_file("src/main.rs", main_text, ext_normal)
    main_ext_names = sorted(main_ext)
    doc = [l for l in old_lib.split("\n") if l.startswith("//!")]
    cut_at = next((i for i, l in enumerate(doc) if l.startswith("//! Layers")), len(doc))
    doc = doc[:cut_at]
    while doc and doc[-1].strip() == "//!":
        doc.pop()
    facade = doc + ["//!", "//! The modules live in the workspace's crates, bottom first (a crate depends only on crates",
                    "//! listed before it; its `Cargo.toml` says which, and the compiler holds it to that):", "//!"]
    for c, ms, _ in CRATES:
        facade.append(f"//! - `{pkg(c)}`: " + ", ".join(f"[`{m}`]" if m != "bench" else "[`bench`](mod@bench)" for m in ms) + ";")
    facade[-1] = facade[-1][:-1] + "."
    facade += ["//!", "//! This crate re-exports them under their old names, so `infergate::results` and the rest",
               "//! keep working for the binary, tests/ and benches/.", "",
               "// Its unit tests (none) see the dev-dependencies tests/ and benches/ use as unused.",
               "#![cfg_attr(test, allow(unused_crate_dependencies))]",
               "#![warn(missing_docs)]", "#![deny(clippy::print_stdout, clippy::print_stderr)]", ""]
    if main_ext_names:
        facade.append("// The binary's own dependencies: the lib target does not use them.")
        for d in main_ext_names:
            facade.append(f"use {d.replace('-', '_')} as _;")
        facade.append("")
    for c, ms, _ in CRATES:
        facade.append(f"pub use {ident(c)}::{{{', '.join(ms)}}};" if len(ms) > 1 else f"pub use {ident(c)}::{ms[0]};")
    facade.append(f"pub use {ident(MACRO_CRATE)}::{{{', '.join(MACROS)}}};")
    (ROOT / "src/lib.rs").write_text("\n".join(facade) + "\n")

    # root Cargo.toml
    other_pkgs = sorted(os.path.dirname(p) for p in sh("git", "ls-files", "*Cargo.toml").split()
                        if p != "Cargo.toml" and not p.startswith("crates/"))
    pk = old["package"]
    r = ["[package]"] + [f"{k} = {toml_value(v)}" for k, v in pk.items()] + [""]
    r += ["[workspace]",
          "# Every crate; plain `cargo build` / `cargo test` covers them all (default-members).",
          'members = ["crates/*"]',
          "default-members = [" + ", ".join(['"."'] + [f'"crates/{c}"' for c in ORDER]) + "]"]
    if other_pkgs:
        r.append("exclude = [" + ", ".join(f'"{p}"' for p in other_pkgs) + "]")
    r += ['resolver = "3"', "", "[workspace.package]", f'version = "{pk["version"]}"', f'edition = "{pk["edition"]}"', "",
          "[workspace.dependencies]"]
    for c in ORDER:
        r.append(f'{pkg(c)} = {{ path = "crates/{c}" }}')
    for k, v in list(old.get("dependencies", {}).items()) + list(old.get("dev-dependencies", {}).items()):
        r.append(f"{k} = {toml_value(v)}")
    r += ["", "[workspace.lints.rust]",
          "# Warnings are errors in CI (`cargo clippy --all-targets -- -D warnings`).",
          "# Every [dependencies] entry of a crate must be used by its library. The lint runs per target",
          "# and the other targets (src/main.rs, tests/*.rs, benches/*.rs, the unit tests) see most",
          "# dependencies as unused, so each of them allows it in its crate root: a new test file starts",
          "# with `#![allow(unused_crate_dependencies)]`.",
          'unused_crate_dependencies = "warn"',
          "# `missing_docs` is set in the crate roots that keep it (`#![warn(missing_docs)]`: the schema",
          "# crate and this facade): the other crates made their former `pub(crate)` items `pub`.",
          ""]
    for k, v in old.get("lints", {}).get("rust", {}).items():
        if k not in ("unused_crate_dependencies", "missing_docs"):
            r.insert(len(r) - 1, f"{k} = {toml_value(v)}")
    if "clippy" in old.get("lints", {}):
        r += ["[workspace.lints.clippy]"] + [f"{k} = {toml_value(v)}" for k, v in old["lints"]["clippy"].items()] + [""]
    r += ["[lints]", "workspace = true", "", "[dependencies]",
          "# The facade re-exports every crate; the binary adds what src/main.rs names."]
    for c in ORDER:
        r.append(f"{pkg(c)}.workspace = true")
    for d in main_ext_names:
        r.append(f"{d}.workspace = true")
    r += ["", "[dev-dependencies]", "# tests/ and benches/ use these directly."]
    for k in ext_normal + ext_dev:
        r.append(f"{k}.workspace = true")
    r.append("")
    # everything after the dependency tables (benches, profiles), verbatim
    tail = re.split(r"(?m)^(?=\[\[bench\]\]|\[profile)", old_toml_text, maxsplit=1)
    if len(tail) == 2:
        r.append(tail[1].rstrip())
    (ROOT / "Cargo.toml").write_text("\n".join(r) + "\n")

    # --- documentation paths -------------------------------------------------------------------
    doc_pat = re.compile(r"(?<![\w/.])src/(" + "|".join(sorted(CRATE_OF, key=len, reverse=True)) + r")(?=/|\.rs)")
    ndocs = 0
    for path in sh("git", "ls-files", *DOC_GLOBS).split():
        if path.startswith("crates/"):
            continue
        t = (ROOT / path).read_text()
        new = doc_pat.sub(lambda m: f"crates/{CRATE_OF[m.group(1)]}/src/{m.group(1)}", t)
        if new != t:
            ndocs += 1
            (ROOT / path).write_text(new)
            sh("git", "add", path)
    say(f"  docs: module paths rewritten in {ndocs} Markdown file(s)")

    # --- fix-ups -------------------------------------------------------------------------------
    for path, a, b, why in FIXUPS:
        p = ROOT / path
        if not p.is_file():
            say(f"  FIXUP MISSED (no file) {path}: {why}")
            continue
        t = p.read_text()
        n = t.count(a)
        if n != 1:
            say(f"  FIXUP MISSED ({n} matches) {path}: {why}")
            continue
        p.write_text(t.replace(a, b))
        say(f"  fixup ok: {path}: {why}")

    fmt = subprocess.run(["cargo", "fmt", "--all"], cwd=ROOT, text=True, capture_output=True)
    if fmt.returncode != 0:
        say("  WARN cargo fmt failed:\n" + fmt.stderr[-3000:])
    sh("git", "add", "-A", "crates", "src", "Cargo.toml", *[p for p, *_ in FIXUPS if (ROOT / p).is_file()])
    # Cargo.lock gains the new packages (no version changes: --offline, no new registry crates)
    meta = subprocess.run(["cargo", "update", "--workspace", "--offline"], cwd=ROOT,
                          text=True, capture_output=True)
    if meta.returncode != 0:
        say("  WARN cargo update --workspace failed (Cargo.toml invalid?):\n" + meta.stderr[-3000:])
    else:
        sh("git", "add", "Cargo.lock")
        for c, banned in NO_DEPS.items():
            tree = sh("cargo", "tree", "--offline", "-p", pkg(c), "--edges", "normal", "--prefix", "none")
            found = sorted({l.split()[0] for l in tree.splitlines() if l.split() and l.split()[0] in banned})
            say(f"  {pkg(c)}: normal dependency tree has " + (f"FORBIDDEN {found}" if found else f"none of {banned}"))
    for u in upward:
        say("  UPWARD " + u)
    for c in ORDER:
        say(f"  {pkg(c)}: deps {sorted(normal[c], key=ORDER.index)} dev {sorted(dev[c], key=ORDER.index)}")
    say(f"done in {time.time() - t0:.1f}s; next: cargo build --workspace --all-targets")


if __name__ == "__main__":
    main()
