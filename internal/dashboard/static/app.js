// duilie's dashboard: plain DOM, one charting library (uPlot), no build step.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const main = $("#main");

// readable: the message's body is shown as itself (json or text); any other is base64.
function readable(m) { return m.content_type === "json" || m.content_type === "text"; }

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c !== null && c !== undefined) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

async function api(path, opts = {}) {
  const init = { method: opts.method || "GET", credentials: "same-origin", headers: {} };
  if (opts.body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(opts.body);
  }
  const res = await fetch(path, init);
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
  if (!res.ok) throw new Error((data && data.error) || text || res.statusText);
  return data;
}

const q = encodeURIComponent;

// One time format everywhere: UTC, as the command line prints times, 24-hour, to the second,
// with the date only when it is not today's (UTC). An element's title has the exact instant.
function fmtTime(ms) {
  if (!ms) return "–";
  const iso = new Date(ms).toISOString(); // YYYY-MM-DDTHH:MM:SS.mmmZ
  const today = new Date().toISOString().slice(0, 10);
  return (iso.slice(0, 10) === today ? "" : iso.slice(0, 10) + " ") + iso.slice(11, 19);
}
function timeEl(ms) {
  if (!ms) return "–";
  const iso = new Date(ms).toISOString();
  return el("time", { datetime: iso, title: iso }, fmtTime(ms));
}
const fmtRate = (r) => (r >= 10 ? r.toFixed(0) : r.toFixed(1));
function setStatus(text, bad) {
  const s = $("#status");
  s.textContent = text;
  s.style.color = bad ? "var(--bad)" : "";
}

// ---- routing ----------------------------------------------------------------------------
let view = null; // {stop()}; a queue's also has its charts
function route() {
  if (view) view.stop();
  const m = location.hash.match(/^#\/queue\/([^/]+)$/);
  view = m ? queueView(decodeURIComponent(m[1])) : queuesView();
}
window.addEventListener("hashchange", route);

// loop runs fn now and then every so often; now() runs it at once (again after a run in
// progress, so that what an action changed is shown).
function loop(fn, every) {
  let stopped = false, timer = null, running = null, again = false;
  const tick = async () => {
    if (stopped) return;
    if (running) { again = true; return running; }
    clearTimeout(timer);
    running = (async () => {
      try { await fn(); if (!stopped) setStatus("updated " + fmtTime(Date.now()) + " UTC"); }
      catch (e) { if (!stopped) setStatus(e.message, true); }
    })();
    await running;
    running = null;
    if (again) { again = false; return tick(); }
    if (!stopped) timer = setTimeout(tick, every);
  };
  tick();
  return { now: tick, stop: () => { stopped = true; clearTimeout(timer); } };
}

// ---- all queues -------------------------------------------------------------------------
function queuesView() {
  $("#crumbs").replaceChildren();
  const body = el("tbody");
  main.replaceChildren(
    el("h1", {}, "Queues"),
    el("div", { class: "card" }, el("table", { id: "queues" },
      el("thead", {}, el("tr", {},
        el("th", {}, "queue"), el("th", { class: "num" }, "ready"), el("th", { class: "num" }, "delayed"),
        el("th", { class: "num" }, "in flight"), el("th", { class: "num" }, "dead letters"),
        el("th", { class: "num" }, "sent/s"), el("th", { class: "num" }, "settled/s"), el("th", {}, "delivery"))),
      body)),
    el("p", { class: "muted" }, "Counts from the platform; rates over the last 10 s from the host's reports. ",
      el("a", { href: "/metrics" }, "/metrics"), " has the same for Prometheus."));
  const l = loop(async () => {
    const rows = await api("/api/queues");
    body.replaceChildren(...rows.map((r) => el("tr", { class: "link", "data-queue": r.queue, onclick: () => { location.hash = "#/queue/" + q(r.queue); } },
      el("td", {}, el("a", { href: "#/queue/" + q(r.queue) }, r.queue),
        r.sources ? el("span", { class: "muted" }, "  dead-letter queue of " + r.sources.join(", ")) : null),
      el("td", { class: "num", "data-col": "ready" }, r.ready),
      el("td", { class: "num", "data-col": "delayed" }, r.delayed),
      el("td", { class: "num", "data-col": "in_flight" }, r.in_flight),
      el("td", { class: "num", "data-col": "dead_letters" }, r.dead_letters === undefined ? "–" : r.dead_letters),
      el("td", { class: "num" }, fmtRate(r.send_rate)),
      el("td", { class: "num" }, fmtRate(r.settle_rate)),
      el("td", { "data-col": "paused" }, r.paused ? el("span", { class: "badge paused" }, "paused") : el("span", { class: "badge ok" }, "running")))));
    if (!rows.length) body.replaceChildren(el("tr", {}, el("td", { colspan: 8, class: "muted" }, "no queues yet")));
  }, 2000);
  return { stop: l.stop };
}

// ---- JSON viewer ------------------------------------------------------------------------
function jsonView(value) {
  const pre = el("pre", { class: "json", id: "viewer" });
  const text = JSON.stringify(value, null, 2);
  const re = /("(?:\\.|[^"\\])*")(\s*:)?|\b(true|false|null)\b|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/g;
  let last = 0, m;
  while ((m = re.exec(text))) {
    pre.append(text.slice(last, m.index));
    if (m[1]) { pre.append(el("span", { class: m[2] ? "k" : "s" }, m[1])); if (m[2]) pre.append(m[2]); }
    else if (m[3]) pre.append(el("span", { class: "l" }, m[3]));
    else pre.append(el("span", { class: "n" }, m[4]));
    last = re.lastIndex;
  }
  pre.append(text.slice(last));
  return pre;
}

