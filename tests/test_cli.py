"""`numbook lint` (and `numbook verify`, which includes it): exact messages for each structural fault."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from numbook.cli import main
from numbook.mkdocs.config import ConfigError, load_layout

TINY = Path(__file__).parent / "fixtures" / "tiny"
A01, A02 = "problems/I.1.A01.md", "problems/I.1.A02.md"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    dst = tmp_path / "tiny"
    shutil.copytree(TINY, dst, ignore=shutil.ignore_patterns("site", ".cache", "__pycache__"))
    return dst


def edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {rel}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def lint(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    rc = main(["lint", "--root", str(root)])
    out = capsys.readouterr()
    return rc, out.err.splitlines(), out.out


def test_a_clean_book_lints_clean(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert lint(root, capsys) == (0, [], "lint: 0 faults\n")


def test_an_unused_check(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (root / "checks/i1_a09_orphan.py").write_text("print(1)\n", encoding="utf-8")
    (root / "checks/_helpers.py").write_text("X = 1\n", encoding="utf-8")          # a helper: exempt
    (root / "checks/frozen").mkdir()
    (root / "checks/frozen/gpu_thing.py").write_text("", encoding="utf-8")        # frozen/: exempt
    assert lint(root, capsys) == (1, [
        "checks/i1_a09_orphan.py:1: no page uses this check: name it in a page's 'check:', bind a claim to it "
        "as [[…|i1_a09_orphan:name]], or rename it _i1_a09_orphan.py if it is a helper"
    ], "lint: 1 faults\n")


def test_a_check_used_only_through_a_qualified_claim_or_a_check_fence_is_used(
        root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (root / "checks/i1_a09_other.py").write_text("print(1)\n", encoding="utf-8")
    (root / "checks/i1_a10_shown.py").write_text("print(1)\n", encoding="utf-8")
    edit(root, A02, "## Where this breaks", 'It also reads [[3|i1_a09_other:n]].\n\n```check path="i1_a10_shown.py"\n'
                                            "```\n\n## Where this breaks")
    assert lint(root, capsys)[1] == []


def test_a_draws_on_target_that_does_not_exist(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit(root, A02, "draws_on: [I.1.A01]", "draws_on: [I.1.A09]")
    assert lint(root, capsys)[:2] == (1, [
        "problems/I.1.A02.md:5: draws on 'I.1.A09', which is no problem in this book"])


def test_a_duplicate_id(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit(root, A02, "id: I.1.A02", "id: I.1.A01")
    assert "problems/I.1.A02.md:2: problem ID 'I.1.A01' is also used by problems/I.1.A01.md" in lint(root, capsys)[1]


def test_a_malformed_id(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit(root, A02, "id: I.1.A02", "id: I.1.A2")
    assert lint(root, capsys)[1] == [
        "problems/I.1.A02.md:2: front matter 'id': 'I.1.A2' is not a problem ID like I.4.B07"]


def test_a_file_not_named_after_its_id(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (root / A02).rename(root / "problems/I.1.A2.md")
    assert lint(root, capsys)[1] == [
        "problems/I.1.A2.md:2: problem 'I.1.A02' is in I.1.A2.md: name the file I.1.A02.md"]


def test_a_missing_section_and_sections_out_of_order(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit(root, A01, "## Variation\n", "## Varied\n")
    edit(root, A01, "## Find\n", "## Find-it\n")
    edit(root, A01, "## Strategy\n", "## Strategy-x\n")
    assert lint(root, capsys)[1] == [
        "problems/I.1.A01.md:8: missing section '## Find'",
        "problems/I.1.A01.md:8: missing section '## Strategy'",
        "problems/I.1.A01.md:8: missing section '## Variation'",
    ]
    edit(root, A01, "## Given\n", "## Given-y\n")
    edit(root, A01, "## Statement\n", "## Given\n\n## Statement\n")
    assert "problems/I.1.A01.md:8: sections out of order: Statement, Given, Find, Strategy, Solution, Answer" \
        in lint(root, capsys)[1]


def test_a_missing_front_matter_field(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit(root, A02, "title: ", "titel: ")
    assert lint(root, capsys)[1] == [
        "problems/I.1.A02.md:1: front matter 'title': Required configuration not provided.",
        "problems/I.1.A02.md:3: front matter 'titel': Unrecognised configuration name: titel",
    ]


def test_a_page_under_problems_that_is_no_problem(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (root / "problems/notes.md").write_text("# Notes\n", encoding="utf-8")
    assert lint(root, capsys)[1] == [
        "problems/notes.md:1: a page under problems/ must be a problem page: its front matter has no 'id' "
        "(and needs 'title' and 'check')"
    ]


def test_verify_includes_lint_and_reports_a_shared_fault_once(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (root / "checks/i1_a09_orphan.py").write_text("print(1)\n", encoding="utf-8")
    edit(root, A01, "## Variation\n", "## Varied\n")
    assert main(["verify", "--root", str(root), "--no-cache"]) == 1
    out = capsys.readouterr()
    assert out.err.splitlines() == [
        "problems/I.1.A01.md:8: missing section '## Variation'",
        "checks/i1_a09_orphan.py:1: no page uses this check: name it in a page's 'check:', bind a claim to it "
        "as [[…|i1_a09_orphan:name]], or rename it _i1_a09_orphan.py if it is a helper",
    ]
    assert out.out.splitlines()[-1].startswith("2 checks, 13 claims verified, 2 faults in ")


# -- numbook verify: progress, the cache, the configuration ----------------------------------------
def test_verify_reports_progress_on_stderr_as_each_check_finishes(root: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--root", str(root), "--no-cache", "--progress", "--jobs", "1"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert [re.sub(r"\d+\.\d\d s", "T", ln) for ln in err] == [
        "[1/2] checks/i1_a01_embedding.py ok T (ran) · still running: i1_a02_reuse",
        "[2/2] checks/i1_a02_reuse.py ok T (ran)",
    ] or [re.sub(r"\d+\.\d\d s", "T", ln) for ln in err] == [
        "[1/2] checks/i1_a01_embedding.py ok T (ran)",
        "[2/2] checks/i1_a02_reuse.py ok T (ran)",
    ]


def test_verify_prunes_cache_entries_no_check_reaches(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit(root, "mkdocs.yml", 'cache_dir: ""', 'cache_dir: ".cache/numbook"')
    assert main(["verify", "--root", str(root)]) == 0
    cache = root / ".cache/numbook"
    assert len(list(cache.glob("*.json"))) == 2
    (cache / "0123456789abcdef0123.json").write_text("{}", encoding="utf-8")     # a check that is gone
    capsys.readouterr()
    assert main(["verify", "--root", str(root)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-2] == "cache: pruned 1 entries that no check of this build reaches"
    assert "cache" in out[2] and "cache" in out[1]                                # both served from the cache
    assert len(list(cache.glob("*.json"))) == 2


def test_the_layout_is_read_by_mkdocs_and_a_bad_plugin_option_is_an_error(
        root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    layout = load_layout(root)
    assert (layout.docs_dir, layout.problems_dir, layout.checks_dir, layout.cache_dir, layout.timeout,
            layout.jobs) == ("docs", "problems", "checks", None, 20.0, 0)
    edit(root, "mkdocs.yml", "timeout: 20", 'timeout: "soon"')
    assert main(["verify", "--root", str(root)]) == 2
    assert capsys.readouterr().err == (
        "numbook verify: mkdocs.yml: Config value 'plugins': Plugin 'numbook' option 'timeout': Expected type: "
        "(<class 'int'>, <class 'float'>) but received: <class 'str'>\n")
    edit(root, "mkdocs.yml", 'timeout: "soon"', "timout: 20")
    with pytest.raises(ConfigError, match="Plugin 'numbook' option 'timout'"):
        load_layout(root)


# -- numbook run -----------------------------------------------------------------------------------
def test_run_one_check_shows_its_output_and_records(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "checks/i1_a02_reuse.py", "--root", str(root)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:5] == [
        "two tables 131.072 MB",
        "kind    name      value                                     line",
        "input   tables    2                                         5",
        "value   total_mb  131.072                                   6",
        "sanity  linear    ok: memory grows linearly with the count  8",
    ]
    assert out[5].startswith("checks/i1_a02_reuse.py: ok in ") and out[5].endswith("ran for this build")
    assert out[6] == "read: checks/i1_a02_reuse.py"


def test_run_lists_a_measured_values_interval_and_a_measured_value_without_one(
        root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (root / "checks/i1_a09_timed.py").write_text(
        "from numbook.check import estimate, value\n"
        "estimate('p99_ms', [41.0, 39.5, 44.2, 40.1, 42.3], n=480, repeated='seeds', measured='served here')\n"
        "value('t_ms', 3.2, measured='timed here')\n", encoding="utf-8")
    assert main(["run", "i1_a09_timed.py", "--root", str(root)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [" ".join(line.split()) for line in out[:3]] == [
        "kind name value line",
        "value p99_ms 41.42 (95% CI 39.0881–43.7519, n = 480, 5 seeds: 95% t interval over 5 seeds) 2",
        "value t_ms 3.2 (measured, no interval) 3"]


def test_run_a_failing_check_exits_non_zero_with_its_traceback(root: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    (root / "checks/i1_a09_bad.py").write_text("x = 1\nraise RuntimeError('boom')\n", encoding="utf-8")
    assert main(["run", "i1_a09_bad.py", "--root", str(root)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-2:] == ["RuntimeError: boom", "check 'checks/i1_a09_bad.py' raised: RuntimeError: boom"]
    assert f'  File "{root / "checks/i1_a09_bad.py"}", line 2, in <module>' in err


# -- verify and the build agree: quick checks, the Markdown extension ------------------------------------
LESSON = "docs/lesson.md"
QUIZ = """# A lesson

