"""The author CLI: ``numbook verify`` runs every check and verifies every claim, without HTML.

    numbook verify [--root DIR] [--no-cache] [--jobs N] [--progress | --no-progress] [--record-times]
    numbook verify --shard K/N [--bundle FILE]
    numbook shards N [--root DIR] [--list | --json]
    numbook run CHECK [--root DIR] [--cache]
    numbook lint [--root DIR]
    numbook new ID "Title" [--root DIR]
    numbook freeze [--root DIR] [--jobs N]

It reads the book's layout from mkdocs.yml (through MkDocs, see ``numbook.mkdocs.config``), verifies
the pages with the build's own pass (``numbook.core.bookpass``), prints one line per fault
(``path:line: message``) and a table of the checks, and exits non-zero when anything is wrong.
``run`` runs one check alone and shows what it recorded; ``lint`` checks the book's structure
without running a check (``verify`` includes it); ``new`` scaffolds a problem page and its check;
``freeze`` runs every GPU check on this machine's GPU and writes its frozen result; ``shards`` prints
how ``verify --shard K/N`` deals the checks into N shards, balanced by ``checks/runtimes.json``
(``numbook.run.shards``), which ``verify --record-times`` writes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numbook.run.standalone as standalone
from numbook.cli.scaffold import ScaffoldError, scaffold
from numbook.core.book import Book
from numbook.core.bookpass import BuildResults, verify_book
from numbook.core.diagnostics import Diagnostic
from numbook.core.ledger import diff, format_diff, read_ledger
from numbook.core.lint import label_faults, lint_book, orphan_faults, structure_faults, used_checks
from numbook.core.result import Source, read_header
from numbook.core.verify import PageReport, RecordKind, Results, failure_message
from numbook.mkdocs.config import ConfigError, Layout, load_layout
from numbook.run.cache import relative
from numbook.run.freeze import FreezeError, freeze_checks
from numbook.run.frozen import narrow_facts
from numbook.run.perturb import format_report, load_report, merge, perturb, report_path, save_report
from numbook.run.runner import CACHED_ONLY_ENV, CheckResult, Progress, Runner
from numbook.run.shards import RUNTIMES_FILE, Plan, RuntimesError, plan, read_runtimes, weight, write_runtimes

__all__ = ["main", "check_book", "load_layout", "lint", "run_check", "freeze_book", "progress_line"]


def _runner(root: Path, layout: Layout, *, cache: bool = True, jobs: int = 0) -> Runner:
    return Runner(root, layout.checks_dir, layout.cache_dir if cache else None, layout.timeout,
                  jobs or layout.jobs, memory=layout.memory)


@dataclass
class BookReport:
    """What verifying the whole book found."""

    diagnostics: list[Diagnostic]
    results: dict[str, CheckResult]
    claims: dict[str, int]                                            # check -> claims verified
    runner: Runner
    bound: dict[str, set[str]] = field(default_factory=dict)          # check -> value names the pages bind
    free: dict[str, int] = field(default_factory=dict)                # page -> numbers marked free
    reports: dict[str, PageReport] = field(default_factory=dict)      # site path -> the page's report


def check_book(root: Path, *, cache: bool = True, jobs: int = 0, progress: Progress | None = None,
               only: list[str] | None = None) -> BookReport:
    """Run every check of the book once (or only those of a shard) and verify every page, by the build's pass."""
    layout = load_layout(root)
    runner = _runner(root, layout, cache=cache, jobs=jobs)
    book = Book.scan(root, root / layout.docs_dir, root / layout.problems_dir)
    results = BuildResults(runner, runner.run_many(book.checks() if only is None else only, progress=progress))
    diags = structure_faults(book, layout.problems_dir)   # the build's order: structure, pages, unused checks
    reports = verify_book(book, results)   # pages without a check too: a claim there is an error
    claims: dict[str, int] = {}
    bound: dict[str, set[str]] = {}
    free: dict[str, int] = {}
    for rep in reports.values():
        diags += rep.diagnostics
        for check, n in rep.claims.items():
            claims[check] = claims.get(check, 0) + n
        for rec in rep.records:
            if rec.kind == RecordKind.CLAIM:
                bound.setdefault(rec.check, set()).add(rec.name)
            elif rec.kind == RecordKind.FREE and rec.shown:
                free[rep.context.path] = free.get(rep.context.path, 0) + 1
    diags += orphan_faults(book, runner.checks_dir) + label_faults(book, runner.checks_dir)
    if layout.run_yourself and layout.execute and only is None:
        diags += _notebook_faults(book, runner, results)
    return BookReport(list(dict.fromkeys(diags)), results.by_name, claims, runner, bound, free, reports)