// ---- one queue --------------------------------------------------------------------------
// textWidth is how wide text is drawn in an axis's font, in CSS pixels.
function textWidth(u, axis, text) {
  u.ctx.font = axis.font[0];
  return u.ctx.measureText(text).width / devicePixelRatio;
}

function chart(target, title, series) {
  const opts = {
    title, width: Math.max(target.clientWidth - 20, 300), height: 220,
    scales: { x: { time: true } },
    series: [{ value: (u, v) => (v == null ? "–" : fmtTime(v * 1000)) },
      ...series.map(([label, stroke]) => ({ label, stroke, width: 2, spanGaps: false }))],
    axes: [
      // Time labels as everywhere else, and never closer than the widest of them.
      { values: (u, splits) => splits.map((v) => fmtTime(v * 1000)),
        space: (u, i, min) => textWidth(u, u.axes[i], fmtTime(min == null ? Date.now() : min * 1000)) + 24 },
      // As wide as its longest label.
      { size: (u, values, i, cycle) => {
        const axis = u.axes[i];
        if (cycle > 1) return axis._size;
        const longest = (values || []).reduce((a, v) => (v.length > a.length ? v : a), "");
        return Math.ceil(axis.ticks.size + axis.gap + (longest ? textWidth(u, axis, longest) : 0)) + 4;
      } },
    ],
  };
  return new uPlot(opts, [[], ...series.map(() => [])], target);
}

// bodyText is a message's body as the table shows it.
function bodyText(m) { return !readable(m) ? "(" + m.content_type + ")" : JSON.stringify(m.body); }

// highlighted shows text with the first place that holds match (ignoring case) marked,
// starting a little before it, as text nodes: a body is never read as HTML.
function highlighted(text, match) {
  const i = match ? text.toLowerCase().indexOf(match.toLowerCase()) : -1;
  if (i < 0) return [text];
  const from = Math.max(0, i - 24);
  return [(from > 0 ? "…" : "") + text.slice(from, i), el("mark", {}, text.slice(i, i + match.length)), text.slice(i + match.length)];
}

