"""The author CLI: ``numbook verify`` runs every check and verifies every claim, without HTML.

    numbook verify [--root DIR] [--no-cache] [--jobs N]
    numbook lint [--root DIR]
    numbook new ID "Title" [--root DIR]

It reads the book's layout from mkdocs.yml (docs_dir and the numbook plugin's options),
prints one line per fault (``path:line: message``) and a table of the checks, and exits
non-zero when anything is wrong. ``lint`` checks the book's structure without running a check
(``verify`` includes it); ``new`` scaffolds a problem page and its check.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from .book import Book
from .diagnostics import Diagnostic
from .lint import lint_book
from .runner import CheckResult, Runner
from .scaffold import ScaffoldError, scaffold
from .verify import PageContext, verify_page

__all__ = ["main", "verify_book", "load_layout", "lint"]


class _Loader(yaml.SafeLoader):
    """Reads mkdocs.yml without constructing its ``!!python/...`` tags."""


_Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
_Loader.add_multi_constructor("!", lambda loader, suffix, node: None)


def load_layout(root: Path) -> dict[str, Any]:
    """docs_dir and the numbook plugin's options from ``root/mkdocs.yml``."""
    cfg = yaml.load((root / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_Loader) or {}
    opts: dict[str, Any] = {}
    for plugin in cfg.get("plugins", []) or []:
        if isinstance(plugin, dict) and "numbook" in plugin:
            opts = plugin["numbook"] or {}
    return {
        "docs_dir": cfg.get("docs_dir", "docs"),
        "problems_dir": opts.get("problems_dir", "problems"),
        "checks_dir": opts.get("checks_dir", "checks"),
        "cache_dir": opts.get("cache_dir", ".cache/numbook"),
        "timeout": float(opts.get("timeout", 120)),
    }


def verify_book(root: Path, *, cache: bool = True, jobs: int = 0) -> tuple[list[Diagnostic], dict[str, CheckResult],
                                                                          dict[str, int], Runner]:
    """Run every check of the book once and verify every page: (faults, results, claims per check)."""
    layout = load_layout(root)
    runner = Runner(root, layout["checks_dir"], layout["cache_dir"] if cache else None, layout["timeout"], jobs)
    book = Book.scan(root, root / layout["docs_dir"], root / layout["problems_dir"])
    results = runner.run_many(book.checks())
    diags = list(book.diagnostics)
    claims: dict[str, int] = {}

    def result(name: str) -> CheckResult:
        if name not in results:
            results[name] = runner.result(name)
        return results[name]

    for entry in book.entries.values():  # pages without a check too: a claim there is an error
        if entry.failed:
            continue  # its front matter failed: that one fault, not one per claim below it
        ctx = PageContext(entry.path, entry.check, result, line_offset=entry.offset, root=root,
                          first_line=entry.offset + 1, check_line=entry.lines.get("check", 1),
                          problem=entry.problem, scan_numbers=entry.scan_numbers)
        rep = verify_page(entry.body, ctx)
        diags += rep.diagnostics
        for check, n in rep.claims.items():
            claims[check] = claims.get(check, 0) + n
    diags += lint_book(book, runner.checks_dir, layout["problems_dir"])
    return list(dict.fromkeys(diags)), results, claims, runner


def lint(root: Path) -> list[Diagnostic]:
    """The structural faults of the book at ``root`` (no check runs)."""
    layout = load_layout(root)
    book = Book.scan(root, root / layout["docs_dir"], root / layout["problems_dir"])
    return list(dict.fromkeys(lint_book(book, root / layout["checks_dir"], layout["problems_dir"])))


def _table(results: dict[str, CheckResult], claims: dict[str, int]) -> str:
    rows = [("check", "status", "time", "cpu", "source", "device", "claims")]
    for r in sorted({r.check: r for r in results.values()}.values(), key=lambda r: r.check):
        src = "frozen" if r.frozen else ("cache" if r.cached else "ran")
        cpu = f"{r.cpu_s:.2f} s" if r.cpu_s is not None else "–"
        rows.append((r.check, r.status, f"{r.elapsed_s:.2f} s", cpu, src, r.device, str(claims.get(r.check, 0))))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="numbook", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("verify", help="run every check and verify every claim, without building HTML")
    v.add_argument("--root", type=Path, default=Path("."), help="the folder holding mkdocs.yml")
    v.add_argument("--no-cache", action="store_true", help="run every check even if a cached result exists")
    v.add_argument("--jobs", type=int, default=0, help="checks run at once (default: one per core)")
    li = sub.add_parser("lint", help="check the book's structure (IDs, links, sections, unused checks) without "
                                     "running a check")
    li.add_argument("--root", type=Path, default=Path("."), help="the folder holding mkdocs.yml")
    n = sub.add_parser("new", help="scaffold a problem page and its check: numbook new I.4.B09 \"Title\"")
    n.add_argument("id", help="the new problem's ID, like I.4.B09")
    n.add_argument("title", help="the problem's title, without its ID")
    n.add_argument("--root", type=Path, default=Path("."), help="the folder holding mkdocs.yml")
    args = parser.parse_args(argv)
    if args.command == "lint":
        faults = lint(args.root.resolve())
        for d in faults:
            print(d, file=sys.stderr)
        print(f"lint: {len(faults)} faults")
        return 1 if faults else 0
    if args.command == "new":
        return _new(args.root.resolve(), args.id, args.title)
    if args.command == "verify":
        started = time.perf_counter()
        diags, results, claims, _ = verify_book(args.root.resolve(), cache=not args.no_cache, jobs=args.jobs)
        for d in diags:
            print(d, file=sys.stderr)
        print(_table(results, claims))
        total = sum(claims.values())
        print(f"{len(results)} checks, {total} claims verified, {len(diags)} faults "
              f"in {time.perf_counter() - started:.2f} s")
        return 1 if diags else 0
    return 2  # pragma: no cover


def _new(root: Path, pid: str, title: str) -> int:
    layout = load_layout(root)
    try:
        made = scaffold(root, pid, title, layout["problems_dir"], layout["checks_dir"])
    except ScaffoldError as exc:
        print(f"numbook new: {exc}", file=sys.stderr)
        return 1
    for f in (made.page, made.check):
        print(f"wrote {f.relative_to(root).as_posix()}")
    print("next: write the Statement, replace the scaffold's inputs and value, then `nox -s verify`")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
