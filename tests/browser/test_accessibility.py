"""Accessibility in a real browser: axe-core on every page, in both palettes, with the solutions shut and open.

axe-core comes from npm, as the noxfile's tests session installs it (``.nox/npm/node_modules/axe-core``;
``NUMBOOK_AXE_JS`` names another ``axe.min.js``). Outside CI a missing axe skips; under ``CI=true`` it fails.
Critical and serious violations fail the test; moderate and minor ones are written to a report under the
test's tmp dir (or to ``NUMBOOK_AXE_REPORT``) and summarized on stdout (``pytest -s``) for the record.

Also here: the keyboard paths axe cannot see (the skip link, the closed search) and the search index that
is fetched only when the reader opens search.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
AXE_VERSION = "4.14.1"     # noxfile.py installs this one
AXE_JS = Path(os.environ.get("NUMBOOK_AXE_JS",
                             str(ROOT / ".nox" / "npm" / "node_modules" / "axe-core" / "axe.min.js")))
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]
FAILING = ("critical", "serious")
# Nodes inside MathJax's output: the math is moving to build-time rendering (another change), so its
# violations are reported apart. They are not excluded: they fail the test like any other.
MATH = ("mjx-container", "mjx-")


@pytest.fixture(scope="module")
def axe_js() -> Path:
    if not AXE_JS.is_file():
        assert os.environ.get("CI") != "true", "CI must run axe: `nox -s tests` installs axe-core from npm"
        pytest.skip(f"axe-core is not installed: `npm install --prefix .nox/npm axe-core@{AXE_VERSION}` "
                    f"(or set NUMBOOK_AXE_JS to an axe.min.js); looked for {AXE_JS}")
    return AXE_JS


def _pages(site_dir: Path) -> list[str]:
    """Every page of the site, as a path under the root ('' for the home page), and the 404 page."""
    pages = sorted("" if p.parent == site_dir else f"{p.parent.relative_to(site_dir).as_posix()}/"
                   for p in site_dir.rglob("index.html"))
    return [p for p in pages if not p.startswith(("assets/", "search/"))] + ["404.html"]


def _site_pages() -> list[str]:
    """The pages to audit, known at collection: those of NUMBOOK_SITE_DIR, else the Markdown sources' pages."""
    prebuilt = os.environ.get("NUMBOOK_SITE_DIR")
    if prebuilt and Path(prebuilt, "index.html").is_file():
        return _pages(Path(prebuilt))
    pages = {"", "404.html", "report/"}     # the plugin's run report (numbook's `report` option, report.md)
    for md in [*ROOT.joinpath("docs").rglob("*.md"), *ROOT.joinpath("problems").glob("*.md"),
               *ROOT.joinpath("docs").rglob("*.ipynb")]:
        rel = md.relative_to(ROOT / ("problems" if md.parent.name == "problems" else "docs")).with_suffix("")
        if ".ipynb_checkpoints" in rel.parts:
            continue
        prefix = "problems/" if md.parent.name == "problems" else ""
        path = prefix + ("" if rel.name == "index" else rel.name + "/")
        pages.add((prefix + rel.parent.as_posix() + "/" + path.removeprefix(prefix)).lstrip("./")
                  if rel.parent.as_posix() != "." else path)
    return sorted(pages)


def _settle(page: Any) -> None:
    """The page's scripts done: the tool's components and MathJax's first typeset."""
    page.wait_for_function("() => window.numbookComponents !== undefined")
    page.evaluate("() => window.MathJax && MathJax.startup && MathJax.startup.promise")


def _axe(page: Any, axe_js: Path, context: Any = None) -> list[dict[str, Any]]:
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(axe_js))
    result: list[dict[str, Any]] = page.evaluate(
        """([tags, context]) => axe.run(context || document,
                 {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']})
                 .then(r => r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                        nodes: v.nodes.map(n => ({target: n.target.join(' '), impact: n.impact,
                                                  summary: (n.failureSummary || '').slice(0, 300)}))})))""",
        [AXE_TAGS, context])
    return result


def _is_math(selector: str) -> bool:
    return any(m in selector for m in MATH)