function queueView(name) {
  $("#crumbs").replaceChildren(el("a", { href: "#/" }, "Queues"), " / ", name);
  const badge = el("span", { class: "badge" });
  const info = el("div", { class: "muted", id: "queue-info" });
  const actions = el("div", { class: "actions" });
  const rates = el("div", { class: "card", id: "chart-rates" });
  const lag = el("div", { class: "card", id: "chart-lag" });
  const state = el("select", { id: "state" }, ["", "ready", "delayed", "in_flight"].map((s) => el("option", { value: s }, s || "every state")));
  const filter = el("input", { id: "filter", type: "search", placeholder: "filter by id or body text", spellcheck: "false", autocomplete: "off" });
  const matchInfo = el("span", { id: "match-info", class: "muted" });
  const pickAll = el("input", { type: "checkbox", id: "pick-all", title: "select every message listed" });
  const msgBody = el("tbody");
  const more = el("button", { id: "more", disabled: true }, "next page");
  const reload = el("button", { id: "refresh" }, "refresh");
  const viewerBox = el("div", { class: "card", id: "viewer-box" }, el("p", { class: "muted" }, "Select a message to read its body."));
  const sendBody = el("textarea", { id: "send-body", spellcheck: "false" }, '{"hello":"duilie"}');
  const sendDelay = el("input", { id: "send-delay", type: "number", min: 0, max: 43200, value: 0 });
  const sendResult = el("div", { id: "send-result", class: "result" });
  const actionResult = el("div", { id: "action-result", class: "result" });
  const evBody = el("tbody");
  main.replaceChildren(
    el("h1", {}, name, badge), info, actions, actionResult,
    el("div", { class: "charts" }, rates, lag),
    el("h2", {}, "Messages"),
    el("div", { class: "grid2" },
      el("div", { class: "card" },
        el("div", { class: "actions" }, filter, state, reload, more, matchInfo),
        el("table", { id: "messages" }, el("thead", {}, el("tr", {}, el("th", {}, pickAll), el("th", {}, "id"), el("th", {}, "state"),
          el("th", { class: "num" }, "attempts"), el("th", {}, "enqueued"), el("th", {}, "due / delivered"), el("th", {}, "body"))), msgBody)),
      viewerBox),
    el("h2", {}, "Send a test message"),
    el("div", { class: "card" }, el("p", { class: "muted" }, "Sent with 发送队列消息 through one of the queue's bindings, with the interface's checks."),
      sendBody, el("div", { class: "actions" }, el("label", {}, "delay (s) ", sendDelay), el("button", { id: "send", class: "primary", onclick: send }, "send"))),
    sendResult,
    el("h2", {}, "Recent events"),
    el("div", { class: "card" }, el("table", { id: "events" }, el("thead", {}, el("tr", {}, el("th", {}, "event"), el("th", {}, "started"),
      el("th", {}, "outcome"), el("th", { class: "num" }, "batch"), el("th", { class: "num" }, "acked"), el("th", { class: "num" }, "retried"),
      el("th", { class: "num" }, "dead"), el("th", { class: "num" }, "duration"), el("th", {}, "error"))), evBody)));

  const charts = {
    rates: chart(rates, "messages per second", [["sent", "#2563eb"], ["delivered", "#7c3aed"], ["acked", "#15803d"], ["retried", "#b45309"], ["dead-lettered", "#b91c1c"]]),
    lag: chart(lag, "delivery lag (ms)", [["p50", "#0891b2"], ["p99", "#be185d"]]),
  };
  let row = null;
  // The message table: the messages listed (refreshed with the rest, as many as were loaded),
  // the cursor after them, the selected ids (always among those listed), the one open in the
  // viewer, and a generation that a new filter or state bumps so that older answers are dropped.
  let listed = [], cursor = "", rowsByID = new Map(), open = null, gen = 0;
  const selected = new Set();
  const matchText = () => filter.value.trim();

  async function act(path, body, done) {
    actionResult.className = "result";
    actionResult.textContent = "…";
    try {
      const out = await api("/api/queues/" + q(name) + path, { method: "POST", body: body || {} });
      actionResult.className = "result done";
      actionResult.textContent = done(out || {});
      selected.clear();
      await l.now();
    } catch (e) {
      actionResult.className = "result error";
      actionResult.textContent = e.message;
    }
  }

  function renderActions() {
    const ops = [];
    if (!row || !row.operable) { actions.replaceChildren(el("span", { class: "muted" }, "this platform has no operator operations")); return; }
    const n = selected.size, ids = () => [...selected];
    ops.push(row.paused
      ? el("button", { id: "resume", class: "primary", onclick: () => act("/resume", {}, () => "resumed") }, "resume delivery")
      : el("button", { id: "pause", onclick: () => act("/pause", {}, () => "paused: sends are kept, nothing is delivered") }, "pause delivery"));
    if (row.sources) {
      ops.push(el("button", { id: "replay-all", class: "primary", onclick: () => act("/replay", {}, (o) => `replayed ${o.replayed} to ${o.to}`) }, "replay all to " + row.sources.join(", ")));
      ops.push(el("button", { id: "replay-selected", disabled: n === 0, onclick: () => act("/replay", { ids: ids() }, (o) => `replayed ${o.replayed} to ${o.to}`) }, `replay ${n} selected`));
    }
    ops.push(el("button", { id: "delete-selected", class: "danger", disabled: n === 0, onclick: () => {
      if (confirm(`Delete ${n} selected message${n === 1 ? "" : "s"} of ${name}?`)) act("/delete", { ids: ids() }, (o) => `deleted ${o.deleted}`);
    } }, `delete ${n} selected…`));
    ops.push(el("button", { id: "purge", class: "danger", onclick: () => {
      if (confirm(`Purge every message of ${name}: ${row.ready} ready, ${row.delayed} delayed, ${row.in_flight} in flight?`)) act("/purge", {}, (o) => `purged ${o.purged}`);
    } }, "purge…"));
    if (row.dead_letter_queue) ops.push(el("a", { href: "#/queue/" + q(row.dead_letter_queue) }, `dead-letter queue ${row.dead_letter_queue} (${row.dead_letters})`));
    actions.replaceChildren(...ops);
  }

  function showMessage(m, gone) {
    viewerBox.replaceChildren(
      el("div", { class: "mono muted" }, m.id, " · ", m.content_type, " · ", m.size + " bytes"),
      gone ? el("p", { class: "result error" }, "no longer in " + name) : null,
      !readable(m) ? el("p", {}, "(not a JSON value: " + m.content_type + ")") : jsonView(m.body));
  }

  function messageRow(m, match) {
    const pick = el("input", { type: "checkbox", class: "pick", onclick: (ev) => {
      ev.stopPropagation();
      if (pick.checked) selected.add(m.id); else selected.delete(m.id);
      pickAll.checked = listed.length > 0 && listed.every((x) => selected.has(x.id));
      renderActions();
    } });
    const tr = el("tr", { class: "link", "data-id": m.id, onclick: () => {
      open = m.id;
      for (const r of msgBody.children) r.classList.toggle("sel", r === tr);
      showMessage(m);
    } },
      el("td", {}, pick), el("td", { class: "mono", title: m.id }, m.id.slice(0, 12) + "…"), el("td", {}, m.state),
      el("td", { class: "num" }, m.attempts), el("td", {}, timeEl(m.timestamp)),
      el("td", {}, m.state === "delayed" ? timeEl(m.due) : m.state === "in_flight" ? timeEl(m.delivered) : "–"),
      el("td", { class: "mono body-preview" }, highlighted(bodyText(m), match)));
    return tr;
  }

  // render shows these messages, keeping the rows (and their checkboxes) of those unchanged,
  // and drops from the selection any message no longer listed.
  function render(list, match) {
    listed = list;
    const ids = new Set(list.map((m) => m.id));
    for (const id of selected) if (!ids.has(id)) selected.delete(id);
    const next = new Map();
    const trs = list.map((m) => {
      const sig = JSON.stringify(m) + "\u0000" + match;
      let r = rowsByID.get(m.id);
      if (!r || r.sig !== sig) {
        r = { sig, m, tr: messageRow(m, match) };
        if (m.id === open) showMessage(m);
      }
      next.set(m.id, r);
      r.tr.querySelector("input.pick").checked = selected.has(m.id);
      r.tr.classList.toggle("sel", m.id === open);
      return r.tr;
    });
    if (open && !ids.has(open) && rowsByID.has(open)) showMessage(rowsByID.get(open).m, true);
    rowsByID = next;
    if (!trs.length) trs.push(el("tr", {}, el("td", { colspan: 7, class: "muted" }, match ? "no message matches" : "no messages")));
    if (trs.length !== msgBody.children.length || trs.some((tr, i) => msgBody.children[i] !== tr)) msgBody.replaceChildren(...trs);
    pickAll.checked = list.length > 0 && list.every((m) => selected.has(m.id));
    renderActions();
  }

  // loadMessages reads the table's messages: "reset" from the start (a new filter or state),
  // "refresh" from the start as many as are listed, "more" the next page after them.
  async function loadMessages(mode) {
    if (mode === "reset") { gen++; selected.clear(); cursor = ""; listed = []; rowsByID = new Map(); }
    const g = gen, match = matchText();
    const p = new URLSearchParams({ limit: mode === "refresh" ? Math.min(Math.max(50, listed.length), 1000) : 50 });
    if (state.value) p.set("state", state.value);
    if (match) p.set("match", match);
    if (mode === "more") p.set("cursor", cursor);
    const page = await api("/api/queues/" + q(name) + "/messages?" + p);
    if (g !== gen) return; // a newer filter or state asked since
    cursor = page.next || "";
    more.disabled = !cursor;
    const seen = new Set(mode === "more" ? listed.map((m) => m.id) : []);
    const list = mode === "more" ? listed.concat(page.messages.filter((m) => !seen.has(m.id))) : page.messages;
    render(list, match);
    matchInfo.textContent = !match ? "" : `${list.length} matching` + (cursor ? ` so far (${page.scanned} read; next page reads on)` : "");
  }
  const loadOrSay = (mode) => loadMessages(mode).catch((e) => setStatus(e.message, true));
  let typing = null;
  filter.addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(() => loadOrSay("reset"), 250); });
  state.addEventListener("change", () => loadOrSay("reset"));
  more.addEventListener("click", () => loadOrSay("more"));
  reload.addEventListener("click", () => l.now());
  pickAll.addEventListener("click", () => {
    for (const m of listed) if (pickAll.checked) selected.add(m.id); else selected.delete(m.id);
    for (const r of rowsByID.values()) r.tr.querySelector("input.pick").checked = selected.has(r.tr.dataset.id);
    renderActions();
  });

  async function send() {
    sendResult.className = "result";
    sendResult.textContent = "…";
    try {
      const out = await api("/api/queues/" + q(name) + "/send", { method: "POST", body: { body: sendBody.value, delay: Number(sendDelay.value) || 0 } });
      if (!out.sent) {
        sendResult.className = "result error";
        sendResult.textContent = out.exception + (out.code ? " — " + out.code + ": " + out.gloss + (out.detail ? "; " + out.detail : "") : "");
        return;
      }
      sendResult.className = "result done";
      sendResult.textContent = "sent through " + out.binding;
      await l.now();
    } catch (e) {
      sendResult.className = "result error";
      sendResult.textContent = e.message;
    }
  }

  // Everything on the page is read again together, the message table too, so its rows and
  // the counts above it are of the same moment.
  const l = loop(async () => {
    const [rows, s, evs] = await Promise.all([api("/api/queues"), api("/api/queues/" + q(name) + "/series?seconds=120"),
      api("/api/events?queue=" + q(name)), loadMessages("refresh")]);
    row = rows.find((r) => r.queue === name) || null;
    if (!row) { info.textContent = "no such queue"; return; }
    badge.className = "badge " + (row.paused ? "paused" : "ok");
    badge.textContent = row.paused ? "paused" : "running";
    badge.id = "queue-state";
    info.textContent = `${row.ready} ready · ${row.delayed} delayed · ${row.in_flight} in flight` +
      (row.bindings ? " · sent through " + row.bindings.join(", ") : "");
    renderActions();
    charts.rates.setData([s.t, s.sent, s.delivered, s.acked, s.retried, s.dead_lettered]);
    charts.lag.setData([s.t, s.lag_p50_ms, s.lag_p99_ms]);
    evBody.replaceChildren(...evs.map((e) => el("tr", {},
      el("td", { class: "mono" }, e.id), el("td", {}, timeEl(e.start)),
      el("td", {}, el("span", { class: "badge " + e.outcome }, e.outcome)), el("td", { class: "num" }, e.batch || 0),
      el("td", { class: "num" }, e.acked), el("td", { class: "num" }, e.retried), el("td", { class: "num" }, e.dead_lettered),
      el("td", { class: "num" }, e.duration_ms.toFixed(1) + " ms"), el("td", { class: "muted wrap" }, e.error || "", e.code ? el("div", { class: "gloss" }, e.code + ": " + e.gloss + (e.detail ? "; " + e.detail : "")) : null))));
  }, 2000);
  return { stop: l.stop, charts };
}

route();