def _notebook_faults(book: Book, runner: Runner, results: Results) -> list[Diagnostic]:
    """The build's run-it-yourself step without its HTML: each problem's notebook runs in its check's sandbox (or
    comes from the cache the build shares) and must print what its check printed; the files go to a folder that
    is thrown away."""
    jobs = []
    with tempfile.TemporaryDirectory(prefix="numbook-offer-") as tmp:
        for entry in sorted(book.problems.values(), key=lambda e: e.path):
            res = results.result(entry.check) if entry.check else None
            if res is None or not res.ok or res.source is Source.FROZEN:
                continue   # a failed check is already a fault; a GPU check cannot run on a reader's CPU
            jobs.append(standalone.Job(entry.path, entry.lines.get("check", 1), entry.pmeta.id, entry.pmeta.title,
                                       runner.root / res.check, Path(tmp) / entry.pmeta.id, "", res))
        return standalone.offer_all(jobs, runner, run=not os.environ.get(CACHED_ONLY_ENV))[0]


def lint(root: Path) -> list[Diagnostic]:
    """The structural faults of the book at ``root`` (no check runs)."""
    layout = load_layout(root)
    book = Book.scan(root, root / layout.docs_dir, root / layout.problems_dir)
    return list(dict.fromkeys(lint_book(book, root / layout.checks_dir, layout.problems_dir)))


def _table(results: dict[str, CheckResult], claims: dict[str, int]) -> str:
    rows = [("check", "status", "time", "cpu", "source", "device", "claims")]
    for r in sorted({r.check: r for r in results.values()}.values(), key=lambda r: r.check):
        src = str(r.source)
        cpu = f"{r.cpu_s:.2f} s" if r.cpu_s is not None else "–"
        rows.append((r.check, r.status, f"{r.elapsed_s:.2f} s", cpu, src, r.device, str(claims.get(r.check, 0))))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def progress_line(done: int, total: int, res: CheckResult, running: list[str]) -> str:
    """``[3/21] checks/x.py ok 14.90 s (ran) · still running: y, z``."""
    src = res.source
    line = f"[{done}/{total}] {res.check} {res.status} {res.elapsed_s:.2f} s ({src})"
    if running:
        names = [Path(c).stem for c in sorted(running)]
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        line += f" · still running: {shown}"
    return line


def _print_progress(done: int, total: int, res: CheckResult, running: list[str]) -> None:
    print(progress_line(done, total, res, running), file=sys.stderr, flush=True)


def freeze_book(root: Path, *, jobs: int = 1) -> tuple[list[Path], list[str]]:
    """Run every GPU check of the book on this machine's GPU and freeze it: (files written, faults).

    Raises FreezeError, writing nothing, where no GPU answers or torch cannot use it. The checks run
    ``jobs`` at a time (one by default, so a measurement does not share the GPU with another).
    """
    layout = load_layout(root)
    runner = Runner(root, layout.checks_dir, None, layout.timeout, jobs, memory=layout.memory)
    written, failed = freeze_checks(runner)
    return written, [res if isinstance(res, str) else failure_message(res, res.check)[0] or f"{res.check}: {res.status}"
                     for res in failed]


def _spread(res: CheckResult, name: str) -> str:
    """A measured value's interval, after its value: `` (95% CI 37.21–45.93, n = 480, 5 seeds: 95% t interval over
    5 seeds)``; `` (measured, no interval)`` for one recorded without."""
    spread = res.spread(name)
    if spread is not None:
        return (f" ({spread.level_words} CI {spread.lo:.6g}–{spread.hi:.6g}, n = {spread.n}, {spread.repeats_words}: "
                f"{spread.kind})")
    return " (measured, no interval)" if name in res.measured and name in res.values else ""


