// A run's page (served after console.js in /assets/console.js; the page
// has no inline script). Recorded data is read from the DOM the server
// escaped and written back only with textContent.
//
// - The filter: facts (and waterfall rows) that do not match a kind, a
//   text or a call are hidden.
// - The call tree: collapse and expand a call's subtree, collapse all,
//   hide calls shorter than a duration, focus on one call's subtree.
// - Deep links: #seq-N (to the page of the run that holds it), #call=ID;
//   every setting in the URL (kind, q, call, focus, below, collapse), so a
//   view can be shared.
// - Copy buttons: a `reel show` command that shows a fact, a call, the run.
// - Live: while the run is being recorded, /runs/ID/events says when it
//   changed, and the page fetches itself and swaps #run-head and #run-body.
(function () {
  "use strict";
  if (document.body.dataset.page !== "run") return;
  var $ = function (id) { return document.getElementById(id); };
  var kindSel = $("kind-filter");
  var text = $("text-filter");
  var callTag = $("call-filter");
  var count = $("filter-count");
  var below = $("below");
  var controls = $("run-controls");
  var params = new URLSearchParams(location.search);
  var state = {
    call: params.get("call") || "",
    focus: params.get("focus") || "",
    collapsed: new Set((params.get("collapse") || "").split(",").filter(Boolean))
  };
  kindSel.value = params.get("kind") || "";
  text.value = params.get("q") || "";
  below.value = params.get("below") || "";

  // POSIX shell quoting, as the server quotes (pages/fact.rs sh_quote).
  function shQuote(s) {
    if (s !== "" && /^[A-Za-z0-9\-_.\/:=@%+,]+$/.test(s)) return s;
    return "'" + s.replace(/'/g, "'\\''") + "'";
  }

  // The call tree, from the server's call index.
  function tree() {
    var ix = { parent: {}, ns: {}, children: {}, calls: [] };
    document.querySelectorAll("#call-index i").forEach(function (i) {
      var c = i.dataset.call;
      ix.calls.push(c);
      ix.parent[c] = i.dataset.parent || "";
      ix.ns[c] = Number(i.dataset.ns) || 0;
    });
    ix.calls.forEach(function (c) {
      var p = ix.parent[c];
      if (p && p in ix.parent) (ix.children[p] = ix.children[p] || []).push(c);
    });
    return ix;
  }
  // Whether `c` is `root` or below it (bounded: a repeated id makes no loop).
  function within(ix, c, root) {
    for (var n = 0; c && n < 10000; n++) {
      if (c === root) return true;
      c = ix.parent[c];
    }
    return false;
  }
  function underCollapsed(ix, c) {
    var p = ix.parent[c];
    for (var n = 0; p && n < 10000; n++) {
      if (state.collapsed.has(p)) return true;
      p = ix.parent[p];
    }
    return false;
  }

  // A twisty (for calls with children), a facts button and a focus
  // button on every row. The row itself stops being a button (a button
  // inside a button is no control a keyboard or a screen reader can
  // use); its facts button does what a click on the row does.
  function decorate(ix) {
    document.querySelectorAll("#waterfall .wf-row").forEach(function (row) {
      if (row.querySelector(".tree-btns")) return;
      var c = row.dataset.call;
      row.removeAttribute("role");
      row.removeAttribute("tabindex");
      var box = document.createElement("span");
      box.className = "tree-btns";
      if (ix.children[c]) {
        var t = document.createElement("button");
        t.type = "button";
        t.className = "twisty";
        t.dataset.call = c;
        box.appendChild(t);
      }
      var p = document.createElement("button");
      p.type = "button";
      p.className = "pick-btn";
      p.dataset.call = c;
      p.textContent = "facts";
      p.setAttribute("aria-label", "show the facts of call " + c);
      box.appendChild(p);
      var f = document.createElement("button");
      f.type = "button";
      f.className = "focus-btn";
      f.dataset.call = c;
      f.textContent = "focus";
      f.setAttribute("aria-label", "focus on call " + c + " and the calls below it");
      box.appendChild(f);
      var label = row.querySelector(".wf-label");
      label.insertBefore(box, label.firstChild);
    });
  }

  function apply() {
    var ix = tree();
    decorate(ix);
    var kind = kindSel.value;
    var q = text.value.trim().toLowerCase();
    var call = state.call;
    var focus = state.focus in ix.parent ? state.focus : "";
    var belowNs = below.value === "" ? 0 : Number(below.value) * 1e6;
    var shownCalls = {};
    var short = 0, folded = 0;
    ix.calls.forEach(function (c) {
      var ok = !focus || within(ix, c, focus);
      if (ok && underCollapsed(ix, c)) { ok = false; folded++; }
      else if (ok && belowNs > 0 && ix.ns[c] < belowNs && c !== focus) { ok = false; short++; }
      shownCalls[c] = ok;
    });
    document.querySelectorAll("#waterfall .wf-row").forEach(function (r) {
      var c = r.dataset.call;
      var ok = shownCalls[c] !== false && (!call || c === call) &&
        (!q || r.textContent.toLowerCase().indexOf(q) >= 0 || kind);
      r.hidden = !ok;
      r.classList.toggle("selected", !!call && c === call);
      r.classList.toggle("focused", !!focus && c === focus);
      var t = r.querySelector(".twisty");
      if (t) {
        var closed = state.collapsed.has(c);
        t.textContent = closed ? "▸" : "▾";
        t.setAttribute("aria-expanded", closed ? "false" : "true");
        t.setAttribute("aria-label", (closed ? "expand" : "collapse") + " the calls below " + c);
      }
    });
    var facts = document.querySelectorAll(".fact-list .fact");
    var shown = 0;
    facts.forEach(function (f) {
      var fc = f.dataset.call;
      var ok = (!kind || f.dataset.kind === kind) && (!call || fc === call) &&
        (!focus || (!!fc && within(ix, fc, focus))) &&
        (!q || f.textContent.toLowerCase().indexOf(q) >= 0);
      f.hidden = !ok;
      if (ok) shown++;
    });
    document.querySelectorAll("#lanes .mark").forEach(function (m) {
      var mc = m.dataset.call;
      m.hidden = (!!focus && !(mc && within(ix, mc, focus))) || (!!call && mc !== call);
    });
    callTag.hidden = !call;
    callTag.textContent = call ? "call " + call : "";
    var filtered = kind || q || call || focus;
    count.textContent = filtered ? shown + " of " + facts.length + " facts on this page match" : "";
    var parts = [];
    if (folded) parts.push(folded + " in collapsed calls");
    if (short) parts.push(short + " shorter than " + below.value + " ms");
    $("tree-count").textContent = parts.length ? "hidden: " + parts.join(", ") : "";
    var bar = $("focus-bar");
    bar.hidden = !focus;
    if (focus) {
      var under = ix.calls.filter(function (c) { return c !== focus && within(ix, c, focus); }).length;
      $("focus-text").textContent = "Focused on call " + focus + " and the " + under +
        " call" + (under === 1 ? "" : "s") + " below it.";
      var cmd = $("focus-cmd");
      cmd.textContent = "";
      var box = document.createElement("span");
      box.className = "show-cmd";
      var code = document.createElement("code");
      code.className = "cmd";
      code.textContent = controls.dataset.showRun + " --call " + shQuote(focus);
      var b = document.createElement("button");
      b.type = "button";
      b.className = "copy";
      b.dataset.what = "call";
      b.textContent = "copy as a reel show command";
      box.appendChild(code);
      box.appendChild(document.createTextNode(" "));
      box.appendChild(b);
      cmd.appendChild(box);
    }
    var p = new URLSearchParams(location.search);
    [["kind", kind], ["q", text.value.trim()], ["call", call], ["focus", focus],
      ["below", below.value], ["collapse", Array.from(state.collapsed).join(",")]].forEach(function (kv) {
      if (kv[1]) p.set(kv[0], kv[1]); else p.delete(kv[0]);
    });
    var qs = p.toString();
    history.replaceState(null, "", location.pathname + (qs ? "?" + qs : "") + location.hash);
  }

  kindSel.addEventListener("change", apply);
  text.addEventListener("input", apply);
  below.addEventListener("input", apply);
  $("clear-filter").addEventListener("click", function () {
    kindSel.value = ""; text.value = ""; state.call = ""; apply();
  });
  $("expand-all").addEventListener("click", function () { state.collapsed.clear(); apply(); });
  $("collapse-all").addEventListener("click", function () {
    var ix = tree();
    Object.keys(ix.children).forEach(function (c) { state.collapsed.add(c); });
    apply();
  });
  $("unfocus").addEventListener("click", function () { state.focus = ""; apply(); });
  function pickCall(id) { state.call = (state.call === id) ? "" : id; apply(); }

  // Clicks anywhere (the waterfall and the copy buttons are replaced by
  // live updates, so they are handled here).
  document.addEventListener("click", function (e) {
    var copy = e.target.closest("button.copy");
    if (copy) {
      var code = copy.parentNode.querySelector("code.cmd");
      if (code) copyText(copy, code);
      return;
    }
    var twisty = e.target.closest("#waterfall button.twisty");
    if (twisty) {
      var c = twisty.dataset.call;
      if (state.collapsed.has(c)) state.collapsed.delete(c); else state.collapsed.add(c);
      apply();
      return;
    }
    var fb = e.target.closest("#waterfall button.focus-btn");
    if (fb) {
      state.focus = fb.dataset.call;
      apply();
      $("run-controls").scrollIntoView({ block: "start" });
      return;
    }
    var pick = e.target.closest("#waterfall button.pick-btn");
    if (pick) {
      pickCall(pick.dataset.call);
      return;
    }
    var row = e.target.closest("#waterfall .wf-row");
    if (row) pickCall(row.dataset.call);
  });
  document.addEventListener("keydown", function (e) {
    if (e.target.closest && e.target.closest("button")) return;
    var row = e.target.closest && e.target.closest("#waterfall .wf-row");
    if (row && (e.key === "Enter" || e.key === " ")) { e.preventDefault(); pickCall(row.dataset.call); }
  });

  function copyText(button, code) {
    var cmd = code.textContent;
    button.dataset.copied = cmd;
    function said(ok) { button.textContent = ok ? "copied" : "select and copy the command"; }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(cmd).then(function () { said(true); }, function () { select(code); said(false); });
    } else {
      select(code);
      said(false);
    }
  }
  function select(node) {
    var range = document.createRange();
    range.selectNodeContents(node);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }

  function fromHash() {
    var h = location.hash.replace(/^#/, "");
    var m = /^seq-(\d+)$/.exec(h);
    var section = $("facts");
    if (m) {
      var seq = Number(m[1]);
      var li = $("seq-" + seq);
      if (li) {
        document.querySelectorAll(".fact-list .fact").forEach(function (f) { f.classList.toggle("selected", f === li); });
        var d = li.querySelector("details");
        if (d) d.open = true;
        if (li.hidden) { kindSel.value = ""; text.value = ""; state.call = ""; state.focus = ""; apply(); }
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
      try { state.call = decodeURIComponent(h.slice(5)); } catch (e) { return; }
      apply();
    }
  }
  window.addEventListener("hashchange", fromHash);

  // Live: a run still being recorded.
  var refreshing = false;
  var again = false;
  function refresh() {
    if (refreshing) { again = true; return; }
    refreshing = true;
    var open = new Set();
    document.querySelectorAll(".fact-list details[open]").forEach(function (d) {
      open.add(d.closest(".fact").id);
    });
    fetch(location.pathname + location.search, { credentials: "same-origin" }).then(function (r) {
      if (!r.ok) throw new Error(String(r.status));
      return r.text();
    }).then(function (html) {
      var doc = new DOMParser().parseFromString(html, "text/html");
      ["run-head", "run-body"].forEach(function (id) {
        var fresh = doc.getElementById(id);
        var old = $(id);
        if (fresh && old) old.replaceWith(document.adoptNode(fresh));
      });
      var known = new Set(Array.from(kindSel.options).map(function (o) { return o.value; }));
      var kinds = doc.getElementById("kind-filter");
      if (kinds) Array.from(kinds.options).forEach(function (o) {
        if (!known.has(o.value)) { var n = document.createElement("option"); n.textContent = o.value; kindSel.appendChild(n); }
      });
      open.forEach(function (id) { var li = $(id); if (li) { var d = li.querySelector("details"); if (d) d.open = true; } });
      document.body.dataset.updates = String(Number(document.body.dataset.updates || "0") + 1);
      apply();
    }).catch(function () {
      var head = $("run-head");
      if (head) head.dataset.liveError = "the console did not answer; reload the page";
    }).then(function () {
      refreshing = false;
      if (again) { again = false; refresh(); }
    });
  }
  var head = $("run-head");
  if (head && head.dataset.state === "running" && window.EventSource) {
    document.body.dataset.live = "following";
    var events = new EventSource(location.pathname + "/events?facts=" + encodeURIComponent(head.dataset.facts));
    events.addEventListener("run", function (e) {
      var parts = String(e.data).split(" ");
      if (parts[1] !== "running") {
        events.close();
        document.body.dataset.live = "closed";
      }
      refresh();
    });
  }

  apply();
  fromHash();
  document.body.dataset.runReady = "1";
})();
