// The console's one script (served as /assets/console.js; the page has no
// inline script). Recorded data is read from the DOM the server escaped and
// written back only with textContent.
(function () {
  "use strict";
  var page = document.body.dataset.page;

  // Runs: a `runs` event (the archive was opened again) reloads the table,
  // unless paused or on an older page (then it only says so).
  function runsPage() {
    var live = document.getElementById("live");
    var state = document.getElementById("live-state");
    var pause = document.getElementById("pause");
    if (!live || !window.EventSource) return;
    var paused = false;
    var missed = false;
    var firstPage = live.dataset.firstPage === "true";
    pause.addEventListener("click", function () {
      paused = !paused;
      live.classList.toggle("paused", paused);
      pause.textContent = paused ? "Resume" : "Pause";
      state.textContent = paused ? "paused: new runs are not shown" : "live: new runs appear here";
      if (!paused && missed) reload();
    });
    function reload() {
      missed = false;
      fetch(location.href, { credentials: "same-origin" }).then(function (r) {
        if (!r.ok) throw new Error(String(r.status));
        return r.text();
      }).then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("runs");
        var old = document.getElementById("runs");
        if (!fresh || !old) return;
        var known = new Set();
        old.querySelectorAll("tr.run").forEach(function (r) { known.add(r.dataset.run); });
        fresh.querySelectorAll("tr.run").forEach(function (r) {
          if (!known.has(r.dataset.run)) r.classList.add("fresh");
        });
        old.replaceWith(document.adoptNode(fresh));
        var counts = doc.getElementById("counts");
        var oldCounts = document.getElementById("counts");
        if (counts && oldCounts) oldCounts.replaceWith(document.adoptNode(counts));
        state.textContent = "live: updated " + new Date().toLocaleTimeString();
        document.body.dataset.updates = String(Number(document.body.dataset.updates || "0") + 1);
      }).catch(function () {
        state.textContent = "live: the console did not answer; reload the page";
      });
    }
    var events = new EventSource("/events");
    events.addEventListener("runs", function () {
      if (paused || !firstPage) {
        missed = true;
        state.textContent = "new runs: " + (firstPage ? "resume to show them" : "see the newest page");
        return;
      }
      reload();
    });
  }

  // A run: a filter that hides facts (and waterfall rows) that do not
  // match; deep links `#seq-N` (to another page of the run when needed)
  // and `#call=ID`.
  function runPage() {
    var section = document.getElementById("facts");
    var kindSel = document.getElementById("kind-filter");
    var text = document.getElementById("text-filter");
    var callTag = document.getElementById("call-filter");
    var clear = document.getElementById("clear-filter");
    var count = document.getElementById("filter-count");
    var facts = Array.prototype.slice.call(document.querySelectorAll(".fact-list .fact"));
    var rows = Array.prototype.slice.call(document.querySelectorAll(".wf-row"));
    var call = "";
    var params = new URLSearchParams(location.search);
    kindSel.value = params.get("kind") || "";
    text.value = params.get("q") || "";
    call = params.get("call") || "";

    function apply() {
      var kind = kindSel.value;
      var q = text.value.trim().toLowerCase();
      var shown = 0;
      facts.forEach(function (f) {
        var ok = (!kind || f.dataset.kind === kind) && (!call || f.dataset.call === call) &&
          (!q || f.textContent.toLowerCase().indexOf(q) >= 0);
        f.hidden = !ok;
        if (ok) shown++;
      });
      rows.forEach(function (r) {
        var ok = (!call || r.dataset.call === call) &&
          (!q || r.textContent.toLowerCase().indexOf(q) >= 0 || kind);
        r.hidden = !ok;
        r.classList.toggle("selected", !!call && r.dataset.call === call);
      });
      callTag.hidden = !call;
      callTag.textContent = call ? "call " + call : "";
      var filtered = kind || q || call;
      count.textContent = filtered ? shown + " of " + facts.length + " facts on this page match" : "";
      var p = new URLSearchParams(location.search);
      [["kind", kind], ["q", text.value.trim()], ["call", call]].forEach(function (kv) {
        if (kv[1]) p.set(kv[0], kv[1]); else p.delete(kv[0]);
      });
      var qs = p.toString();
      history.replaceState(null, "", location.pathname + (qs ? "?" + qs : "") + location.hash);
    }
    kindSel.addEventListener("change", apply);
    text.addEventListener("input", apply);
    clear.addEventListener("click", function () {
      kindSel.value = ""; text.value = ""; call = ""; apply();
    });
    function pickCall(id) { call = (call === id) ? "" : id; apply(); }
    var wf = document.getElementById("waterfall");
    if (wf) {
      wf.addEventListener("click", function (e) {
        var row = e.target.closest(".wf-row");
        if (row) pickCall(row.dataset.call);
      });
      wf.addEventListener("keydown", function (e) {
        var row = e.target.closest(".wf-row");
        if (row && (e.key === "Enter" || e.key === " ")) { e.preventDefault(); pickCall(row.dataset.call); }
      });
    }
    function fromHash() {
      var h = location.hash.replace(/^#/, "");
      var m = /^seq-(\d+)$/.exec(h);
      if (m) {
        var seq = Number(m[1]);
        var li = document.getElementById("seq-" + seq);
        if (li) {
          facts.forEach(function (f) { f.classList.toggle("selected", f === li); });
          var d = li.querySelector("details");
          if (d) d.open = true;
          if (li.hidden) { kindSel.value = ""; text.value = ""; call = ""; apply(); }
          li.scrollIntoView({ block: "center" });
          return;
        }
        var per = Number(section.dataset.perPage);
        var from = Number(section.dataset.from);
        var page = Math.floor(seq / per) * per;
        if (page !== from && seq < Number(section.dataset.total)) {
          location.replace(location.pathname + "?from=" + page + "#seq-" + seq);
        }
        return;
      }
      if (h.indexOf("call=") === 0) {
        try { call = decodeURIComponent(h.slice(5)); } catch (e) { return; }
        apply();
      }
    }
    window.addEventListener("hashchange", fromHash);
    apply();
    fromHash();
  }

  if (page === "runs") runsPage();
  if (page === "run") runPage();
  document.body.dataset.ready = "1";
})();
