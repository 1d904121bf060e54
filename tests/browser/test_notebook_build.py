"""The companion notebooks' build settings, tried on a tiny project built for real.

The settings are read from the book's own mkdocs.yml, so this tests what the site uses: only
*.ipynb files become notebooks (a *.py under docs/ is left alone), every notebook is executed
at build time, its source is copied next to its page for download, and a cell that raises
fails ``mkdocs build --strict``. It lives with the browser tests because it guards the same
lesson pages, but it needs no browser.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def jupyter_config() -> dict[str, Any]:
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("", lambda loader, tag, node: None)  # !!python/name and friends
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=Loader)  # noqa: S506
    for entry in config["plugins"]:
        if isinstance(entry, dict) and "mkdocs-jupyter" in entry:
            return dict(entry["mkdocs-jupyter"])
    raise AssertionError("mkdocs.yml has no mkdocs-jupyter plugin entry")


def notebook(*sources: str) -> str:
    cells = [{"cell_type": "markdown", "id": "c0", "metadata": {}, "source": "# A notebook"}]
    cells += [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": None, "outputs": [],
               "source": src} for i, src in enumerate(sources, start=1)]
    return json.dumps({"cells": cells, "nbformat": 4, "nbformat_minor": 5, "metadata": {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}})


def build(tmp_path: Path, *cells: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n", encoding="utf-8")
    (docs / "nb.ipynb").write_text(notebook(*cells), encoding="utf-8")
    (docs / "helper.py").write_text("raise SystemExit('a .py under docs/ must not be executed')\n", encoding="utf-8")
    config = {"site_name": "tiny", "theme": {"name": "mkdocs"}, "plugins": [{"mkdocs-jupyter": jupyter_config()}],
              "nav": [{"Home": "index.md"}, {"Notebook": "nb.ipynb"}]}
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    site = tmp_path / "site"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    return proc, site


def test_the_book_configures_notebooks_to_run_and_fail_loudly() -> None:
    config = jupyter_config()
    assert config["include"] == ["*.ipynb"]
    assert config["execute"] is True and config["allow_errors"] is False and config["include_source"] is True
    assert config["custom_mathjax_url"] == ""  # the default loads MathJax from a CDN


def test_a_notebook_runs_at_build_time_and_is_offered_for_download(tmp_path: Path) -> None:
    proc, site = build(tmp_path, "print(6 * 7)")
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = (site / "nb" / "index.html").read_text(encoding="utf-8")
    assert "<pre>42\n</pre>" in page
    assert (site / "nb" / "nb.ipynb").is_file()
    assert not (site / "helper").exists() and (site / "helper.py").is_file()  # copied as a file, never run
    assert "libs/mathjax" not in page  # (the tiny project's own theme loads highlight.js remotely; the book's not)


def test_a_raising_cell_fails_the_strict_build(tmp_path: Path) -> None:
    proc, _ = build(tmp_path, "x = 1", "1 / 0")
    assert proc.returncode != 0
    assert "ZeroDivisionError" in proc.stderr