def _report(rows: list[dict[str, Any]], impacts: tuple[str, ...]) -> list[str]:
    """One entry per rule and impact: how many nodes on how many page states, the first pages and selectors."""
    by_rule: dict[tuple[str, str, bool], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        for n in r["nodes"]:
            impact = n["impact"] or r["impact"]
            if impact in impacts:
                by_rule[(r["id"], impact, _is_math(n["target"]))].append({**r, "node": n})
    lines = []
    for (rule, impact, math), hits in sorted(by_rule.items(), key=lambda kv: (kv[0][2], kv[0][0])):
        pages = sorted({f"{h['page'] or '/'} ({h['scheme']}, solutions {h['state']})" for h in hits})
        sels = list(dict.fromkeys(h["node"]["target"] for h in hits))[:3]
        lines.append(f"{'[math, MathJax: being replaced] ' if math else ''}{rule} ({impact}): {len(hits)} node(s)"
                     f" on {len(pages)} page state(s): {hits[0]['help']}\n    pages: {', '.join(pages[:4])}"
                     f"{' ...' if len(pages) > 4 else ''}\n    first nodes: {' | '.join(sels)}"
                     f"\n    {hits[0]['node']['summary']}")
    return lines


class Auditor:
    """One browser context and one page per palette, reused for every page of the site; rows kept for the summary."""

    def __init__(self, browser: Any, base_url: str, axe_js: Path, scheme: str, report: Path) -> None:
        self.context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme=scheme)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.base_url, self.axe_js, self.scheme, self.report = base_url, axe_js, scheme, report
        self.rows: list[dict[str, Any]] = []
        self.pages = 0
        self.start = time.monotonic()

    def audit(self, path: str) -> list[dict[str, Any]]:
        """axe on one page with its solutions shut, then on what opening every <details> reveals."""
        page = self.page
        page.goto(self.base_url + path, wait_until="load")
        if path != "404.html":
            _settle(page)
        rows = [{"page": path, "state": "shut", "scheme": self.scheme, **v} for v in _axe(page, self.axe_js)]
        opened = page.evaluate("() => { const d = [...document.querySelectorAll('details:not([open])')];"
                               " d.forEach(e => { e.open = true; }); return d.length; }")
        if opened:
            # the page's own handlers of the toggle events run first, as they would for a reader's click
            page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
            rows += [{"page": path, "state": "open", "scheme": self.scheme, **v}
                     for v in _axe(page, self.axe_js, {"include": [["details"]]})]
        self.rows += rows
        self.pages += 1
        return rows

    def close(self) -> None:
        self.context.close()
        self.report.write_text(json.dumps(self.rows, indent=1), encoding="utf-8")
        rest = _report(self.rows, ("moderate", "minor"))
        print(f"\naxe {AXE_VERSION} ({self.scheme}): {self.pages} pages in {time.monotonic() - self.start:.0f} s;"
              f" every violation in {self.report}")
        print("moderate and minor:\n  " + "\n  ".join(rest) if rest else "moderate and minor: none")


@pytest.fixture(scope="module", params=["light", "dark"])
def auditor(request: pytest.FixtureRequest, browser: Any, base_url: str, axe_js: Path,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Auditor]:
    folder = Path(os.environ.get("NUMBOOK_AXE_REPORT", "") or tmp_path_factory.mktemp("axe"))
    folder.mkdir(parents=True, exist_ok=True)
    a = Auditor(browser, base_url, axe_js, request.param, folder / f"axe-{request.param}-{os.getpid()}.json")
    yield a
    a.close()
    assert a.errors == [], f"script errors while auditing ({request.param}): {a.errors}"


@pytest.mark.parametrize("path", _site_pages())
def test_axe_finds_nothing_critical_or_serious(auditor: Auditor, site_dir: Path, path: str) -> None:
    if path != "404.html" and not (site_dir / path / "index.html").is_file():
        pytest.fail(f"{path}: no such page in the built site {site_dir}")
    failing = _report(auditor.audit(path), FAILING)
    assert not failing, (f"axe ({auditor.scheme}) on {path or '/'}: critical or serious violations:\n  "
                         + "\n  ".join(failing))


def test_the_audit_covers_every_page_of_the_site(site_dir: Path) -> None:
    """The pages parametrized at collection (from the sources when no built site is named) are the site's."""
    assert set(_site_pages()) == set(_pages(site_dir)), set(_site_pages()) ^ set(_pages(site_dir))


def _focused(page: Any) -> dict[str, Any]:
    result: dict[str, Any] = page.evaluate(
        "() => { const e = document.activeElement;"
        " return {tag: e.tagName, cls: String(e.className), inArticle: !!e.closest('article'),"
        " visible: e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden'"
        " && Number(getComputedStyle(e).opacity) > 0}; }")
    return result


@pytest.mark.parametrize("path", ["problems/I.4.B07/", "lessons/lesson-2/"])
def test_the_skip_link_lands_in_the_content_every_time(tab: Any, path: str) -> None:
    landed = []
    for _ in range(12):
        page = tab.open(path)
        page.keyboard.press("Tab")
        first = _focused(page)
        assert "md-skip" in first["cls"], f"the first Tab stop is the skip link, not {first}"
        page.keyboard.press("Enter")
        page.keyboard.press("Tab")
        landed.append(_focused(page)["inArticle"])
    assert landed.count(True) == 12, f"Tab after the skip link landed in the article {landed.count(True)} of 12 times"


