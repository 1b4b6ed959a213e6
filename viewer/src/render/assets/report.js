(function () {
  "use strict";
  var facts = [];
  try {
    facts = JSON.parse(document.getElementById("reel-facts").textContent);
  } catch (e) {
    facts = [];
  }
  var byCall = new Map();
  var runFacts = [];
  facts.forEach(function (f) {
    var c = f.fact.call;
    if (c === null || c === undefined) { runFacts.push(f); return; }
    if (!byCall.has(c)) byCall.set(c, []);
    byCall.get(c).push(f);
  });
  var rows = new Map();
  document.querySelectorAll(".wf-row").forEach(function (r) { rows.set(r.dataset.call, r); });
  var panel = document.getElementById("detail");

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function show(callId) {
    var row = callId === null ? null : (rows.get(callId) || null);
    rows.forEach(function (r) { r.classList.toggle("selected", r === row); });
    var list = callId === null ? runFacts : (byCall.get(callId) || []);
    var parts = [];
    if (callId === null) {
      parts.push(el("h2", null, "Run-level facts"));
      parts.push(el("div", "meta", "Facts of the run itself, not of a call."));
    } else {
      var h = el("h2");
      h.appendChild(el("span", "mono", callId));
      if (row) h.appendChild(document.createTextNode(" " + row.dataset.tool));
      parts.push(h);
      if (row) {
        parts.push(el("div", "meta", row.dataset.status + " · took " + row.dataset.took +
          (row.title ? " · " + row.title : "")));
      }
    }
    if (list.length === 0) {
      parts.push(el("p", "hint", "No facts of this call are listed in this page."));
    }
    var ol = el("ol", "facts");
    list.forEach(function (f) {
      var li = el("li", "fact");
      li.dataset.seq = String(f.fact.seq);
      var head = el("div", "fact-head");
      head.appendChild(el("span", "mono muted", "#" + f.fact.seq));
      head.appendChild(el("span", "mono muted", f.t));
      head.appendChild(el("span", "kind", f.fact.kind));
      li.appendChild(head);
      li.appendChild(el("div", "fact-line", f.line));
      li.appendChild(el("pre", "data", JSON.stringify(f.fact.data, null, 2)));
      ol.appendChild(li);
    });
    parts.push(ol);
    panel.replaceChildren.apply(panel, parts);
    panel.dataset.call = callId === null ? "" : callId;
    panel.dataset.shown = callId === null ? "run" : "call";
    if (row && row.scrollIntoView && window.innerHeight) {
      var box = row.getBoundingClientRect();
      if (box.top < 0 || box.bottom > window.innerHeight) row.scrollIntoView({ block: "center" });
    }
  }

  function fromHash() {
    var h = location.hash.replace(/^#/, "");
    if (h === "run") { show(null); return; }
    if (h.indexOf("call=") !== 0) return;
    var id;
    try { id = decodeURIComponent(h.slice(5)); } catch (e) { return; }
    if (rows.has(id) || byCall.has(id)) show(id);
  }

  function open(row) {
    var target = "#call=" + encodeURIComponent(row.dataset.call);
    if (location.hash === target) { fromHash(); } else { location.hash = target; }
  }

  var waterfall = document.getElementById("waterfall");
  waterfall.addEventListener("click", function (e) {
    var row = e.target.closest(".wf-row");
    if (row) open(row);
  });
  waterfall.addEventListener("keydown", function (e) {
    var row = e.target.closest(".wf-row");
    if (row && (e.key === "Enter" || e.key === " ")) { e.preventDefault(); open(row); }
  });
  window.addEventListener("hashchange", fromHash);
  fromHash();
  document.body.dataset.ready = "1";
})();
