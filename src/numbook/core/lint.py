"""``numbook lint``: the structure of the book, checked without running a single check.

- problem IDs are well formed and unique, and each page's file is named after its ID;
- every ``draws_on`` target is a problem of the book;
- every check in ``checks/`` is used by some page (helpers named ``_*.py`` and the
  ``checks/frozen/`` folder are exempt);
- every page under ``problems/`` is a problem page with its front matter and its sections.

``numbook verify`` applies the same rules (the faults it shares with the claim processor,
missing sections for one, are reported once).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from numbook.core.book import Book, Entry, book_path
from numbook.core.diagnostics import Diagnostic
from numbook.core.page import split_front_matter
from numbook.core.result import read_header
from numbook.core.structure import PAGES_REMEMBERED, check_file_name, code_spans, h2, walk
from numbook.core.verify import CHECK_FENCE, CLAIM, display, section_faults, unbound_numbers

__all__ = ["lint_book", "label_faults", "printed_digits", "structure_faults", "orphan_faults", "used_checks",
           "section_diagnostics"]


def used_checks(entry: Entry) -> set[str]:
    """Checks a page uses: its ``check:``, ```` ```check path="…" ```` fences, ``[[x|other:name]]`` claims."""
    return set(_used_checks(entry.check, entry.body))


@functools.lru_cache(maxsize=PAGES_REMEMBERED)
def _used_checks(check: str | None, body: str) -> frozenset[str]:
    """used_checks of one page's text, remembered: ``mkdocs serve`` asks again for every page on each rebuild."""
    used = {check} if check else set()
    for ln in walk(body):
        if ln.code:
            cf = CHECK_FENCE.match(ln.text)
            if cf:
                used.add(cf.group(1))
            continue
        spans = code_spans(ln.text)
        for m in CLAIM.finditer(ln.text):
            ref = (m.group("ref") or "").partition("±")[0].strip()
            if any(a <= m.start() < b for a, b in spans):
                continue
            if ":" in ref:
                used.add(check_file_name(ref.split(":", 1)[0]))
            if m.group("scheck"):
                used.add(check_file_name(m.group("scheck")))
    return frozenset(used)


def section_diagnostics(entry: Entry) -> list[Diagnostic]:
    """Missing or misordered sections of a problem page (the claim processor's own rule)."""
    return section_faults(entry.path, list(_sections(entry.body)), entry.offset + 1)


@functools.lru_cache(maxsize=PAGES_REMEMBERED)
def _sections(body: str) -> tuple[str, ...]:
    """The titles of a page's second-level headings, in order, remembered by the text (serve asks on every
    rebuild)."""
    return tuple(t for ln in walk(body) if not ln.code and (t := h2(ln.text)) is not None)


def _problem_pages(book: Book, problems_dir: str) -> list[Entry]:
    prefix = Path(problems_dir).name + "/"
    return [e for uri, e in sorted(book.entries.items()) if uri.startswith(prefix)]


def lint_book(book: Book, checks_dir: Path, problems_dir: str = "problems") -> list[Diagnostic]:
    """Every structural fault of the book: the pages' (front matter included), then the checks'."""
    return structure_faults(book, problems_dir) + orphan_faults(book, checks_dir) + label_faults(book, checks_dir)


def printed_digits(source: str) -> list[tuple[int, str, str]]:
    """(line, literal, digits) for each digit typed into a string a check prints (see _printed_digits)."""
    return list(_printed_digits(source))


@functools.lru_cache(maxsize=PAGES_REMEMBERED)
def _printed_digits(source: str) -> tuple[tuple[int, str, str], ...]:
    """(line, literal, digits) for each digit typed into a string a check prints.

    Memoized by the source text: ``mkdocs serve`` lints every check on every rebuild.

    A printed label such as ``"15% padding"`` or ``"10.74 GB"`` goes stale the day an input
    changes; build it from the value (``f"{pad:.0%} padding"``). Digits inside words
    and identifiers by the prose's rule (``fp32``, ``Step 2``, ``Llama 3``; 0 and 1) are not counted.
    """
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ()
    found: list[tuple[int, str, str]] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"):
            continue
        for arg in node.args:
            parts = arg.values if isinstance(arg, ast.JoinedStr) else [arg]
            for part in parts:
                if isinstance(part, ast.Constant) and isinstance(part.value, str):
                    for digits in unbound_numbers(part.value):   # the prose's identifier rule, not a second one
                        found.append((part.lineno, part.value.strip(), digits))
    return tuple(found)


def label_faults(book: Book, checks_dir: Path) -> list[Diagnostic]:
    """Digits typed into the printed labels of the checks the book uses."""
    diags: list[Diagnostic] = []
    root = book.root.resolve()
    for name in book.checks():
        path = checks_dir / name if not name.startswith(checks_dir.name + "/") else root / name
        if not path.is_file():
            continue
        shown = book_path(str(path), str(root))
        for line, text, digits in printed_digits(path.read_text(encoding="utf-8")):
            short = text if len(text) <= 50 else text[:47] + "…"
            diags.append(Diagnostic(shown, line, f"printed label '{short}' types the number {digits}: build it from "
                                                 "the value, so the output cannot go stale when an input changes"))
    return diags


QUIZ_WINDOW = 300
_QUIZ = re.compile(r"^[ \t]*/{3,}[ \t]*quiz\b")
_KEY = re.compile(r"^[-*+][ \t]+\[[xX]\][ \t]+(?P<key>.+)$")


def _shown(text: str) -> str:
    """Prose as a reader sees it: claims as their literals, code spans and markup dropped."""
    text = CLAIM.sub(lambda m: display(m.group("lit"), False) if m.group("lit") else " ", text)
    return " ".join(re.sub(r"[`*_$\\]", " ", text).split())