def _records(res: CheckResult) -> str:
    rows = [("kind", "name", "value", "line")]
    for kind, recs in (("input", res.inputs), ("value", res.values)):
        rows += [(kind, k, json.dumps(v) + _spread(res, k), str(res.lines.get(k, ""))) for k, v in recs.items()]
    for k, v in res.sanity.items():
        ok = "ok" if v.get("ok") else "FAILED"
        rows.append(("sanity", k, ok + (f": {v['message']}" if v.get("message") else ""), str(res.lines.get(k, ""))))
    rows += [("figure", k, v.get("caption", ""), str(res.lines.get(k, ""))) for k, v in res.figures.items()]
    if len(rows) == 1:
        return "(nothing recorded)"
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def run_check(root: Path, check: str, *, cache: bool = False) -> tuple[int, CheckResult]:
    """``numbook run CHECK``: run one check through the runner and its sandbox, print what it did."""
    layout = load_layout(root)
    runner = _runner(root, layout, cache=cache, jobs=1)
    name = os.path.relpath(Path(check).resolve(), runner.checks_dir) if Path(check).is_file() else check
    res = runner.result(Path(name).as_posix())
    if res.stdout:
        print(res.stdout, end="" if res.stdout.endswith("\n") else "\n")
    if res.stderr and not res.ok:
        print(res.stderr, end="" if res.stderr.endswith("\n") else "\n", file=sys.stderr)
    if res.ok:
        print(_records(res))
        reads = ", ".join(res.reads) or "none"
        print(f"{res.check}: ok in {res.elapsed_s:.2f} s · {res.stamp()}")
        print(f"read: {reads}")
        return 0, res
    print(failure_message(res, name)[0] or f"{res.check}: {res.status}", file=sys.stderr)
    return 1, res


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="numbook", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("verify", help="run every check and verify every claim, without building HTML")
    v.add_argument("--root", type=Path, default=Path("."), help="the folder holding mkdocs.yml")
    v.add_argument("--no-cache", action="store_true", help="run every check even if a cached result exists")
    v.add_argument("--jobs", type=int, default=0, help="checks run at once (default: the plugin's jobs, one per core)")
    v.add_argument("--perturb", action="store_true",
                   help="re-run each check with each input nudged; report dead inputs and constant claims")
    v.add_argument("--shard", metavar="K/N", help="run only the K-th of N deterministic shards of the checks and "
                                                 "write their results as a bundle (see numbook merge)")
    v.add_argument("--bundle", type=Path, help="where --shard writes its bundle (default numbook-shard-K-of-N.json)")
    v.add_argument("--record-times", action="store_true",
                   help=f"write each check's run time in core-seconds to checks/{RUNTIMES_FILE}, which --shard "
                        "balances the shards by")
    v.add_argument("--only", action="append", default=[], metavar="CHECK",
                   help="with --perturb: nudge only this check's inputs (repeatable)")
    v.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="a line on stderr as each check finishes (default: when stderr is a terminal)")
    r = sub.add_parser("run", help="run one check alone, through the runner's sandbox, and show what it recorded")
    r.add_argument("check", help="the check, as checks/x.py or x.py")
    r.add_argument("--root", type=Path, default=Path("."), help="the folder holding mkdocs.yml")
    r.add_argument("--cache", action="store_true", help="use (and fill) the cache instead of always running")
    li = sub.add_parser("lint", help="check the book's structure (IDs, links, sections, unused checks) without "
                                     "running a check")
    li.add_argument("--root", type=Path, default=Path("."), help="the folder holding mkdocs.yml")
    n = sub.add_parser("new", help="scaffold a problem page and its check: numbook new I.4.B09 \"Title\"")
    n.add_argument("id", help="the new problem's ID, like I.4.B09")
    n.add_argument("title", help="the problem's title, without its ID")
    n.add_argument("--root", type=Path, default=Path("."), help="the folder holding mkdocs.yml")
    f = sub.add_parser("freeze", help="run every requires=cuda check on this GPU and write its frozen result")
    f.add_argument("--root", type=Path, default=Path("."), help="the folder holding mkdocs.yml")
    f.add_argument("--jobs", type=int, default=1, help="GPU checks run at once (default 1)")
    sh = sub.add_parser("shards", help="print how verify --shard K/N deals the checks into N shards (runs nothing)")
    sh.add_argument("n", type=int, help="the number of shards")
    sh.add_argument("--root", type=Path, default=Path("."), help="the folder holding mkdocs.yml")
    shown = sh.add_mutually_exclusive_group()
    shown.add_argument("--list", action="store_true", help="each shard's checks and their weights too")
    shown.add_argument("--json", action="store_true", help="the plan as JSON: the shards, their checks and weights")
    mg = sub.add_parser("merge", help="put shard bundles' results into the cache; then mkdocs build runs no check "
                                      "(set NUMBOOK_CACHED_ONLY=1 to make it refuse to)")
    mg.add_argument("bundles", type=Path, nargs="+", help="bundles written by numbook verify --shard K/N")
    mg.add_argument("--root", type=Path, default=Path("."), help="the folder holding mkdocs.yml")
    d = sub.add_parser("diff", help="the published numbers that changed between two ledgers (site/numbers.json)")
    d.add_argument("old", type=Path, help="the earlier ledger, e.g. the deployed site's numbers.json")
    d.add_argument("new", type=Path, help="the later ledger, e.g. site/numbers.json of this build")
    d.add_argument("--fail-on-change", action="store_true", help="exit 1 when any published number changed")
    d.add_argument("--ignore-measured", action="store_true",
                   help="leave out measured values (timings) whose written form is unchanged, whose intervals overlap "
                        "and whose claim still verifies: they move between any two runs")
    args = parser.parse_args(argv)
    try:
        return _command(args)
    except ConfigError as exc:
        print(f"numbook {args.command}: {exc}", file=sys.stderr)
        return 2


