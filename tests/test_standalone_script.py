"""A problem's download, as :mod:`numbook.run.standalone` writes it: a check that imports the project's own
package carries the modules it uses (and never imports an installed package of that name), the header and the
page name the libraries it needs, a local site address is named nowhere, and the notebook shows the check's
docstring as a Markdown cell."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from numbook.run.standalone import (
    StandaloneError,
    libraries,
    notebook,
    pip_line,
    public_url,
    requirements,
    script,
    sources_stamp,
)

INIT = '''\
"""A harness: the docstring of its package."""

from servebench import metrics
from servebench.config import Config, preset
from servebench.model import Model
'''
CONFIG = '''\
"""Configurations."""
from dataclasses import dataclass


@dataclass(frozen=True)
class Config:
    layers: int = 2


def preset(name):
    return Config(layers={"tiny": 1, "cpu": 4}[name])
'''
METRICS = '''\
"""Metrics, which use the configuration."""
from servebench.config import Config


def per_layer(total, cfg: Config):
    return total / cfg.layers
'''
MODEL = '''\
"""A model that needs a library the checks never import themselves."""
import json


class Model:
    def __init__(self):
        raise RuntimeError("not used by the check")
'''
CHECK = '''\
# numbook: timeout=30
"""X.1.A01 — A check that uses the harness.

It reads ``preset("cpu")`` and prints *per layer* figures.
"""

from servebench import metrics, preset

from numbook.check import given, value

TOTAL = given("total", 64)
cfg = preset("cpu")
print(f"per layer: {value('per_layer', metrics.per_layer(TOTAL, cfg)):g}")
'''


def project(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "book"
    pkg = root / "servebench" / "src" / "servebench"
    pkg.mkdir(parents=True)
    for name, text in {"__init__": INIT, "config": CONFIG, "metrics": METRICS, "model": MODEL}.items():
        (pkg / f"{name}.py").write_text(text, encoding="utf-8")
    checks = root / "checks"
    checks.mkdir()
    (checks / "x1_a01_harness.py").write_text(CHECK, encoding="utf-8")
    return root, checks / "x1_a01_harness.py"


def test_a_check_that_imports_the_harness_carries_the_modules_it_uses_and_no_more(tmp_path: Path) -> None:
    root, check = project(tmp_path)
    text = script(check, check.parent, title="X.1.A01 · Harness")
    assert "'servebench.config': r'''" in text and "'servebench.metrics': r'''" in text
    assert "'servebench.model'" not in text, "a module the check does not reach is carried"
    assert "from servebench.config import preset\nfrom servebench import metrics\n" not in text
    assert "from servebench import metrics\nfrom servebench.config import preset\n" in text   # the reduced __init__
    assert "from servebench import metrics, preset\n" in text   # the check's own line, as the author wrote it


def test_the_carried_harness_runs_and_an_installed_one_is_never_imported(tmp_path: Path) -> None:
    root, check = project(tmp_path)
    run = tmp_path / "reader"
    decoy = run / "servebench"
    decoy.mkdir(parents=True)   # a package of that name on the path: the wrong servebench of PyPI, say
    (decoy / "__init__.py").write_text("raise ImportError('the installed servebench was imported')\n",
                                       encoding="utf-8")
    (run / check.name).write_text(script(check, check.parent, title="X"), encoding="utf-8")
    code = ("import runpy, sys; sys.modules['numbook'] = None; sys.path.insert(0, '.'); import servebench.config; "
            "runpy.run_path(sys.argv[1], run_name='__main__')")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    ran = subprocess.run([sys.executable, "-c", code, check.name], cwd=run, capture_output=True, text=True,
                         timeout=60, env=env, check=False)
    assert "the installed servebench was imported" in ran.stderr   # the decoy is what an import finds here ...
    code = code.replace(" import servebench.config;", "")
    ran = subprocess.run([sys.executable, "-c", code, check.name], cwd=run, capture_output=True, text=True,
                         timeout=60, env=env, check=False)
    assert ran.returncode == 0, ran.stderr   # ... and the script does not use it
    assert ran.stdout == "per layer: 16\n"


def test_a_traceback_in_a_carried_module_shows_its_file_and_line(tmp_path: Path) -> None:
    root, check = project(tmp_path)
    check.write_text(CHECK.replace('preset("cpu")', 'preset("gpu")'), encoding="utf-8")
    (tmp_path / "x.py").write_text(script(check, check.parent, title="X"), encoding="utf-8")
    # the traceback module (a notebook's kernel, a reader's IDE) reads the carried lines; Python 3.11's own
    # printer of an uncaught exception reads files only, and names the module and the line
    ran = subprocess.run([sys.executable, "-c", "import sys, runpy, traceback; sys.modules['numbook'] = None\n"
                          "try: runpy.run_path('x.py', run_name='__main__')\n"
                          "except KeyError: traceback.print_exc(); sys.exit(1)"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60, check=False)
    assert ran.returncode == 1
    assert 'servebench/config.py, written into this script", line 11, in preset' in ran.stderr
    assert 'return Config(layers={"tiny": 1, "cpu": 4}[name])' in ran.stderr


def test_a_harness_that_is_not_there_is_an_error_naming_the_check(tmp_path: Path) -> None:
    root, check = project(tmp_path)
    with pytest.raises(StandaloneError, match=r"x1_a01_harness\.py imports servebench, whose source is not at "):
        script(check, check.parent, title="X", root=tmp_path / "elsewhere")
    check.write_text(CHECK.replace("metrics, preset", "metrics, preset, nowhere"), encoding="utf-8")
    with pytest.raises(StandaloneError, match=r"imports nowhere from servebench, which .*__init__\.py does not offer"):
        script(check, check.parent, title="X")


def test_the_header_names_the_libraries_and_no_local_address(tmp_path: Path) -> None:
    root, check = project(tmp_path)
    check.write_text(CHECK.replace("from servebench", "import numpy as np\nimport yaml\nfrom servebench"),
                     encoding="utf-8")
    assert requirements(check, check.parent) == ["numpy", "pyyaml"]   # json (the harness's) is the stdlib's
    text = script(check, check.parent, title="X.1.A01 · Harness", page_url=public_url("http://127.0.0.1:8000/"))
    assert text.startswith("# X.1.A01 · Harness\n# The check of this problem")
    assert "It needs Python 3.11 or later and numpy, pyyaml (pip install numpy pyyaml); not numbook." in text
    assert "127.0.0.1" not in text
    text = script(check, check.parent, title="X", page_url="https://book.example.org/X.1.A01/")
    assert text.startswith("# X\n# From the page https://book.example.org/X.1.A01/\n")


@pytest.mark.parametrize(("url", "public"), [
    ("http://127.0.0.1:8000/", False), ("http://localhost:8000/", False), ("http://[::1]:8000/", False),
    ("http://0.0.0.0:8000/", False), ("http://192.168.1.4/", False), ("", False), ("file:///tmp/site/", False),
    ("https://someone.github.io/numbook/", True), ("https://book.example.org/", True),
])
def test_only_a_public_site_url_is_written_into_a_download(url: str, public: bool) -> None:
    assert public_url(url) == (url if public else "")


def test_libraries_leave_out_the_standard_library_the_helpers_and_what_is_carried() -> None:
    src = textwrap.dedent("""\
        import os, json
        from __future__ import annotations
        import torch.nn.functional as F
        from _memory import mib
        from servebench import preset
        def f():
            import matplotlib.pyplot as plt
            from PIL import Image
        import numpy
        from . import sibling
    """)
    assert libraries([src], local={"servebench"}) == ["torch", "matplotlib", "pillow", "numpy"]   # source order
    assert pip_line(["torch", "numpy"]) == "pip install torch numpy"
    assert pip_line([]) == ""


def test_the_notebook_shows_the_docstring_as_a_markdown_cell_not_a_printed_string(tmp_path: Path) -> None:
    root, check = project(tmp_path)
    nb = notebook(script(check, check.parent, title="X"), title="X.1.A01 · Harness", intro="The check.")
    kinds = [c["cell_type"] for c in nb["cells"]]
    assert kinds[:2] == ["markdown", "markdown"] and set(kinds[2:]) == {"code"}
    assert "".join(nb["cells"][1]["source"]) == ("X.1.A01 — A check that uses the harness.\n\n"
                                                 "It reads ``preset(\"cpu\")`` and prints *per layer* figures.")
    code = "".join("".join(c["source"]) for c in nb["cells"][2:])
    assert '"""X.1.A01' not in code and "# The check of this problem" not in code
    assert code.startswith("# --- servebench") or "from servebench import metrics, preset" in code


