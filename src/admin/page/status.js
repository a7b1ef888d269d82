// The status page's only script: polls status.json every second and redraws in place.
// Everything is built with DOM calls and textContent (never innerHTML), so keys and client
// names from the slow log cannot inject markup.
"use strict";

const POLL_MS = 1000;
const PALETTE = ["#3b7dd8", "#e0803a", "#3aa676", "#9b59b6", "#d04f6a", "#2fa3b5",
  "#b8a02a", "#6d7fd9", "#c0683f", "#5a9e3a", "#a0529b", "#47807f"];

function $(id) { return document.getElementById(id); }

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "style") node.style.cssText = v;
    else if (k === "class") node.className = v;
    else node.setAttribute(k, String(v));
  }
  for (const c of children) node.append(c instanceof Node ? c : String(c));
  return node;
}

function colour(shard) { return shard == null ? "" : PALETTE[shard % PALETTE.length]; }

function num(v, digits) {
  if (v == null) return "–";
  if (v >= 10000) return (v / 1000).toFixed(1) + "k";
  return v.toFixed(digits === undefined ? (v < 10 && v % 1 ? 1 : 0) : digits);
}

function us(v) {
  if (v == null || v === 0) return "–";
  if (v < 1000) return v + " µs";
  if (v < 1000000) return (v / 1000).toFixed(v < 10000 ? 2 : 1) + " ms";
  return (v / 1000000).toFixed(2) + " s";
}

function duration(s) {
  const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
  if (d) return d + "d " + h + "h";
  if (h) return h + "h " + m + "m";
  return m + "m " + (s % 60) + "s";
}

function clock(ms) {
  const t = new Date(ms);
  return t.toTimeString().slice(0, 8);
}

function header(s) {
  const ready = $("ready");
  ready.textContent = s.ready ? "ready" : "not ready";
  ready.className = "pill " + (s.ready ? "ok" : "bad");
  $("rate").textContent = num(s.commands_per_s);
  $("clients").textContent = s.clients;
  nearCache(s.near_cache);
  workers(s.workers);
  $("owned").textContent = s.owned_slots + " / 16384";
  $("source").textContent = s.source || "–";
  $("uptime").textContent = duration(s.uptime_s);
  $("version").textContent = s.version;
  // The server keeps the last two minutes, so the line is full from the first load.
  const history = s.commands_per_s_history;
  const max = Math.max(1, ...history);
  const step = 120 / Math.max(1, history.length - 1);
  const points = history.map((r, i) =>
    (i * step).toFixed(1) + "," + (31 - r / max * 30).toFixed(1));
  document.querySelector("#spark polyline").setAttribute("points", points.join(" "));
}

// The near cache's hit ratio since the last refresh (since start-up on the first), and its size.
let nearLast = null;
function nearCache(n) {
  $("nearcache").hidden = !n;
  if (!n) return;
  const prev = nearLast || { hits: 0, misses: 0 };
  const hits = n.hits - prev.hits, reads = hits + n.misses - prev.misses;
  nearLast = n;
  const ratio = reads > 0 ? Math.round(hits / reads * 100) + "% hits" : "idle";
  $("nearhits").textContent = ratio + " · " + bytes(n.bytes);
}

// Per-core workers: each one's clients and busy share, and where new clients go.
function workers(w) {
  $("workers").hidden = !w;
  if (!w) return;
  const each = w.each.map(x => x.clients + " · " + Math.round(x.busy * 100) + "%");
  $("workerload").textContent = each.join(" | ") + (w.packing ? " (packing)" : " (even)");
}

function slotbar(s) {
  const bar = $("slotbar");
  bar.replaceChildren(...s.ranges.map(r => {
    const size = r.end - r.start + 1;
    const shard = r.shard == null ? "none" : r.shard;
    const seg = el("div", {
      class: "seg" + (r.shard == null ? " unowned" : ""),
      "data-start": r.start, "data-end": r.end, "data-shard": shard,
      title: `slots ${r.start}–${r.end} (${size}): ` +
        (r.shard == null ? "unowned" : "shard " + r.shard + ", " + s.shards[r.shard].nodes[0].addr),
      style: `flex: ${size} 1 0; background: ${colour(r.shard)}`,
    });
    if (size > 1200) seg.textContent = r.shard == null ? "unowned" : `${r.start}–${r.end}`;
    return seg;
  }));
}

