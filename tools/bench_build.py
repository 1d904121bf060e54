"""Measure what the verification costs the build, in one run, and print the figures as ratios.

    python tools/bench_build.py [--root .] [--repeat 3] [--keep]      (or: nox -s bench)

It works on a copy of the project in a temporary folder (the result cache copied along), so the
working tree, its site/ and its cache are never touched. Every figure is wall-clock time of a
real command:

- warm: ``mkdocs build --strict`` with nothing changed (every check from the cache), against the
  floor: the same site with check execution off and no cache (``execute: false`` and
  ``cache_dir: ""`` in a config that INHERITs mkdocs.yml: no check result at all, so no claim is
  verified and no check output is rendered), median of ``--repeat`` runs each;
- cold: the strict build with an empty cache, against the time a perfect scheduler would add to the
  floor: the ``alone`` checks one after another (nothing may run beside them), plus every other check
  and every run-it-yourself notebook spread over the cores (or the longest check, if longer);
- ``numbook verify`` with a warm cache;
- edit to page: ``mkdocs serve --dirty`` running (as ``nox -s serve`` runs it), one problem page
  edited, time until the served HTML
  of that page shows the edit (polled over HTTP every 50 ms).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ENV = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONWARNINGS="ignore")
BIN = Path(sys.executable).parent


@dataclass
class Timed:
    seconds: float
    rc: int
    warnings: int
    numbook: str = ""   # the plugin's summary: "numbook: N checks (k ran, m from cache) in s"
    notebooks_s: float = 0.0   # the run-it-yourself notebooks' summed run time, as the plugin logs it


def run(cmd: list[str], cwd: Path) -> Timed:
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=ENV, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    summary = re.findall(r"numbook: (\d+ checks \(.*?\)) in", proc.stderr)
    notebooks = re.findall(r"([\d.]+) s of notebook run time", proc.stderr)
    return Timed(elapsed, proc.returncode, sum(ln.startswith("WARNING") for ln in proc.stderr.splitlines()),
                 summary[-1] if summary else "", float(notebooks[-1]) if notebooks else 0.0)


def mkdocs(root: Path, *args: str) -> list[str]:
    return [str(BIN / "mkdocs"), *args] if (BIN / "mkdocs").exists() else [sys.executable, "-m", "mkdocs", *args]


def median(root: Path, cmd: list[str], repeat: int) -> tuple[float, list[Timed]]:
    runs = [run(cmd, root) for _ in range(repeat)]
    return statistics.median(r.seconds for r in runs), runs


def _plugins(root: Path) -> list[object]:
    """The ``plugins`` list of the project's mkdocs.yml, as data (tags such as ``!ENV`` read as null)."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("", lambda loader, suffix, node: None)
    config = yaml.load((root / "mkdocs.yml").read_text(encoding="utf-8"), Loader=Loader) or {}  # noqa: S506
    return list(config.get("plugins") or [])


