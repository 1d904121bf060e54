"""Run it yourself: a problem's check as a script and a notebook a reader downloads and reruns.

:func:`script` turns a check into one file that runs with Python and the libraries it imports
(PyTorch, NumPy), without numbook: the check API becomes a few lines (``given()`` and
``value()`` return their value, ``sanity()`` raises when its property fails, ``fact()`` returns
the sourced number), and a helper module of the checks folder (``from _memory import ...``) is
written in place. A check that imports a package of the project (``servebench``, the benchmark harness) carries
the modules of it that it uses, verbatim, with a loader that imports them from the script itself: never an
installed package of that name (PyPI has an unrelated ``servebench``). The header names the libraries the
script needs (:func:`libraries`) and, only where the deploy sets a public address, the page's.
:func:`notebook` splits that script into cells at the blank lines between its
top-level statements, the check's docstring a Markdown cell; :func:`execute` runs it (nbclient, a python3
kernel), as the lessons' notebooks are run at build time. The plugin offers both next to each problem page
(``run_yourself`` option); a notebook that fails to run is a fault of the page, like a check.

With a runner, the notebook runs where the check ran: under ``numbook.run.sandbox`` (the audit hook
that refuses writes outside a scratch folder and the network, the memory limit, the scrubbed
environment, the scratch working folder), forked from the runner's warm parent where the check
would be. Its cache entry is keyed like a check's: the script, the check's own first key (its
source, declared environment, versions, device, limits), the machinery, and then every project file
the run read with the hash of its content, so a changed data file runs it again. :func:`mismatch`
then holds the notebook's printed output to the output the check printed for the page (see there):
a notebook that prints another number than the page is a fault of the page.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import json
import os
import re
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from numbook.core.diagnostics import Diagnostic
from numbook.core.result import read_header
from numbook.run.executor import scratch_folder

if TYPE_CHECKING:
    from numbook.core.result import CheckResult
    from numbook.run.runner import Runner

__all__ = ["script", "notebook", "execute", "offer", "offer_all", "mismatch", "printed", "libraries", "requirements",
           "sources_stamp", "pip_line", "public_url", "Job", "Offered", "NotebookError", "StandaloneError", "PACKAGES"]

NOTEBOOK_CACHE_VERSION = "3"
_SELF = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:20]
"""How notebooks are made and run (this module): a change runs every notebook again."""

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


def _stats() -> str:
    """The statistics of ``numbook.check.estimate()`` written in place: a reader's run computes the same interval."""
    import numbook.check as api

    parts = [inspect.getsource(f).rstrip("\n") for f in (api._t_within, api.t_quantile, api._interval, api._kind,
                                                           api.Estimate)]
    estimate = ("def estimate(name, per_repeat, *, n=0, level=0.95, method=\"t\", repeated=\"runs\", "
                "resamples=2000, seed=0, **_):\n"
                "    xs = [float(v) for v in per_repeat]\n"
                "    point, lo, hi = _interval(xs, level, method, resamples, seed)\n"
                "    return Estimate(point, lo, hi, n, len(xs), _kind(level, method, len(xs), repeated, resamples, "
                "seed))")
    return "\n\n".join(["import math\nfrom dataclasses import dataclass", *parts, estimate]) + "\n"


def _group() -> str:
    """``numbook.check.run_group()`` written in place: plain multiprocessing and torch.distributed (gloo)."""
    import numbook.check as api

    parts = [inspect.getsource(f).rstrip("\n") for f in (api.GroupError, api._group_worker, api.run_group)]
    head = "import math\nimport os\nimport sys\nimport time\nfrom typing import Any, Callable"
    return "\n\n".join([head, *parts]) + "\n"


_STATS = ("estimate", "Estimate", "t_quantile")
"""Names of the check API whose shim is the statistics block (``_stats``)."""


class NotebookError(RuntimeError):
    """A generated notebook raised when it ran."""


