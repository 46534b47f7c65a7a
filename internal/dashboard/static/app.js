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
// Times in UTC, as the command line prints them: the date only when it is not today.
function fmtTime(ms) {
  if (!ms) return "–";
  const iso = new Date(ms).toISOString();
  const today = new Date().toISOString().slice(0, 10);
  return (iso.slice(0, 10) === today ? "" : iso.slice(0, 10) + " ") + iso.slice(11, 23);
}
const fmtRate = (r) => (r >= 10 ? r.toFixed(0) : r.toFixed(1));
function setStatus(text, bad) {
  const s = $("#status");
  s.textContent = text;
  s.style.color = bad ? "var(--bad)" : "";
}

// ---- routing ----------------------------------------------------------------------------
let view = null; // {refresh(), stop()}
function route() {
  if (view) view.stop();
  const m = location.hash.match(/^#\/queue\/([^/]+)$/);
  view = m ? queueView(decodeURIComponent(m[1])) : queuesView();
}
window.addEventListener("hashchange", route);

function loop(fn, every) {
  let stopped = false, timer = null, running = false;
  const tick = async () => {
    if (stopped || running) return;
    running = true;
    try { await fn(); setStatus("updated " + new Date().toLocaleTimeString()); }
    catch (e) { setStatus(e.message, true); }
    finally { running = false; }
    if (!stopped) timer = setTimeout(tick, every);
  };
  tick();
  return { now: () => { clearTimeout(timer); tick(); }, stop: () => { stopped = true; clearTimeout(timer); } };
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
function chart(target, title, series) {
  const opts = {
    title, width: Math.max(target.clientWidth - 20, 300), height: 220,
    scales: { x: { time: true } },
    series: [{}, ...series.map(([label, stroke]) => ({ label, stroke, width: 2, spanGaps: false }))],
    axes: [{}, { size: 50 }],
  };
  return new uPlot(opts, [[], ...series.map(() => [])], target);
}

function queueView(name) {
  $("#crumbs").replaceChildren(el("a", { href: "#/" }, "Queues"), " / ", name);
  const badge = el("span", { class: "badge" });
  const info = el("div", { class: "muted" });
  const actions = el("div", { class: "actions" });
  const rates = el("div", { class: "card", id: "chart-rates" });
  const lag = el("div", { class: "card", id: "chart-lag" });
  const state = el("select", { id: "state" }, ["", "ready", "delayed", "in_flight"].map((s) => el("option", { value: s }, s || "every state")));
  const msgBody = el("tbody");
  const more = el("button", { id: "more", disabled: true }, "next page");
  const reload = el("button", { id: "refresh" }, "refresh");
  const viewerBox = el("div", { class: "card" }, el("p", { class: "muted" }, "Select a message to read its body."));
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
        el("div", { class: "actions" }, state, reload, more),
        el("table", { id: "messages" }, el("thead", {}, el("tr", {}, el("th", {}, ""), el("th", {}, "id"), el("th", {}, "state"),
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
  let row = null, cursor = "", selected = new Set();

  async function act(path, body, done) {
    actionResult.className = "result";
    actionResult.textContent = "…";
    try {
      const out = await api("/api/queues/" + q(name) + path, { method: "POST", body: body || {} });
      actionResult.className = "result done";
      actionResult.textContent = done(out || {});
      selected.clear();
      await Promise.all([loadMessages(true), l.now()]);
    } catch (e) {
      actionResult.className = "result error";
      actionResult.textContent = e.message;
    }
  }

  function renderActions() {
    const ops = [];
    if (!row || !row.operable) { actions.replaceChildren(el("span", { class: "muted" }, "this platform has no operator operations")); return; }
    ops.push(row.paused
      ? el("button", { id: "resume", class: "primary", onclick: () => act("/resume", {}, () => "resumed") }, "resume delivery")
      : el("button", { id: "pause", onclick: () => act("/pause", {}, () => "paused: sends are kept, nothing is delivered") }, "pause delivery"));
    if (row.sources) {
      ops.push(el("button", { id: "replay-all", class: "primary", onclick: () => act("/replay", {}, (o) => `replayed ${o.replayed} to ${o.to}`) }, "replay all to " + row.sources.join(", ")));
      ops.push(el("button", { id: "replay-selected", disabled: selected.size === 0, onclick: () => act("/replay", { ids: [...selected] }, (o) => `replayed ${o.replayed} to ${o.to}`) }, "replay selected"));
    }
    ops.push(el("button", { id: "delete-selected", class: "danger", disabled: selected.size === 0, onclick: () => act("/delete", { ids: [...selected] }, (o) => `deleted ${o.deleted}`) }, "delete selected"));
    ops.push(el("button", { id: "purge", class: "danger", onclick: () => {
      if (confirm(`Purge every message of ${name}: ${row.ready} ready, ${row.delayed} delayed, ${row.in_flight} in flight?`)) act("/purge", {}, (o) => `purged ${o.purged}`);
    } }, "purge…"));
    if (row.dead_letter_queue) ops.push(el("a", { href: "#/queue/" + q(row.dead_letter_queue) }, `dead-letter queue ${row.dead_letter_queue} (${row.dead_letters})`));
    actions.replaceChildren(...ops);
  }

  async function loadMessages(reset) {
    if (reset) { cursor = ""; msgBody.replaceChildren(); }
    const p = new URLSearchParams({ limit: 50 });
    if (state.value) p.set("state", state.value);
    if (cursor) p.set("cursor", cursor);
    const page = await api("/api/queues/" + q(name) + "/messages?" + p);
    cursor = page.next || "";
    more.disabled = !cursor;
    for (const m of page.messages) {
      const pick = el("input", { type: "checkbox", class: "pick", checked: selected.has(m.id), onclick: (ev) => {
        ev.stopPropagation();
        if (pick.checked) selected.add(m.id); else selected.delete(m.id);
        renderActions();
      } });
      const tr = el("tr", { class: "link", "data-id": m.id, onclick: () => {
        for (const r of msgBody.children) r.classList.remove("sel");
        tr.classList.add("sel");
        viewerBox.replaceChildren(el("div", { class: "mono muted" }, m.id, " · ", m.content_type, " · ", m.size + " bytes"),
          !readable(m) ? el("p", {}, "(not a JSON value: " + m.content_type + ")") : jsonView(m.body));
      } },
        el("td", {}, pick), el("td", { class: "mono" }, m.id.slice(0, 12) + "…"), el("td", {}, m.state),
        el("td", { class: "num" }, m.attempts), el("td", {}, fmtTime(m.timestamp)),
        el("td", {}, m.state === "delayed" ? fmtTime(m.due) : m.state === "in_flight" ? fmtTime(m.delivered) : "–"),
        el("td", { class: "mono body-preview" }, !readable(m) ? "(" + m.content_type + ")" : JSON.stringify(m.body)));
      msgBody.append(tr);
    }
    if (!msgBody.children.length) msgBody.append(el("tr", {}, el("td", { colspan: 7, class: "muted" }, "no messages")));
  }
  state.addEventListener("change", () => loadMessages(true).catch((e) => setStatus(e.message, true)));
  more.addEventListener("click", () => loadMessages(false).catch((e) => setStatus(e.message, true)));
  reload.addEventListener("click", () => loadMessages(true).catch((e) => setStatus(e.message, true)));

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
      await Promise.all([loadMessages(true), l.now()]);
    } catch (e) {
      sendResult.className = "result error";
      sendResult.textContent = e.message;
    }
  }

  const l = loop(async () => {
    const [rows, s, evs] = await Promise.all([api("/api/queues"), api("/api/queues/" + q(name) + "/series?seconds=120"), api("/api/events?queue=" + q(name))]);
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
      el("td", { class: "mono" }, e.id), el("td", {}, fmtTime(e.start)),
      el("td", {}, el("span", { class: "badge " + e.outcome }, e.outcome)), el("td", { class: "num" }, e.batch || 0),
      el("td", { class: "num" }, e.acked), el("td", { class: "num" }, e.retried), el("td", { class: "num" }, e.dead_lettered),
      el("td", { class: "num" }, e.duration_ms.toFixed(1) + " ms"), el("td", { class: "muted wrap" }, e.error || "", e.code ? el("div", { class: "gloss" }, e.code + ": " + e.gloss + (e.detail ? "; " + e.detail : "")) : null))));
  }, 2000);
  loadMessages(true).catch((e) => setStatus(e.message, true));
  return { stop: l.stop };
}

route();
