"""``numbook new``: scaffold a problem page and its check, wired together and building clean.

    numbook new I.4.B09 "Micro-batches and the mean of means"

writes ``problems/I.4.B09.md`` (front matter and every section) and
``checks/i4_b09_micro_batches_and_the_mean.py`` (two ``given()`` inputs stated in the page's
Given, one ``value()`` the Solution and Answer claim, one ``sanity()`` the sanity section
marks). The pair passes ``mkdocs build --strict`` as written, so the first fault the author sees
is the first one they write.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from numbook.core.page import PROBLEM_ID, split_front_matter

__all__ = ["ScaffoldError", "Scaffold", "check_name", "scaffold", "slugify"]

_SLUG_WORDS = 5


class ScaffoldError(ValueError):
    """The scaffold cannot be written (a malformed or existing ID, an existing file)."""


@dataclass(frozen=True)
class Scaffold:
    page: Path
    check: Path


def slugify(title: str) -> str:
    """``"Micro-batches and the mean of means"`` → ``micro_batches_and_the_mean``."""
    words = re.findall(r"[a-z0-9]+", title.lower())
    return "_".join(words[:_SLUG_WORDS]) or "problem"


def check_name(pid: str, title: str) -> str:
    """The check's file name for a problem: ``i4_b09_<slug>.py``."""
    m = PROBLEM_ID.match(pid)
    if not m:
        raise ScaffoldError(f"'{pid}' is not a problem ID like I.4.B07 (a Roman part, a chapter number, "
                            "a capital series letter and two digits)")
    return f"{m['part'].lower()}{m['chapter']}_{m['series'].lower()}{m['number']}_{slugify(title)}.py"


def _existing_ids(problems: Path) -> dict[str, Path]:
    ids: dict[str, Path] = {}
    for f in sorted(problems.rglob("*.md")):
        data = split_front_matter(f.read_text(encoding="utf-8"), str(f)).data
        pid = data.get("id")
        if isinstance(pid, str):
            ids.setdefault(pid, f)
    return ids


def _yaml_str(text: str) -> str:
    """``text`` as a YAML scalar: plain where YAML reads it back unchanged, else double-quoted."""
    try:
        if yaml.safe_load(f"k: {text}") == {"k": text}:
            return text
    except yaml.YAMLError:
        pass
    return json.dumps(text, ensure_ascii=False)


def page_text(pid: str, title: str, check: str) -> str:
    """The problem page: front matter and every section, with claims bound to the scaffold check."""
    return f"""---
id: {pid}
title: {_yaml_str(title)}
check: {check}
draws_on: []
tags: []
---

## Statement

State the problem in words: what is asked and why it matters. Replace every paragraph of this
scaffold; keep the section headings, which the build requires in this order.

## Given

- Batch size $B = [[4|B]]$ sequences.
- Sequence length $T = [[512|T]]$ tokens.

## Find

1. The number of positions in one batch.

## Strategy

Say which quantities you compute, in which order, and why that order.

## Solution

### Step 1 — count the positions

A batch of $B$ sequences of $T$ tokens holds $B \\cdot T = [[2048|positions]]$ positions.

## Answer

One batch holds [[2,048|positions]] positions.

## Check — numeric

Say what the check builds, which library calls it makes and what it reads back.

```check
```

## Check — sanity

The position count is the product of the two inputs. [[sanity:positions_product]]

## Where this breaks

Say when the answer stops holding: which assumption fails first.

## Variation

Change one input and ask for the answer again.
"""


def check_text(pid: str, title: str, stem: str) -> str:
    """The check script: the inputs, the value and the assertion the scaffold page uses."""
    title = title.replace("\\", "/").replace('"', "'")  # safe inside the docstring
    return f'''"""{pid} — {title}.

Replace this docstring with what the check builds and measures.
Run it alone: python checks/{stem}.py
"""

from numbook.check import given, sanity, value

B = given("B", 4)
T = given("T", 512)

positions = value("positions", B * T)
sanity("positions_product", positions == B * T, "B * T positions")

print(f"B = {{B}} sequences of T = {{T}} tokens: {{positions:,}} positions")
'''


def scaffold(root: Path, pid: str, title: str, problems_dir: str = "problems",
             checks_dir: str = "checks") -> Scaffold:
    """Write the page and the check of a new problem under ``root``; refuse to overwrite anything."""
    title = title.strip()
    if not title:
        raise ScaffoldError("the title is empty: numbook new I.4.B09 \"A title\"")
    name = check_name(pid, title)
    problems, checks = root / problems_dir, root / checks_dir
    page, check = problems / f"{pid}.md", checks / name
    taken = _existing_ids(problems) if problems.is_dir() else {}
    if pid in taken:
        raise ScaffoldError(f"problem ID '{pid}' already exists: {taken[pid].relative_to(root).as_posix()}")
    for f in (page, check):
        if f.exists():
            raise ScaffoldError(f"{f.relative_to(root).as_posix()} already exists")
    problems.mkdir(parents=True, exist_ok=True)
    checks.mkdir(parents=True, exist_ok=True)
    page.write_text(page_text(pid, title, name), encoding="utf-8")
    check.write_text(check_text(pid, title, check.stem), encoding="utf-8")
    return Scaffold(page, check)