def script(check: Path, checks_dir: Path, *, title: str, page_url: str = "", root: Path | None = None) -> str:
    """The check at ``check`` as one standalone script (StandaloneError where a project module it imports is not
    there). ``root`` is the project's (the checks folder's parent by default): where :data:`PACKAGES` lie.
    ``page_url`` is the page's public address, or "" (:func:`public_url`)."""
    return _script(check, checks_dir, title=title, page_url=page_url, root=root)[0]


def _script(check: Path, checks_dir: Path, *, title: str, page_url: str = "", root: Path | None = None
            ) -> tuple[str, list[str]]:
    """The script, and the libraries it needs (:func:`libraries`)."""
    src = _HEADER.sub("", check.read_text(encoding="utf-8"))

    def api(m: re.Match[str]) -> str:
        """The first import of the check API (the check's, or a helper's written in before it) becomes the shim
        of every name any of them imports; a later one is then a comment."""
        if written:
            return f"# {m.group(0).strip()}: written above\n"
        names: list[str] = []
        for each in _API.finditer(src):
            names += [n.strip() for n in each.group("names").split(",") if n.strip() and n.strip() not in names]
        written.append(True)
        out = ["# The book's check API, reduced to what a script run by hand needs (numbook is not needed):",
               "# given() and value() return their value; sanity() stops when its property does not hold."]
        if "fact" in names:
            out.append(f"_FACTS = {_facts(src, checks_dir)!r}  # from the book's checks/facts.yml, with sources")
        if any(n in _STATS for n in names):
            out.append("# estimate(): the mean of the per-repeat figures and its interval (t, or a seeded bootstrap)")
            out.append(_stats().rstrip("\n"))
        if any(n in ("run_group", "GroupError") for n in names):
            out.append("# run_group(): run a function in N processes joined by torch.distributed (gloo, loopback)")
            out.append(_group().rstrip("\n"))
        for n in names:
            if n in _SHIM:
                out.append(_SHIM[n].rstrip("\n"))
        return "\n".join(out) + "\n"

    parts = [src]   # the source texts the script is made of (the shims import the standard library alone)

    def helper(m: re.Match[str]) -> str:
        path = checks_dir / f"{m.group('mod')}.py"
        if not path.is_file():
            return m.group(0)
        body = path.read_text(encoding="utf-8").strip("\n")
        parts.append(body)
        return (f"# --- {path.name}, a helper of the book's checks, written in place ---\n{body}\n"
                f"# --- end of {path.name} ---\n")

    written: list[bool] = []
    src = _HELPER.sub(helper, src)   # first: a helper may import the check API too (_driver does)
    src = _API.sub(api, src)
    src, carried = _carry_packages(src, parts, root if root is not None else checks_dir.parent, str(check))
    libs = libraries([*parts, *carried], local=PACKAGES)
    needs = f"{', '.join(libs)} ({pip_line(libs)})" if libs else "nothing beyond the standard library"
    head = (f"# {title}\n" + (f"# From the page {page_url}\n" if page_url else "") +
            "# The check of this problem, as the book ran it, to run yourself: change a given() and run it\n"
            f"# again (python {check.name}). It needs Python 3.11 or later and {needs}; not numbook.\n\n")
    return head + src, libs


def requirements(check: Path, checks_dir: Path, root: Path | None = None) -> list[str]:
    """The libraries the script of ``check`` needs (what its page names): those :func:`script` names, read from
    the same source texts without writing the script (the page asks for each problem in every build)."""
    src = _HEADER.sub("", check.read_text(encoding="utf-8"))
    parts = [src, *(path.read_text(encoding="utf-8").strip("\n") for m in _HELPER.finditer(src)
                    if (path := checks_dir / f"{m.group('mod')}.py").is_file())]
    records = [r for part in parts for r in _import_records(part)]
    carried: list[str] = []
    for package, rel in PACKAGES.items():
        if any(_modules_imported(records, package)):
            carried += _package_sources(records, package, (root if root is not None else checks_dir.parent) / rel,
                                        str(check)).values()
    return libraries([*parts, *carried], local=PACKAGES)


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


# -- the project's own packages, carried by the scripts that import them -----------------------------------------

