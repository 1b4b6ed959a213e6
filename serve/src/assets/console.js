// The console's script (served as /assets/console.js, followed by run.js,
// a run's page; the page has no inline script). Recorded data is read from the DOM the server escaped and
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
        // Paused while this was on its way: shown only on resume.
        if (paused) { missed = true; return; }
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
        var trend = doc.getElementById("trend");
        var oldTrend = document.getElementById("trend");
        if (trend && oldTrend) oldTrend.replaceWith(document.adoptNode(trend));
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

  if (page === "runs") runsPage();
  document.body.dataset.ready = "1";
})();
