// Provenance of every verified number, for mouse, keyboard and touch readers alike.
//
// A claim in prose is a <span class="nb-claim" title="…" tabindex="0">; a claim inside math is a <g> of the
// equation's SVG, drawn at build time (numbook.html.mathrender), that carries its hint as data-nb-tip, an
// SVG <title> and a spoken aria-label. On hover the browser shows the title; on focus (keyboard) or tap
// (touch) a small note under the number shows the same text, and Escape or a tap elsewhere closes it. A quiz
// key's hint waits for the answer (components.js moves it from data-nb-title to title once the reader has
// found it).
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


  document.addEventListener("focusin", function (e) { var el = target(e.target); if (el) show(el); else hide(); });
  document.addEventListener("focusout", function (e) { if (target(e.target) === owner) hide(); });
  document.addEventListener("click", function (e) {
    var el = target(e.target);
    if (el) { show(el); } else if (!(tip && tip.contains(e.target))) { hide(); }
  });
  document.addEventListener("keydown", function (e) { if (e.key === "Escape") hide(); });

  if (typeof document$ !== "undefined") document$.subscribe(hide);   // instant navigation: a new page
})();
