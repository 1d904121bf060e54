"""Statements, not only digits: relation sentences, dead inputs, constant claims, facts, printed labels.

Each rule is shown on a small book: a page and its check in, diagnostics (or the perturb report) out.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from _results import Fixed
from numbook.core.lint import printed_digits
from numbook.core.result import CheckResult
from numbook.core.verify import PageContext, verify_page
from numbook.run.perturb import GivenRow, PerturbReport, load_report, merge, stale

RESULT = CheckResult("checks/demo.py", "ok", values={"masked": 3.62, "plain": 3.08, "n": 3},
                     sanity={"masked_larger": {"ok": True, "message": "masked > plain", "operands": [3.62, 3.08],
                                                       "relation": ["larger"]}})


def faults(text: str) -> list[str]:
    ctx = PageContext("docs/x.md", "demo.py", scan_numbers=True)
    return [str(d) for d in verify_page(text, ctx, Fixed(lambda name: RESULT)).diagnostics]


def test_a_relation_sentence_without_a_sanity_is_reported_with_its_words() -> None:
    assert faults("The masked mean, [[3.62|masked]], is larger than the plain one, [[3.08|plain]].") == [
        "docs/x.md:1: relation sentence with no sanity (larger): 'The masked mean, [[3.62|masked]], is larger "
        "than the plain one, [[3.08|plain]].': back it with a sanity(name, relation, operands=(left, right)) and "
        "end it with [[sanity:name]], or mark it [[relation:none|why]]"]


def test_a_relation_sentence_with_its_sanity_or_a_reasoned_allowance_passes() -> None:
    assert faults("The masked mean, [[3.62|masked]], is larger than [[3.08|plain]]. [[sanity:masked_larger]]") == []
    assert faults("The rank falls [[three|n]] times. [[relation:none|a count the table above lists]]") == []
    assert faults("The masked mean is [[3.62|masked]].") == []   # no relation: a plain statement of a value


def test_the_sanity_mark_shows_both_operands() -> None:
    import markdown

    from numbook.html.extension import NumbookExtension

    ctx = PageContext("docs/x.md", "demo.py")
    ext = NumbookExtension(context=ctx, results=Fixed(lambda name: RESULT))
    html = markdown.Markdown(extensions=[ext]).convert("Larger. [[sanity:masked_larger]]")
    assert 'data-left="3.62" data-right="3.08"' in html
    assert "held when checks/demo.py ran: masked &gt; plain (left = 3.62, right = 3.08)" in html


def _book(tmp_path: Path, check: str, page_body: str, facts: str = "") -> Path:
    root = tmp_path / "book"
    (root / "docs").mkdir(parents=True)
    (root / "problems").mkdir()
    (root / "checks").mkdir()
    (root / "mkdocs.yml").write_text("site_name: t\nplugins:\n  - numbook: {cache_dir: ''}\n"
                                     "markdown_extensions:\n  - numbook\n", encoding="utf-8")
    (root / "docs" / "index.md").write_text("# t\n", encoding="utf-8")
    (root / "docs" / "page.md").write_text("---\ncheck: c.py\n---\n\n" + page_body, encoding="utf-8")
    (root / "checks" / "c.py").write_text("from numbook.check import given, value, fact\n" + textwrap.dedent(check),
                                          encoding="utf-8")
    if facts:
        (root / "checks" / "facts.yml").write_text(textwrap.dedent(facts), encoding="utf-8")
    return root


def _verify(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "numbook.cli", "verify", *args], cwd=root, capture_output=True,
                          text=True, timeout=120, check=False)


def test_perturb_reports_a_dead_input_and_a_constant_claim(tmp_path: Path) -> None:
    root = _book(tmp_path, """
        B = given("B", 4)
        T = given("T", 512)
        value("positions", B * 512)          # T typed again instead of used: T is dead
        value("bytes_per_elem", 4)           # a constant standing in for element_size()
        value("fp32_bytes", 4, fixed="bytes of an fp32 element: a property of the dtype")
        """, "B [[4|B]], T [[512|T]]: [[2048|positions]] positions, [[4|bytes_per_elem]] and [[4|fp32_bytes]] bytes.\n")
    proc = _verify(root, "--perturb")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = {tuple(line.split()[:5]) for line in proc.stdout.splitlines() if line.startswith("checks/c.py  ")}
    assert ("checks/c.py", "B", "4", "5", "moves") in rows
    assert ("checks/c.py", "T", "512", "513", "dead") in rows
    assert ("checks/c.py: constant claims (no input moves them; compute them, source them with fact(), or say why "
            "they are fixed): bytes_per_elem") in proc.stdout
    assert "perturb: 2 inputs nudged, 1 move claims, 1 dead, 0 failed when nudged; 1 constant claims; 1 fixed " \
           "with a reason; 0 measured; NOT clean" in proc.stdout
    record = load_report(root / "checks" / "perturb.json")   # the book's record, kept in the repository
    assert record is not None and set(record.checked) == {"checks/c.py"} and not record.clean
    assert "checks/c.py" in record.reads["checks/c.py"]


def test_a_measured_value_is_left_out_so_noise_cannot_pass_an_input_as_live(tmp_path: Path) -> None:
    root = _book(tmp_path, """
        import time
        N = given("N", 8)
        t0 = time.perf_counter()
        sum(range(N * 1000))
        value("seconds", time.perf_counter() - t0, unit="s", measured="timed on this machine")
        """, "A sum over [[8|N]] thousand numbers took [[< 10|seconds]] seconds.\n")
    proc = _verify(root, "--perturb")
    rows = {tuple(line.split()[:6]) for line in proc.stdout.splitlines() if line.startswith("checks/c.py  ")}
    assert ("checks/c.py", "N", "8", "9", "measured", "only") in rows, proc.stdout
    assert "1 inputs nudged, 0 move claims, 0 dead, 0 failed when nudged; 0 constant claims; 0 fixed with a " \
           "reason; 1 measured; clean" in proc.stdout
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_record_keeps_other_checks_and_marks_a_changed_one_stale() -> None:
    def one(check: str, digest: str) -> PerturbReport:
        return PerturbReport([GivenRow(check, "B", "4", "5", "moves", ("positions",))], when="today",
                             checked={check: "today"}, reads={check: {check: digest, "src/numbook/check.py": "t"}})

    whole = merge(merge(None, one("checks/a.py", "1")), one("checks/b.py", "2"))
    assert set(whole.checked) == {"checks/a.py", "checks/b.py"} and [r.check for r in whole.rows] == [
        "checks/a.py", "checks/b.py"]
    assert set(merge(whole, one("checks/b.py", "3"), keep={"checks/b.py"}).checked) == {"checks/b.py"}
    now = {"checks/a.py": "1", "checks/b.py": "changed", "src/numbook/check.py": "t"}
    assert stale(whole, lambda reads: [f for f, d in sorted(reads.items()) if now.get(f) != d]) == {
        "checks/b.py": ["checks/b.py"]}


@pytest.mark.slow  # a real build
def test_a_fact_without_a_source_is_an_error_and_a_sourced_fact_shows_its_source(tmp_path: Path) -> None:
    page = "The vocabulary has [[32,000|V]] tokens.\n"
    root = _book(tmp_path, 'fact("vocab", "V")\n', page, facts="""
        vocab:
          value: 32000
          read: 2026-12-02
        """)
    proc = _verify(root)
    assert proc.returncode == 1
    assert ("docs/page.md:2: check 'checks/c.py' raised: numbook.check.FactError: fact 'vocab' in "
            "checks/facts.yml has no source: every number taken from outside names its source "
            "(spec sheet, paper or config file, with its version) and the date it was read") in proc.stderr
    (root / "checks" / "facts.yml").write_text("vocab:\n  value: 32000\n  source: Llama 2 config.json\n"
                                               "  read: 2026-12-02\n", encoding="utf-8")
    assert _verify(root).returncode == 0
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict"], cwd=root, capture_output=True,
                           text=True, timeout=120, check=False)
    assert build.returncode == 0, build.stderr
    html = (root / "site" / "page" / "index.html").read_text(encoding="utf-8")
    assert 'data-source="Llama 2 config.json (read 2026-12-02)"' in html
    assert "source: Llama 2 config.json (read 2026-12-02), recorded by checks/c.py, line 2" in html


def test_digits_typed_into_printed_labels_are_found() -> None:
    src = 'pad = 0.15\nprint("Masking: 15% padding")\nprint(f"Masking: {pad:.0%} padding, fp32, Step 2")\n'
    assert printed_digits(src) == [(2, "Masking: 15% padding", "15")]


def test_a_perturbation_record_goes_stale_on_an_edit_to_a_fact_its_check_read_not_to_another(tmp_path: Path) -> None:
    """The facts file is shared by every check that cites one: the record names the entries a check took through
    ``fact()``, so editing another check's fact leaves this record current, and editing its own makes it stale."""
    from numbook.run.frozen import changed_reads
    from numbook.run.perturb import load_report
    from numbook.run.runner import Runner

    facts = """
        vocab:
          value: 32000
          source: Llama 2 config.json
          read: 2026-12-02
        util:
          value: 0.9
          source: vLLM 0.5 CacheConfig
          read: 2026-12-02
        """
    root = _book(tmp_path, 'V = fact("vocab", "V")\nvalue("bytes", V * 8)\n',
                 "A vocabulary of [[32,000|V]] tokens: [[256,000|bytes]] bytes of int64.\n", facts=facts)
    proc = _verify(root, "--perturb")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = load_report(root / "checks" / "perturb.json")
    assert record is not None
    digest = record.reads["checks/c.py"]["checks/facts.yml"]
    assert digest is not None and digest.startswith("facts[vocab]:")
    runner = Runner(root, "checks", None)

    def stale_files() -> list[str]:
        return changed_reads(record.reads["checks/c.py"], root, runner.file_hash)

    assert stale_files() == []
    facts_yml = root / "checks" / "facts.yml"
    facts_yml.write_text(facts_yml.read_text(encoding="utf-8").replace("0.9", "0.92"), encoding="utf-8")
    assert stale_files() == []                       # another check's fact: this record stays current
    facts_yml.write_text(facts_yml.read_text(encoding="utf-8").replace("32000", "32001"), encoding="utf-8")
    assert stale_files() == ["checks/facts.yml"]     # its own fact: stale