function shardOfSlot(s, slot) {
  const range = s.ranges.find(r => r.start <= slot && slot <= r.end);
  return range ? range.shard : null;
}

// A node that left the slot map: shown (greyed) until redcar forgets it.
function goneRow(g, shard) {
  const since = `left the slot map at ${clock(g.since_ms)}`;
  return el("tr", {
    class: "node gone " + g.role, "data-addr": g.addr, "data-role": g.role,
    "data-health": "gone", "data-shard": shard == null ? "none" : shard,
  },
    el("td", {}),
    el("td", { class: "addr" }, g.addr),
    el("td", { class: "role" }, g.role),
    el("td", {}, el("span", { class: "badge gone", title: since }, "gone")),
    el("td", { class: "num since", colspan: 8 }, since));
}

function nodes(s) {
  const rows = [];
  const departed = s.departed.map(g => [g, shardOfSlot(s, g.slot)]);
  for (const shard of s.shards) {
    rows.push(el("tr", { class: "shard-head", "data-shard": shard.index },
      el("td", {}, el("span", { class: "swatch", style: "background:" + colour(shard.index) })),
      el("td", { colspan: 11 },
        `shard ${shard.index} · ${shard.slots} slots · config epoch ${shard.epoch}`)));
    for (const n of shard.nodes) {
      rows.push(el("tr", {
        class: "node " + n.role, "data-addr": n.addr, "data-role": n.role,
        "data-health": n.health, "data-shard": shard.index,
      },
        el("td", {}),
        el("td", { class: "addr" }, n.addr),
        el("td", { class: "role" }, n.role),
        el("td", {}, el("span", {
          class: "badge " + n.health,
          title: n.health === "ejected" ? `back in ${(n.ejected_for_ms / 1000).toFixed(1)} s at the earliest`
            : n.consecutive_failures + " failure(s) in a row",
        }, n.health)),
        el("td", { class: "num" }, num(n.requests_per_s)),
        el("td", { class: "num" }, num(n.errors_per_s)),
        el("td", { class: "num" }, us(n.p50_us)),
        el("td", { class: "num" }, us(n.p99_us)),
        el("td", { class: "num" }, us(n.latency_ewma_us)),
        el("td", { class: "num" }, n.in_flight),
        el("td", { class: "num" }, n.connections),
        el("td", { class: "num" }, n.ejections)));
    }
    for (const [g, i] of departed) if (i === shard.index) rows.push(goneRow(g, i));
  }
  const orphans = departed.filter(([, i]) => i == null);
  if (orphans.length) {
    rows.push(el("tr", { class: "shard-head" }, el("td", {}), el("td", { colspan: 11 }, "not in the slot map")));
    for (const [g] of orphans) rows.push(goneRow(g, null));
  }
  $("nodes").replaceChildren(...rows);
  $("window").textContent = s.latency_window_s > 0
    ? `p50/p99 over the last ${Math.round(s.latency_window_s)} s, write-to-reply on node connections` : "";
}

function commands(s) {
  const max = Math.max(1, ...s.commands.map(c => c.per_s));
  const rows = s.commands.map(c => el("tr", { "data-command": c.command },
    el("td", {}, c.command.toUpperCase()),
    el("td", { class: "bar" }, el("div", { class: "fill", style: `width:${(c.per_s / max * 100).toFixed(1)}%` })),
    el("td", { class: "num" }, num(c.per_s))));
  $("commands").replaceChildren(...(rows.length ? rows
    : [el("tr", {}, el("td", { class: "empty" }, "no commands in the last second"))]));
}

function events(s) {
  const items = s.events.map(e => el("li", { "data-kind": e.kind, "data-node": e.node },
    el("span", { class: "when", title: new Date(e.time_ms).toISOString() }, clock(e.time_ms)),
    el("span", { class: "kind " + e.kind }, e.kind.replace("_", " ") + (e.count > 1 ? ` ×${e.count}` : "")),
    el("span", { class: "what" }, (e.node ? e.node + ": " : "") + e.detail)));
  $("events").replaceChildren(...(items.length ? items : [el("li", { class: "empty" }, "nothing yet")]));
}

