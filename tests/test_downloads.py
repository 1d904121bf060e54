"""Every problem's run-it-yourself download, taken from the built site, runs in a bare environment.

The environment is a virtual environment with only the libraries the pages name (``pip install ...`` in
each page's run-it-yourself paragraph, torch pinned to the book's CPU build): no numbook, no servebench. Each
problem's script is fetched by the page's own (relative) link, copied into a fresh empty folder and run there
with ``python SCRIPT``, as a reader runs it; it must end with status 0 and print what the page shows, by the
rule the build holds the notebooks to (:func:`numbook.run.standalone.mismatch`: a check that records a measured
value is compared with its numbers masked). One test per problem page, so pytest-xdist spreads them over the
cores; the environment is made once per session, by whichever worker comes first.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import html
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from numbook.core.result import read_header
from numbook.run.standalone import mismatch

# runs every problem's check once more, as a reader would: 29 min for the 59 (one worker, the bare environment made
# in 3 min of it) on this project's shared 2-core machine beside a full build; the longest, I.2.A05, 94 s
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = sorted(p for p in (ROOT / "problems").glob("*.md")
                  if re.search(r"^check:\s*\S", p.read_text(encoding="utf-8").split("\n---", 1)[0], re.M))
TORCH = re.search(r'"(torch==[^"]+)"', (ROOT / "pyproject.toml").read_text(encoding="utf-8"))
SECTION = re.compile(r'<section class="nb-check".*?</section>', re.S)
OUTPUT = re.compile(r'<pre class="nb-output"><code>(.*?)</code></pre>', re.S)
LINKS = re.compile(r'<p class="nb-run-yourself">.*?</p>', re.S)


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def _downloads(page: str) -> list[tuple[str, str, str]]:
    """Each run-it-yourself paragraph of a page: (script href, notebook href, what the check printed there)."""
    found = []
    for section in SECTION.findall(page):
        para = LINKS.search(section)
        out = OUTPUT.search(section)
        if para is None or out is None:
            continue
        hrefs = re.findall(r'href="([^"]+)"', para.group(0))
        found.append((next(h for h in hrefs if h.endswith(".py")), next(h for h in hrefs if h.endswith(".ipynb")),
                      _text(out.group(1))))
    return found


@functools.cache
def _pages(site: Path) -> list[Path]:
    """The built pages that offer a download."""
    return sorted(p for p in site.rglob("index.html") if 'class="nb-run-yourself"' in p.read_text(encoding="utf-8"))


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "w", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def bare_python(site_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment with only what the pages name, made once per session (shared by the workers)."""
    shared = Path(os.environ.get("NUMBOOK_TESTS_DIR") or tmp_path_factory.getbasetemp())
    venv = shared / "bare-venv"
    python = venv / "bin" / "python"
    with _locked(shared / "bare-venv.lock"):
        if not (venv / "ready").exists():
            named: list[str] = []
            for page in _pages(site_dir):
                for line in re.findall(r'<code class="nb-pip">pip install ([^<]+)</code>', page.read_text("utf-8")):
                    named += [n for n in line.split() if n not in named]
            assert named, f"no page of {site_dir} names the libraries its download needs"
            assert TORCH is not None, "pyproject.toml pins no torch==VERSION"
            wanted = [TORCH.group(1) if n == "torch" else n for n in named]
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=120)
            pip = subprocess.run([str(python), "-m", "pip", "install", "-q", *wanted], capture_output=True,
                                 text=True, timeout=600, check=False)
            assert pip.returncode == 0, f"pip install {' '.join(wanted)} ended with {pip.returncode}:\n{pip.stderr}"
            (venv / "ready").write_text(" ".join(wanted), encoding="utf-8")
    # the environment is bare: neither the book's tool nor its harness can be imported there
    probe = subprocess.run([str(python), "-c", "import importlib.util as u; print(u.find_spec('numbook'), "
                            "u.find_spec('servebench'))"], capture_output=True, text=True, timeout=60,
                           cwd=tmp_path_factory.mktemp("probe"), env=_bare_env(), check=False)
    assert probe.stdout.split() == ["None", "None"], f"the bare environment imports numbook or servebench: {probe}"
    return python


def _bare_env() -> dict[str, str]:
    """The environment a reader's shell gives: no PYTHONPATH, nothing of numbook's."""
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV") and not k.startswith("NUMBOOK")}


@pytest.mark.parametrize("problem", PROBLEMS, ids=[p.stem for p in PROBLEMS])
def test_the_download_runs_where_only_the_named_libraries_are(problem: Path, site_dir: Path, bare_python: Path,
                                                              tmp_path: Path) -> None:
    front = problem.read_text(encoding="utf-8").split("\n---", 1)[0]
    check = re.search(r"^check:\s*(\S+)", front, re.M)
    assert check is not None
    source = (ROOT / "checks" / check.group(1)).read_text(encoding="utf-8")
    page = next((p for p in _pages(site_dir) if p.parent.name == problem.stem), None)
    if page is None:
        if read_header(source).requires:
            pytest.skip(f"{check.group(1)} needs {read_header(source).requires}: frozen, not offered to run yourself")
        pytest.fail(f"{problem.relative_to(ROOT)}: the built page offers no download (no nb-run-yourself paragraph)")
    downloads = _downloads(page.read_text(encoding="utf-8"))
    assert downloads, f"{page}: a run-it-yourself paragraph without a check's output beside it"
    for script_href, notebook_href, shown in downloads:
        for href in (script_href, notebook_href):   # relative to the page: the site works wherever it is served
            assert not re.match(r"^([a-z]+:|/)", href), f"{page}: the download link {href!r} is not relative"
            assert (page.parent / href).is_file(), f"{page}: the download link {href!r} names no file"
        script = page.parent / script_href
        text = script.read_text(encoding="utf-8")
        assert "127.0.0.1" not in text and "localhost" not in text, f"{script} names a local address"
        (tmp_path / script.name).write_text(text, encoding="utf-8")
        ran = subprocess.run([str(bare_python), script.name], cwd=tmp_path, env=_bare_env(), capture_output=True,
                             text=True, timeout=900, check=False)
        tail = "\n".join(ran.stderr.strip().splitlines()[-15:])
        assert ran.returncode == 0, (f"{script} (run as python {script.name} in a bare environment) ended with "
                                     f"status {ran.returncode}; the last lines of its stderr:\n{tail}")
        wrong = mismatch(ran.stdout, shown, measured=bool(re.search(r"\bmeasured\s*=", source)))
        assert wrong is None, f"{script}, run in a bare environment, {wrong}"