@pytest.mark.parametrize("width", [1280, 390])
def test_the_closed_search_is_no_hidden_tab_stop(browser: Any, base_url: str, width: int) -> None:
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.goto(base_url + "problems/I.4.B07/", wait_until="load")
    page.wait_for_function("() => window.numbookComponents !== undefined")
    stops = []
    for _ in range(40):
        page.keyboard.press("Tab")
        stops.append(_focused(page) | {"search": page.evaluate(
            "() => !!document.activeElement.closest('.md-search') && !document.getElementById('__search').checked")})
    context.close()
    in_search = [s for s in stops if s["search"]]
    assert [s for s in in_search if not s["visible"]] == [], f"hidden Tab stops of the closed search: {in_search}"
    # at 1280 the search input sits in the header and is a Tab stop (focus opens search); at 390 nothing of
    # the closed search is
    assert all(s["cls"].startswith("md-search__input") for s in in_search), f"closed search's Tab stops: {in_search}"


def test_the_search_index_loads_only_when_the_reader_opens_search(tab: Any) -> None:
    requests: list[str] = []
    tab.page.on("request", lambda r: requests.append(r.url))
    page = tab.open("problems/I.4.B07/")
    page.wait_for_timeout(500)
    assert not [u for u in requests if "search_index" in u], "a page load fetched the search index"
    page.keyboard.press("/")                           # the search shortcut
    page.wait_for_function("() => document.activeElement.classList.contains('md-search__input')")
    page.keyboard.type("cross entropy")
    page.locator(".md-search-result__item").first.wait_for(state="visible", timeout=15000)
    assert len([u for u in requests if u.endswith("search/search_index.json")]) == 1
    # a second page load does not fetch it until the reader clicks into the search input
    requests.clear()
    page2 = tab.open("lessons/lesson-2/")
    page2.wait_for_timeout(300)
    assert not [u for u in requests if "search_index" in u]
    page2.locator(".md-search__input").click()                # focus of the input, by the mouse
    page2.wait_for_function("() => window.numbookSearchIndex && window.numbookSearchIndex.requested")
    page2.wait_for_timeout(300)
    assert [u for u in requests if u.endswith("search/search_index.json")]


def test_a_notebook_cell_that_scrolls_takes_focus_and_shows_it(tab: Any) -> None:
    page = tab.page
    page.goto(tab.base_url + "lessons/notebooks/lesson-5/", wait_until="load")
    page.wait_for_function("() => document.querySelector('.nb-scroller') !== null")
    scroller = page.locator(".nb-scroller").first
    assert scroller.evaluate("e => e.scrollWidth > e.clientWidth && e.tabIndex === 0")
    scroller.focus()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")             # reached by the keyboard, so :focus-visible applies
    ring = scroller.evaluate("e => [document.activeElement === e, getComputedStyle(e).outlineStyle,"
                             " parseFloat(getComputedStyle(e).outlineWidth)]")
    assert ring[0] and ring[1] == "solid" and ring[2] >= 2


def test_on_a_phone_the_menu_button_opens_the_navigation_by_keyboard_and_a_closed_drawer_has_no_tab_stops(
        browser: Any, base_url: str) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.goto(base_url + "problems/I.4.B07/", wait_until="load")
    page.wait_for_function("() => window.numbookComponents !== undefined")
    in_drawer = "() => !!document.activeElement.closest('.md-sidebar--primary')"
    stops = []
    for _ in range(30):                                   # closed: Tab never enters the drawer
        page.keyboard.press("Tab")
        stops.append(page.evaluate(in_drawer))
        if page.evaluate("() => document.activeElement.matches('.md-header label[for=\"__drawer\"]')"):
            break
    assert not any(stops), "a Tab stop inside the closed navigation drawer"
    assert page.evaluate("() => document.activeElement.getAttribute('aria-expanded')") == "false", \
        "the menu button is no Tab stop (or does not say whether the navigation is open)"
    page.keyboard.press("Enter")                           # opens it, and the focus goes into it
    assert page.evaluate("() => document.getElementById('__drawer').checked")
    assert page.evaluate(in_drawer)
    page.wait_for_timeout(300)
    assert page.locator(".md-sidebar--primary").evaluate("e => e.getBoundingClientRect().left >= 0")   # on screen
    page.keyboard.press("Escape")                          # closes it, the focus back on the button
    assert not page.evaluate("() => document.getElementById('__drawer').checked")
    assert page.evaluate("() => document.activeElement.getAttribute('aria-expanded')") == "false"
    context.close()


def test_search_finds_a_word_that_stands_after_a_bracket(tab: Any) -> None:
    # "(Touvron et al." in II.2.A03's Given: the theme's default separator made "(touvron" the word
    page = tab.open("lessons/lesson-2/")
    page.keyboard.press("/")
    page.wait_for_function("() => document.activeElement.classList.contains('md-search__input')")
    page.keyboard.type("Touvron")
    page.locator(".md-search-result__item").first.wait_for(state="visible", timeout=15000)
    links = page.locator(".md-search-result__item a").evaluate_all("els => els.map(e => e.getAttribute('href'))")
    assert any("II.2.A03" in (h or "") for h in links), links