def inherit(root: Path, name: str, options: dict[str, object], strict: bool = True) -> str:
    """A config that INHERITs mkdocs.yml and overrides numbook plugin options (and ``strict``).

    MkDocs merges an inherited *list* of plugins by replacing it, so the override repeats the whole
    list (search, the notebook plugin, ...) with only numbook's options changed: the site built is
    the same site, with the same plugins, as the project's own build.
    """
    plugins: list[object] = []
    for item in _plugins(root):
        key = item if isinstance(item, str) else next(iter(item))  # type: ignore[call-overload]
        opts = {} if isinstance(item, str) else dict(item[key] or {})  # type: ignore[index]
        if key == "numbook":
            opts.update(options)
        plugins.append({key: opts} if opts else key)
    lines = ["INHERIT: mkdocs.yml", f"strict: {json.dumps(strict)}", f"plugins: {json.dumps(plugins)}"]
    (root / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return name


def copy_project(src: Path, dst: Path) -> Path:
    ignore = shutil.ignore_patterns(".git", ".venv", ".nox", "site", "__pycache__", "*.egg-info", ".pytest_cache",
                                    ".mypy_cache", ".ruff_cache")
    shutil.copytree(src, dst, ignore=ignore, symlinks=True)
    return dst


def first_problem(root: Path) -> Path:
    """The first problem page (front matter with an ``id``, a Statement section) to edit."""
    for page in sorted((root / "problems").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        if re.search(r"^id:", text, re.M) and "\n## Statement\n" in text:
            return page
    raise RuntimeError("no problem page with a '## Statement' section to edit under problems/")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fetch(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return str(resp.read().decode("utf-8", "replace"))
    except (urllib.error.URLError, OSError):
        return ""


def serve_edit(root: Path, edits: int, strict: bool, extra: tuple[str, ...] = ()) -> list[tuple[float, float]]:
    """Per edit: (seconds from writing an edit to a problem page until ``mkdocs serve`` serves it,
    seconds of that spent in the rebuild as serve's log reports it)."""
    port = free_port()
    page = first_problem(root)
    cfg = "mkdocs.yml" if strict else inherit(root, "mkdocs.bench-serve.yml", {}, strict=False)
    args = ["serve", "-f", cfg, "-a", f"127.0.0.1:{port}"] + (["--strict"] if strict else []) + list(extra)
    log = root / "serve.log"
    with log.open("w", encoding="utf-8") as fh:
        proc = subprocess.Popen(mkdocs(root, *args), cwd=root, env=ENV, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
    original = page.read_text(encoding="utf-8")
    times: list[tuple[float, float]] = []
    try:
        deadline = time.perf_counter() + 600
        url = ""
        while not url or "</html>" not in fetch(url):
            served = re.search(r"Serving on (http://\S+)", log.read_text(encoding="utf-8"))
            url = f"{served.group(1).rstrip('/')}/problems/{page.stem}/" if served else ""
            if proc.poll() is not None or time.perf_counter() > deadline:
                tail = "\n".join(log.read_text(encoding="utf-8").splitlines()[-15:])
                raise RuntimeError(f"mkdocs serve did not come up (exit {proc.returncode}):\n{tail}")
            time.sleep(0.2)
        time.sleep(1.0)  # let the watcher settle after the first build
        for i in range(edits):
            marker = f"Benchmark edit marker {'abcdefghij'[i]} here."
            text = original.replace("## Statement\n", f"## Statement\n\n{marker}\n", 1)
            started = time.perf_counter()
            page.write_text(text, encoding="utf-8")
            while marker not in fetch(url):
                if time.perf_counter() - started > 600:
                    raise RuntimeError("the edit never showed up")
                time.sleep(0.05)
            elapsed = time.perf_counter() - started
            time.sleep(0.5)
            built = re.findall(r"Documentation built in ([\d.]+) seconds", log.read_text(encoding="utf-8"))
            times.append((elapsed, float(built[-1]) if len(built) > i + 1 else float("nan")))
            time.sleep(0.5)
    finally:
        page.write_text(original, encoding="utf-8")
        if proc.poll() is None:
            os.killpg(proc.pid, 15)
            proc.wait(timeout=30)
    return times


def check_seconds(cache: Path, root: Path) -> tuple[float, int, float, str, float]:
    """Of the checks whose results an empty cache collected: summed run time, count, the longest and its
    name, and the summed run time of the ``alone`` ones (which nothing may run beside)."""
    from numbook.core.result import read_header

    data = [json.loads(f.read_text(encoding="utf-8")) for f in cache.glob("*.json")]
    longest = max(data, key=lambda d: d["elapsed_s"], default={"elapsed_s": 0.0, "check": "none"})

    def alone(d: dict[str, object]) -> bool:
        try:
            return read_header((root / str(d["check"])).read_text(encoding="utf-8")).alone
        except (OSError, ValueError):
            return False

    return (sum(d["elapsed_s"] for d in data), len(data), longest["elapsed_s"], longest["check"],
            sum(d["elapsed_s"] for d in data if alone(d)))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", type=Path, default=Path("."), help="the project (the folder holding mkdocs.yml)")
    p.add_argument("--repeat", type=int, default=3, help="runs per timed build (median)")
    p.add_argument("--edits", type=int, default=2, help="edits timed under mkdocs serve")
    p.add_argument("--keep", action="store_true", help="keep the temporary copy")
    args = p.parse_args(argv)
    src = args.root.resolve()
    tmp = Path(tempfile.mkdtemp(prefix="numbook-bench-"))
    root = copy_project(src, tmp / "book")
    cores = os.cpu_count() or 1
    out = tmp / "site"
    def show(label: str, value: str) -> None:
        print(f"{label:<50}  {value}", flush=True)

    def judged(label: str, value: float, target: float, unit: str = "×") -> None:
        """A figure with its target (issue 14) and whether this run met it."""
        show(label, f"{value:.2f}{unit}   target ≤ {target:g}{unit}: {'pass' if value <= target else 'MISS'}")

    try:
        print(f"bench: a copy of {src} in {root}; {cores} cores; median of {args.repeat}", flush=True)
        first = run(mkdocs(root, "build", "--strict", "-d", str(out)), root)
        strict_ok = first.rc == 0
        show("first build (cache as copied)", f"{first.seconds:.2f} s, exit {first.rc}, {first.warnings} warnings, "
                                              f"{first.numbook}")
        warm, wruns = median(root, mkdocs(root, "build", "--strict", "-d", str(out)), args.repeat)
        show("warm strict build (nothing changed)", f"{warm:.2f} s; " + "; ".join(r.numbook for r in wruns))
        # execute: false alone still reads cached results; with no cache no check result exists at all
        floor_cfg = inherit(root, "mkdocs.bench-floor.yml", {"execute": False, "cache_dir": ""})
        floor, _ = median(root, mkdocs(root, "build", "-f", floor_cfg, "-d", str(out)), args.repeat)
        show("floor: execute: false, no cache", f"{floor:.2f} s")
        judged("  ratio warm / floor", warm / floor, 1.2)
        cold_cfg = inherit(root, "mkdocs.bench-cold.yml", {"cache_dir": ".cache/numbook-bench-cold"})
        cold_cache = root / ".cache/numbook-bench-cold"
        shutil.rmtree(cold_cache, ignore_errors=True)
        cold = run(mkdocs(root, "build", "--strict", "-f", cold_cfg, "-d", str(out)), root)
        summed, n_checks, longest, longest_name, alone = check_seconds(cold_cache, root)
        show("cold strict build (empty cache)", f"{cold.seconds:.2f} s, {cold.numbook}")
        show(f"  sum of check run times ({n_checks} ok checks)", f"{summed:.2f} s, of which {alone:.2f} s alone")
        show("  sum of notebook run times (run it yourself)", f"{cold.notebooks_s:.2f} s")
        show(f"  longest check: {longest_name}", f"{longest:.2f} s")
        show(f"  floor + max(sum / {cores} cores, longest)", f"{floor + max(summed / cores, longest):.2f} s")
        show("  ratio cold / (floor + max(sum / cores, longest))",
             f"{cold.seconds / (floor + max(summed / cores, longest)):.2f}×  (issue 14's first formula: it counts "
             "neither the checks that run alone nor the notebooks)")
        # A check marked `alone` measures: nothing may run beside it, so no schedule finishes before the
        # floor plus the alone checks one after another plus everything else spread over the cores; the
        # notebooks run the checks' code a second time, as work of the build like any check's.
        bound = floor + max(longest, alone + (summed - alone + cold.notebooks_s) / cores)
        show("  floor + alone + (other checks + notebooks) / cores", f"{bound:.2f} s")
        judged("  ratio cold / (floor + alone + rest / cores)", cold.seconds / bound, 1.1)
        numbook = str(BIN / "numbook") if (BIN / "numbook").exists() else "numbook"
        verify, vruns = median(root, [numbook, "verify"], args.repeat)
        show("numbook verify, warm cache", f"{verify:.2f} s (exit {vruns[0].rc})")
        judged("  ratio verify / warm build", verify / warm, 1.0)
        try:
            # as `nox -s serve` runs it: rebuild only what an edit changes
            edits = serve_edit(root, args.edits, strict=False, extra=("--dirty",))
        except RuntimeError as exc:
            show("mkdocs serve: edit to served page", f"not measured: {exc}")
        else:
            show("mkdocs serve --dirty: edit to served page",
                 ", ".join(f"{s:.2f} s" for s, _ in edits))
            show("  of which the rebuild (serve's log)", ", ".join(f"{b:.2f} s" for _, b in edits))
            show("  ratio edit-to-page / warm build", f"{statistics.median(s for s, _ in edits) / warm:.2f}×")
            judged("  edit to served page, median", statistics.median(s for s, _ in edits), 1.0, " s")
        if not strict_ok:
            print(f"\nnote: the book does not build strict now ({first.warnings} warnings); the builds above ran "
                  "to the end and were timed all the same, and serve ran with strict: false")
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