/// quiz | How many MB does the table take in fp32?
    answer: i1_a01_embedding:fp32_mb
- [ ] [[32.8|i1_a01_embedding:bf16_mb]]
    That is bf16, two bytes an element.
- [x] [[65.5|i1_a01_embedding:fp32_mb]]
    Four bytes an element.
///
"""


def verify_faults(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """``numbook verify``'s exit status and its faults on the lesson (the tiny book's own pages aside)."""
    rc = main(["verify", "--root", str(root)])
    faults = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith(LESSON)]
    return (rc if faults else 0), faults


def build_faults(root: Path, rel: str) -> list[str]:
    """The faults the build's Markdown conversion reports for one page (the extensions of a lesson)."""
    import markdown

    from numbook.core.verify import PageContext
    from numbook.html.extension import NumbookExtension
    from numbook.run.runner import Runner

    runner = Runner(root, "checks", None)
    ext = NumbookExtension(context=PageContext(rel, None, root=root), results=runner)
    md = markdown.Markdown(extensions=[ext, "numbook.components", "pymdownx.superfences", "attr_list", "md_in_html"])
    md.convert((root / rel).read_text(encoding="utf-8"))
    return [str(d) for d in ext.session.reporter.faults if d.path == rel]


def test_a_quiz_key_moved_to_a_wrong_option_fails_verify_and_the_build(
        root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (root / LESSON).write_text(QUIZ, encoding="utf-8")
    assert verify_faults(root, capsys) == (0, [])
    assert build_faults(root, LESSON) == []
    moved = QUIZ.replace("- [ ] [[32.8", "- [x] [[32.8").replace("- [x] [[65.5", "- [ ] [[65.5")
    (root / LESSON).write_text(moved, encoding="utf-8")
    fault = ("docs/lesson.md:5: /// quiz: the option marked [x], '32.8', is not the answer: the answer "
             "i1_a01_embedding:fp32_mb = 65.536 is option 2, '65.5'; mark that one [x]")
    assert verify_faults(root, capsys) == (1, [fault])
    assert build_faults(root, LESSON) == [fault]


@pytest.mark.parametrize("marks", [("[x]", "[x]"), ("[ ]", "[ ]")])
def test_two_or_no_marked_options_fail_verify_as_they_fail_the_build(
        root: Path, capsys: pytest.CaptureFixture[str], marks: tuple[str, str]) -> None:
    page = QUIZ.replace("- [ ] [[32.8", f"- {marks[0]} [[32.8").replace("- [x] [[65.5", f"- {marks[1]} [[65.5")
    (root / LESSON).write_text(page, encoding="utf-8")
    n = 2 if marks[0] == "[x]" else 0
    fault = f"docs/lesson.md:3: /// quiz: {n} options are marked correct; mark exactly one with '[x]'"
    assert verify_faults(root, capsys) == (1, [fault])
    assert build_faults(root, LESSON) == [fault]


def test_a_quiz_key_that_is_a_value_must_be_named_as_the_answer(
        root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (root / LESSON).write_text(QUIZ.replace("    answer: i1_a01_embedding:fp32_mb\n", ""), encoding="utf-8")
    fault = ("docs/lesson.md:6: /// quiz: the key '65.5' is the value i1_a01_embedding:fp32_mb: name it in the "
             "block's header as 'answer: i1_a01_embedding:fp32_mb', so the key is tied to the check and a moved "
             "[x] fails")
    assert verify_faults(root, capsys) == (1, [fault])
    assert build_faults(root, LESSON) == [fault]


def test_a_book_without_the_numbook_markdown_extension_fails_verify_as_it_fails_the_build(
        root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit(root, "mkdocs.yml", "markdown_extensions:\n  - numbook\n", "markdown_extensions:\n")
    assert main(["verify", "--root", str(root)]) == 2
    assert capsys.readouterr().err == ("numbook verify: mkdocs.yml: the numbook plugin needs the 'numbook' Markdown "
                                       "extension in markdown_extensions\n")
    with pytest.raises(ConfigError, match="the numbook plugin needs the 'numbook' Markdown extension"):
        load_layout(root)
