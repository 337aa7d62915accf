#!/usr/bin/env python3
"""Evaluates each shipped workflow's trigger and job `if:` conditions against recorded event
payloads (tests/fixtures/github-events/cases.json) the way the Actions runner would: the
workflow must list the event under `on:` (with a matching branch/tag filter for push), and
every job's `if:` must come out as the case expects, with the `github` context built around
the payload (event_name, ref, ref_name, event, repository, ...).

The expression evaluator covers the part of GitHub's expression language the workflows use:
literals, property access (missing → null), `!`, `==`, `!=`, `<`, `>`, `&&`, `||` (which
return an operand, as GitHub's do), parentheses, and the functions `format`, `contains`,
`startsWith`, `endsWith`, `fromJSON`, `toJSON` and the status functions (`success()`,
`always()`; a job's needs are taken as succeeded). String comparison ignores case, as GitHub's
does. An unknown function or context is an error, never a silent false.

Python 3.11 with PyYAML: the system's when installed, else a venv of its own under
~/.cache/infergate. Exit 0 when every case holds, 1 otherwise, 2 on a usage problem.
"""

import fnmatch
import json
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests/fixtures/github-events"


def load_yaml():
    try:
        import yaml  # noqa: PLC0415
        return yaml
    except ImportError:
        pass
    venv = pathlib.Path.home() / ".cache/infergate/workflow-triggers-venv"
    py = venv / "bin/python3"
    if os.environ.get("INFERGATE_TRIGGERS_IN_VENV") == "1":
        sys.exit("PyYAML is missing even in the script's venv")
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "--quiet", "PyYAML==6.0.2"], check=True)
    env = dict(os.environ, INFERGATE_TRIGGERS_IN_VENV="1")
    os.execve(str(py), [str(py), __file__, *sys.argv[1:]], env)


TOKEN = re.compile(
    r"\s*(?:(?P<num>-?\d+(?:\.\d+)?)|(?P<str>'(?:[^']|'')*')|(?P<op>==|!=|<=|>=|&&|\|\||[!<>()\[\].,*])"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_-]*))"
)


def tokenize(text):
    pos, out = 0, []
    text = text.strip()
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(f"cannot read the expression at {text[pos:]!r}")
        pos = m.end()
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
    return out


def truthy(v):
    return not (v is None or v is False or v == 0 or v == "")


def loose_eq(a, b):
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()
    if type(a) is not type(b):
        def num(x):
            if x is None:
                return 0
            if isinstance(x, bool):
                return int(x)
            if isinstance(x, (int, float)):
                return x
            if isinstance(x, str):
                try:
                    return float(x) if x.strip() else 0
                except ValueError:
                    return float("nan")
            return float("nan")
        return num(a) == num(b)
    return a == b


class Parser:
    def __init__(self, tokens, ctx):
        self.t, self.i, self.ctx = tokens, 0, ctx

    def peek(self):
        return self.t[self.i] if self.i < len(self.t) else (None, None)

    def take(self, value=None):
        tok = self.peek()
        if value is not None and tok[1] != value:
            raise ValueError(f"expected {value!r}, got {tok[1]!r}")
        self.i += 1
        return tok

    def parse(self):
        v = self.or_()
        if self.i != len(self.t):
            raise ValueError(f"unexpected {self.peek()[1]!r}")
        return v

    def or_(self):
        v = self.and_()
        while self.peek()[1] == "||":
            self.take()
            rhs = self.and_()
            v = v if truthy(v) else rhs
        return v

    def and_(self):
        v = self.cmp()
        while self.peek()[1] == "&&":
            self.take()
            rhs = self.cmp()
            v = rhs if truthy(v) else v
        return v

    def cmp(self):
        v = self.unary()
        while self.peek()[1] in ("==", "!=", "<", ">", "<=", ">="):
            op = self.take()[1]
            rhs = self.unary()
            if op == "==":
                v = loose_eq(v, rhs)
            elif op == "!=":
                v = not loose_eq(v, rhs)
            else:
                v = {"<": v < rhs, ">": v > rhs, "<=": v <= rhs, ">=": v >= rhs}[op]
        return v

    def unary(self):
        if self.peek()[1] == "!":
            self.take()
            return not truthy(self.unary())
        return self.postfix(self.primary())

    def postfix(self, v):
        while self.peek()[1] in (".", "["):
            if self.take()[1] == ".":
                key = self.take()[1]
                v = v.get(key) if isinstance(v, dict) else None
            else:
                key = self.or_()
                self.take("]")
                v = v.get(key) if isinstance(v, dict) else (
                    v[int(key)] if isinstance(v, list) and isinstance(key, (int, float)) and int(key) < len(v) else None)
        return v

    def primary(self):
        kind, val = self.take()
        if kind == "num":
            return float(val) if "." in val else int(val)
        if kind == "str":
            return val[1:-1].replace("''", "'")
        if val == "(":
            v = self.or_()
            self.take(")")
            return v
        if kind == "name":
            if self.peek()[1] == "(":
                self.take("(")
                args = []
                while self.peek()[1] != ")":
                    args.append(self.or_())
                    if self.peek()[1] == ",":
                        self.take()
                self.take(")")
                return call(val, args)
            lit = {"true": True, "false": False, "null": None}
            if val in lit:
                return lit[val]
            if val not in self.ctx:
                raise ValueError(f"unknown context {val!r}")
            return self.ctx[val]
        raise ValueError(f"unexpected {val!r}")


