/* ANDREA Block Lab: boxes that scroll sideways can be reached with the keyboard, and the
   theme's controls are named by what they show.
   The theme gives code, outputs and tables a tab stop when they scroll; this does the
   same for the other boxes andrea.css lets scroll (figures of several panels on a
   phone, wide formulas), once MathJax has typeset them and whenever the window resizes.
   Loaded on every page by book/_ext/andrea_book/layout.py. */
(function () {
  "use strict";
  var SELECTOR = "div.cell_output > figure, div.math, mjx-container[display='true'], mjx-container";
  function update() {
    document.querySelectorAll(SELECTOR).forEach(function (el) {
      var scrolls = el.scrollWidth > el.clientWidth + 1;
      if (scrolls) {
        el.tabIndex = 0;
      } else if (el.tabIndex === 0 && !el.matches("mjx-container")) {
        el.removeAttribute("tabindex");
      }
    });
  }
  /* A control whose aria-label leaves out its visible text (MyST-NB's "Show code cell
     source" toggles) is named by that text instead, so that a speech-input user can say
     what they see. (The colour-mode switch shows no text: its icons are decorative,
     book/_templates/theme-switcher.html.) */
  function nameByContent() {
    document.querySelectorAll("button[aria-label], summary[aria-label], a[aria-label]").forEach(function (el) {
      var label = el.getAttribute("aria-label");
      var shown = (el.innerText || "").replace(/\s+/g, " ").trim();
      if (shown && label.toLowerCase().indexOf(shown.toLowerCase()) < 0) {
        el.removeAttribute("aria-label");
      }
    });
  }
  /* Names the themes write in English in their own code (the book's extension lists them,
     HARD_CODED_LABELS in book/_ext/andrea_book/editions.py, and gives each edition's words
     from its catalog as window.andreaLabels). */
  function translateLabels() {
    var words = window.andreaLabels;
    if (!words) {
      return;
    }
    document.querySelectorAll("[aria-label]").forEach(function (el) {
      var label = el.getAttribute("aria-label");
      if (Object.prototype.hasOwnProperty.call(words, label)) {
        el.setAttribute("aria-label", words[label]);
      }
    });
  }
  function afterMath() {
    translateLabels();
    nameByContent();
    update();
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      MathJax.startup.promise.then(update);
    }
  }
  function start() {
    afterMath();
    window.addEventListener("load", afterMath);
    var timer = null;
    window.addEventListener("resize", function () {
      clearTimeout(timer);
      timer = setTimeout(update, 200);
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