PACKAGES: dict[str, str] = {"servebench": "servebench/src/servebench"}
"""Packages of the project a check may import, and where their source lies under the project's root. No reader
has them installed (and PyPI's ``servebench`` is another project): a script carries the modules it uses."""

_DISTRIBUTIONS = {"yaml": "pyyaml", "PIL": "pillow", "sklearn": "scikit-learn", "cv2": "opencv-python"}
"""Import names whose distribution (what ``pip install`` takes) is named otherwise."""

_LOADER = '''\
def _inline_package(package, sources):
    """Import ``package`` from the sources written into this script: never from an installed package of that name."""
    import importlib.abc
    import importlib.util
    import linecache
    import sys

    class _Inline(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path=None, target=None):
            if name in sources:
                return importlib.util.spec_from_loader(name, self, is_package=name == package)
            if name.startswith(package + "."):
                raise ModuleNotFoundError(f"{name} is not written into this script", name=name)
            return None

        def create_module(self, spec):
            return None

        def exec_module(self, module):
            src = sources[module.__name__]
            where = module.__name__.replace(".", "/") + ".py, written into this script"
            linecache.cache[where] = (len(src), None, src.splitlines(True), where)   # for tracebacks
            exec(compile(src, where, "exec"), module.__dict__)

    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        del sys.modules[name]   # one imported before (a notebook's kernel) is not used
    sys.meta_path.insert(0, _Inline())
'''


class StandaloneError(ValueError):
    """A check cannot be written as a standalone script (a module of the project it imports is not there)."""


_Import = tuple[bool, str, int, tuple[tuple[str, str], ...]]
"""One import statement: (a ``from`` import?, its module, its level, its (name, bound name) pairs)."""


