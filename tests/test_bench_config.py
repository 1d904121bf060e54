"""The bench's derived configs (tools/bench_build.py): the floor and the serve build are the same site as the
project's own build, with only numbook's options changed. MkDocs replaces an inherited list of plugins, so a
config that names only numbook would drop search and the notebook plugin and make the floor look cheaper."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import bench_build  # noqa: E402


def test_a_derived_config_keeps_every_plugin_and_overrides_only_numbooks_options(tmp_path: Path) -> None:
    (tmp_path / "mkdocs.yml").write_text(
        'site_name: t\nsite_url: !ENV [X, "http://h/"]\nplugins:\n  - search\n  - numbook:\n      jobs: 2\n'
        '  - mkdocs-jupyter:\n      include: ["*.ipynb"]\n', encoding="utf-8")
    name = bench_build.inherit(tmp_path, "floor.yml", {"execute": False, "cache_dir": ""})
    derived = yaml.safe_load((tmp_path / name).read_text(encoding="utf-8"))
    assert derived == {"INHERIT": "mkdocs.yml", "strict": True,
                       "plugins": ["search", {"numbook": {"jobs": 2, "execute": False, "cache_dir": ""}},
                                   {"mkdocs-jupyter": {"include": ["*.ipynb"]}}]}


def test_the_books_own_config_keeps_search_and_the_notebook_plugin(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1]
    (tmp_path / "mkdocs.yml").write_bytes((root / "mkdocs.yml").read_bytes())
    derived = yaml.safe_load((tmp_path / bench_build.inherit(tmp_path, "f.yml", {}, strict=False)).read_text())
    names = [p if isinstance(p, str) else next(iter(p)) for p in derived["plugins"]]
    assert names == [p if isinstance(p, str) else next(iter(p)) for p in bench_build._plugins(root)]
    assert {"search", "numbook", "mkdocs-jupyter"} <= set(names)
