"""Run it yourself: a problem's check as a script and a notebook a reader downloads and reruns.

:func:`script` turns a check into one file that runs with Python and the libraries it imports
(PyTorch, NumPy), without numbook: the check API becomes a few lines (``given()`` and
``value()`` return their value, ``sanity()`` raises when its property fails, ``fact()`` returns
the sourced number), and a helper module of the checks folder (``from _memory import ...``) is
written in place. :func:`notebook` splits that script into cells at the blank lines between its
top-level statements; :func:`execute` runs it (nbclient, a python3 kernel), as the lessons'
notebooks are run at build time. The plugin offers both next to each problem page
(``run_yourself`` option); a notebook that fails to run is a fault of the page, like a check.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

__all__ = ["script", "notebook", "execute", "offer", "NotebookError"]

_API = re.compile(r"^from numbook\.check import (?P<names>[^\n]+)\n", re.M)
_HELPER = re.compile(r"^from (?P<mod>_\w+) import (?P<names>[^\n]+)\n", re.M)
_HEADER = re.compile(r"^# numbook:[^\n]*\n", re.M)

_SHIM = {
    "given": "def given(name, x, **_):\n    return x  # change the value here and run again\n",
    "value": "def value(name, x, **_):\n    return x\n",
    "sanity": ("def sanity(name, condition, message=\"\", **_):\n"
               "    if not condition:\n"
               "        raise AssertionError(f\"sanity {name!r} does not hold: {message}\")\n"),
    "figure": "def figure(name, fig, caption=\"\"):\n    fig.savefig(f\"{name}.svg\")\n",
    "fact": "def fact(key, name, **_):\n    return _FACTS[key]\n",
}


class NotebookError(RuntimeError):
    """A generated notebook raised when it ran."""


def script(check: Path, checks_dir: Path, *, title: str, page_url: str = "") -> str:
    """The check at ``check`` as one standalone script."""
    src = _HEADER.sub("", check.read_text(encoding="utf-8"))

    def api(m: re.Match[str]) -> str:
        names = [n.strip() for n in m.group("names").split(",") if n.strip()]
        out = ["# The book's check API, reduced to what a script run by hand needs (numbook is not needed):",
               "# given() and value() return their value; sanity() stops when its property does not hold."]
        if "fact" in names:
            out.append(f"_FACTS = {_facts(src, checks_dir)!r}  # from the book's checks/facts.yml, with sources")
        for n in names:
            if n in _SHIM:
                out.append(_SHIM[n].rstrip("\n"))
        return "\n".join(out) + "\n"

    def helper(m: re.Match[str]) -> str:
        path = checks_dir / f"{m.group('mod')}.py"
        if not path.is_file():
            return m.group(0)
        body = path.read_text(encoding="utf-8").strip("\n")
        return (f"# --- {path.name}, a helper of the book's checks, written in place ---\n{body}\n"
                f"# --- end of {path.name} ---\n")

    src = _HELPER.sub(helper, _API.sub(api, src))
    where = f" ({page_url})" if page_url else ""
    head = (f"# {title}{where}\n"
            "# The check of this problem, as the book ran it, to run yourself: change a given() and run it\n"
            f"# again (python {check.name}). It needs Python and the libraries it imports.\n\n")
    return head + src


def _facts(src: str, checks_dir: Path) -> dict[str, Any]:
    """The facts the check reads: those named by a literal key, or all of them when a key is computed."""
    keys = set(re.findall(r"\bfact\(\s*[\"'](\w+)[\"']", src))
    data = _facts_file(checks_dir / "facts.yml")
    if re.search(r"\bfact\(\s*(?![\"'\s])", src):   # fact(f"{model}_layers", ...): any key may be read
        keys = set(data)
    return {k: data[k]["value"] for k in sorted(keys) if k in data}


_FACTS_READ: dict[Path, tuple[tuple[int, int], dict[str, Any]]] = {}


def _facts_file(path: Path) -> dict[str, Any]:
    """facts.yml as data, parsed once per build while the file is unchanged (every check that reads a
    fact carries its facts: parsing the file for each of them was most of a warm build's notebook step)."""
    st = path.stat()
    stamp = (st.st_mtime_ns, st.st_size)
    hit = _FACTS_READ.get(path)
    if hit is None or hit[0] != stamp:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        hit = (stamp, yaml.load(path.read_text(encoding="utf-8"), Loader=loader) or {})  # noqa: S506 - a safe loader
        _FACTS_READ[path] = hit
    return hit[1]


def _cells(code: str) -> list[str]:
    """Top-level chunks separated by blank lines; a chunk of fewer than three lines joins the next."""
    lines = code.split("\n")
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return [code]
    starts = [min([n.lineno, *[d.lineno for d in getattr(n, "decorator_list", [])]]) - 1 for n in tree.body]
    cuts = [0]
    for s in starts[1:]:
        b = s
        while b > 0 and lines[b - 1].lstrip().startswith("#"):
            b -= 1   # a statement's comment lines go with it
        if b > 0 and not lines[b - 1].strip():
            cuts.append(b)
    cuts.append(len(lines))
    chunks = ["\n".join(lines[a:b]).strip("\n") for a, b in zip(cuts, cuts[1:], strict=False)]
    chunks = [c for c in chunks if c.strip()]
    out: list[str] = []
    for c in chunks:
        if out and len(out[-1].split("\n")) < 3:
            out[-1] = out[-1] + "\n\n" + c
        else:
            out.append(c)
    return out


def notebook(code: str, *, title: str, intro: str) -> dict[str, Any]:
    """The script as a notebook (nbformat 4, as JSON data): a title cell, then its top-level chunks."""
    def lines(text: str) -> list[str]:
        return text.splitlines(keepends=True)

    cells: list[dict[str, Any]] = [{"cell_type": "markdown", "id": "cell-0", "metadata": {},
                                    "source": lines(f"# {title}\n\n{intro}")}]
    cells += [{"cell_type": "code", "id": f"cell-{i}", "metadata": {}, "execution_count": None, "outputs": [],
               "source": lines(c)} for i, c in enumerate(_cells(code), start=1)]
    return {"nbformat": 4, "nbformat_minor": 5, "cells": cells,
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                         "language_info": {"name": "python"}}}