@functools.lru_cache(maxsize=1024)
def _import_records(text: str) -> tuple[_Import, ...]:
    """Every import statement of a source text, at any depth, in source order (read once per text)."""
    tree = _tree(text)
    if tree is None:
        return ()
    found: list[tuple[int, _Import]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.append((node.lineno, (False, "", 0, tuple((a.name, a.asname or a.name) for a in node.names))))
        elif isinstance(node, ast.ImportFrom):
            found.append((node.lineno, (True, node.module or "", node.level,
                                        tuple((a.name, a.asname or a.name) for a in node.names))))
    return tuple(r for _, r in sorted(found, key=lambda x: x[0]))


def _modules_imported(records: Iterable[_Import], package: str, here: str = "") -> tuple[set[str], set[str], bool]:
    """What the imports take of ``package``: module names, names taken from the package itself, and whether one
    imports the package whole (``import servebench``). ``here`` is the importing module's name (relative imports)."""
    mods: set[str] = set()
    names: set[str] = set()
    whole = False
    for is_from, module, level, pairs in records:
        if not is_from:
            whole = whole or any(n == package for n, _ in pairs)
            mods.update(n for n, _ in pairs if n.startswith(package + "."))
            continue
        mod = module
        if level:
            base = here.split(".")[: len(here.split(".")) - level + (1 if here == package else 0)]
            mod = ".".join([*base, *([module] if module else [])])
        if mod == package:
            names.update(n for n, _ in pairs)
        elif mod.startswith(package + "."):
            mods.add(mod)
    return mods, names, whole


@functools.lru_cache(maxsize=256)
def _tree(text: str) -> ast.Module | None:
    """A source text parsed, once; None where it is not Python."""
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


_READ: dict[Path, tuple[tuple[int, int], str]] = {}


def _read(path: Path) -> str:
    """A source file's text, read once while the file is unchanged."""
    st = path.stat()
    hit = _READ.get(path)
    if hit is None or hit[0] != (st.st_mtime_ns, st.st_size):
        hit = _READ[path] = ((st.st_mtime_ns, st.st_size), path.read_text(encoding="utf-8"))
    return hit[1]


def _package_sources(records: Iterable[_Import], package: str, folder: Path, who: str) -> dict[str, str]:
    """The modules of ``package`` (source in ``folder``) that the imports ``records`` need, and those they import
    in turn: ``{module name: source}``, the package itself first. Its ``__init__`` is reduced to the names taken
    from it, unless something imports the package whole (``import servebench``)."""
    init = folder / "__init__.py"
    if not init.is_file():
        raise StandaloneError(f"{who} imports {package}, whose source is not at {folder}")
    init_tree = _tree(_read(init))
    if init_tree is None:
        raise StandaloneError(f"{who} imports {package}, whose {init} is not Python")
    exports: dict[str, str] = {}   # a name the package's __init__ offers -> the module it comes from
    for node in init_tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(package + "."):
            exports.update((a.asname or a.name, node.module) for a in node.names)

    def file_of(mod: str) -> Path:
        return folder.joinpath(*mod.split(".")[1:]).with_suffix(".py")

    def module_of(name: str) -> str:
        """The module a name taken from the package comes from: a submodule of that name, or what __init__ says."""
        if file_of(f"{package}.{name}").is_file():
            return f"{package}.{name}"
        if name in exports:
            return exports[name]
        raise StandaloneError(f"{who} imports {name} from {package}, which {init} does not offer")

    mods, taken, whole = _modules_imported(records, package)
    todo = [*sorted(mods), *([package] if whole else []), *(module_of(n) for n in sorted(taken))]
    sources: dict[str, str] = {}
    while todo:
        mod = todo.pop()
        if mod in sources:
            continue
        path = init if mod == package else file_of(mod)
        if not path.is_file():
            raise StandaloneError(f"{who} imports {mod}, which is not a module of {folder}")
        text = sources[mod] = _read(path)
        more, more_taken, more_whole = _modules_imported(_import_records(text), package, mod)
        taken |= more_taken
        todo += [*sorted(more), *([package] if more_whole else []), *(module_of(n) for n in sorted(more_taken))]
    if package not in sources:   # the package's __init__, reduced to the names taken from it
        doc = ast.get_docstring(init_tree, clean=False)
        lines = [f'"""{doc.rstrip()}\n\nReduced here to the names this script takes from it.\n"""\n\n'] if doc else []
        by_module: dict[str, list[str]] = {}
        for n in sorted(taken):
            mod = module_of(n)
            by_module.setdefault(package if mod == f"{package}.{n}" else mod, []).append(n)
        lines += [f"from {mod} import {', '.join(ns)}\n" for mod, ns in sorted(by_module.items())]
        sources[package] = "".join(lines)
    return {package: sources[package], **{k: sources[k] for k in sorted(sources) if k != package}}


def _literal(text: str) -> str:
    """``text`` as a Python string literal that reads like the file: a raw triple-quoted string where it can be."""
    for q in ("'''", '"""'):
        lit = f"r{q}{text}{q}"
        if q not in text and not text.endswith("\\"):
            try:
                if ast.literal_eval(lit) == text:
                    return lit
            except (SyntaxError, ValueError):
                pass
    return repr(text)


def _carried(package: str, rel: str, sources: dict[str, str]) -> str:
    """The block written into a script: the package's modules verbatim, and the loader that imports them."""
    var = f"_{package.upper()}_SOURCES"
    mods = ", ".join(m.split(".", 1)[1] for m in sources if m != package)
    out = [f"# --- {package}, the book's own package ({rel} in the book's repository), carried by this script ---",
           f"# The modules this check uses ({mods}), verbatim, and its __init__ reduced to the names the check takes",
           f"# from it. The loader below imports {package} from here: an installed package of that name is never used.",
           f"{var} = {{"]
    for mod, text in sources.items():
        out.append(f"{mod!r}: {_literal(text)},")
    out += ["}", "", "", _LOADER.rstrip("\n"), "", "", f"_inline_package({package!r}, {var})",
            f"# --- end of {package} ---"]
    return "\n".join(out) + "\n"


def _carry_packages(src: str, parts: list[str], root: Path, who: str) -> tuple[str, list[str]]:
    """``src`` (the script, made of the source texts ``parts``: the check and its helpers) with each project
    package they import written in, before the first line that imports it; and the sources written in (whose
    imports count among the script's libraries)."""
    records = [r for part in parts for r in _import_records(part)]
    carried: list[str] = []
    for package, rel in PACKAGES.items():
        mods, names, whole = _modules_imported(records, package)
        if not (mods or names or whole):
            continue
        sources = _package_sources(records, package, root / rel, who)
        carried += sources.values()
        first = re.search(rf"^(?:from {package}[\s.]|import {package}\b)", src, re.M)   # a top-level import
        at = src.count("\n", 0, first.start()) if first is not None else _after_preamble(src)
        lines = src.split("\n")
        src = "\n".join([*lines[:at], "", _carried(package, rel, sources), "", *lines[at:]])
    return src, carried


def _after_preamble(src: str) -> int:
    """The line (0-based) after the module's docstring and ``from __future__`` imports."""
    at = 0
    for node in ast.parse(src).body:
        doc = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        if doc or (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            at = node.end_lineno or node.lineno
        else:
            break
    return at


def libraries(sources: Iterable[str], local: Iterable[str] = ()) -> list[str]:
    """The distributions (``pip install`` names) the sources import beyond the standard library and ``local``
    (modules written into the script), in order of first import."""
    import sys

    skip = set(sys.stdlib_module_names) | set(local) | {"__future__", "numbook"}
    found: list[str] = []
    for text in sources:
        for is_from, module, level, pairs in _import_records(text):
            if level or (is_from and not module):
                continue   # a relative import: of the package itself
            for top in [module.split(".")[0]] if is_from else [n.split(".")[0] for n, _ in pairs]:
                name = _DISTRIBUTIONS.get(top, top)
                if top not in skip and not top.startswith("_") and name not in found:
                    found.append(name)
    return found


def sources_stamp(checks_dir: Path, root: Path | None = None) -> str:
    """What :func:`requirements` reads beyond the check itself, as a stamp of names, sizes and times: the checks'
    helpers and the project's packages. A cache of a rendered page keys on it, and asks again when it moves."""
    base = root if root is not None else checks_dir.parent
    files = [*checks_dir.glob("_*.py"), *(f for rel in PACKAGES.values() for f in (base / rel).rglob("*.py"))]
    parts = []
    for f in sorted(files):
        st = f.stat()
        parts.append(f"{f}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()[:16]


def pip_line(libs: Iterable[str]) -> str:
    """The command that installs ``libs``."""
    return "pip install " + " ".join(libs) if libs else ""


def public_url(site_url: str) -> str:
    """``site_url`` where it is a public address a downloaded file may name (the deploy's); "" for a local one
    (``mkdocs.yml``'s default, ``http://127.0.0.1:8000/``) or none."""
    from urllib.parse import urlsplit

    parts = urlsplit(site_url or "")
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host or host == "localhost" or host.endswith(".localhost"):
        return ""
    import ipaddress

    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return site_url
    return "" if ip.is_loopback or ip.is_unspecified or ip.is_private or ip.is_link_local else site_url


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


def _docstring(code: str) -> tuple[str, str]:
    """The script's module docstring as text, and the code after it (the script's header comments, which the
    notebook's title cell says, dropped with it); ``("", code)`` where it has none."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return "", code
    first = tree.body[0] if tree.body else None
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        return "", code
    doc = inspect.cleandoc(first.value.value)
    rest = "\n".join(code.split("\n")[first.end_lineno or first.lineno:]).lstrip("\n")
    if re.search(r"\b__doc__\b", rest):
        rest = f"__doc__ = {doc!r}\n\n{rest}"   # the check reads its docstring
    return doc, rest


def notebook(code: str, *, title: str, intro: str) -> dict[str, Any]:
    """The script as a notebook (nbformat 4, as JSON data): a title cell, the check's docstring as a Markdown
    cell, then its top-level chunks as code cells."""
    def lines(text: str) -> list[str]:
        return text.splitlines(keepends=True)

    doc, code = _docstring(code)
    cells: list[dict[str, Any]] = [{"cell_type": "markdown", "id": "cell-0", "metadata": {},
                                    "source": lines(f"# {title}\n\n{intro}")}]
    if doc:
        cells.append({"cell_type": "markdown", "id": "cell-doc", "metadata": {}, "source": lines(doc)})
    cells += [{"cell_type": "code", "id": f"cell-{i}", "metadata": {}, "execution_count": None, "outputs": [],
               "source": lines(c)} for i, c in enumerate(_cells(code), start=1)]
    return {"nbformat": 4, "nbformat_minor": 5, "cells": cells,
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                         "language_info": {"name": "python"}}}


_DRIVER = """\
# numbook: the cells of a notebook, run by numbook.run.sandbox as the check itself is run
import json as _json

from numbook.run.warm import run_notebook

with open({cells!r}, encoding="utf-8") as _fh:
    run_notebook(_json.load(_fh), {out!r})
"""


def _sandboxed(cells: list[str], check: Path, runner: Runner, timeout: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run the cells in one IPython shell under the check's sandbox: ``({"cells": [...], "error": ...}, reads)``.

    The shell runs in a child of the runner's warm parent where the check runs in one (a fresh interpreter
    where it does not: a GPU check, a header that passes variables through), with the environment, memory limit,
    scratch folder and audit hook the runner gives the check itself (numbook.run.executor); ``reads`` lists the
    project files it read (``{path relative to the root: hash or None}``), as the runner's cache keys a check."""
    header = read_header(check.read_text(encoding="utf-8"))
    executor = runner.executor
    with scratch_folder(prefix="numbook-nb-") as scratch:
        (scratch / "cells.json").write_text(json.dumps(cells), encoding="utf-8")
        driver = scratch / "notebook_cells.py"
        driver.write_text(_DRIVER.format(cells=str(scratch / "cells.json"), out=str(scratch / "outputs.json")),
                          encoding="utf-8")
        env = executor.environment(header, scratch, runner.rel(check), limit=runner.memory_limit(header),
                                   device=runner.device)
        env["IPYTHONDIR"] = str(scratch / "ipython")
        ran = executor.run(driver, check, header, scratch, env, timeout)
        if ran.returncode is None:
            return {"cells": [], "error": f"the notebook did not finish in {timeout:g} s"}, ran.reads
        try:
            done: dict[str, Any] = json.loads((scratch / "outputs.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            last = (ran.stderr.strip().splitlines() or ["the notebook's process ended without a result"])[-1]
            return {"cells": [], "error": last}, ran.reads
    return done, ran.reads


def _with_outputs(nb: dict[str, Any], done: dict[str, Any]) -> dict[str, Any]:
    ran_nb: dict[str, Any] = json.loads(json.dumps(nb))
    for cell, ran in zip([c for c in ran_nb["cells"] if c["cell_type"] == "code"], done["cells"], strict=True):
        cell["execution_count"], cell["outputs"] = ran["execution_count"], ran["outputs"]
    return ran_nb


def execute(nb: dict[str, Any], cwd: Path, timeout: int = 600, runner: Runner | None = None,
            check: Path | None = None) -> dict[str, Any]:
    """Run every cell and return the notebook with its outputs; NotebookError says what the failing cell raised.

    With a ``runner`` and the ``check`` the notebook was made from, the cells run in one IPython shell (the
    shell a kernel runs) inside the check's sandbox (see :func:`_sandboxed`); ``cwd`` is not used then (the
    sandbox's scratch folder is). Without them, in a python3 kernel (nbclient) with ``cwd`` as its folder:
    that kernel is not sandboxed, for use outside a build only.
    """
    if runner is not None and check is not None:
        done, _reads = _sandboxed(["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"],
                                  check, runner, timeout)
        if done["error"]:
            raise NotebookError(done["error"])
        return _with_outputs(nb, done)
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


@dataclass
class Offered:
    """What :func:`offer` wrote: the notebook (with its outputs, or without where it did not run)."""

    notebook: dict[str, Any]
    spent: float = 0.0          # seconds spent running it (0 when it came from the cache or did not run)
    cached: bool = False


def offer(check: Path, checks_dir: Path, dest: Path, *, pid: str, title: str, page_url: str = "",
          cache: Path | None = None, environment: Any = None, run: bool = True, timeout: int = 600,
          runner: Runner | None = None, key: str = "", root: Path | None = None) -> Offered:
    """Write ``check`` into ``dest`` as a script and as a notebook executed (raises NotebookError).

    Executed notebooks are cached in ``cache`` like checks: the first key hashes the script, ``environment``
    (the library versions, the device, the machinery), ``key`` (the check's own first key: its source, declared
    environment, limits) and this module; the entry it names serves only while every project file the
    notebook's run read still has the content it had. With ``run=False`` (a build that may run nothing) an
    uncached notebook is written without outputs.
    """
    heading = f"{pid} · {title}"
    code, libs = _script(check, checks_dir, title=heading, page_url=page_url, root=root)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / check.name).write_text(code, encoding="utf-8")
    stamp = json.dumps([NOTEBOOK_CACHE_VERSION, _SELF, code, environment, key], sort_keys=True, default=str)
    hit = cache / f"{hashlib.sha256(stamp.encode('utf-8')).hexdigest()[:24]}.json" if cache is not None else None
    if hit is not None and hit.is_file():
        try:
            entry = json.loads(hit.read_text(encoding="utf-8"))
            fresh = runner is not None and runner.cache.fresh(entry["reads"])
            nb_cached: dict[str, Any] = entry["notebook"]
        except (OSError, ValueError, KeyError, TypeError):
            fresh = False
        if fresh:
            _write_notebook(dest / f"{check.stem}.ipynb", nb_cached)
            return Offered(nb_cached, cached=True)
    needs = f"{', '.join(libs)} (`{pip_line(libs)}`)" if libs else "nothing beyond the standard library"
    intro = (f"The check of {f'[{pid}]({page_url})' if page_url else pid}, cell by cell, as the book ran it for "
             f"its build. Change a `given(...)` and run the cells again. It needs Python 3.11 or later and {needs}; "
             "not numbook.")
    nb = notebook(code, title=heading, intro=intro)
    started = time.perf_counter()
    reads: dict[str, Any] = {}
    if run and runner is not None:
        done, reads = _sandboxed(["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"],
                                 check, runner, timeout)
        if done["error"]:
            raise NotebookError(done["error"])
        nb = _with_outputs(nb, done)
    elif run:
        with tempfile.TemporaryDirectory() as tmp:
            nb = execute(nb, Path(tmp), timeout=timeout)
    spent = time.perf_counter() - started if run else 0.0
    _write_notebook(dest / f"{check.stem}.ipynb", nb)
    if hit is not None and run and runner is not None:
        hit.parent.mkdir(parents=True, exist_ok=True)
        tmp_file = hit.with_name(f".{hit.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp_file.write_text(json.dumps({"reads": reads, "notebook": nb}), encoding="utf-8")
        tmp_file.replace(hit)
    return Offered(nb, spent)


def _write_notebook(path: Path, nb: dict[str, Any]) -> None:
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


# -- the notebook against the page -------------------------------------------------------------------------------

_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+(?:[.,_]\d+)*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
"""A number as a line of output prints it: ``-3``, ``16,384,000``, ``65.536``, ``1.2e-05``, ``.5``; not the digits
inside a word or a name (``fp32``, ``x86_64``, ``numbook-ab12``)."""


def printed(nb: dict[str, Any]) -> str | None:
    """What the notebook printed: the text of its cells' ``stdout`` streams, in order; None where it did not run.

    A cell's displayed value (``Out[n]``), its rich displays and its ``stderr`` (warnings) are not part of it: the
    check, run as a script, prints none of them."""
    code = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    if any(c.get("execution_count") is None for c in code):
        return None
    return "".join("".join(o.get("text", "")) for c in code for o in c.get("outputs", [])
                   if o.get("output_type") == "stream" and o.get("name") == "stdout")


def _lines(text: str) -> list[str]:
    out = [ln.rstrip() for ln in text.split("\n")]
    while out and not out[-1]:
        out.pop()
    return out


def mismatch(notebook_out: str, check_out: str, *, measured: bool = False) -> str | None:
    """Where the notebook's printed output departs from the check's, as the rest of a sentence; None if nowhere.

    The rule: both outputs are split into lines (trailing spaces and trailing blank lines dropped), and line N of
    the notebook must be line N of the check's output, number for number (a number as :data:`_NUMBER` reads it,
    compared as written: ``0.10`` is not ``0.1``). A check that records a ``measured`` value times something on the
    machine that ran it: its lines must match with every number in them masked (a timing moves between any two
    runs, and it is not told apart from the other numbers of its line), and the spaces between words are compared
    as one (a wider timing moves the columns after it)."""
    mine, theirs = _lines(notebook_out), _lines(check_out)
    for n, (a, b) in enumerate(zip(mine, theirs, strict=False), start=1):
        if a == b:
            continue
        if measured and " ".join(_NUMBER.sub("#", a).split()) == " ".join(_NUMBER.sub("#", b).split()):
            continue   # a measured number may be wider or narrower, and the columns after it move with it
        if _NUMBER.sub("#", a) == _NUMBER.sub("#", b):
            if measured:
                continue
            x, y = next((x, y) for x, y in zip(_NUMBER.findall(a), _NUMBER.findall(b), strict=True) if x != y)
            return f"prints {x} where the page's check printed {y} (line {n} of its output: {b.strip()!r})"
        return f"prints {a.strip()!r} where the page's check printed {b.strip()!r} (line {n} of its output)"
    if len(mine) > len(theirs):
        return (f"prints {mine[len(theirs)].strip()!r} at line {len(theirs) + 1} of its output, past the end of "
                "the page's check's output")
    if len(mine) < len(theirs):
        return (f"stops printing at line {len(mine) + 1} of the page's check's output, which prints "
                f"{theirs[len(mine)].strip()!r} there")
    return None


@dataclass(frozen=True)
class Job:
    """One problem page to offer its check for: where the fault of its notebook is reported, and where it goes."""

    page: str            # the page's path, relative to the root
    line: int            # the line of its check: in the front matter
    pid: str
    title: str
    check: Path
    dest: Path           # the folder the script and the notebook are written to
    url: str             # the page's public address, or "" (public_url)
    result: CheckResult  # the check's result in this build: its output is what the notebook must print


def offer_all(jobs: Iterable[Job], runner: Runner, *, run: bool = True, timeout: int = 600
              ) -> tuple[list[Diagnostic], list[Offered]]:
    """Offer every job's check as a script and a notebook, in parallel; the faults of their pages: a notebook
    that raised, or one that prints other numbers than its check (:func:`mismatch`)."""
    from concurrent.futures import ThreadPoolExecutor

    cache = runner.cache_dir / "notebooks" if runner.cache_dir is not None else None
    offered: list[Offered] = []

    def one(job: Job) -> Diagnostic | None:
        rel = runner.rel(job.check)
        try:
            done = offer(job.check, runner.checks_dir, job.dest, pid=job.pid, title=job.title, page_url=job.url,
                         cache=cache, environment=[runner.versions, runner.device, runner.machinery], run=run,
                         timeout=int(job.result.timeout_s or timeout), runner=runner, key=job.result.key,
                         root=runner.root)
        except NotebookError as exc:
            return Diagnostic(job.page, job.line, f"the notebook generated from {rel} raised: {exc}")
        except StandaloneError as exc:
            return Diagnostic(job.page, job.line, f"{rel} cannot be offered to run yourself: {exc}")
        offered.append(done)
        out = printed(done.notebook)
        wrong = None if out is None else mismatch(out, job.result.stdout, measured=bool(job.result.measured))
        if wrong is not None:
            return Diagnostic(job.page, job.line, f"the notebook generated from {rel} {wrong}: a reader who runs "
                              "it sees other numbers than the page (seed every random draw; declare a timing with "
                              "value(..., measured=...))")
        return None

    with ThreadPoolExecutor(max_workers=runner.jobs or os.cpu_count() or 1) as pool:
        found = [d for d in pool.map(one, list(jobs)) if d is not None]
    return found, offered
