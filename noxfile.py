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


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff on everything, mypy (strict) on the package."""
    _install(session, "[test]")
    session.run("ruff", "check", "src", "tests", "checks", "noxfile.py")
    session.run("mypy")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The whole test suite: unit, Markdown in / HTML out, real strict builds, browser tests."""
    if not (shutil.which("chromium") or os.path.exists("/usr/bin/chromium")):
        session.error("the browser tests need Debian's chromium: `apt-get install -y chromium` "
                      "(.ci/run installs it)")
    _install(session, "[test]")
    session.run("pytest", "-q", "-ra", *session.posargs)