def test_a_check_that_reads_its_docstring_still_has_it_in_the_notebook() -> None:
    nb = notebook('"""The doc."""\n\nprint(__doc__)\n', title="T", intro="i")
    assert "".join(nb["cells"][1]["source"]) == "The doc."
    namespace: dict[str, object] = {}
    exec("".join(nb["cells"][2]["source"]), namespace)   # noqa: S102 - the cell, run as a kernel runs it
    assert namespace["__doc__"] == "The doc."


def test_the_stamp_of_what_the_libraries_are_read_from_moves_with_the_harness_and_the_helpers(tmp_path: Path) -> None:
    root, check = project(tmp_path)
    (check.parent / "_helper.py").write_text("import math\n", encoding="utf-8")
    before = sources_stamp(check.parent)
    assert sources_stamp(check.parent) == before
    (root / "servebench/src/servebench/config.py").write_text(CONFIG + "import scipy\n", encoding="utf-8")
    after = sources_stamp(check.parent)
    assert after != before
    (check.parent / "_helper.py").write_text("import math\nimport pandas\n", encoding="utf-8")
    assert sources_stamp(check.parent) != after


def test_a_helper_that_imports_the_check_api_gets_the_shim_before_it_runs(tmp_path: Path) -> None:
    checks = tmp_path / "checks"
    checks.mkdir()
    (checks / "_helper.py").write_text('from numbook.check import sanity, value\n\n\ndef twice(x):\n'
                                       '    sanity("positive", x > 0)\n    return value("twice", 2 * x)\n',
                                       encoding="utf-8")
    (checks / "x.py").write_text('from _helper import twice\n\nfrom numbook.check import given\n\n'
                                 'print(twice(given("x", 21)))\n', encoding="utf-8")
    text = script(checks / "x.py", checks, title="X")
    assert [ln for ln in text.split("\n") if "numbook.check" in ln] == [
        "# from numbook.check import given: written above"]   # one shim, first, for every name either imports
    (tmp_path / "run.py").write_text(text, encoding="utf-8")
    ran = subprocess.run([sys.executable, "-I", "-S", "run.py"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=60, check=False)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "42\n"
