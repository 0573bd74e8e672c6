// Typeset the TeX of HTML fragments as SVG, the way MathJax 3 does in a browser,
// so that a page needs no script to show its math (classroom/reporting/mathsvg.py runs this).
//
//   node mathsvg.js NODE_MODULES
//     stdin:  one request per line,  {"html": "...", "options": {...}}
//     stdout: one answer per line,   {"html": "...", "css": "...", "math": n, "cpu_ms": t}
//                                 or {"error": "..."}
//
// One process serves many pages (loading MathJax costs far more than a page): it reads
// requests until its input is closed. Nothing of one page reaches the next: each request
// gets a TeX input and an SVG output of its own (so a \def, \newcommand or \let of one
// page is unknown on the next: the TeX input's macro tables are made anew with it) and a
// document of its own; what is shared is MathJax's code and the HTML handler, which
// keeps no state of a document.
//
// The delimiters are the notebook front ends' ($...$, $$...$$, \(...\), \[...\] and
// \begin{...}...\end{...}); text inside pre, code, script, style and textarea and
// under class tex2jax_ignore is left alone (options: processHtmlClass and ignoreHtmlClass
// change the classes, as Sphinx's pages do). Every TeX package is available except
// \require and autoload (nothing is loaded at typesetting time); MathJax's "safe"
// filter drops \href URLs other than http(s), \style and \class values it does not
// know, and the like. Each formula also carries its MathML (hidden, for screen readers).
"use strict";
const readline = require("readline");
const base = process.argv[2] + "/mathjax-full/js/";
const {mathjax} = require(base + "mathjax.js");
const {TeX} = require(base + "input/tex.js");
const {SVG} = require(base + "output/svg.js");
const {liteAdaptor} = require(base + "adaptors/liteAdaptor.js");
const {RegisterHTMLHandler} = require(base + "handlers/html.js");
const {AssistiveMmlHandler} = require(base + "a11y/assistive-mml.js");
const {SafeHandler} = require(base + "ui/safe/SafeHandler.js");
const {AllPackages} = require(base + "input/tex/AllPackages.js");

const adaptor = liteAdaptor();
SafeHandler(AssistiveMmlHandler(RegisterHTMLHandler(adaptor)));
const PACKAGES = AllPackages.filter((p) => p !== "require" && p !== "autoload");

function typeset(request) {
  const tex = new TeX({
    packages: PACKAGES,
    inlineMath: [["$", "$"], ["\\(", "\\)"]],
    displayMath: [["$$", "$$"], ["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  });
  const svg = new SVG({fontCache: "none"});
  const options = {InputJax: tex, OutputJax: svg};
  for (const key of ["processHtmlClass", "ignoreHtmlClass"]) {
    if (request.options && typeof request.options[key] === "string") options[key] = request.options[key];
  }
  const doc = mathjax.document("<!DOCTYPE html><html><head></head><body>" + request.html + "</body></html>", options);
  doc.render();
  let n = 0;
  for (const _ of doc.math) n++;
  const css = adaptor.textContent(svg.styleSheet(doc));
  return {html: adaptor.innerHTML(adaptor.body(doc.document)), css: css, math: n};
}

const lines = readline.createInterface({input: process.stdin, crlfDelay: Infinity});
lines.on("line", (line) => {
  const cpu = process.cpuUsage();
  let answer;
  try {
    const request = JSON.parse(line);
    if (typeof request.html !== "string") throw new Error("no html in the request");
    answer = typeset(request);
  } catch (err) {
    answer = {error: String((err && err.message) || err).slice(0, 300)};
  }
  const used = process.cpuUsage(cpu);
  answer.cpu_ms = (used.user + used.system) / 1000;
  process.stdout.write(JSON.stringify(answer) + "\n");
});