def _command(args: Any) -> int:
    if args.command == "diff":
        try:
            changes = diff(read_ledger(args.old), read_ledger(args.new))
        except (OSError, ValueError, TypeError) as exc:
            print(f"numbook diff: {exc}", file=sys.stderr)
            return 2
        if args.ignore_measured:
            changes = [c for c in changes if not c.measured]
        print(format_diff(changes))
        return 1 if changes and args.fail_on_change else 0
    root = args.root.resolve()
    if args.command == "merge":
        return _merge(root, args.bundles)
    if args.command == "lint":
        faults = lint(root)
        for d in faults:
            print(d, file=sys.stderr)
        print(f"lint: {len(faults)} faults")
        return 1 if faults else 0
    if args.command == "new":
        return _new(root, args.id, args.title)
    if args.command == "run":
        return run_check(root, args.check, cache=args.cache)[0]
    if args.command == "freeze":
        return _freeze(root, args.jobs)
    if args.command == "shards":
        return _shards(root, args)
    if args.command == "verify":
        started = time.perf_counter()
        show = sys.stderr.isatty() if args.progress is None else args.progress
        if args.record_times and (args.shard or args.perturb):
            print(f"numbook verify: --record-times needs every check's plain run: leave out "
                  f"{'--shard' if args.shard else '--perturb'}", file=sys.stderr)
            return 2
        if args.shard:
            return _shard(root, args, show)
        book = check_book(root, cache=not args.no_cache, jobs=args.jobs,
                          progress=_print_progress if show else None)
        diags, results, claims, runner = book.diagnostics, book.results, book.claims, book.runner
        for d in diags:
            print(d, file=sys.stderr)
        print(_table(results, claims))
        if book.free:
            print("free numbers: " + ", ".join(f"{p} {n}" for p, n in sorted(book.free.items())))
        clean = True
        if args.perturb:
            chosen = {runner.rel(runner.resolve(c)) for c in args.only}
            pick = {k: r for k, r in results.items() if not chosen or r.check in chosen}
            report = perturb(pick, book.bound, lambda check, given: runner.result(check, perturb=given))
            facts_file = runner.rel(runner.checks_dir / "facts.yml")   # recorded by the entries each check took
            by_check = {r.check: r for r in pick.values()}
            report.reads = {c: narrow_facts(reads, by_check[c], runner.root, runner.file_hash, facts_file)
                            for c, reads in report.reads.items()}
            record = report_path(runner.checks_dir)
            whole = merge(load_report(record), report, keep={r.check for r in results.values()})
            save_report(whole, record)
            print(format_report(report))
            print(f"record: {runner.rel(record)} holds {len(whole.checked)} checks; "
                  f"the book's status: {whole.status()}")
            clean = report.clean
        else:
            pruned = runner.prune()   # (a perturbed run's entries are kept for the next --perturb)
            if pruned:
                print(f"cache: pruned {pruned} entries that no check of this build reaches")
        if args.record_times:
            _record_times(runner, results)
        total = sum(claims.values())
        print(f"{len(results)} checks, {total} claims verified, {len(diags)} faults "
              f"in {time.perf_counter() - started:.2f} s")
        return 1 if diags or not clean else 0
    return 2  # pragma: no cover


