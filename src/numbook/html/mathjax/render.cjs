// Math rendered at build time: MathJax 3.2.2 (the files beside this one, from the npm package `mathjax`, es5/)
// under Node, with its lite DOM. numbook.html.mathrender starts one of these per build and talks to it in JSON
// lines on stdin and stdout:
//
//   in:  {"items": [[tex, display], ...]}                       one page's expressions, in page order
//   out: {"svgs": [svg, ...], "defs": "<defs>...</defs>"}        each expression's <svg>, and the glyphs they use
//   or:  {"error": "message", "index": i}                       the i-th expression (0-based) is not valid TeX
//
// Glyphs are drawn once per page (MathJax's "global" font cache: each <svg> refers to <path id="MJX-..."> in the
// page's <defs>), and the cache is emptied before each page, so a page carries only the glyphs it uses.
//
// An element named by \cssId (numbook's math claims) that is a run of glyphs gets, as its first children, a
// <rect class="nb-ring"> over the glyphs' box (its focus ring: an SVG <g> draws no CSS outline) and a dotted
// <line class="nb-mark"> under them (the mark every verified number carries), sized from the font's metrics.
"use strict";
const path = require("path");
const readline = require("readline");

global.MathJax = {
  loader: {
    paths: {mathjax: __dirname},
    load: ["core", "adaptors/liteDOM", "input/tex-full", "output/svg"],
    require: require,
  },
  tex: {packages: {"[-]": ["noundefined"]}, processEscapes: true, processEnvironments: true, formatError: (jax, err) => { throw err; }},
  svg: {fontCache: "global"},
  startup: {typeset: false},
};
require(path.join(__dirname, "startup.js"));

const VARIANTS = {N: "normal", I: "italic", B: "bold", BI: "bold-italic", SS: "sans-serif", T: "monospace"};

function glyphs(adaptor, font, node, dx, dy, out) {
  // the glyphs under node, each as [x0, x1, bottom, top] in node's coordinates; false where a scale is met
  for (const child of adaptor.childNodes(node)) {
    const kind = adaptor.kind(child);
    if (kind === "#text" || kind === "#comment" || kind === "text") continue;   // MathJax's empty id-align <text>
    const transform = adaptor.getAttribute(child, "transform") || "";
    if (/scale|matrix|rotate/.test(transform)) return false;
    const m = /translate\(([-\d.]+),?\s*([-\d.]+)?\)/.exec(transform);
    const x = dx + (m ? parseFloat(m[1]) : 0), y = dy + (m && m[2] ? parseFloat(m[2]) : 0);
    if (kind === "use") {
      const id = (adaptor.getAttribute(child, "xlink:href") || "").split("-");
      const variant = VARIANTS[id[id.length - 2]] || "normal";
      const chr = font.getChar(variant, parseInt(adaptor.getAttribute(child, "data-c"), 16)) || [0.75, 0.25, 0.5];
      out.push([x, x + chr[2] * 1000, y - chr[1] * 1000, y + chr[0] * 1000]);
    } else if (kind === "g") {
      if (!glyphs(adaptor, font, child, x, y, out)) return false;
    } else {
      return false;   // a rule, a path: not a plain number
    }
  }
  return true;
}

function ring(adaptor, font, g) {
  const boxes = [];
  if (!glyphs(adaptor, font, g, 0, 0, boxes) || boxes.length === 0) return;
  const x0 = Math.min(...boxes.map((b) => b[0])), x1 = Math.max(...boxes.map((b) => b[1]));
  const bottom = Math.min(...boxes.map((b) => b[2])), top = Math.max(...boxes.map((b) => b[3]));
  const pad = 60, r = (n) => n.toFixed(1), NS = "http://www.w3.org/2000/svg";
  const rect = adaptor.node("rect", {class: "nb-ring", x: r(x0 - pad), y: r(bottom - pad), width: r(x1 - x0 + 2 * pad),
                                      height: r(top - bottom + 2 * pad), rx: "60"}, [], NS);
  const line = adaptor.node("line", {class: "nb-mark", x1: r(x0), x2: r(x1), y1: r(bottom - 110), y2: r(bottom - 110)},
                            [], NS);
  adaptor.insert(line, adaptor.firstChild(g));
  adaptor.insert(rect, line);
}

function ringAll(adaptor, font, node) {
  for (const child of adaptor.childNodes(node)) {
    if (adaptor.kind(child) === "#text" || adaptor.kind(child) === "#comment") continue;
    if (adaptor.kind(child) === "g" && adaptor.getAttribute(child, "id")) ring(adaptor, font, child);
    else ringAll(adaptor, font, child);
  }
}

MathJax.startup.promise.then(() => {
  const adaptor = MathJax.startup.adaptor;
  const svg = MathJax.startup.output;
  const rl = readline.createInterface({input: process.stdin, crlfDelay: Infinity});
  rl.on("line", (line) => {
    let reply;
    const request = JSON.parse(line);
    svg.fontCache.clearCache();
    const out = [];
    let i = 0;
    try {
      for (; i < request.items.length; i++) {
        const [tex, display] = request.items[i];
        MathJax.texReset();
        const node = MathJax.tex2svg(tex, {display: display});
        ringAll(adaptor, svg.font, node);
        out.push(adaptor.innerHTML(node));   // the <svg>; the container is the page's own element
      }
      reply = {svgs: out, defs: adaptor.outerHTML(svg.fontCache.getCache())};
    } catch (err) {
      reply = {error: String((err && err.message) || err), index: i};
    }
    process.stdout.write(JSON.stringify(reply) + "\n");
  });
  process.stdout.write(JSON.stringify({ready: true, css: adaptor.textContent(MathJax.svgStylesheet())}) + "\n");
}).catch((err) => {
  process.stderr.write(String((err && err.stack) || err) + "\n");
  process.exit(1);
});
