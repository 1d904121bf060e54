"""Scale: generate books of N problems and measure what building, serving, searching and verifying them costs.

    python tools/scale_book.py [--sizes 100 500 1000] [--repeat 3] [--keep DIR] [--json FILE]   (or: nox -s scale)

Each generated book is laid out like this one: parts of ten chapters, chapters of ten problems with
an overview page each, every problem a page of the book's kind (front matter, every section, claims
in prose, a table, display math, the problem before it in ``draws_on``) and a stdlib check. The
theme, its features, the overrides, the stylesheets and scripts, the Markdown extensions and the
plugins are this project's (the run-it-yourself notebooks are off: they are the same work per page
at every size). A few checks wait a while, as a real book's long checks do, so that shards have
something to balance: one in twenty 0.4 s, one in a hundred 2 s.

Per size it measures: a cold ``numbook verify`` (every check runs; the run times are recorded for
the shards), a warm one, the warm strict build (median of ``--repeat``) and its time per page, where
that time goes (``--profile``: per MkDocs event and plugin, Markdown, the theme's templates), the search
index (bytes and entries per page). At the largest size: ``mkdocs serve --dirty``'s edit to served page,
the search index's load in Chromium (from opening search to the first result), and the shards: the N=4
plan by recorded run time, each shard run one after another from an empty cache, and the slowest
shard's time against the total over N. The last lines judge the figures against issue 32's targets.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent
ENV = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONWARNINGS="ignore")
PARTS = ["I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII", "XIII", "XIV", "XV", "XVI",
         "XVII", "XVIII", "XIX", "XX"]

CHAPTER = """---
chapter: {cid}
title: Tables, set {cid}
description: Embedding tables of ten sizes, their element counts and their fp32 memory.
---

Every table here is a vocabulary times a width. The problems, in order:

{items}
"""

PAGE = """---
id: {pid}
title: Table {n}
check: {stem}.py
draws_on: [{draws}]
description: "The element count and fp32 memory of embedding table {n}."
---

## Statement

An embedding table maps each of $|V|$ tokens to $d$ numbers. How large is table {n}, and how
much memory does it take in fp32?

## Given

$|V| = [[{V_tex}|V]]$ tokens and $d = [[{d}|d]]$.

## Find

1. The element count.
2. The fp32 memory in MB ($10^6$ bytes).

## Strategy

Multiply the axis lengths, then the bytes per element: fp32 spends four bytes on each.

## Solution

### Step 1 — the element count

$$|V| \\cdot d = [[{V_tex}|V]] \\times [[{d}|d]] = [[{numel_tex}|numel]]$$

### Step 2 — the memory

| table | elements | MB |
|---|---|---|
| this one | [[{numel:,}|numel]] | [[{mb:.1f}|fp32_mb]] |

## Answer

$[[{numel_tex}|numel]]$ elements, [[{mb:.1f}|fp32_mb]] MB.

## Check — numeric

```check
```

## Check — sanity

- The bytes are the elements times four. [[sanity:bytes]]

## Where this breaks

Tied input and output tables share one storage; a table sharded over devices splits its bytes.

## Variation

Double $d$: the memory doubles.
"""

CHECK = '''"""Table {n}: the element count and the fp32 bytes of a ({V}, {d}) embedding table."""
import array
import time

from numbook.check import given, sanity, value

time.sleep({wait})   # stands for the work of a longer check (tools/scale_book.py: shards need uneven checks)
V = given("V", {V})
d = given("d", {d})
elem = array.array("f").itemsize
numel = value("numel", V * d)
value("fp32_mb", numel * elem / 1e6)
sanity("bytes", numel * elem == V * d * 4, "fp32 is four bytes an element", operands=(numel * elem, V * d * 4))
print(f"table ({{V}}, {{d}}): {{numel:,}} elements, {{numel * elem:,}} bytes")
'''

MKDOCS = """site_name: Scale test
site_url: http://127.0.0.1:8000/
theme:
  name: material
  custom_dir: overrides
  font: false
  features: {features}
plugins:
  - search: {search}
  - numbook: {{timeout: 60}}
markdown_extensions:
  - numbook
  - toc: {{permalink: true}}
  - tables
  - admonition
  - attr_list
  - md_in_html
  - footnotes
  - pymdownx.details
  - pymdownx.superfences
  - pymdownx.tabbed: {{alternate_style: true}}
  - pymdownx.arithmatex: {{generic: true}}
  - pymdownx.highlight: {{anchor_linenums: true}}
  - pymdownx.inlinehilite
  - numbook.components
