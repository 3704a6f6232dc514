// toolgate console: the page beside the agent. Plain DOM, no framework.
// Every piece of server data is inserted with textContent (descriptions come
// from hostile repositories): never as HTML markup.
"use strict";

(function () {
  var TOKEN_KEY = "toolgate-token";
  var MAX_ROWS = 500;
  var STALL_MS = 45000;
  var token = null;
  var stopped = false;

  // ---------- small DOM helpers ----------
  function $(id) { return document.getElementById(id); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function button(cls, text, onClick) {
    var b = el("button", cls, text);
    b.type = "button";
    b.addEventListener("click", function () { onClick(b); });
    return b;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function pad(n) { return n < 10 ? "0" + n : String(n); }
  function clock(ms) {
    var d = new Date(ms);
    return pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
  }
  function fullDate(ms) { return new Date(ms).toLocaleString(); }
  function timeEl(ms) {
    if (typeof ms !== "number") return el("span", "muted", "—");
    var t = el("time", "when", clock(ms));
    t.title = fullDate(ms);
    t.dateTime = new Date(ms).toISOString();
    return t;
  }
  function duration(us) {
    if (typeof us !== "number") return "—";
    if (us < 1000) return Math.round(us) + " µs";
    if (us < 1000000) return (us / 1000).toFixed(1) + " ms";
    return (us / 1000000).toFixed(2) + " s";
  }
  function orDash(v) { return v === null || v === undefined || v === "" ? "—" : String(v); }

  // ---------- notices ----------
  var noticeTimer = null;
  function notice(kind, text, action) {
    var box = $("notice"), bar = $("notice-bar");
    clear(box);
    box.dataset.kind = bar.dataset.kind = kind;
    box.appendChild(el("span", null, text));
    if (action) { box.appendChild(document.createTextNode(" ")); box.appendChild(action); }
    box.hidden = bar.hidden = false;
    if (noticeTimer) clearTimeout(noticeTimer);
    noticeTimer = action ? null : setTimeout(hideNotice, 12000);
  }
  function hideNotice() {
    $("notice").hidden = $("notice-bar").hidden = true;
    clear($("notice"));
    if (noticeTimer) clearTimeout(noticeTimer);
    noticeTimer = null;
  }
  function fatal(text) { $("fatal").textContent = text; $("fatal").hidden = false; $("content").hidden = true; }

  // ---------- API ----------
  var TOKEN_REFUSED = "the token is not accepted: open the console again with the address toolgate printed";
  function ApiError(status, message) { this.status = status; this.message = message; }
  function api(path, body) {
    var opts = { headers: { Authorization: "Bearer " + token }, cache: "no-store", credentials: "omit" };
    if (body !== undefined) {
      opts.method = "POST";
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    return fetch(path, opts).then(function (res) {
      return res.text().then(function (text) {
        var data = null;
        try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
        if (res.status === 401) {
          fatal(TOKEN_REFUSED);
          throw new ApiError(401, TOKEN_REFUSED);
        }
        if (!res.ok) {
          var msg = data && typeof data.error === "string" ? data.error
            : "the console answered " + res.status + " " + (res.statusText || "");
          throw new ApiError(res.status, msg);
        }
        return data || {};
      });
    }, function () {
      throw new ApiError(0, "toolgate cannot be reached (is it still running?)");
    });
  }
  function complain(err) {
    if (err && err.status === 401) return;
    notice("error", err && err.message ? err.message : String(err));
  }

  // ---------- header and policy (/api/overview) ----------
  function loadOverview() {
    return api("/api/overview").then(function (o) {
      $("workspace").textContent = orDash(o.workspace);
      $("mode").textContent = "mode: " + orDash(o.mode);
      $("mode").hidden = !o.mode;
      $("version").textContent = o.version ? "toolgate " + o.version : "";
      renderPolicy(o.layers || [], o.ignored || []);
    }).catch(complain);
  }
  function renderPolicy(layers, ignored) {
    var list = $("policy-layers");
    clear(list);
    layers.forEach(function (l) {
      var li = el("li", "layer");
      var head = el("div", "layer-head");
      head.appendChild(el("strong", "layer-kind", orDash(l.kind)));
      head.appendChild(el("span", "layer-origin mono", orDash(l.origin)));
      head.appendChild(el("span", l.trusted ? "pill trusted" : "pill untrusted", l.trusted ? "trusted" : "not trusted"));
      li.appendChild(head);
      var applied = l.applied || [];
      if (applied.length) {
        var ul = el("ul", "applied");
        applied.forEach(function (a) { ul.appendChild(el("li", "mono", a)); });
        li.appendChild(ul);
      } else {
        li.appendChild(el("p", "muted small", "Sets nothing."));
      }
      list.appendChild(li);
    });
    if (!layers.length) list.appendChild(el("li", "empty", "No policy layer was reported."));
    fillIgnored("policy-ignored", "policy-ignored-box", ignored);
  }
  function fillIgnored(listId, boxId, lines) {
    var ul = $(listId);
    clear(ul);
    lines.forEach(function (s) { ul.appendChild(el("li", null, s)); });
    $(boxId).hidden = !lines.length;
  }

  // ---------- approvals ----------
  var CHOICE_LABEL = { once: "Allow once", session: "Allow for this session", project: "Allow for the project", deny: "Deny" };
  var RISK_LABEL = { read: "reads files", write: "changes files", exec: "runs a command", network: "uses the network" };
  var cards = new Map();     // id -> {node, deadline, countdown}
  var answered = new Set();  // ids answered from this page (a stale queue must not bring them back)

  function renderApprovals(pending) {
    var list = $("approvals-list");
    var seen = new Set();
    var now = Date.now();
    var placed = 0;
    pending.forEach(function (req) {
      if (!req || typeof req.id !== "string" || answered.has(req.id)) return;
      seen.add(req.id);
      var card = cards.get(req.id);
      if (!card) {
        card = buildCard(req);
        cards.set(req.id, card);
      }
      if (typeof req.expires_in_secs === "number") card.deadline = now + req.expires_in_secs * 1000;
      var at = list.children[placed++] || null;
      if (at !== card.node) list.insertBefore(card.node, at);
    });
    cards.forEach(function (card, id) {
      if (!seen.has(id)) dropCard(id);
    });
    tick();
    updateCount();
  }
  function dropCard(id) {
    var card = cards.get(id);
    if (!card) return;
    if (card.node.parentNode) card.node.parentNode.removeChild(card.node);
    cards.delete(id);
    updateCount();
  }
  function updateCount() {
    var n = cards.size;
    var badge = $("approvals-count");
    badge.textContent = String(n);
    badge.hidden = n === 0;
    $("approvals-empty").hidden = n !== 0;
    $("approvals").classList.toggle("waiting", n !== 0);
    document.title = n ? "(" + n + ") toolgate console" : "toolgate console";
  }
  function buildCard(req) {
    var node = el("section", "approval");
    node.dataset.id = req.id;
    node.setAttribute("aria-label", "Approval for " + orDash(req.tool));
    var head = el("div", "approval-head");
    head.appendChild(el("span", "tool", orDash(req.tool)));
    head.appendChild(el("code", "key", orDash(req.key)));
    head.appendChild(el("span", "pill risk risk-" + (RISK_LABEL[req.risk] ? req.risk : "other"),
      RISK_LABEL[req.risk] || orDash(req.risk)));
    var countdown = el("span", "countdown", "");
    head.appendChild(countdown);
    node.appendChild(head);

    var meta = el("div", "approval-meta");
    meta.appendChild(el("span", "muted", "session "));
    meta.appendChild(el("code", "session", orDash(req.session)));
    if (typeof req.asked_ms === "number") {
      meta.appendChild(el("span", "muted", " · asked at "));
      meta.appendChild(timeEl(req.asked_ms));
    }
    node.appendChild(meta);
    node.appendChild(describe(req.description || ""));

    var buttons = el("div", "choices"), scopes = req.scopes || [];
    (req.choices || []).forEach(function (c) {
      if (!CHOICE_LABEL[c]) return; // session with scopes: a button per scope, narrowest first ("session:N"), the widest "session"
      (c === "session" && scopes.length > 1 ? scopes.map(function (s, i) { return [i < scopes.length - 1 ? c + ":" + i : c, CHOICE_LABEL[c] + ": " + s.key, s.allows]; }) : [[c, CHOICE_LABEL[c]]]).forEach(function (o) {
        var b = button(c === "deny" ? "danger" : (c === "once" ? "primary" : "secondary"), o[1], function () { answer(req, o[0], node); });
        b.dataset.answer = o[0];
        if (o[2]) { b.appendChild(el("br")); b.appendChild(el("small", "allows", o[2])); }
        buttons.appendChild(b);
      });
    });
    node.appendChild(buttons);
    return { node: node, deadline: null, countdown: countdown };
  }
  // The description is plain text; a unified diff inside it is colored line by line.
  function describe(text) {
    var pre = el("pre", "description");
    var lines = String(text).split("\n");
    var inDiff = false;
    lines.forEach(function (line, i) {
      var cls = "line";
      var next = lines[i + 1] || "", prev = lines[i - 1] || "";
      if (line.indexOf("--- ") === 0 && next.indexOf("+++ ") === 0) { cls = "line line-file"; inDiff = true; }
      else if (line.indexOf("+++ ") === 0 && prev.indexOf("--- ") === 0) { cls = "line line-file"; inDiff = true; }
      else if (line.indexOf("@@") === 0) { cls = "line line-hunk"; inDiff = true; }
      else if (inDiff && line.charAt(0) === "+") cls = "line line-add";
      else if (inDiff && line.charAt(0) === "-") cls = "line line-del";
      else if (inDiff && line.charAt(0) === "\\") cls = "line line-meta";
      pre.appendChild(el("span", cls, i < lines.length - 1 ? line + "\n" : line));
    });
    return pre;
  }
  function answer(req, choice, node) {
    var buttons = node.querySelectorAll("button");
    buttons.forEach(function (b) { b.disabled = true; });
    node.classList.add("sending");
    api("/api/approvals/answer", { id: req.id, input_sha256: req.input_sha256, answer: choice })
      .then(function () {
        answered.add(req.id);
        dropCard(req.id);
      }, function (err) {
        if (err.status === 409 || err.status === 400) {
          answered.add(req.id);
          dropCard(req.id);
          notice("error", err.message);
          return;
        }
        buttons.forEach(function (b) { b.disabled = false; });
        node.classList.remove("sending");
        complain(err);
      });
  }
  function tick() {
    var now = Date.now();
    cards.forEach(function (card) {
      if (card.deadline === null) { card.countdown.textContent = ""; return; }
      var left = Math.max(0, Math.round((card.deadline - now) / 1000));
      card.countdown.textContent = left > 0
        ? "answer within " + Math.floor(left / 60) + ":" + pad(left % 60)
        : "time is up";
      card.countdown.classList.toggle("soon", left <= 30);
      card.countdown.title = "Without an answer the call is refused at " + clock(card.deadline);
    });
  }
  var queueFromStream = false; // the stream's queue is newer than any answer to GET
  function loadApprovals() {
    return api("/api/approvals").then(function (d) {
      if (!queueFromStream) renderApprovals(d.pending || []);
    }).catch(complain);
  }

  // ---------- audit ----------
  var rows = new Map(); // call_id -> tr
  var recentEvents = null; // calls from events while a full reload is in flight
  function callRow(c) {
    var tr = el("tr");
    tr.dataset.call = c.call_id;
    var status = typeof c.status === "string" ? c.status : "";
    var scls = status === "ok" || status === "error" || status === "denied" ? status : "other";
    tr.className = "status-" + scls;
    tr.appendChild(el("td", "col-time")).appendChild(timeEl(c.started_ms));
    tr.appendChild(el("td", "col-session mono", orDash(c.session)));
    tr.appendChild(el("td", "col-tool", orDash(c.tool)));
    var key = el("td", "col-key mono", orDash(c.key));
    key.title = orDash(c.call_id);
    tr.appendChild(key);
    var dec = c.decision ? c.decision + (c.stage ? "@" + c.stage : "") : "—";
    tr.appendChild(el("td", "col-decision mono decision-" + (c.decision || "none"), dec));
    var st = el("td", "col-status");
    var pill = el("span", "status status-" + scls, status || "—");
    st.appendChild(pill);
    if (c.error_code) st.appendChild(el("span", "error-code mono", c.error_code));
    tr.appendChild(st);
    tr.appendChild(el("td", "col-duration num", duration(c.duration_us)));
    return tr;
  }
  function addCall(c, atTop) {
    if (!c || typeof c.call_id !== "string") return;
    var body = $("audit-table").tBodies[0];
    var tr = callRow(c);
    var old = rows.get(c.call_id);
    if (old && old.parentNode) {
      if (atTop) { old.parentNode.removeChild(old); body.insertBefore(tr, body.firstChild); }
      else old.parentNode.replaceChild(tr, old);
    } else if (atTop) {
      body.insertBefore(tr, body.firstChild);
    } else {
      body.appendChild(tr);
    }
    rows.set(c.call_id, tr);
    while (body.rows.length > MAX_ROWS) {
      var last = body.rows[body.rows.length - 1];
      rows.delete(last.dataset.call);
      body.removeChild(last);
    }
    $("audit-empty").hidden = body.rows.length !== 0;
  }
  function onCallEvent(c) {
    if (recentEvents) recentEvents.push(c);
    addCall(c, true);
  }
  function loadCalls() {
    recentEvents = [];
    return api("/api/calls?limit=200").then(function (d) {
      var body = $("audit-table").tBodies[0];
      clear(body);
      rows.clear();
      var listed = new Set();
      (d.calls || []).forEach(function (c) {
        if (c && c.call_id) listed.add(c.call_id);
        addCall(c, false);
      });
      (recentEvents || []).forEach(function (c) {
        if (c && !listed.has(c.call_id)) addCall(c, true);
      });
      recentEvents = null;
      $("audit-empty").hidden = body.rows.length !== 0;
    }).catch(function (e) { recentEvents = null; complain(e); });
  }

  // ---------- history and undo ----------
  var ORIGIN_LABEL = { original: "as it was first seen", external: "changed outside toolgate",
    tool: "written by a tool", absent: "did not exist", undo: "restored by an undo" };
  var historyPath = "";
  var historySeq = 0;
  function loadHistory() {
    var seq = ++historySeq;
    var q = historyPath ? "?path=" + encodeURIComponent(historyPath) : "";
    return api("/api/history" + q).then(function (d) {
      if (seq === historySeq) renderHistory(d.files || []);
    }).catch(complain);
  }
  function renderHistory(files) {
    var list = $("history-list");
    clear(list);
    files.forEach(function (f) {
      var art = el("article", "file");
      art.appendChild(el("h3", "file-path mono", orDash(f.path)));
      var ol = el("ol", "versions");
      (f.versions || []).slice().reverse().forEach(function (v) { ol.appendChild(versionRow(v)); });
      art.appendChild(ol);
      list.appendChild(art);
    });
    var empty = $("history-empty");
    empty.textContent = historyPath ? "No change is recorded for this path." : "No file has been changed yet.";
    empty.hidden = files.length !== 0;
  }
  function versionRow(v) {
    var li = el("li", "version origin-" + (ORIGIN_LABEL[v.origin] ? v.origin : "other"));
    li.appendChild(timeEl(v.at_ms));
    li.appendChild(el("span", "origin", ORIGIN_LABEL[v.origin] || orDash(v.origin)));
    var who = el("span", "who");
    if (v.tool) who.appendChild(el("span", "tool", v.tool));
    if (v.session) { who.appendChild(el("span", "muted", " session ")); who.appendChild(el("code", null, v.session)); }
    if (v.call_id) { who.appendChild(el("span", "muted", " call ")); who.appendChild(el("code", null, v.call_id)); }
    li.appendChild(who);
    var counts = el("span", "counts mono");
    if (typeof v.added === "number" || typeof v.removed === "number") {
      counts.appendChild(el("span", "added", "+" + (v.added || 0)));
      counts.appendChild(document.createTextNode(" "));
      counts.appendChild(el("span", "removed", "−" + (v.removed || 0)));
    }
    li.appendChild(counts);
    var act = el("span", "actions");
    if ((v.origin === "tool" || v.origin === "undo") && v.call_id) {
      var b = button("undo", "Undo", function () { undo(v.call_id, false, b); });
      b.dataset.call = v.call_id;
      b.title = "Put back the files as they were before this call";
      act.appendChild(b);
    }
    li.appendChild(act);
    if (v.note) { li.classList.add("has-note"); li.appendChild(el("p", "note", v.note)); }
    return li;
  }
  function undo(callId, force, btn) {
    if (btn) btn.disabled = true;
    api("/api/undo", { call_id: callId, force: force }).then(function (d) {
      var parts = (d.files || []).map(function (f) {
        var s = orDash(f.path) + " " + orDash(f.action);
        return f.overrode ? s + " (" + f.overrode + ")" : s;
      });
      notice("info", "undone: " + (parts.length ? parts.join(", ") : "nothing to change"));
      loadHistory();
    }, function (err) {
      if (btn) btn.disabled = false;
      if (err.status === 409 && !force) {
        var again = button("undo-force danger", "Undo anyway", function (b) { undo(callId, true, b); });
        again.dataset.call = callId;
        notice("error", err.message, again);
        return;
      }
      complain(err);
    });
  }

  // ---------- grants ----------
  function loadGrants() {
    return api("/api/grants").then(renderGrants).catch(complain);
  }
  function revokeButton(scope, key, session) {
    var b = button("revoke secondary", "Revoke", function () {
      b.disabled = true;
      var body = scope === "session" ? { scope: scope, session: session, key: key } : { scope: scope, key: key };
      api("/api/grants/revoke", body).then(function (d) {
        var n = typeof d.revoked === "number" ? d.revoked : 0;
        notice("info", n ? "revoked: " + key : "nothing to revoke: " + key + " was already gone");
        loadGrants();
      }, function (err) { b.disabled = false; complain(err); });
    });
    b.dataset.scope = scope;
    b.dataset.key = key;
    if (scope === "session") b.dataset.session = session;
    return b;
  }

  function renderGrants(g) {
    var proj = $("grants-project"), sess = $("grants-session");
    clear(proj); clear(sess);
    (g.project || []).forEach(function (p) {
      var li = el("li", "row");
      li.appendChild(el("code", "key", orDash(p.key)));
      li.appendChild(el("span", "source mono muted", orDash(p.source)));
      li.appendChild(revokeButton("project", p.key, null));
      proj.appendChild(li);
    });
    (g.session || []).forEach(function (s) {
      var li = el("li", "row");
      li.appendChild(el("code", "key", orDash(s.key)));
      var who = el("span", "source");
      who.appendChild(el("span", "muted", "session "));
      who.appendChild(el("code", null, orDash(s.session)));
      li.appendChild(who);
      li.appendChild(revokeButton("session", s.key, s.session));
      sess.appendChild(li);
    });
    $("grants-project-empty").hidden = proj.children.length !== 0;
    $("grants-session-empty").hidden = sess.children.length !== 0;
    fillIgnored("grants-ignored", "grants-ignored-box", g.ignored || []);
  }

  // ---------- events stream ----------
  var connectedOnce = false;
  function setStatus(live, text) {
    var s = $("status");
    s.dataset.state = live ? "live" : "reconnecting";
    s.textContent = text || (live ? "live" : "reconnecting…");
    s.title = live ? "Connected: calls without another way to ask wait for your answer here"
      : "Not connected to toolgate; trying again";
  }
  function dispatch(name, data) {
    var obj = null;
    try { obj = data ? JSON.parse(data) : {}; } catch (e) { return; }
    if (name === "hello") {
      if (connectedOnce) { loadCalls(); loadHistory(); }
      connectedOnce = true;
    } else if (name === "approvals") {
      queueFromStream = true;
      renderApprovals((obj && obj.pending) || []);
    } else if (name === "call") {
      onCallEvent(obj);
    } else if (name === "history") {
      loadHistory();
    }
  }
  function parseFrame(frame) {
    var name = "message", data = [], any = false;
    frame.split("\n").forEach(function (line) {
      if (line === "" || line.charAt(0) === ":") return;
      var i = line.indexOf(":");
      var field = i < 0 ? line : line.slice(0, i);
      var value = i < 0 ? "" : line.slice(i + 1);
      if (value.charAt(0) === " ") value = value.slice(1);
      if (field === "event") name = value;
      else if (field === "data") { data.push(value); any = true; }
    });
    if (any) dispatch(name, data.join("\n"));
  }
  function connect() {
    if (stopped) return;
    var ctl = new AbortController();
    var stall = null;
    function watch() {
      if (stall) clearTimeout(stall);
      stall = setTimeout(function () { ctl.abort(); }, STALL_MS);
    }
    function retry() {
      if (stall) clearTimeout(stall);
      if (stopped) return;
      setStatus(false);
      setTimeout(connect, 1000);
    }
    watch();
    fetch("/api/events", {
      headers: { Authorization: "Bearer " + token, Accept: "text/event-stream" },
      cache: "no-store", credentials: "omit", signal: ctl.signal
    }).then(function (res) {
      if (res.status === 401) {
        stopped = true;
        if (stall) clearTimeout(stall);
        fatal(TOKEN_REFUSED);
        setStatus(false, "token refused");
        return;
      }
      if (!res.ok || !res.body) { retry(); return; }
      setStatus(true);
      var reader = res.body.getReader();
      var decoder = new TextDecoder();
      var buf = "";
      function pump() {
        return reader.read().then(function (r) {
          if (r.done) { retry(); return; }
          watch();
          buf += decoder.decode(r.value, { stream: true });
          buf = buf.replace(/\r\n/g, "\n");
          var cut;
          while ((cut = buf.indexOf("\n\n")) >= 0) {
            var frame = buf.slice(0, cut);
            buf = buf.slice(cut + 2);
            parseFrame(frame);
          }
          return pump();
        });
      }
      return pump();
    }).catch(function () { retry(); });
  }

  // ---------- token and start ----------
  function readToken() {
    var m = /^#token=([^&]+)/.exec(location.hash || "");
    var t = null;
    if (m) {
      try { t = decodeURIComponent(m[1]); } catch (e) { t = m[1]; }
      try { sessionStorage.setItem(TOKEN_KEY, t); } catch (e) { /* storage may be off: keep it in memory */ }
      history.replaceState(null, "", location.pathname);
    } else {
      try { t = sessionStorage.getItem(TOKEN_KEY); } catch (e) { t = null; }
    }
    return t;
  }
  function start() {
    token = readToken();
    setStatus(false);
    if (!token) {
      stopped = true;
      fatal("Open the console with the address `toolgate console` printed (it carries the token).");
      $("content").hidden = true;
      setStatus(false, "no token");
      return;
    }
    updateCount();
    $("grants-refresh").addEventListener("click", loadGrants);
    $("notice-close").addEventListener("click", hideNotice);
    var input = $("history-path"), typing = null;
    function filter() {
      var p = input.value.trim();
      if (p === historyPath) return;
      historyPath = p;
      loadHistory();
    }
    input.addEventListener("input", function () { clearTimeout(typing); typing = setTimeout(filter, 300); });
    input.addEventListener("keydown", function (e) { if (e.key === "Enter") filter(); });
    setInterval(tick, 1000);
    connect();
    loadOverview(); loadApprovals(); loadCalls(); loadHistory(); loadGrants();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