def execute(nb: dict[str, Any], cwd: Path, timeout: int = 600, runner: Any = None) -> dict[str, Any]:
    """Run every cell in a python3 kernel with ``cwd`` as its folder and return the notebook with its
    outputs; NotebookError says what the failing cell raised.

    With a ``runner`` (numbook.runner.Runner), the cells run in one IPython shell forked from the
    runner's warm parent, which has torch imported already: the same shell a kernel runs, without
    starting a kernel and importing torch again for each notebook.
    """
    if runner is not None:
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        done = runner.run_cells(["".join(c["source"]) for c in code], cwd, timeout)
        if done is not None:
            if done["error"]:
                raise NotebookError(done["error"])
            ran_nb: dict[str, Any] = json.loads(json.dumps(nb))
            for cell, ran in zip([c for c in ran_nb["cells"] if c["cell_type"] == "code"], done["cells"], strict=True):
                cell["execution_count"], cell["outputs"] = ran["execution_count"], ran["outputs"]
            return ran_nb
    import nbformat  # type: ignore[import-untyped,unused-ignore]
    from nbclient import NotebookClient  # type: ignore[import-untyped,unused-ignore]
    from nbclient.exceptions import CellExecutionError  # type: ignore[import-untyped,unused-ignore]
    from traitlets.config import Config  # type: ignore[import-untyped,unused-ignore]

    node = nbformat.reads(json.dumps(nb), as_version=4)  # type: ignore[no-untyped-call,unused-ignore]
    # the kernel's channels are Unix sockets in a folder of this run (IPC), not unencrypted TCP ports
    # (the client owns the kernel it starts, and shuts it down when the last cell has run)
    cfg = Config()
    cfg.KernelManager.transport = "ipc"
    cfg.KernelManager.ip = str(cwd / "kernel-ipc")
    try:
        NotebookClient(node, config=cfg, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": str(cwd)}}).execute()
    except CellExecutionError as exc:
        text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()   # the traceback's terminal colours
        raise NotebookError(text.splitlines()[-1] if text else "a cell raised") from None
    out: dict[str, Any] = json.loads(nbformat.writes(node))  # type: ignore[no-untyped-call,unused-ignore]
    return out


def offer(check: Path, checks_dir: Path, dest: Path, *, pid: str, title: str, page_url: str = "",
          cache: Path | None = None, environment: Any = None, run: bool = True, timeout: int = 600,
          runner: Any = None) -> float:
    """Write ``check`` into ``dest`` as a script and as a notebook executed there (raises NotebookError).

    Executed notebooks are cached in ``cache`` by the script and ``environment`` (the library
    versions and the device: the outputs depend on them as much as on the code). With
    ``run=False`` (a build that may run nothing) an uncached notebook is written without outputs.
    Returns the seconds spent running the notebook (0 when it came from the cache or did not run).
    """
    heading = f"{pid} · {title}"
    code = script(check, checks_dir, title=heading, page_url=page_url)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / check.name).write_text(code, encoding="utf-8")
    stamp = json.dumps([code, environment], sort_keys=True, default=str)
    hit = cache / f"{hashlib.sha256(stamp.encode('utf-8')).hexdigest()[:24]}.ipynb" if cache is not None else None
    if hit is not None and hit.is_file():
        shutil.copyfile(hit, dest / f"{check.stem}.ipynb")
        return 0.0
    intro = (f"The check of [{pid}]({page_url or '.'}), cell by cell, as the book ran it for its build. "
             "Change a `given(...)` and run the cells again.")
    nb = notebook(code, title=heading, intro=intro)
    started = time.perf_counter()
    if run:
        with tempfile.TemporaryDirectory() as tmp:
            nb = execute(nb, Path(tmp), timeout=timeout, runner=runner)
    spent = time.perf_counter() - started if run else 0.0
    text = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    (dest / f"{check.stem}.ipynb").write_text(text, encoding="utf-8")
    if hit is not None and run:
        hit.parent.mkdir(parents=True, exist_ok=True)
        hit.write_text(text, encoding="utf-8")
    return spent