extra_css: {css}
extra_javascript: {js}
nav:
  - Home: index.md
"""


def project_theme() -> tuple[list[str], list[str], list[str], dict[str, Any]]:
    """This project's theme features, stylesheets, scripts and search options (read from its mkdocs.yml)."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("", lambda loader, suffix, node: None)
    cfg = yaml.load((PROJECT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=Loader)  # noqa: S506
    search = next((p["search"] or {} for p in cfg.get("plugins", []) if isinstance(p, dict) and "search" in p), {})
    return (list(cfg["theme"].get("features", [])), list(cfg.get("extra_css", [])),
            list(cfg.get("extra_javascript", [])), dict(search))


def wait_of(i: int) -> float:
    """The extra seconds problem i's check waits: one in a hundred 2 s, one in twenty 0.4 s, else none."""
    return 2.0 if i % 100 == 37 else 0.4 if i % 20 == 11 else 0.0


def pid_of(i: int) -> tuple[str, str, str]:
    """Problem i's ID, chapter ID and check stem: ten problems a chapter, ten chapters a part."""
    part, chapter, num = PARTS[i // 100], i // 10 % 10 + 1, i % 10 + 1
    return f"{part}.{chapter}.A{num:02d}", f"{part}.{chapter}", f"{part.lower()}{chapter}_a{num:02d}_table"


def make_book(root: Path, n: int) -> None:
    if n > 100 * len(PARTS):
        raise SystemExit(f"at most {100 * len(PARTS)} problems")
    if root.exists():
        shutil.rmtree(root)
    for d in ("docs", "problems", "checks"):
        (root / d).mkdir(parents=True)
    features, css, js, search = project_theme()
    shutil.copytree(PROJECT / "overrides", root / "overrides")
    shutil.copytree(PROJECT / "docs" / "assets", root / "docs" / "assets")
    (root / "mkdocs.yml").write_text(MKDOCS.format(features=json.dumps(features), css=json.dumps(css),
                                                   js=json.dumps(js), search=json.dumps(search)), encoding="utf-8")
    (root / "docs" / "index.md").write_text("# Scale test\n\nA generated book of embedding tables.\n", encoding="utf-8")
    chapters: dict[str, list[str]] = defaultdict(list)
    for i in range(n):
        pid, cid, stem = pid_of(i)
        chapters[cid].append(pid)
        V, d = 1000 + 7 * i, 64 + (i % 8) * 32
        numel = V * d
        prev = pid_of(i - 1)[0] if i % 10 else ""
        (root / "problems" / f"{pid}.md").write_text(PAGE.format(
            pid=pid, n=i + 1, stem=stem, V_tex=f"{V:,}".replace(",", "{,}"), d=d, numel=numel, mb=numel * 4 / 1e6,
            numel_tex=f"{numel:,}".replace(",", "{,}"), draws=prev),
            encoding="utf-8")
        (root / "checks" / f"{stem}.py").write_text(CHECK.format(n=i + 1, V=V, d=d, wait=wait_of(i)), encoding="utf-8")
    for cid, pids in chapters.items():
        items = "\n".join(f"{k}. [{p}]({p}.md) · Table {p}." for k, p in enumerate(pids, 1))
        (root / "problems" / f"{cid}.md").write_text(CHAPTER.format(cid=cid, items=items), encoding="utf-8")


def run(cmd: list[str], cwd: Path, timeout: float = 7200) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout, check=False)
    return time.perf_counter() - started, proc


def must(proc: subprocess.CompletedProcess[str], what: str) -> None:
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed (exit {proc.returncode}):\n{(proc.stdout + proc.stderr)[-4000:]}")


NUMBOOK = [sys.executable, "-m", "numbook.cli"]
MKDOCS_CMD = [sys.executable, "-m", "mkdocs"]


# -- where a build's time goes ---------------------------------------------------------------------
def profile_build(root: Path) -> dict[str, float]:
    """One strict build in this process, timed per MkDocs event and plugin, Markdown and the theme's templates."""
    import jinja2
    from mkdocs.commands import build as mk_build
    from mkdocs.config import load_config
    from mkdocs.plugins import PluginCollection
    from mkdocs.structure.pages import Page

    spent: dict[str, float] = defaultdict(float)
    stack: list[float] = []   # time spent in nested timed calls, subtracted from the caller's

    def timed(key: str, fn: Any, *a: Any, **kw: Any) -> Any:
        stack.append(0.0)
        t0 = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            took = time.perf_counter() - t0
            inner = stack.pop()
            spent[key] += took - inner
            if stack:
                stack[-1] += took

    def run_event(self: Any, name: str, item: Any = None, **kwargs: Any) -> Any:
        pass_item = item is not None
        for method in self.events[name]:
            origin = self._current_plugin = self._event_origins.get(method, "?")
            key = f"on_{name} · {origin} ({getattr(method, '__name__', '?')})"
            result = timed(key, method, item, **kwargs) if pass_item else timed(key, method, **kwargs)
            if result is not None:
                item = result
        self._current_plugin = None
        return item

    PluginCollection.run_event = run_event  # type: ignore[method-assign,assignment]
    render_md, render_tpl = Page.render, jinja2.Template.render
    Page.render = lambda self, *a, **kw: timed("Markdown → HTML (Page.render, extensions)",  # type: ignore[method-assign]
                                               render_md, self, *a, **kw)
    named = ("main.html", "404.html", "sitemap.xml")
    jinja2.Template.render = lambda self, *a, **kw: timed(  # type: ignore[method-assign]
        f"theme template {self.name if self.name in named else 'other'}", render_tpl, self, *a, **kw)
    os.chdir(root)
    t0 = time.perf_counter()
    cfg = load_config(config_file=str(root / "mkdocs.yml"), strict=True, site_dir=str(root / "site"))
    cfg.plugins.on_startup(command="build", dirty=False)
    try:
        mk_build.build(cfg)
    finally:
        cfg.plugins.on_shutdown()
    total = time.perf_counter() - t0
    out = {k: v for k, v in spent.items() if v >= 0.0005}
    out["everything else (MkDocs: reading, context, writing)"] = total - sum(spent.values())
    out["total"] = total
    return out


def profile(root: Path) -> dict[str, float]:
    _, proc = run([sys.executable, str(Path(__file__)), "--profile-build", str(root)], root)
    must(proc, "the profiled build")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


# -- measurements ------------------------------------------------------------------------------------
def warm_builds(root: Path, repeat: int) -> list[float]:
    _, proc = run([*MKDOCS_CMD, "build", "--strict"], root)   # fills the rendered-fence and math caches
    must(proc, "the first strict build")
    times = []
    for _ in range(repeat):
        took, proc = run([*MKDOCS_CMD, "build", "--strict"], root)
        must(proc, "a warm strict build")
        times.append(took)
    return times


def search_index(root: Path, pages: int) -> dict[str, float]:
    data = (root / "site" / "search" / "search_index.json").read_bytes()
    docs = json.loads(data)["docs"]
    return {"search_bytes": len(data), "search_entries": len(docs), "search_bytes_per_page": len(data) / pages,
            "search_entries_per_page": len(docs) / pages}


def search_load(site: Path, repeat: int) -> list[float]:
    """Seconds from opening search on a problem page to the first result shown, in Chromium, empty cache each
    (a new browser context per run; one run first to warm the browser up, not kept)."""
    import http.server
    import threading
    from functools import partial

    from playwright.sync_api import sync_playwright

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(site)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/problems/{pid_of(0)[0]}/"
    times = []
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=os.environ.get("NUMBOOK_CHROMIUM", "/usr/bin/chromium"),
                                         args=["--headless", "--no-sandbox", "--disable-gpu"])
            for i in range(repeat + 1):   # the first, in a browser just started, warms it up and is not kept
                ctx = browser.new_context()
                page = ctx.new_page()
                page.goto(url, wait_until="load")
                page.wait_for_timeout(300)
                started = time.perf_counter()
                page.keyboard.press("/")
                page.keyboard.type("embedding")
                page.wait_for_selector(".md-search-result__item", timeout=60_000)
                if i:
                    times.append(time.perf_counter() - started)
                ctx.close()
            browser.close()
    finally:
        httpd.shutdown()
    return times