def call(name, args):
    s = lambda x: "" if x is None else (json.dumps(x) if isinstance(x, (dict, list)) else str(x).lower() if isinstance(x, bool) else str(x))
    n = name.lower()
    if n == "format":
        out = s(args[0])
        for i, a in enumerate(args[1:]):
            out = out.replace("{" + str(i) + "}", s(a))
        return out
    if n == "contains":
        hay, needle = args
        if isinstance(hay, list):
            return any(loose_eq(x, needle) for x in hay)
        return s(needle).lower() in s(hay).lower()
    if n == "startswith":
        return s(args[0]).lower().startswith(s(args[1]).lower())
    if n == "endswith":
        return s(args[0]).lower().endswith(s(args[1]).lower())
    if n == "fromjson":
        return json.loads(s(args[0]))
    if n == "tojson":
        return json.dumps(args[0])
    if n in ("success", "always"):
        return True
    if n in ("failure", "cancelled"):
        return False
    raise ValueError(f"unknown function {name}()")


def evaluate(expr, ctx):
    text = expr.strip() if isinstance(expr, str) else str(expr)
    m = re.fullmatch(r"\$\{\{(.*)\}\}", text, re.S)
    if m:
        text = m.group(1)
    return Parser(tokenize(text), ctx).parse()


def merge(base, patch):
    for k, v in patch.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            merge(base[k], v)
        else:
            base[k] = v
    return base


def triggered(on, event, ref):
    """Whether `on:` lists `event`, with push's branch/tag filters applied to `ref`."""
    if isinstance(on, str):
        on = {on: None}
    elif isinstance(on, list):
        on = {e: None for e in on}
    if event not in on:
        return False, f"`on:` does not list {event} ({', '.join(on)})"
    spec = on[event] or {}
    if event == "push":
        if ref.startswith("refs/tags/"):
            pats = spec.get("tags")
            if pats is None:
                return ("branches" not in spec), "push of a tag"
            name = ref[len("refs/tags/"):]
        else:
            pats = spec.get("branches")
            if pats is None:
                return ("tags" not in spec), "push of a branch"
            name = ref[len("refs/heads/"):]
        ok = any(fnmatch.fnmatchcase(name, p.replace("**", "*")) for p in pats)
        return ok, f"push filter {pats} for {name}"
    return True, ""


def main():
    yaml = load_yaml()
    cases = json.loads((FIXTURES / "cases.json").read_text())["cases"]
    failures = 0
    for case in cases:
        wf_path = ROOT / case["workflow"]
        wf = yaml.safe_load(wf_path.read_text())
        # PyYAML reads the bare key `on` as the boolean True (YAML 1.1).
        on = wf.get("on", wf.get(True))
        payload = json.loads((FIXTURES / case["payload"]).read_text())
        merge(payload, case.get("patch", {}))
        ref = case["ref"]
        label = f"{case['workflow']} on {case['event']} ({case['payload']}{' patched' if case.get('patch') else ''})"
        ok, why = triggered(on, case["event"], ref)
        if not ok:
            print(f"FAIL {label}: not triggered: {why}")
            failures += 1
            continue
        ref_name = re.sub(r"^refs/(heads|tags)/", "", ref)
        github = {
            "event_name": case["event"],
            "event": payload,
            "ref": ref,
            "ref_name": ref_name,
            "ref_type": "tag" if ref.startswith("refs/tags/") else "branch",
            "repository": "acme/engine",
            "repository_owner": "acme",
            "sha": "0123456789abcdef0123456789abcdef01234567",
            "run_id": "9876543210",
            "token": "***",
        }
        ctx = {
            "github": github,
            "inputs": payload.get("inputs", {}) if case["event"] == "workflow_dispatch" else {},
            "vars": {},
            "needs": {},
            "env": {},
        }
        for job, want in case["expect"].items():
            spec = wf["jobs"].get(job)
            if spec is None:
                print(f"FAIL {label}: no job `{job}`")
                failures += 1
                continue
            cond = spec.get("if", "success()")
            try:
                got = truthy(evaluate(cond, ctx))
            except (ValueError, KeyError, TypeError) as e:
                print(f"FAIL {label}: job {job}: cannot evaluate `if: {cond}`: {e}")
                failures += 1
                continue
            status = "ok  " if got == want else "FAIL"
            failures += got != want
            print(f"{status} {label}: job {job} runs={got} (expected {want}) — if: {cond}")
    print(f"{len(cases)} cases, {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
