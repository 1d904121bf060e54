// Provenance of every verified number, for mouse, keyboard and touch readers alike.
//
// A claim in prose is a <span class="nb-claim" title="…" tabindex="0">; a claim inside math is drawn
// by MathJax, and the page carries its provenance in <script type="application/json" class="nb-claims">
// (one entry per math claim: the id MathJax gave its element, the text shown, the hint). On hover the
// browser shows the title; on focus (keyboard) or tap (touch) a small note under the number shows the
// same text, and Escape or a tap elsewhere closes it. A quiz key's hint waits for the answer
// (components.js moves it from data-nb-title to title once the reader has found it).
(function () {
  "use strict";
  var tip = null;
  var owner = null;

  function note() {
    if (!tip) {
      tip = document.createElement("div");
      tip.className = "nb-tip";
      tip.setAttribute("role", "tooltip");
      tip.id = "nb-tip";
      tip.hidden = true;
      document.body.appendChild(tip);
    }
    return tip;
  }

  function hintOf(el) {
    return el.getAttribute("data-nb-tip") || el.getAttribute("title") || "";
  }

  function show(el) {
    var text = hintOf(el);
    if (!text) return;
    var t = note();
    t.textContent = text;
    t.hidden = false;
    var r = el.getBoundingClientRect();
    var left = Math.max(8, Math.min(window.scrollX + r.left, window.scrollX + document.documentElement.clientWidth - t.offsetWidth - 8));
    t.style.left = left + "px";
    t.style.top = (window.scrollY + r.bottom + 6) + "px";
    el.setAttribute("aria-describedby", "nb-tip");
    owner = el;
  }

  function hide() {
    if (tip) tip.hidden = true;
    if (owner) owner.removeAttribute("aria-describedby");
    owner = null;
  }

  function target(node) {
    while (node && node !== document) {
      if (node.nodeType === 1 && node.matches && node.matches(".nb-claim[title], .nb-sanity[title], [data-nb-tip]")) {
        return node;
      }
      node = node.parentNode;
    }
    return null;
  }

  // Math claims: give the element MathJax drew a hint, a focus stop and an SVG <title> for hover.
  function decorateMath() {
    var data = [];
    document.querySelectorAll("script.nb-claims").forEach(function (s) {
      try { data = data.concat(JSON.parse(s.textContent || "[]")); } catch (e) { /* a broken index shows nothing */ }
    });
    data.forEach(function (c) {
      var el = document.getElementById(c.id);
      if (!el || el.getAttribute("data-nb-tip")) return;
      el.setAttribute("data-nb-tip", c.tip);
      el.setAttribute("tabindex", "0");
      el.setAttribute("role", "note");
      el.setAttribute("aria-label", c.shown + ": " + c.tip);
      el.classList.add("nb-math-claim");
      if (el.namespaceURI === "http://www.w3.org/2000/svg") {
        var t = document.createElementNS("http://www.w3.org/2000/svg", "title");
        t.textContent = c.tip;
        el.insertBefore(t, el.firstChild);
      }
    });
  }
  window.numbookDecorateMath = decorateMath;

  document.addEventListener("focusin", function (e) { var el = target(e.target); if (el) show(el); else hide(); });
  document.addEventListener("focusout", function (e) { if (target(e.target) === owner) hide(); });
  document.addEventListener("click", function (e) {
    var el = target(e.target);
    if (el) { show(el); } else if (!(tip && tip.contains(e.target))) { hide(); }
  });
  document.addEventListener("keydown", function (e) { if (e.key === "Escape") hide(); });

  function whenTypeset() {
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      MathJax.startup.promise.then(decorateMath);
    } else {
      decorateMath();
    }
  }
  if (typeof document$ !== "undefined") {
    document$.subscribe(function () { hide(); whenTypeset(); });
  } else if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", whenTypeset);
  } else {
    whenTypeset();
  }
})();