def _record_times(runner: Runner, results: dict[str, CheckResult]) -> None:
    """``verify --record-times``: each ok check's weight (its run time, now or when its cached result ran, in
    core-seconds: numbook.run.shards.weight) into checks/runtimes.json; a check that failed keeps its earlier
    entry, a check no page names any more loses its."""
    path = runner.checks_dir / RUNTIMES_FILE
    shown = runner.rel(path)
    try:
        earlier = read_runtimes(path, shown)
    except RuntimesError as exc:
        print(f"numbook verify: replacing a malformed record: {exc}", file=sys.stderr)
        earlier = {}
    seconds: dict[str, float] = {}
    kept = 0
    for r in {r.check: r for r in results.values()}.values():
        if r.ok:
            seconds[r.check] = weight(r.elapsed_s, read_header(runner.resolve(r.check).read_text(encoding="utf-8")))
        elif r.check in earlier:
            seconds[r.check] = earlier[r.check]
            kept += 1
    written = write_runtimes(path, seconds)
    heaviest = sorted(written, key=lambda c: (-written[c], c))[:3]
    print(f"record: wrote {shown}: {len(written)} checks, {sum(written.values()):.1f} core-s in all"
          + (f" ({kept} failed now and kept their earlier time)" if kept else "")
          + "; heaviest " + ", ".join(f"{Path(c).stem} {written[c]:g}" for c in heaviest))


def _plan(root: Path, layout: Layout, n: int) -> tuple[Plan, list[str], str]:
    """The book's checks (as results name them: checks/x.py) dealt into n shards by the record; the record's name.
    Raises RuntimesError for a malformed record, ValueError for a bad N.

    The checks are every check a page uses, as the build runs them: a page's ``check:``, its ``check`` fences and
    the checks its claims name (``[[8|other:name]]``), on a page with front matter or without (the author guide
    shows a check by a fence), so that a build from the merged shards finds every result."""
    book = Book.scan(root, root / layout.docs_dir, root / layout.problems_dir)
    checks_dir = root / layout.checks_dir
    used = {c for e in book.entries.values() if not e.failed for c in used_checks(e)} | set(book.checks())
    names = sorted({relative(root, root / c if Path(c).parts[0] == checks_dir.name else checks_dir / c)
                    for c in used})
    path = checks_dir / RUNTIMES_FILE
    shown = relative(root, path)
    return plan(names, n, read_runtimes(path, shown)), names, shown


def _unrecorded(p: Plan) -> str:
    return f"{len(p.unrecorded)} unrecorded" + (f", weighed {p.guess:.2g} core-s each" if p.unrecorded else "")


