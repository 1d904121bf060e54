"""The run report: one row per check of this build, as a Markdown page the plugin adds to the site.

Each row says what the build did with a check: its status, how long it ran, on which device,
whether it ran for this build, came from the cache or was derived from frozen GPU measurements, how many claims
it backs, and which pages use it. The claims and the pages are read from the reports of the book's
verification pass (``numbook.core.bookpass``): nothing is verified here. ``numbook verify`` prints the
same facts as a text table.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Iterable, Mapping

from numbook.core.book import Book, Entry
from numbook.core.bookpass import BuildResults
from numbook.core.result import Source
from numbook.core.verify import PageReport, Results
from numbook.run.perturb import PerturbReport
from numbook.run.runner import CheckResult

__all__ = ["source_of", "count_claims", "report_markdown"]


def source_of(res: CheckResult) -> str:
    """Where a result came from: ``ran`` (for this build), ``cache``, ``frozen`` or ``not run``."""
    return str(res.source)


def count_claims(entries: Iterable[Entry], reports: Mapping[str, PageReport], results: Results
                 ) -> tuple[dict[str, int], dict[str, list[Entry]]]:
    """Claims verified per check, and the pages whose claims bind to each check (a page's own check with them).

    The counts are the reports' (page site path -> its report), the ones ``numbook verify`` prints."""
    claims: dict[str, int] = {}
    pages: dict[str, list[Entry]] = {}
    for entry in entries:
        report = reports.get(entry.uri)
        if entry.meta is None or report is None:
            continue
        counted = dict(report.claims)
        if entry.check:
            counted.setdefault(results.result(entry.check).check, 0)
        for check, n in counted.items():
            claims[check] = claims.get(check, 0) + n
            pages.setdefault(check, []).append(entry)
    return claims, pages


def _link(report_uri: str, entry: Entry) -> str:
    target = os.path.relpath(entry.uri, os.path.dirname(report_uri) or ".").replace(os.sep, "/")
    pid = getattr(entry.meta, "id", None)
    label = pid or (entry.meta.get("title") if entry.meta is not None else None) or entry.uri
    return f"[{label}]({target})"


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|")


def _perturb_summary(rep: PerturbReport | None, checks: Iterable[str], changed: dict[str, list[str]]) -> list[str]:
    """The book's perturbation record (``checks/perturb.json``) in a few lines; each check's rows are in its fold."""
    bound = sorted(set(checks))
    if rep is None:
        return ["## Perturbation", "", "No perturbation record yet (`checks/perturb.json`): run "
                "`numbook verify --perturb` to see which claims each input moves.", ""]
    missing = [c for c in bound if c not in rep.checked]
    out = ["## Perturbation", "",
           "Each check re-run once per input with that input nudged (a count by one, a float by 1%), "
           "from the book's record `checks/perturb.json`; each check's inputs are listed in its fold above. "
           "*dead*: the input moves no claim; *constant* claims move with no input; *measured* values (times, "
           "bandwidths) move with the machine and are left out of both tests.", "",
           f"**{rep.status()}**", ""]
    if missing:
        out += [f"**Never nudged**: {', '.join(f'`{c}`' for c in missing)}.", ""]
    if changed:
        out += ["**Stale** (a file the check reads changed since it was nudged; run `numbook verify --perturb "
                "--only CHECK`): " + "; ".join(f"`{c}` ({', '.join(f[:3])}{' …' if len(f) > 3 else ''})"
                                             for c, f in sorted(changed.items())) + ".", ""]
    return out


def _perturb_rows(rep: PerturbReport | None, check: str) -> list[str]:
    """What the perturbation record says of one check: its nudged inputs and its constant, fixed and measured
    values (Markdown, unindented)."""
    if rep is None:
        return []
    out: list[str] = []
    rows = [r for r in rep.rows if r.check == check]
    if check in rep.checked:
        out += [f"Nudged on {rep.checked[check]}: {len(rows)} inputs.", ""]
    if rows:
        out += ["| input | value | nudged | verdict | claims it moves |", "|---|---|---|---|---|"]
        for r in rows:
            moved = ", ".join(f"`{m}`" for m in r.moved) or _cell(r.note)
            out.append(f"| `{r.given}` | {_cell(r.was)} | {_cell(r.nudged)} | {r.verdict} | {moved or '–'} |")
        out.append("")
    if rep.constants.get(check):
        out += [f"*Constant claims*: {', '.join(f'`{n}`' for n in rep.constants[check])}.", ""]
    if rep.fixed.get(check):
        out += ["*Fixed values*: " + "; ".join(f"`{n}` ({why})" for n, why in sorted(rep.fixed[check].items()))
                + ".", ""]
    if rep.measured.get(check):
        out += ["*Measured values*: " + "; ".join(f"`{n}` ({what})"
                                                 for n, what in sorted(rep.measured[check].items())) + ".", ""]
    return out


def _fold(title: str, body: list[str], *, open_: bool = False, kind: str = "nb-check") -> list[str]:
    """A pymdownx.details block: closed unless ``open_``, its body indented under it."""
    head = f'???{"+" if open_ else ""} {kind} "{title.replace(chr(34), chr(39))}"'
    return [head, *[f"    {line}" if line else "" for line in body], ""]


def report_markdown(book: Book, reports: Mapping[str, PageReport], results: BuildResults,
                    report_uri: str = "report.md", now: _dt.datetime | None = None,
                    perturbed: PerturbReport | None = None, stale: dict[str, list[str]] | None = None) -> str:
    """The Markdown of the run report page, from the book's ``reports``: a summary, then one fold per check of
    this build (closed, a failed check's open) whose title line says its status, time, source and claims, and
    whose body says its device, its pages and what nudging its inputs moved. On a phone the page is a list of
    one-line titles, not a table 390 px wide with thousands of rows."""
    claims, pages = count_claims(book.entries.values(), reports, results)
    rows = results.unique()
    when = (now or _dt.datetime.now(_dt.UTC)).strftime("%Y-%m-%d %H:%M UTC")
    ran = sum(r.ok and source_of(r) == "ran" for r in rows)
    cached = sum(r.ok and r.source is Source.CACHE for r in rows)
    frozen = sum(r.ok and r.source is Source.FROZEN for r in rows)
    failed = [r for r in rows if not r.ok]
    total = sum(r.elapsed_s for r in rows if r.ok and source_of(r) == "ran")
    out = [
        "# Run report", "",
        f"What this build did with each check, built {when}: {len(rows)} checks, {ran} ran for this build "
        f"({total:.2f} s of check time), {cached} from the cache, {frozen} derived from frozen GPU measurements, "
        f"{len(failed)} failed; {sum(claims.values())} claims verified.", "",
    ]
    if failed:
        out += ["**Failed**: " + ", ".join(f"`{r.check.removeprefix('checks/')}`" for r in failed) + ".", ""]
    out += ["## Checks", "",
            "One line per check: its name in `checks/`, its status, its run time, where its result came from and "
            "the claims it backs. Open a line for the device it ran on, the pages that use it and what "
            "nudging its inputs moved.", "",
            "*source*: `ran` ran for this build; `cache` is the result of an earlier run with the same "
            "source, imports, library versions and device; `frozen` is derived on this build from committed GPU "
            "measurements (`checks/frozen/`). *time* is the check's own run time, when it ran.", ""]
    shown = set()
    for r in rows:
        shown.add(r.check)
        used = ", ".join(_link(report_uri, e) for e in pages.get(r.check, []))
        time = f"{r.elapsed_s:.2f} s" if r.elapsed_s else "–"
        n = claims.get(r.check, 0)
        title = (f"{r.check.removeprefix('checks/')} · {r.status} · {time} · {source_of(r)} · "
                 f"{n} claim{'' if n == 1 else 's'}")
        body = [f"- **device**: {_cell(r.device or '–')}", f"- **pages**: {used or '–'}", "",
                *_perturb_rows(perturbed, r.check)]
        out += _fold(title, body, open_=not r.ok, kind="failure nb-check" if not r.ok else "nb-check")
    with_claims = [c for c in claims if claims.get(c)]
    out += _perturb_summary(perturbed, with_claims, stale or {})
    others = sorted({row.check for row in perturbed.rows} - shown) if perturbed is not None else []
    for check in others:   # in the record, not in this build
        out += _fold(f"{check.removeprefix('checks/')} · not in this build", _perturb_rows(perturbed, check))
    return "\n".join(out)
