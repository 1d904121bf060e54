"""What ``mkdocs serve`` keeps from one rebuild to the next in its process: the theme's compiled templates and
the pages' parsed front matter. A rebuild starts from a new configuration (new plugin objects, a new theme
environment) as serve makes it; what is kept must never show a page as it was before an edit."""

from __future__ import annotations

import os
from pathlib import Path

import jinja2
import pytest
from mkdocs.commands.build import build
from mkdocs.config import load_config

import numbook.core.page as page_module
from numbook.core.book import Entry
from numbook.core.lint import used_checks
from numbook.core.page import split_front_matter
from test_build import A01, copy_tiny, edit

pytestmark = pytest.mark.slow


def _rebuild(root: Path) -> None:
    """One of serve's rebuilds: a fresh configuration and plugins, ``--dirty``, into the same site folder."""
    cwd = os.getcwd()
    os.chdir(root)
    try:
        config = load_config(str(root / "mkdocs.yml"), site_dir=str(root / "site"))
        config.plugins.on_startup(command="serve", dirty=True)
        config.strict = False   # a dirty build warns that it is dirty
        build(config, dirty=True)
    finally:
        os.chdir(cwd)


def test_a_rebuild_compiles_no_theme_template_again_and_an_edited_template_shows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = copy_tiny(tmp_path)
    (root / "overrides").mkdir()
    override = root / "overrides" / "main.html"
    override.write_text('{% extends "base.html" %}\n{% block footer %}<p>Footer one</p>{% endblock %}\n',
                        encoding="utf-8")
    cfg = root / "mkdocs.yml"
    cfg.write_text(cfg.read_text(encoding="utf-8").replace(
        "theme: {name: material, font: false}", "theme: {name: material, font: false, custom_dir: overrides}"),
        encoding="utf-8")
    compiled: list[str | None] = []
    original = jinja2.Environment.compile

    def counting(self: jinja2.Environment, source: object, name: str | None = None, *args: object,
                 **kw: object) -> object:
        compiled.append(name)
        return original(self, source, name, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(jinja2.Environment, "compile", counting)
    _rebuild(root)
    first = set(compiled)
    assert {"main.html", "base.html", "404.html"} <= first   # the theme's templates, compiled once
    html = root / "site" / "problems" / "I.1.A01" / "index.html"
    assert "Footer one" in html.read_text(encoding="utf-8")

    compiled.clear()
    edit(root, A01, "## Statement\n", "## Statement\n\nAn edit.\n")
    _rebuild(root)
    assert not {"main.html", "base.html", "404.html"} & set(compiled), compiled
    assert "An edit." in html.read_text(encoding="utf-8")

    compiled.clear()
    override.write_text(override.read_text(encoding="utf-8").replace("Footer one", "Footer two"), encoding="utf-8")
    edit(root, A01, "An edit.", "A second edit.")
    _rebuild(root)
    assert "main.html" in compiled                         # the edited template, compiled again
    assert "base.html" not in compiled
    page = html.read_text(encoding="utf-8")
    assert "Footer two" in page and "Footer one" not in page and "A second edit." in page


def test_front_matter_read_twice_is_parsed_once_and_each_reader_gets_its_own_copy(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    original = page_module.yaml.safe_load

    def counting(text: str) -> object:
        calls.append(text)
        return original(text)

    monkeypatch.setattr(page_module.yaml, "safe_load", counting)
    raw = "---\nid: I.9.Z99\ntags: [a, b]\n---\nBody.\n"
    first = split_front_matter(raw, "p.md")
    first.data["tags"].append("changed by a reader")
    second = split_front_matter(raw, "q.md")
    assert second.data == {"id": "I.9.Z99", "tags": ["a", "b"]}
    assert len(calls) <= 1   # at most once: an earlier test may have parsed the same block

    edited = split_front_matter(raw.replace("Z99", "Z98"), "p.md")
    assert edited.data["id"] == "I.9.Z98"

    bad = "---\nid: [unclosed\n---\nBody.\n"
    for _ in range(2):   # an error is not remembered as a page without front matter
        fm = split_front_matter(bad, "bad.md")
        assert fm.error is not None and fm.error.message.startswith("malformed front matter")


def test_the_checks_a_page_uses_follow_its_check_and_its_text() -> None:
    body = "A claim [[65.5|other:fp32_mb]] MB.\n"
    one = Entry("a.md", "a.md", None, {}, 0, body)
    assert used_checks(one) == {"other.py"}
    named = Entry("b.md", "b.md", None, {}, 0, body)
    named_check = used_checks(named)
    named_check.add("changed by a reader")
    assert used_checks(named) == {"other.py"}
    edited = Entry("a.md", "a.md", None, {}, 0, body.replace("other:", "third:"))
    assert used_checks(edited) == {"third.py"}


def test_compiled_templates_are_never_shared_between_environments_with_other_settings() -> None:
    from numbook.mkdocs.serve import TEMPLATES as _TEMPLATES

    source = {"loop.html": "{% for x in [1, 2, 3] %}{% if x == 3 %}{% break %}{% endif %}{{ x }}{% endfor %}"}
    with_break = jinja2.Environment(loader=jinja2.DictLoader(source), extensions=["jinja2.ext.loopcontrols"],
                                    bytecode_cache=_TEMPLATES)
    assert with_break.get_template("loop.html").render() == "12"
    again = jinja2.Environment(loader=jinja2.DictLoader(source), extensions=["jinja2.ext.loopcontrols"],
                               bytecode_cache=_TEMPLATES)
    assert again.get_template("loop.html").render() == "12"   # the same settings: the code compiled above
    plain = jinja2.Environment(loader=jinja2.DictLoader(source), bytecode_cache=_TEMPLATES)
    with pytest.raises(jinja2.TemplateSyntaxError, match="break"):
        plain.get_template("loop.html")   # no loop controls here: compiled for this environment, and refused
    kept = len(_TEMPLATES.store)
    chooser = jinja2.Environment(loader=jinja2.DictLoader({"a.html": "{{ x }}"}), bytecode_cache=_TEMPLATES,
                                 autoescape=jinja2.select_autoescape(["html"]))
    assert chooser.get_template("a.html").render(x="<b>") == "&lt;b&gt;"
    assert len(_TEMPLATES.store) == kept   # autoescape decided per template by a function: never kept


def _broken(root: Path) -> tuple[Path, str, str, Path]:
    """The tiny book with a cache; its first check, as written and broken; the page that shows it."""
    edit(root, "mkdocs.yml", 'cache_dir: ""', 'cache_dir: ".cache/numbook"')
    check = root / "checks" / "i1_a01_embedding.py"
    good = check.read_text(encoding="utf-8")
    bad = good.replace('d = given("d", 512)\n', 'd = given("d", 512)\nraise RuntimeError("broken")\n')
    return check, good, bad, root / "site" / "problems" / "I.1.A01" / "index.html"


BOX = "check 'checks/i1_a01_embedding.py' raised: RuntimeError: broken"


def test_a_dirty_rebuild_shows_a_failure_served_from_the_cache(tmp_path: Path) -> None:
    """serve keeps the plugin between rebuilds: a page is rebuilt when its check's result is another than the
    one it was built with, though the check did not run (its failure came from the cache)."""
    root = copy_tiny(tmp_path)
    check, good, bad, html = _broken(root)
    check.write_text(bad, encoding="utf-8")
    _rebuild(root)                                   # the failure ran, and is cached
    check.write_text(good, encoding="utf-8")
    _rebuild(root)
    assert BOX not in html.read_text(encoding="utf-8")
    check.write_text(bad, encoding="utf-8")
    _rebuild(root)
    assert BOX in html.read_text(encoding="utf-8")


def test_a_dirty_rebuild_clears_the_box_when_the_check_is_fixed(tmp_path: Path) -> None:
    """Reverting a broken check serves its good result from the cache: the page is rebuilt, the box goes."""
    root = copy_tiny(tmp_path)
    check, good, bad, html = _broken(root)
    _rebuild(root)
    check.write_text(bad, encoding="utf-8")
    _rebuild(root)
    assert BOX in html.read_text(encoding="utf-8")
    check.write_text(good, encoding="utf-8")
    _rebuild(root)
    assert BOX not in html.read_text(encoding="utf-8")


def test_a_dirty_rebuild_rebuilds_a_page_whose_fence_shows_a_check_that_printed_something_else(tmp_path: Path) -> None:
    """The pages a new result changes are found from the book's reports: a page that shows another page's check in
    a ```check path="…" fence, and binds no claim to it, is rebuilt when that check prints something else."""
    root = copy_tiny(tmp_path)
    edit(root, "mkdocs.yml", 'cache_dir: ""', 'cache_dir: ".cache/numbook"')
    fence = '```check path="i1_a01_embedding.py"\n```\n\n'
    edit(root, "problems/I.1.A02.md", "## Check — sanity", fence + "## Check — sanity")
    _rebuild(root)
    _rebuild(root)   # every result from the cache now: nothing but the edit below changes a result
    html = root / "site" / "problems" / "I.1.A02" / "index.html"
    check = root / "checks" / "i1_a01_embedding.py"
    check.write_text(check.read_text(encoding="utf-8") + '\nprint("printed by the edited check")\n', encoding="utf-8")
    _rebuild(root)
    assert "printed by the edited check" in html.read_text(encoding="utf-8")
