// Keyboard shortcuts, an enhancement: every page works without this
// script, which only follows the links and moves to the places the page
// already has. "?" shows what each key does (docs/reading.md).
(function () {
  "use strict";
  var $ = function (sel) { return document.querySelector(sel); };
  var all = function (sel) { return Array.prototype.slice.call(document.querySelectorAll(sel)); };
  var go = function (a) { if (a) { window.location.href = a.href; return true; } return false; };

  // The rows j and k move between: a thread page's messages, or the
  // threads (or results) of a list, a month or a search.
  var rows = all("article.tmsg[id]");
  var rowLink = "a.from";
  var rowsAreThreads = false;
  if (rows.length === 0) {
    rows = all("ol.threads > li, ol.results > li");
    rowLink = "a";
    rowsAreThreads = rows.length > 0;
  }
  var at = -1;
  rows.forEach(function (r, i) { if (r.classList.contains("current")) { at = i; } });
  var move = function (by) {
    if (rows.length === 0) { return false; }
    var next = at < 0 ? (by > 0 ? 0 : rows.length - 1) : at + by;
    if (next < 0 || next >= rows.length) {
      // Past the last row (or before the first): the next (previous) page.
      return go($('nav.pager a[rel="' + (by > 0 ? "next" : "prev") + '"]'));
    }
    if (at >= 0) { rows[at].classList.remove("kb"); }
    at = next;
    rows[at].classList.add("kb");
    var a = rows[at].querySelector(rowLink);
    (a || rows[at]).focus();
    rows[at].scrollIntoView({block: "nearest"});
    return true;
  };

  // A message page: in its thread, else by date.
  var inThread = function (rel) { return $('nav.thread ul.prevnext a[rel="' + rel + '"]'); };
  var byDate = function (which) { return $("nav.thread ul.prevnext a.bydate-" + which); };

  var help = null;
  var keys = [
    ["j", "next message (on a list, a month or a search: next thread)", function () { return go(inThread("next") || byDate("next")) || move(1); }],
    ["k", "previous message (on a list, a month or a search: previous thread)", function () { return go(inThread("prev") || byDate("prev")) || move(-1); }],
    ["n", "next message by date", function () { return go(byDate("next")); }],
    ["p", "previous message by date", function () { return go(byDate("prev")); }],
    ["J", "next thread, or the next page of threads", function () { return rowsAreThreads ? move(1) : go($('nav.pager a[rel="next"]')); }],
    ["K", "previous thread, or the previous page of threads", function () { return rowsAreThreads ? move(-1) : go($('nav.pager a[rel="prev"]')); }],
    ["t", "the whole thread of this message", function () { return go($("nav.thread p.where a")); }],
    ["u", "up: the list, the month or the archive", function () { var c = all("nav.crumbs a"); return go(c[c.length - 1] || $("header.site a.home")); }],
    ["/", "search", function () { var i = $("form.search input[name=n]") || $("form.go input[name=n]"); if (i) { i.focus(); i.select(); } return !!i; }],
    ["?", "show or hide these keys", function () { toggleHelp(); return true; }]
  ];
  var toggleHelp = function () {
    if (help) { help.remove(); help = null; return; }
    help = document.createElement("aside");
    help.className = "keyhelp";
    help.setAttribute("role", "dialog");
    help.setAttribute("aria-label", "Keyboard shortcuts");
    var h = document.createElement("h2");
    h.textContent = "Keyboard shortcuts";
    help.appendChild(h);
    var dl = document.createElement("dl");
    keys.forEach(function (k) {
      var dt = document.createElement("dt");
      var kbd = document.createElement("kbd");
      kbd.textContent = k[0];
      dt.appendChild(kbd);
      var dd = document.createElement("dd");
      dd.textContent = k[1];
      dl.appendChild(dt);
      dl.appendChild(dd);
    });
    help.appendChild(dl);
    var p = document.createElement("p");
    p.textContent = "Esc or ? closes this.";
    help.appendChild(p);
    document.body.appendChild(help);
  };

  document.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey || e.isComposing) { return; }
    var t = e.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT|BUTTON)$/.test(t.tagName))) {
      if (e.key === "Escape" && t.blur) { t.blur(); }
      return;
    }
    if (e.key === "Escape" && help) { toggleHelp(); e.preventDefault(); return; }
    for (var i = 0; i < keys.length; i++) {
      if (keys[i][0] === e.key) {
        if (keys[i][2]()) { e.preventDefault(); }
        return;
      }
    }
  });
})();