def _shards(root: Path, args: Any) -> int:
    """``numbook shards N``: the plan of ``verify --shard K/N`` for every K, without running a check."""
    try:
        p, names, shown = _plan(root, load_layout(root), args.n)
    except ValueError as exc:   # RuntimesError names the file itself
        print(f"numbook shards: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"n": args.n, "record": shown, "unrecorded": p.unrecorded, "guess": p.guess,
                          "shards": [{"checks": s, "seconds": round(w, 3)} for s, w in zip(p.shards, p.weights,
                                                                                            strict=True)]}, indent=1))
        return 0
    for k, (checks, w) in enumerate(zip(p.shards, p.weights, strict=True), 1):
        print(f"shard {k}/{args.n}: {len(checks)} checks, {w:.1f} core-s")
        if args.list:
            for c in sorted(checks, key=lambda c: (-p.of[c], c)):
                print(f"  {c} {p.of[c]:g}" + (" (unrecorded)" if c in p.unrecorded else ""))
    robin = [sorted(names)[k::args.n] for k in range(args.n)]
    print(f"{args.n} shards of {len(names)} checks by {shown}: heaviest {p.heaviest:.1f} core-s, "
          f"{p.balance:.2f}x the mean {p.total / args.n:.1f} (round-robin by name: {p.balance_of(robin):.2f}x); "
          f"{_unrecorded(p)}")
    return 0


def _shard(root: Path, args: Any, show: bool) -> int:
    """``verify --shard K/N``: run the K-th of N shards of the checks and write their results as a bundle."""
    try:
        k, n = (int(x) for x in args.shard.split("/"))
        if not 1 <= k <= n:
            raise ValueError(f"shard {k}/{n}: K must be between 1 and N")
        layout = load_layout(root)
        p, names, _ = _plan(root, layout, n)
    except RuntimesError as exc:
        print(f"numbook verify: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"numbook verify: --shard {args.shard}: {exc}", file=sys.stderr)
        return 2
    mine = p.shards[k - 1]
    print(f"shard {k}/{n}: {len(mine)} of {len(names)} checks, {p.weights[k - 1]:.1f} core-s recorded (heaviest "
          f"shard {p.heaviest:.1f} core-s, total {p.total:.1f} core-s; {_unrecorded(p)})", flush=True)
    runner = _runner(root, layout, cache=True, jobs=args.jobs)
    results = runner.run_many(mine, progress=_print_progress if show else None)
    failed = [r for r in results.values() if not r.ok]
    for r in failed:
        print(f"{r.check}: {r.status}: {failure_message(r, r.check)[0]}", file=sys.stderr)
    out = Path(args.bundle or f"numbook-shard-{k}-of-{n}.json")
    out.write_text(json.dumps(runner.bundle(list(results.values()))), encoding="utf-8")
    print(f"shard {k}/{n}: {len(mine)} of {len(names)} checks, {len(failed)} failed; wrote {out}")
    return 1 if failed else 0


def _merge(root: Path, bundles: list[Path]) -> int:
    """``numbook merge``: put the results of shard bundles into this book's cache; a build then runs no check."""
    layout = load_layout(root)
    runner = _runner(root, layout, cache=True, jobs=1)
    total = 0
    for b in bundles:
        try:
            total += runner.merge(json.loads(b.read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            print(f"numbook merge: {b}: {exc}", file=sys.stderr)
            return 2
    print(f"merged {total} results from {len(bundles)} bundles into {runner.cache_dir}")
    return 0


def _freeze(root: Path, jobs: int) -> int:
    """0 frozen, 1 a check failed, 2 refused (no GPU)."""
    try:
        written, faults = freeze_book(root, jobs=jobs)
    except FreezeError as exc:
        print(f"numbook freeze: refused: {exc}", file=sys.stderr)
        return 2
    for f in written:
        print(f"froze {os.path.relpath(f, root)}")
    for fault in faults:
        print(f"numbook freeze: {fault}", file=sys.stderr)
    print(f"{len(written)} frozen, {len(faults)} failed")
    return 1 if faults else 0


def _new(root: Path, pid: str, title: str) -> int:
    layout = load_layout(root)
    try:
        made = scaffold(root, pid, title, layout.problems_dir, layout.checks_dir)
    except ScaffoldError as exc:
        print(f"numbook new: {exc}", file=sys.stderr)
        return 1
    for f in (made.page, made.check):
        print(f"wrote {f.relative_to(root).as_posix()}")
    print("next: write the Statement, replace the scaffold's inputs and value, then `nox -s verify`")
    return 0

