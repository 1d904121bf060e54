"""Bad inputs, as a careless or hostile author would write them: each fails both roads.

Every case edits a copy of the tiny book, then runs ``numbook verify`` and
``mkdocs build --strict``. Where the input is a fault, both exit non-zero and both put the
same clear message first; where it is not (a claim inside code is code), both pass.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from test_build import A01, CHECK, copy_tiny, edit

pytestmark = pytest.mark.slow

A02 = "problems/I.1.A02.md"
CHECK2 = "checks/i1_a02_reuse.py"


def run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    return subprocess.run([sys.executable, "-m", *args], cwd=root, capture_output=True, text=True, env=env,
                          timeout=300, check=False)


def first_fault(proc: subprocess.CompletedProcess[str], build: bool) -> str:
    if build:
        lines = [ln.split("-  ", 1)[1] for ln in proc.stderr.splitlines() if ln.startswith("WARNING")]
    else:
        lines = [ln for ln in proc.stderr.splitlines() if ":" in ln and not ln.startswith(("[", " "))]
    return lines[0] if lines else ""


def _append(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.write_text(p.read_text(encoding="utf-8") + text, encoding="utf-8")


def _check_body(root: Path, body: str) -> None:
    (root / CHECK).write_text('"""I.1.A01, broken."""\n' + body, encoding="utf-8")


CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "digit changed in the Answer": (
        lambda r: edit(r, A01, "## Answer\n\n[[65.5|fp32_mb]]", "## Answer\n\n[[65.4|fp32_mb]]"),
        "problems/I.1.A01.md:36: claim 'fp32_mb' reads 65.4, checks/i1_a01_embedding.py computed 65.536"),
    "a name the check never records": (
        lambda r: edit(r, A01, "[[32.8|bf16_mb]] MB in bf16.\n\n## Check", "[[32.8|bf16_mib]] MB in bf16.\n\n## Check"),
        "problems/I.1.A01.md:36: claim 'bf16_mib' names a value checks/i1_a01_embedding.py does not record"),
    "a check that raises": (
        lambda r: _append(r, CHECK, "\nraise RuntimeError('boom')\n"),
        "problems/I.1.A01.md:4: check 'checks/i1_a01_embedding.py' raised: RuntimeError: boom"),
    "a check that hangs": (
        lambda r: edit(r, CHECK, '"""I.1.A01: the memory of an embedding table."""',
                       '"""I.1.A01."""\n# numbook: timeout=2\nimport time\ntime.sleep(600)'),
        "problems/I.1.A01.md:4: check 'checks/i1_a01_embedding.py' timed out after 2 s"),
    "a check that prints and records nothing": (
        lambda r: _check_body(r, "import numbook.check\nprint('hello')\n"),
        "problems/I.1.A01.md:4: check 'checks/i1_a01_embedding.py' ran but recorded nothing"),
    "a check that records NaN": (
        lambda r: edit(r, CHECK, 'value("fp32_mb", ', 'value("fp32_mb", float("nan")) and ('),
        "problems/I.1.A01.md:32: claim 'fp32_mb' reads 65.5, checks/i1_a01_embedding.py computed nan"),
    "front matter naming a missing check": (
        lambda r: edit(r, A01, "check: i1_a01_embedding.py", "check: i1_a01_embeding.py"),
        "problems/I.1.A01.md:4: check 'checks/i1_a01_embeding.py' does not exist"),
    "two pages with one ID": (
        lambda r: edit(r, A02, "id: I.1.A02", "id: I.1.A01"),
        "problems/I.1.A02.md:2: problem ID 'I.1.A01' is also used by problems/I.1.A01.md"),
    "draws_on naming no problem": (
        lambda r: edit(r, A02, "draws_on: [I.1.A01]", "draws_on: [I.1.A09]"),
        "problems/I.1.A02.md:5: draws on 'I.1.A09', which is no problem in this book"),
    "malformed YAML": (
        lambda r: edit(r, A02, "draws_on: [I.1.A01]", "draws_on: [I.1.A01\ntags: x"),
        "problems/I.1.A02.md:6: malformed front matter:"),
    "MB written where MiB was computed": (
        lambda r: edit(r, A01, "In fp32 that is [[65.5|fp32_mb]] MB", "In fp32 that is [[65.5|fp32_mb]] MiB"),
        "problems/I.1.A01.md:32: claim 'fp32_mb' is written in MiB, but checks/i1_a01_embedding.py computed it "
        "in MB: 65.536 MB = 62.5 MiB"),
    "a precision line the build cannot enforce": (
        lambda r: edit(r, A01, "title: The memory", "precision: three decimals\ntitle: The memory"),
        "problems/I.1.A01.md:3: front matter 'precision' is gone"),
    "more digits than the value's dtype carries": (
        lambda r: (_append(r, CHECK, '\nvalue("loss", 3.447619438171, dtype="float32")\n'),
                   edit(r, A01, "Tied input and output embeddings share one table.",
                        "Tied input and output embeddings share one table; the loss is [[3.447619438171|loss]].")),
        "problems/I.1.A01.md:49: claim 'loss' is written with 13 significant digits, but "
        "checks/i1_a01_embedding.py computed it in float32, which carries about 8: round it"),
    "a Given that disagrees with the check's input": (
        lambda r: edit(r, A01, "width $d = [[512|d]]$", "width $d = [[256|d]]$"),
        "problems/I.1.A01.md:14: claim 'd' reads 256, checks/i1_a01_embedding.py computed 512"),
    "a Statement that disagrees with the check's input": (
        lambda r: edit(r, A01, "of $|V|$ tokens to a vector of $d$ numbers",
                       "of $|V|$ tokens to a vector of $d = 256$ numbers"),
        "problems/I.1.A01.md:10: unbound number '256' in Statement"),
    "a plain unbound number in the Answer": (
        lambda r: edit(r, A01, "## Answer\n\n[[65.5|fp32_mb]] MB", "## Answer\n\n65.5 MB"),
        "problems/I.1.A01.md:36: unbound number '65.5' in Answer"),
    "a check with a syntax error": (
        lambda r: _append(r, CHECK, "\ndef broken(:\n"),
        "problems/I.1.A01.md:4: check 'checks/i1_a01_embedding.py' raised: SyntaxError"),
    "a check that writes into the project": (
        lambda r: _append(r, CHECK, "\nopen(r'" + str(r / "docs" / "INJECTED.md") + "', 'w').write('# x')\n"),
        "problems/I.1.A01.md:4: check 'checks/i1_a01_embedding.py' raised: PermissionError"),
    "a check that reads the network": (
        lambda r: _append(r, CHECK, "\nimport socket\nsocket.create_connection(('127.0.0.1', 9))\n"),
        "problems/I.1.A01.md:4: check 'checks/i1_a01_embedding.py' raised: PermissionError"),
    "a check that allocates 20 GB": (
        lambda r: _append(r, CHECK, "\nblock = bytearray(20 * 10**9)\n"),
        "problems/I.1.A01.md:4: check 'checks/i1_a01_embedding.py' ran out of memory"),
    "a misplaced thousands separator": (
        lambda r: edit(r, A01, "[[16,384,000|numel]]", "[[16,38,4000|numel]]"),
        "problems/I.1.A01.md:28: claim '[[16,38,4000|numel]]': '16,38,4000' has a misplaced thousands separator"),
    "a flipped relation word next to its sanity": (
        lambda r: edit(r, A02, "Memory grows linearly", "Memory falls linearly"),
        "problems/I.1.A02.md:39: relation word 'falls' says falls, but sanity 'linear' of checks/i1_a02_reuse.py "
        "asserts grows"),
    "a negation added next to its sanity": (
        lambda r: edit(r, A01, "bf16 takes exactly half", "bf16 does not take exactly half"),
        "problems/I.1.A01.md:45: relation word 'not take exactly half' says not half, but sanity 'half' of "
        "checks/i1_a01_embedding.py asserts half"),
    "a digit glued to a claim": (
        lambda r: edit(r, A01, "## Answer\n\n[[65.5|fp32_mb]] MB", "## Answer\n\n[[65.5|fp32_mb]]0 MB"),
        "problems/I.1.A01.md:36: '0' is glued to the claim [[65.5|fp32_mb]]: the reader reads 65.50"),
    "an empty literal": (
        lambda r: edit(r, A01, "## Answer\n\n[[65.5|fp32_mb]] MB", "## Answer\n\n[[|fp32_mb]] MB"),
        "problems/I.1.A01.md:36: marker '[[|fp32_mb]]' would be published as typed: its literal is empty"),
    "an empty page under problems/": (
        lambda r: (r / "problems" / "I.1.A03.md").write_text("", encoding="utf-8"),
        "problems/I.1.A03.md:1: a page under problems/ must be a problem page"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_fails_verify_and_build_with_one_clear_first_line(case: str, tmp_path: Path) -> None:
    make, expected = CASES[case]
    root = copy_tiny(tmp_path)
    make(root)
    verify = run(root, "numbook.cli", "verify")
    build = run(root, "mkdocs", "build", "--strict", "-d", str(root / "site"))
    assert verify.returncode == 1, verify.stderr
    assert build.returncode == 1, build.stderr
    assert first_fault(verify, build=False).startswith(expected), verify.stderr
    assert first_fault(build, build=True).startswith(expected), build.stderr
    assert not (root / "docs" / "INJECTED.md").exists()


def test_claims_inside_fenced_and_indented_code_are_code(tmp_path: Path) -> None:
    root = copy_tiny(tmp_path)
    edit(root, A01, "## Where this breaks\n",
         "## Where this breaks\n\n```text\n[[99.9|fp32_mb]]\n```\n\n    [[98.7|fp32_mb]] indented\n\n")
    assert run(root, "numbook.cli", "verify").returncode == 0
    assert run(root, "mkdocs", "build", "--strict", "-d", str(root / "site")).returncode == 0
    page = (root / "site" / "problems" / "I.1.A01" / "index.html").read_text(encoding="utf-8")
    assert "[[99.9|fp32_mb]]" in page and "[[98.7|fp32_mb]] indented" in page
    assert "nb-claim" not in page.split("Where this breaks", 1)[1].split("Variation", 1)[0]