def quiz_faults(entry: Entry) -> list[Diagnostic]:
    """A quick check whose right answer stands in the 300 characters of prose before it.

    A quick check asks the reader to predict or apply before the text says it; one answered word
    for word just above tests reading, not understanding.
    """
    if "///" not in entry.body:
        return []   # no block at all, so no quick check: the lines are not walked (a rebuild asks for every page)
    lines = list(walk(entry.body))
    out: list[Diagnostic] = []
    for i, ln in enumerate(lines):
        if ln.code or not _QUIZ.match(ln.text):
            continue
        key = next((m.group("key") for later in lines[i + 1:] if (m := _KEY.match(later.text.strip()))), None)
        if key is None:
            continue
        answer = _shown(key)
        before = _shown(" ".join(x.text for x in lines[:i] if not x.code and not x.text.lstrip().startswith("//")))
        window = before[-QUIZ_WINDOW:]
        if answer and re.search(r"(?<![\w.])" + re.escape(answer) + r"(?![\w])", window):
            out.append(Diagnostic(entry.path, entry.offset + ln.index + 1,
                                  f"quick check answered by the text before it: its answer '{answer}' stands in the "
                                  f"{QUIZ_WINDOW} characters above; ask the reader to predict it, one step further"))
    return out


def structure_faults(book: Book, problems_dir: str = "problems") -> list[Diagnostic]:
    """Faults of the pages' structure: front matter, IDs and file names, links, sections, quick checks."""
    diags = list(book.diagnostics)
    for entry in book.entries.values():
        if entry.meta is not None:
            diags += quiz_faults(entry)
    faulty = {d.path for d in book.diagnostics}
    for entry in _problem_pages(book, problems_dir):
        if entry.meta is None and entry.path not in faulty:
            diags.append(Diagnostic(entry.path, 1, "a page under problems/ must be a problem page: "
                                                   "its front matter has no 'id' (and needs 'title' and 'check')"))
    for pid, entry in sorted(book.problems.items()):
        if Path(entry.path).stem != pid:
            diags.append(Diagnostic(entry.path, entry.lines.get("id", 1),
                                    f"problem '{pid}' is in {Path(entry.path).name}: name the file {pid}.md"))
        diags += book.link_diagnostics(entry)
        diags += section_diagnostics(entry)
    return diags


def awaiting_gpu(path: Path, checks_dir: Path) -> bool:
    """A ``requires=cuda`` check with no frozen result yet: ``nox -s freeze`` runs it on the GPU runner.

    Until its first GPU run nothing can bind to its values, so no page may use it yet (a page
    that did would fail every CPU build); once frozen, a page must use it like any other check.
    """
    try:
        cuda = read_header(path.read_text(encoding="utf-8")).requires == "cuda"
    except (ValueError, UnicodeDecodeError):
        return False
    return cuda and not (checks_dir / "frozen" / f"{path.stem}.json").is_file()


def orphan_faults(book: Book, checks_dir: Path) -> list[Diagnostic]:
    """A check no page uses: reported after the pages' faults (a misspelt ``check:`` orphans one)."""
    diags: list[Diagnostic] = []
    faulty = {d.path for d in book.diagnostics}
    root = book.root.resolve()
    checks_dir = checks_dir.resolve()
    used: set[str] = set()
    for entry in book.entries.values():
        if entry.meta is None and entry.path in faulty:  # a page whose front matter failed still names its check
            named = split_front_matter((root / entry.path).read_text(encoding="utf-8"), entry.path).data.get("check")
            used |= {named} if isinstance(named, str) else set()
        else:   # a page without front matter uses a check by a fence or a claim as much as one with it
            used |= used_checks(entry)
    used = {u.removeprefix(checks_dir.name + "/") for u in used}
    for f in sorted(checks_dir.rglob("*.py")):
        rel = f.relative_to(checks_dir)
        if any(p.startswith("_") or p.startswith(".") for p in rel.parts) or rel.parts[0] == "frozen":
            continue
        if rel.as_posix() not in used and not awaiting_gpu(f, checks_dir):
            try:
                shown = f.relative_to(root).as_posix()
            except ValueError:
                shown = str(f)
            diags.append(Diagnostic(shown, 1, f"no page uses this check: name it in a page's 'check:', bind a claim "
                                              f"to it as [[…|{rel.with_suffix('').as_posix()}:name]], or rename it "
                                              f"_{rel.name} if it is a helper"))
    return diags
