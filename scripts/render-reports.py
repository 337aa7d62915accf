#!/usr/bin/env python3
"""Renders report Markdown (PR comment, job summary) the way a reader sees it, and checks it.

Usage: render-reports.py OUT_DIR FILE.md...

Each FILE.md is converted from GitHub-flavoured Markdown to HTML (Python `markdown`, tables and
fenced code, GitHub-like CSS at GitHub's comment width), screenshotted with headless chromium
into OUT_DIR/NAME.png, and checked on the rendered page:
  - the first visible line is a heading that starts with a verdict symbol;
  - no raw Markdown is left in the text (`**`, `|---`, `<details>` as text);
  - no table is wider than the comment column.
Exit 0 when every file passes, 1 with the failures listed, 77 when a tool is missing.
"""

import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

WIDTH = 900  # px: GitHub's conversation column is about this wide
CSS = """
body { font-family: -apple-system, 'Segoe UI', 'Noto Sans', Helvetica, Arial, sans-serif;
       font-size: 14px; line-height: 1.5; color: #1f2328; margin: 16px; max-width: 868px; }
h2, h3 { border-bottom: 1px solid #d1d9e0; padding-bottom: .3em; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border: 1px solid #d1d9e0; padding: 4px 10px; }
tr:nth-child(2n) { background: #f6f8fa; }
code { background: #eff1f3; padding: .1em .3em; border-radius: 4px; font-size: 85%; }
details { margin: 8px 0; }
"""
PROBE = """
<script>
window.addEventListener('load', () => {
  const widths = [...document.querySelectorAll('table')].map(t => t.getBoundingClientRect().width);
  document.body.setAttribute('data-widest-table', String(Math.max(0, ...widths)));
  document.body.setAttribute('data-body-width', String(document.body.getBoundingClientRect().width));
  const first = document.body.querySelector('h1, h2, h3, h4, p');
  document.body.setAttribute('data-first-line', first ? first.innerText : '');
  document.body.setAttribute('data-text', document.body.innerText);
});
</script>
"""


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def browser(args, profile):
    base = [chromium(), "--headless", "--no-sandbox", "--disable-gpu",
            "--disable-background-networking", "--no-first-run",
            f"--user-data-dir={profile}", "--hide-scrollbars"]
    return subprocess.run(base + args, capture_output=True, text=True, timeout=120)


def to_html(markdown_text):
    import markdown  # pip install markdown

    # GitHub renders Markdown inside <details> when a blank line follows <summary>;
    # python-markdown needs the md_in_html attribute for the same.
    text = markdown_text.replace("<details>", '<details markdown="1">')
    body = markdown.markdown(text, extensions=["tables", "fenced_code", "md_in_html"])
    return f"<!doctype html><meta charset=utf-8><style>{CSS}</style><body>{body}{PROBE}</body>"


def check(name, dom):
    failures = []
    attr = lambda a: html.unescape(re.search(f'{a}="([^"]*)"', dom).group(1)) if re.search(f'{a}="', dom) else ""
    first = attr("data-first-line")
    text = attr("data-text")
    widest = float(attr("data-widest-table") or 0)
    body = float(attr("data-body-width") or WIDTH)
    if not re.match(r"^\s*(✓|✗|\?|–|‼|❌|⚪|✅|⏹)", first):
        failures.append(f"{name}: the first line is not a verdict: {first!r}")
    for raw in ("**", "|---", "<details", "</summary>"):
        if raw in text:
            failures.append(f"{name}: raw Markdown {raw!r} in the rendered text")
    if widest > body + 1:
        failures.append(f"{name}: a table is {widest:.0f} px wide, the column {body:.0f} px")
    return failures, {"first_line": first, "widest_table_px": widest, "column_px": body}


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    out_dir, files = sys.argv[1], sys.argv[2:]
    try:
        import markdown  # noqa: F401
    except ImportError:
        print("render-reports: python `markdown` is missing (pip install markdown)")
        return 77
    if not chromium():
        print("render-reports: no chromium (apt-get install -y chromium)")
        return 77
    os.makedirs(out_dir, exist_ok=True)
    failures, seen = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for path in files:
            name = os.path.splitext(os.path.basename(path))[0]
            with open(path, encoding="utf-8") as f:
                page = to_html(f.read())
            page_path = os.path.join(tmp, f"{name}.html")
            with open(page_path, "w", encoding="utf-8") as f:
                f.write(page)
            url = f"file://{page_path}"
            dom = browser(["--dump-dom", "--virtual-time-budget=2000",
                           f"--window-size={WIDTH},1200", url], os.path.join(tmp, "p1-" + name))
            fails, facts = check(name, dom.stdout)
            failures += fails
            seen[name] = facts
            png = os.path.abspath(os.path.join(out_dir, f"{name}.png"))
            # Tall enough for the whole report (Details collapsed, as a reader first sees it).
            shot = browser([f"--screenshot={png}", f"--window-size={WIDTH},420", url],
                           os.path.join(tmp, "p2-" + name))
            if not os.path.exists(png):
                failures.append(f"{name}: no screenshot: {shot.stderr[-400:]}")
            # The same page with Details opened, as a reader sees it after one click.
            open_path = os.path.join(tmp, f"{name}-details.html")
            with open(open_path, "w", encoding="utf-8") as f:
                f.write(page.replace("<details>", "<details open>"))
            browser([f"--screenshot={os.path.abspath(os.path.join(out_dir, name + '-details.png'))}",
                     f"--window-size={WIDTH},1100", f"file://{open_path}"],
                    os.path.join(tmp, "p3-" + name))
    print(json.dumps(seen, ensure_ascii=False, indent=1))
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
