/*
 * numbook components: quick checks, the shape debugger and your-turn boxes.
 *
 * The markup is written at build time by src/numbook/components (Python-Markdown blocks)
 * and is complete without this file: every explanation, hint and model answer is on the
 * page. This file adds the interaction. It makes no network request and needs no library.
 *
 * Material's instant navigation swaps the page content without reloading scripts and then
 * emits on its `document$` observable, so every component is initialised from there, once
 * per element (marked with data-nb-ready).
 */
(function () {
  "use strict";

  if (window.numbookComponents) return; // loaded twice (a notebook page can do that)

  var READY = "data-nb-ready";

  function each(root, selector, init) {
    root.querySelectorAll(selector).forEach(function (el) {
      if (el.hasAttribute(READY)) return;
      el.setAttribute(READY, "");
      try {
        init(el);
      } catch (err) {
        console.error("numbook: could not initialise", selector, err);
      }
    });
  }

  function make(tag, className, text) {
    var el = document.createElement(tag);
    if (className) el.className = className;
    if (text !== undefined) el.textContent = text;
    return el;
  }

  /* ---------------------------------------------------------------- quick check */

  function initQuiz(quiz) {
    var feedback = quiz.querySelector(".nb-quiz__feedback");
    var options = Array.prototype.slice.call(quiz.querySelectorAll(".nb-quiz__option"));
    var pending = null; // the feedback about to be shown; a quicker second pick replaces it
    quiz.classList.add("is-ready");

    options.forEach(function (option) {
      var button = option.querySelector(".nb-quiz__choice");
      var why = option.querySelector(".nb-quiz__why");
      var verdict = make("span", "nb-sr-only nb-quiz__verdict");
      button.appendChild(verdict);

      button.addEventListener("click", function () {
        var right = option.getAttribute("data-correct") === "true";
        options.forEach(function (other) {
          other.classList.remove("is-chosen");
          other.querySelector(".nb-quiz__choice").setAttribute("aria-pressed", "false");
        });
        option.classList.add("is-chosen", right ? "is-right" : "is-wrong");
        button.setAttribute("aria-pressed", "true");
        verdict.textContent = right ? " (right answer)" : " (not right)";

        // Rebuild the live region so that picking the same option twice is announced twice.
        var parts = document.createDocumentFragment();
        Array.prototype.forEach.call(why ? why.childNodes : [], function (node) {
          parts.appendChild(node.cloneNode(true));
        });
        var lead = make("strong", "nb-quiz__verdict-text", right ? "Correct." : "Not quite.");
        var first = parts.firstElementChild;
        if (first && first.tagName === "P") {
          first.insertBefore(document.createTextNode(" "), first.firstChild);
          first.insertBefore(lead, first.firstChild);
        } else {
          var p = make("p");
          p.appendChild(lead);
          parts.insertBefore(p, parts.firstChild);
        }
        feedback.textContent = "";
        feedback.className = "nb-quiz__feedback " + (right ? "is-right" : "is-wrong");
        window.clearTimeout(pending);
        pending = window.setTimeout(function () {
          feedback.appendChild(parts);
        }, 50);
        if (right) {
          quiz.classList.add("is-solved");
          // The build hid the claims' tooltips and their interval suffixes' (they name the value); the key is found now.
          quiz.querySelectorAll("[data-nb-title]").forEach(function (claim) {
            claim.setAttribute("title", claim.getAttribute("data-nb-title"));
          });
        }
      });
    });
  }

  /* ------------------------------------------------------------- shape debugger */

  function shapeText(dims, sizes) {
    var values = dims.split("").map(function (d) {
      return String(sizes[d]);
    });
    return "(" + values.join(", ") + (values.length === 1 ? "," : "") + ")";
  }

  function countOf(dims, sizes) {
    return dims.split("").reduce(function (n, d) {
      return n * sizes[d];
    }, 1);
  }

  function grouped(n) {
    return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  }

  function listWords(items) {
    if (items.length < 2) return items.join("");
    return items.slice(0, -1).join(", ") + " and " + items[items.length - 1];
  }

  function drawGrid(figure, name, dims, sizes, grows) {
    var CAP = 16;
    var rows = dims.length === 2 ? sizes[dims[0]] : 1;
    var cols = sizes[dims[dims.length - 1]];
    var shownRows = Math.min(rows, CAP);
    var shownCols = Math.min(cols, CAP);
    figure.textContent = "";
    figure.className = "nb-shapes__grid" + (grows ? " grows" : " shared");
    var cells = make("div", "nb-shapes__cells");
    cells.style.gridTemplateColumns = "repeat(" + shownCols + ", var(--nb-cell))";
    for (var i = 0; i < shownRows * shownCols; i++) cells.appendChild(make("span"));
    figure.appendChild(cells);
    var caption = make("p", "nb-shapes__grid-caption");
    caption.appendChild(make("code", "", name));
    caption.appendChild(document.createTextNode(" " + shapeText(dims, sizes)));
    if (rows > CAP || cols > CAP) caption.appendChild(make("span", "nb-shapes__more", " (first 16 shown)"));
    figure.appendChild(caption);
  }

  function initShapes(box) {
    var numbers = Array.prototype.slice.call(box.querySelectorAll("input.nb-shapes__number"));
    var ranges = Array.prototype.slice.call(box.querySelectorAll("input.nb-shapes__range"));
    var rows = Array.prototype.slice.call(box.querySelectorAll("tr[data-tensor]"));
    var grids = box.querySelector(".nb-shapes__grids");
    var summary = box.querySelector(".nb-shapes__summary");
    var sizes = {};
    numbers.forEach(function (input) {
      sizes[input.getAttribute("data-dim")] = parseInt(input.value, 10);
    });

    var figures = {};
    rows.forEach(function (row) {
      var name = row.getAttribute("data-tensor");
      figures[name] = make("figure");
      grids.appendChild(figures[name]);
    });

    function render(changedDim, before) {
      var grew = [];
      var same = [];
      rows.forEach(function (row) {
        var name = row.getAttribute("data-tensor");
        var dims = row.getAttribute("data-dims");
        var grows = dims.indexOf("B") !== -1;
        var count = countOf(dims, sizes);
        var changed = before && countOf(dims, before) !== count;
        row.querySelector(".nb-shapes__shape").textContent = shapeText(dims, sizes);
        row.querySelector(".nb-shapes__count").textContent = grouped(count);
        row.classList.toggle("is-changed", Boolean(changed));
        drawGrid(figures[name], name, dims, sizes, grows);
        if (before) {
          var item = name + " " + shapeText(dims, sizes) + ", " + grouped(count) + " elements";
          (changed ? grew : same).push(item);
        }
      });
      if (before) {
        var text = changedDim + " went from " + before[changedDim] + " to " + sizes[changedDim] + ". ";
        if (grew.length) text += "Changed: " + listWords(grew) + ". ";
        if (same.length) text += "Unchanged: " + listWords(same) + ".";
        summary.textContent = text.trim();
      }
    }

    function set(dim, raw) {
      var input = box.querySelector("input.nb-shapes__number[data-dim='" + dim + "']");
      var value = parseInt(raw, 10);
      if (!isFinite(value)) return; // wait for a number; "change" restores the last good one
      var lo = parseInt(input.min, 10);
      var hi = parseInt(input.max, 10);
      value = Math.min(hi, Math.max(lo, value));
      ranges.concat(numbers).forEach(function (el) {
        if (el.getAttribute("data-dim") !== dim) return;
        if (el === document.activeElement && parseInt(el.value, 10) === value) return; // mid-typing
        el.value = value;
      });
      if (value === sizes[dim]) return;
      var before = {};
      Object.keys(sizes).forEach(function (k) {
        before[k] = sizes[k];
      });
      sizes[dim] = value;
      render(dim, before);
    }

    numbers.forEach(function (input) {
      var dim = input.getAttribute("data-dim");
      input.addEventListener("input", function () {
        set(dim, input.value);
      });
      input.addEventListener("change", function () {
        if (!isFinite(parseInt(input.value, 10))) input.value = sizes[dim];
        set(dim, input.value);
      });
    });
    ranges.forEach(function (input) {
      var dim = input.getAttribute("data-dim");
      input.addEventListener("input", function () {
        set(dim, input.value);
      });
    });
    box.classList.add("is-ready");
    render(null, null);
  }

  /* ------------------------------------------------------------------ your turn */

  var store = (function () {
    try {
      var s = window.localStorage;
      s.setItem("numbook:probe", "1");
      s.removeItem("numbook:probe");
      return s;
    } catch (err) {
      return null;
    }
  })();

  function draftKey(box) {
    var page = window.location.pathname.replace(/index\.html$/, "");
    return "numbook:draft:" + page + "#" + box.getAttribute("data-nb-box");
  }

  function initYourTurn(box) {
    var text = box.querySelector(".nb-yourturn__text");
    var count = box.querySelector(".nb-yourturn__count");
    var note = box.querySelector(".nb-yourturn__note");
    var max = parseInt(text.getAttribute("maxlength"), 10);
    var key = draftKey(box);

    function counter() {
      var n = text.value.length;
      count.textContent = n + " / " + max + " characters";
      count.classList.toggle("is-full", n >= max);
    }

    if (store) {
      var saved = store.getItem(key);
      if (saved !== null && !text.value) text.value = saved.slice(0, max);
      note.textContent = "Your draft is saved in this browser as you type; nothing is sent or marked.";
    } else {
      note.textContent = "This browser does not let the page save drafts: copy your answer before you leave.";
    }
    text.addEventListener("input", function () {
      counter();
      if (!store) return;
      try {
        if (text.value) store.setItem(key, text.value);
        else store.removeItem(key);
      } catch (err) {
        note.textContent = "Your draft could not be saved (the browser's storage is full).";
      }
    });
    counter();

    var hints = Array.prototype.slice.call(box.querySelectorAll(".nb-hint"));
    var next = box.querySelector(".nb-hints__next");
    if (!next || !hints.length) return;
    var shown = 0;
    hints.forEach(function (hint) {
      hint.hidden = true;
    });
    next.addEventListener("click", function () {
      if (shown >= hints.length) return;
      hints[shown].hidden = false;
      shown += 1;
      if (shown < hints.length) {
        next.textContent = "Show hint " + (shown + 1) + " of " + hints.length;
      } else {
        next.hidden = true;
        hints[shown - 1].focus(); // the button is gone: keep the keyboard where the reader is
      }
    });
  }

  /* ----------------------------------------------------------------------- init */

  function init(root) {
    root = root && root.querySelectorAll ? root : document;
    each(root, "[data-nb-quiz]", initQuiz);
    each(root, "[data-nb-shapes]", initShapes);
    each(root, "[data-nb-yourturn]", initYourTurn);
  }

  window.numbookComponents = { init: init };

  if (window.document$ && typeof window.document$.subscribe === "function") {
    window.document$.subscribe(function () {
      init(document);
    });
  } else if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () {
      init(document);
    });
  } else {
    init(document);
  }
})();