def load_bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench_build", HERE / "bench_build.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_build"] = mod   # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def shards(root: Path, n: int) -> dict[str, Any]:
    """The n-shard plan by recorded run time (``numbook shards N --json``), then each shard run from an empty
    cache, one after another: the slowest shard's wall time against the sum over n."""
    _, proc = run([*NUMBOOK, "shards", str(n), "--json"], root)
    must(proc, "numbook shards")
    plan = json.loads(proc.stdout)
    record = json.loads((root / "checks" / "runtimes.json").read_text(encoding="utf-8"))["seconds"]
    names = sorted(c for s in plan["shards"] for c in s["checks"])
    weigh = {c: record.get(c, plan["guess"]) for c in names}

    def balance(loads: list[float]) -> float:
        return max(loads) / (sum(loads) / len(loads))

    robin = [sum(weigh[c] for c in names[k::n]) for k in range(n)]
    walls = []
    for k in range(1, n + 1):
        shutil.rmtree(root / ".cache" / "numbook", ignore_errors=True)
        took, proc = run([*NUMBOOK, "verify", "--no-progress", "--shard", f"{k}/{n}", "--bundle",
                          str(root / f"shard-{k}.json")], root)
        must(proc, f"shard {k}/{n}")
        walls.append(took)
    return {"shard_walls": walls, "shard_ratio": balance(walls),
            "shard_planned_ratio": balance([s["seconds"] for s in plan["shards"]]),
            "shard_round_robin_ratio": balance(robin)}