function slowlog(s) {
  const rows = s.slowlog.map(e => el("tr", {},
    el("td", {}, clock(e.time * 1000)),
    el("td", { class: "num" }, us(e.duration_us)),
    el("td", {}, e.command.toUpperCase()),
    el("td", {}, e.key),
    el("td", {}, e.node || "–"),
    el("td", {}, e.client)));
  $("slowlog").replaceChildren(...(rows.length ? rows
    : [el("tr", {}, el("td", { class: "empty", colspan: 6 }, "no slow commands"))]));
}

function bytes(v) {
  if (v >= 1 << 20) return (v / (1 << 20)).toFixed(1) + " MB";
  if (v >= 1 << 10) return (v / (1 << 10)).toFixed(1) + " KB";
  return v + " B";
}

// The hottest keys (sampled: rates are estimates) and the biggest requests and replies.
function hotkeys(s) {
  const h = s.hotkeys;
  if (!h) return;
  const empty = (text, span) => [el("tr", {}, el("td", { class: "empty", colspan: span }, text))];
  const hot = h.hot.map(k => el("tr", { "data-key": k.key, "data-command": k.command },
    el("td", { class: "key" }, k.key),
    el("td", {}, k.command.toUpperCase()),
    el("td", {}, k.node || "–"),
    el("td", { class: "num", title: `about ${k.count} in ${h.window_seconds.toFixed(0)} s (± ${k.error})` }, num(k.rate))));
  $("hotkeys").replaceChildren(...(hot.length ? hot
    : empty(h.enabled ? "no keyed commands in the window" : "off (hotkeys.enabled: false)", 4)));
  $("hotwindow").firstChild.textContent = h.enabled
    ? `last ${Math.round(h.window_seconds)} s, 1 in ${h.sample_rate} sampled; full list at ` : "full list at ";
  const big = h.big.map(b => el("tr", { "data-key": b.key, "data-direction": b.direction },
    el("td", { class: "key" }, b.key),
    el("td", {}, b.command.toUpperCase()),
    el("td", {}, b.node || "–"),
    el("td", {}, b.direction),
    el("td", { class: "num", title: `${b.size} bytes, seen ${b.seen}×` }, bytes(b.size)),
    el("td", {}, clock(b.at_ms))));
  $("bigkeys").replaceChildren(...(big.length ? big : empty("none yet", 6)));
  $("bigthreshold").textContent = `requests and replies of ${bytes(h.big_value_threshold)} or more, biggest first`;
}

// Configured users: their counters since start, turned into rates between two refreshes.
let lastUsers = null;
function users(s) {
  const list = s.users || [];
  $("userscard").hidden = list.length === 0;
  const now = Date.now();
  const before = lastUsers && new Map(lastUsers.list.map(u => [u.user, u]));
  const secs = lastUsers ? (now - lastUsers.at) / 1000 : 0;
  const rate = (u, field) => {
    const old = before && before.get(u.user);
    return old && secs > 0 ? (u[field] - old[field]) / secs : null;
  };
  const rows = list.map(u => el("tr", { "data-user": u.user },
    el("td", {}, u.user),
    el("td", { class: "num" }, String(u.connections)),
    el("td", { class: "num" }, num(rate(u, "commands"))),
    el("td", { class: "num" }, num(rate(u, "errors"))),
    el("td", { class: "num" }, num(rate(u, "refusals"))),
    el("td", { class: "num" }, num(rate(u, "rate_limited"))),
    el("td", { class: "num" }, rate(u, "bytes_received") == null ? "–" : bytes(Math.round(rate(u, "bytes_received")))),
    el("td", { class: "num" }, rate(u, "bytes_sent") == null ? "–" : bytes(Math.round(rate(u, "bytes_sent")))),
    el("td", { class: "num" }, us(u.p50_us)),
    el("td", { class: "num" }, us(u.p99_us))));
  $("users").replaceChildren(...rows);
  lastUsers = { at: now, list };
}

async function poll() {
  const root = $("status");
  try {
    const response = await fetch("status.json", { cache: "no-store" });
    if (!response.ok) throw new Error("HTTP " + response.status);
    const s = await response.json();
    header(s); slotbar(s); nodes(s); commands(s); events(s); slowlog(s); hotkeys(s); users(s);
    root.dataset.state = "ok";
    root.dataset.updated = String(Date.now());
    $("updated").textContent = "updated " + clock(Date.now());
  } catch (err) {
    root.dataset.state = "error";
    $("updated").textContent = "cannot reach redcar: " + err.message;
  }
  setTimeout(poll, POLL_MS);
}

poll();
