// Settle dashboard: small touches on top of pages that work without JavaScript.
// Loaded from /static so the Content-Security-Policy needs no inline script.
(function () {
  "use strict";

  // Copy buttons copy the text of the element they name, for support's customer sentence.
  document.addEventListener("click", function (ev) {
    var btn = ev.target.closest("[data-copy-target]");
    if (!btn) return;
    var src = document.getElementById(btn.getAttribute("data-copy-target"));
    if (!src) return;
    var text = src.value !== undefined ? src.value : src.textContent;
    var done = function () {
      var old = btn.textContent;
      btn.textContent = "Copied";
      btn.setAttribute("data-copied", "true");
      setTimeout(function () { btn.textContent = old; }, 1500);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { fallback(src); done(); });
    } else {
      fallback(src);
      done();
    }
  });

  function fallback(src) {
    if (src.select) { src.select(); }
    try { document.execCommand("copy"); } catch (e) { /* the text stays selected */ }
  }

  // "Select all" ticks every row box of its table.
  document.addEventListener("change", function (ev) {
    var all = ev.target.closest("[data-select-all]");
    if (!all) return;
    document.querySelectorAll("input[name=ids]").forEach(function (b) { b.checked = all.checked; });
  });

  // Forms that act on many rows ask first.
  document.addEventListener("submit", function (ev) {
    var msg = ev.submitter && ev.submitter.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) ev.preventDefault();
  });

  // Auto-refresh must not wipe a selection someone is making: skip a refresh while any row
  // is ticked or a field of the page has focus.
  document.addEventListener("htmx:beforeRequest", function (ev) {
    if (!ev.detail.elt || !ev.detail.elt.hasAttribute("data-live")) return;
    var busy = document.querySelector("input[name=ids]:checked") ||
      (document.activeElement && document.activeElement.matches("input, select, textarea"));
    if (busy) ev.preventDefault();
  });

  // Countdowns to a key's retention end tick every second.
  // The server says what time it is on the page, so a wrong clock on this computer does
  // not make a retained key look expired, or the other way round.
  var skew = 0;
  var first = document.querySelector("time[data-countdown][data-now]");
  if (first) {
    var serverNow = Date.parse(first.getAttribute("data-now"));
    if (!isNaN(serverNow)) skew = serverNow - Date.now();
  }
  function tick() {
    var now = Date.now() + skew;
    document.querySelectorAll("time[data-countdown]").forEach(function (t) {
      var end = Date.parse(t.getAttribute("datetime"));
      if (isNaN(end)) return;
      var s = Math.round((end - now) / 1000);
      t.textContent = s > 0 ? span(s) + " left" : "passed " + span(-s) + " ago";
      t.classList.toggle("passed", s <= 0);
    });
  }
  function span(s) {
    var d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
    if (d > 0) return d + "d " + h + "h";
    if (h > 0) return h + "h " + m + "m";
    if (m > 0) return m + "m " + (s % 60) + "s";
    return s + "s";
  }
  tick();
  setInterval(tick, 1000);
})();
