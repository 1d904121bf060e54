/* Keyboard and loading fixes for Material's templates (the site's overrides; loaded before Material's bundle).

   1. The search index (search/search_index.json, about 1 MB) is fetched only when the reader opens search.
      Material's bundle requests it with XMLHttpRequest at start-up on every page; here that request's
      send() is held until the reader clicks the search button, presses one of the search shortcuts
      (/, s, f), focuses the search input, or lands on a page with a query (?q=). The bundle's search
      then proceeds exactly as it would have: the request is only late.
   2. The skip link moves the keyboard focus to the content, not only the view: the next Tab lands inside
      the article (Material's instant navigation scrolls to the target but leaves the focus behind).
   3. A region of the content that scrolls and holds nothing focusable takes focus (tabindex=0, with a
      visible ring: numbook.css), so a keyboard reader can scroll it; checked again when the page changes
      (instant navigation), when a <details> opens, and when the window resizes.
   4. Each code block's toolbar (a <nav> holding its copy button) has a name of its own. */
(function () {
  "use strict";

  /* 1. the search index, on demand */
  var INDEX = /\/search\/search_index\.json(?:[?#]|$)/;
  var open = XMLHttpRequest.prototype.open;
  var send = XMLHttpRequest.prototype.send;
  var held = [];
  var released = false;
  XMLHttpRequest.prototype.open = function (method, url) {
    this.nbSearchIndex = INDEX.test(String(url));
    return open.apply(this, arguments);
  };
  XMLHttpRequest.prototype.send = function () {
    if (this.nbSearchIndex && !released) {
      held.push([this, arguments]);
      return undefined;
    }
    return send.apply(this, arguments);
  };
  function release() {
    if (released) return;
    released = true;
    held.splice(0).forEach(function (h) { send.apply(h[0], h[1]); });
  }
  window.numbookSearchIndex = {
    get requested() { return released; },
    release: release,
  };
  function editable(el) {
    return el instanceof HTMLElement && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  }
  document.addEventListener("keydown", function (ev) {
    if (!ev.ctrlKey && !ev.metaKey && !ev.altKey && /^[/sSfF]$/.test(ev.key) && !editable(ev.target)) release();
  }, true);
  document.addEventListener("focusin", function (ev) {
    if (ev.target instanceof Element && ev.target.closest(".md-search")) release();
  }, true);
  document.addEventListener("click", function (ev) {
    if (ev.target instanceof Element && ev.target.closest('label[for="__search"], .md-search')) release();
  }, true);
  document.addEventListener("change", function (ev) {
    if (ev.target instanceof HTMLInputElement && ev.target.id === "__search" && ev.target.checked) release();
  }, true);
  if (new URLSearchParams(location.search).has("q")) release();

  /* 2. the skip link moves the focus */
  window.addEventListener("click", function (ev) {
    var link = ev.target instanceof Element ? ev.target.closest("a.md-skip") : null;
    if (!link || !link.hash) return;
    var target = document.getElementById(decodeURIComponent(link.hash.slice(1)));
    if (!target) return;
    ev.preventDefault();
    ev.stopPropagation();
    if (!target.hasAttribute("tabindex")) target.setAttribute("tabindex", "-1");
    target.focus();
  }, true);

  /* 3. scrollers take focus */
  var FOCUSABLE = "a[href], button, input, select, textarea, summary, [tabindex]";
  function scrollers() {
    var root = document.querySelector(".md-content");
    if (!root) return;
    root.querySelectorAll("pre, div, table, code, .md-typeset__scrollwrap").forEach(function (el) {
      if (el.closest("mjx-container")) return;
      var wide = el.scrollWidth > el.clientWidth + 1, tall = el.scrollHeight > el.clientHeight + 1;
      if (!wide && !tall) return;
      var style = getComputedStyle(el);
      var scrolls = (wide && /auto|scroll/.test(style.overflowX)) || (tall && /auto|scroll/.test(style.overflowY));
      if (!scrolls || el.hasAttribute("tabindex") || el.querySelector(FOCUSABLE)) return;
      el.setAttribute("tabindex", "0");
      el.classList.add("nb-scroller");
    });
  }
  /* 4. the copy button's <nav> of each code block (made by Material's bundle) is a landmark: each gets its
        own name, so that the landmarks of a page with several code blocks are told apart */
  function codeNavs() {
    document.querySelectorAll("nav.md-code__nav").forEach(function (nav, i) {
      if (!nav.hasAttribute("aria-label")) nav.setAttribute("aria-label", "Code block " + (i + 1));
    });
  }
  /* 5. the navigation drawer on a narrow screen (below Material's 76.25em it slides in from the side): its menu
        button is a Tab stop that opens it with Enter or Space, and names whether it is open; while it is closed
        its links are inert (no Tab stop in a drawer no one sees); Escape closes it and gives the button the focus */
  var NARROW = window.matchMedia("(max-width: 76.234375em)");
  var MENU = '.md-header label[for="__drawer"]';
  function drawer() {
    var toggle = document.getElementById("__drawer");
    if (!toggle) return;
    var button = document.querySelector(MENU);
    if (button) {
      button.setAttribute("role", "button");
      button.setAttribute("tabindex", "0");
      if (!button.hasAttribute("aria-label")) button.setAttribute("aria-label", "Navigation");
      button.setAttribute("aria-expanded", String(toggle.checked));
    }
    var sidebar = document.querySelector(".md-sidebar--primary");
    if (sidebar) {
      if (NARROW.matches && !toggle.checked) sidebar.setAttribute("inert", "");
      else sidebar.removeAttribute("inert");
    }
  }
  function setDrawer(open) {
    var toggle = document.getElementById("__drawer");
    if (!toggle || toggle.checked === open) return;
    toggle.checked = open;
    toggle.dispatchEvent(new Event("change", { bubbles: true }));   /* Material's own script follows the toggle */
  }
  document.addEventListener("keydown", function (ev) {
    var onMenu = ev.target instanceof Element && ev.target.matches(MENU);
    if (onMenu && (ev.key === "Enter" || ev.key === " ")) {
      ev.preventDefault();
      setDrawer(!document.getElementById("__drawer").checked);
      if (document.getElementById("__drawer").checked) {
        var first = document.querySelector(".md-sidebar--primary a[href]");
        if (first) first.focus();
      }
    } else if (ev.key === "Escape" && NARROW.matches) {
      var toggle = document.getElementById("__drawer");
      if (toggle && toggle.checked) {
        setDrawer(false);
        var button = document.querySelector(MENU);
        if (button) button.focus();
      }
    }
  }, true);
  document.addEventListener("change", function (ev) {
    if (ev.target instanceof HTMLInputElement && ev.target.id === "__drawer") drawer();
  }, true);
  if (NARROW.addEventListener) NARROW.addEventListener("change", drawer);

  function pageChanged() {
    scrollers();
    codeNavs();
    drawer();
  }
  function watch() {
    pageChanged();
    if (window.document$ && typeof window.document$.subscribe === "function") {
      window.document$.subscribe(function () { requestAnimationFrame(pageChanged); });   /* the math is in the HTML */
    }
    document.addEventListener("toggle", function () { requestAnimationFrame(scrollers); }, true);
    var timer = 0;
    window.addEventListener("resize", function () { clearTimeout(timer); timer = setTimeout(scrollers, 200); });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", watch);
  else watch();
})();
