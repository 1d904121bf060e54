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


def _perturb_section(rep: PerturbReport | None, checks: Iterable[str], changed: dict[str, list[str]]) -> list[str]:
    """The book's perturbation record (``checks/perturb.json``): every check's last nudged run."""
    bound = sorted(set(checks))
    if rep is None:
        return ["## Perturbation", "", "No perturbation record yet (`checks/perturb.json`): run "
                "`numbook verify --perturb` to see which claims each input moves.", ""]
    missing = [c for c in bound if c not in rep.checked]
    out = ["## Perturbation", "",
           "Each check re-run once per input with that input nudged (a count by one, a float by 1%), "
           "from the book's record `checks/perturb.json`. *dead*: the input moves no claim; *constant* "
           "claims move with no input; *measured* values (times, bandwidths) move with the machine and "
           "are left out of both tests.", "",
           f"**{rep.status()}**", ""]
    if missing:
        out += [f"**Never nudged**: {', '.join(f'`{c}`' for c in missing)}.", ""]
    if changed:
        out += ["**Stale** (a file the check reads changed since it was nudged; run `numbook verify --perturb "
                "--only CHECK`): " + "; ".join(f"`{c}` ({', '.join(f[:3])}{' …' if len(f) > 3 else ''})"
                                             for c, f in sorted(changed.items())) + ".", ""]
    out += ["| check | nudged on | input | value | nudged | verdict | claims it moves |",
            "|---|---|---|---|---|---|---|"]
    for r in rep.rows:
        moved = ", ".join(f"`{m}`" for m in r.moved) or r.note.replace("|", "\\|")
        out.append(f"| `{r.check.removeprefix('checks/')}` | {rep.checked.get(r.check, '–')} | `{r.given}` | {r.was} "
                   f"| {r.nudged} | {r.verdict} | {moved or '–'} |")
    for check, names in sorted(rep.constants.items()):
        out.append(f"\n*Constant claims of `{check}`*: {', '.join(f'`{n}`' for n in names)}.")
    for check, fixed in sorted(rep.fixed.items()):
        out.append("\n" + f"*Fixed values of `{check}`*: "
                   + "; ".join(f"`{n}` ({why})" for n, why in sorted(fixed.items())) + ".")
    for check, meas in sorted(rep.measured.items()):
        out.append("\n" + f"*Measured values of `{check}`*: "
                   + "; ".join(f"`{n}` ({what})" for n, what in sorted(meas.items())) + ".")
    return [*out, ""]


def report_markdown(book: Book, reports: Mapping[str, PageReport], results: BuildResults,
                    report_uri: str = "report.md", now: _dt.datetime | None = None,
                    perturbed: PerturbReport | None = None, stale: dict[str, list[str]] | None = None) -> str:
    """The Markdown of the run report page: a row for each check of this build, from the book's ``reports``."""
    claims, pages = count_claims(book.entries.values(), reports, results)
    rows = results.unique()
    when = (now or _dt.datetime.now(_dt.UTC)).strftime("%Y-%m-%d %H:%M UTC")
    ran = sum(r.ok and source_of(r) == "ran" for r in rows)
    cached = sum(r.ok and r.source is Source.CACHE for r in rows)
    frozen = sum(r.ok and r.source is Source.FROZEN for r in rows)
    failed = sum(not r.ok for r in rows)
    total = sum(r.elapsed_s for r in rows if r.ok and source_of(r) == "ran")
    out = [
        "# Run report", "",
        f"What this build did with each check, built {when}: {len(rows)} checks, {ran} ran for this build "
        f"({total:.2f} s of check time), {cached} from the cache, {frozen} derived from frozen GPU measurements, "
        f"{failed} failed; {sum(claims.values())} claims verified.", "",
        "| check (in `checks/`) | status | time | device | source | claims | pages |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        used = ", ".join(_link(report_uri, e) for e in pages.get(r.check, []))
        time = f"{r.elapsed_s:.2f} s" if r.elapsed_s else "–"
        device = (r.device or "–").replace("|", "\\|")
        out.append(f"| `{r.check.removeprefix('checks/')}` | {r.status} | {time} | {device} | {source_of(r)} | "
                   f"{claims.get(r.check, 0)} | {used or '–'} |")
    out += ["", "*source*: `ran` ran for this build; `cache` is the result of an earlier run with the same "
                "source, imports, library versions and device; `frozen` is derived on this build from committed GPU "
                "measurements (`checks/frozen/`). *time* is the check's own run time, when it ran.", ""]
    with_claims = [c for c in claims if claims.get(c)]
    out += _perturb_section(perturbed, with_claims, stale or {})
    return "\n".join(out)