def this_book(base: Path, repeat: int, search: bool) -> dict[str, Any]:
    """This project's own book, copied with its result cache: pages, the warm strict build (median), the search
    index and (``search``) its first search in Chromium, as for the generated books."""
    bench = load_bench()
    root = bench.copy_project(PROJECT, base / "this-book")
    print(f"scale: this book, copied to {root}", flush=True)
    builds = warm_builds(root, repeat)
    pages = sum(1 for _ in (root / "site").rglob("*.html")) - 1   # every page's index.html; not the 404
    index = (root / "site" / "search" / "search_index.json").stat().st_size
    out = {"pages": pages, "build_warm_s": statistics.median(builds), "build_warm_runs": builds,
           "build_ms_per_page": 1000 * statistics.median(builds) / pages, "search_bytes": index,
           "search_bytes_per_page": index / pages}
    if search:
        out["search_load_s"] = search_load(root / "site", 5)
    return out


def machine() -> dict[str, Any]:
    import platform

    model = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                  if ln.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").is_file() else ""
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d"), "load_before": os.getloadavg()[0]}


def measure(root: Path, n: int, repeat: int, do_profile: bool) -> dict[str, Any]:
    print(f"scale: {n} problems in {root}", flush=True)
    make_book(root, n)
    pages = n + len({pid_of(i)[1] for i in range(n)}) + 1
    cold, p1 = run([*NUMBOOK, "verify", "--no-progress", "--record-times"], root)
    must(p1, "the cold numbook verify")
    warm_verify, p2 = run([*NUMBOOK, "verify", "--no-progress"], root)
    must(p2, "the warm numbook verify")
    builds = warm_builds(root, repeat)
    row: dict[str, Any] = {"problems": n, "pages": pages, "verify_cold_s": cold, "verify_warm_s": warm_verify,
                           "build_warm_s": statistics.median(builds), "build_warm_runs": builds,
                           "build_ms_per_page": 1000 * statistics.median(builds) / pages}
    row.update(search_index(root, pages))
    if do_profile:
        row["profile"] = profile(root)
    print(f"  {pages} pages: verify cold {cold:.1f} s, warm {warm_verify:.1f} s; warm build "
          f"{row['build_warm_s']:.1f} s ({row['build_ms_per_page']:.0f} ms a page); search "
          f"{row['search_bytes_per_page'] / 1000:.2f} kB a page", flush=True)
    return row


