// MathJax 3, served by this site (assets/vendor/mathjax). Arithmatex emits \( \) and \[ \].
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex",
  },
  svg: { fontCache: "global" },
};

// Material's instant navigation swaps the page without reloading: typeset the new one.
if (typeof document$ !== "undefined") {
  document$.subscribe(() => {
    if (window.MathJax && MathJax.typesetPromise) {
      MathJax.startup.output.clearCache && MathJax.startup.output.clearCache();
      MathJax.typesetClear && MathJax.typesetClear();
      MathJax.texReset && MathJax.texReset();
      MathJax.typesetPromise().then(() => window.numbookDecorateMath && window.numbookDecorateMath());
    }
  });
}