def show_profile(rows: list[dict[str, Any]]) -> None:
    keys = sorted({k for r in rows for k in r.get("profile", {})}, key=lambda k: -rows[-1].get("profile", {}).get(k, 0))
    if not keys:
        return
    print("\nwhere a warm build's time goes (ms a page; one profiled build per size)")
    print(f"{'':<78}" + "".join(f"{r['problems']:>9}" for r in rows))
    for k in keys:
        print(f"{k[:78]:<78}" + "".join(f"{1000 * r.get('profile', {}).get(k, 0.0) / r['pages']:>9.2f}" for r in rows))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 500, 1000])
    ap.add_argument("--repeat", type=int, default=3, help="warm builds per size (median)")
    ap.add_argument("--profile", action="store_true", help="profile one warm build per size")
    ap.add_argument("--skip", nargs="*", default=[], choices=["book", "serve", "search", "shards"])
    ap.add_argument("--keep", type=Path, help="build the books here instead of a temporary folder")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON")
    ap.add_argument("--profile-build", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.profile_build:
        print(json.dumps(profile_build(args.profile_build.resolve())))
        return 0
    base = (args.keep or Path(tempfile.mkdtemp(prefix="numbook-scale-"))).resolve()
    try:
        extra: dict[str, Any] = {"machine": machine()}
        if "book" not in args.skip:
            extra["this_book"] = this_book(base, args.repeat, "search" not in args.skip)
        rows = [measure(base / f"book-{n}", n, args.repeat, args.profile) for n in sorted(args.sizes)]
        big = rows[-1]
        root = base / f"book-{big['problems']}"
        if "serve" not in args.skip:
            edits = load_bench().serve_edit(root, 3, strict=False, extra=("--dirty",))
            extra["serve_edit_s"] = [s for s, _ in edits]
            extra["serve_rebuild_s"] = [b for _, b in edits]
        if "search" not in args.skip:
            extra["search_load_s"] = search_load(root / "site", 5)
        if "shards" not in args.skip:
            extra.update(shards(root, 4))
        report(rows, extra)
        if args.json:
            args.json.write_text(json.dumps({"rows": rows, "largest": extra}, indent=1), encoding="utf-8")
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    return 0


def report(rows: list[dict[str, Any]], extra: dict[str, Any]) -> None:
    head = ("problems", "pages", "verify cold", "verify warm", "build warm", "per page", "search/page")
    print()
    print("  ".join(f"{h:>11}" for h in head))
    for r in rows:
        print("  ".join(f"{v:>11}" for v in (
            r["problems"], r["pages"], f"{r['verify_cold_s']:.1f} s", f"{r['verify_warm_s']:.1f} s",
            f"{r['build_warm_s']:.1f} s", f"{r['build_ms_per_page']:.0f} ms",
            f"{r['search_bytes_per_page'] / 1000:.2f} kB")))
    show_profile(rows)
    first, last = rows[0], rows[-1]
    print()

    def judged(label: str, value: float, target: float, unit: str = "×") -> None:
        print(f"{label:<64} {value:.2f}{unit}   target ≤ {target:g}{unit}: {'pass' if value <= target else 'MISS'}")

    if "this_book" in extra:
        b = extra["this_book"]
        print(f"this book: {b['pages']} pages, warm build {b['build_warm_s']:.1f} s ({b['build_ms_per_page']:.0f} ms a "
              f"page), search index {b['search_bytes_per_page'] / 1000:.1f} kB a page"
              + (f"; first search {statistics.median(b['search_load_s']):.2f} s (of "
                 + ", ".join(f"{x:.2f}" for x in b["search_load_s"]) + ")" if "search_load_s" in b else ""))
    if len(rows) > 2:
        mid = rows[-2]
        def step(a: dict[str, Any], z: dict[str, Any]) -> float:
            return 1000 * (z["build_warm_s"] - a["build_warm_s"]) / (z["pages"] - a["pages"])
        print(f"warm build, each added page: {first['problems']}→{mid['problems']} problems {step(first, mid):.1f} ms, "
              f"{mid['problems']}→{last['problems']} {step(mid, last):.1f} ms (equal when linear)")
    if len(rows) > 1:
        judged(f"warm build per page, {last['problems']} problems / {first['problems']}",
               last["build_ms_per_page"] / first["build_ms_per_page"], 1.2)
        judged(f"search index per page, {last['problems']} problems / {first['problems']}",
               last["search_bytes_per_page"] / first["search_bytes_per_page"], 1.2)
    if "serve_edit_s" in extra:
        print(f"{'mkdocs serve --dirty, edit to served page':<64} "
              + ", ".join(f"{s:.2f} s" for s in extra["serve_edit_s"]))
        judged(f"  median, {last['problems']} problems", statistics.median(extra["serve_edit_s"]), 1.0, " s")
    if "search_load_s" in extra:
        print(f"{'search: open to first result, Chromium, empty cache':<64} "
              + ", ".join(f"{s:.2f} s" for s in extra["search_load_s"]))
        judged(f"  median, {last['problems']} problems ({last['search_bytes'] / 1e6:.2f} MB index)",
               statistics.median(extra["search_load_s"]), 1.0, " s")
    if "shard_walls" in extra:
        print(f"{'shards (N=4, one after another, empty cache each)':<64} "
              + ", ".join(f"{s:.1f} s" for s in extra["shard_walls"]))
        print(f"{'  planned: heaviest / mean, by recorded time (round-robin)':<64} "
              f"{extra['shard_planned_ratio']:.2f}× ({extra['shard_round_robin_ratio']:.2f}×)")
        judged("  measured: slowest shard / (sum of shards / 4)", extra["shard_ratio"], 1.2)


if __name__ == "__main__":
    sys.exit(main())
