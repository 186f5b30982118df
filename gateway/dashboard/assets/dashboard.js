// The gateway's truncation dashboard: reads /dashboard/api/overview and draws it as SVG.
// No library and nothing fetched from elsewhere (the page's Content-Security-Policy forbids it);
// the admin key, when the gateway asks for one, stays in this tab's sessionStorage.
"use strict";
(() => {
  const NS = "http://www.w3.org/2000/svg";
  const KEY_STORE = "llm-gateway-admin-key";
  const STOP_COLORS = {
    stop: "#2f9e44", tool_calls: "#1c7ed6", length: "#e03131", context_window: "#c2255c",
    stop_sequence: "#0ca678", content_filter: "#f08c00", refusal: "#7048e8", pause: "#74b816",
    malformed: "#862e9c", error: "#a61e4d", aborted: "#868e96", unknown: "#495057",
    none: "#ced4da",
  };
  const PALETTE = ["#2d5be3", "#e8590c", "#2f9e44", "#ae3ec9", "#1098ad", "#f59f00", "#d6336c", "#5c940d"];
  const state = { range: "24h", provider: "", model: "" };
  const $ = (selector) => document.querySelector(selector);

  // --- numbers -------------------------------------------------------------------------------
  const count = (n) => (n ?? 0).toLocaleString("en-US");
  const percent = (x) => (x * 100).toFixed(1) + "%";
  const usd = (x) => (x == null ? "–" : "$" + (x >= 1 ? x.toFixed(2) : x.toFixed(4)));
  const ms = (x) => (x == null ? "–" : x.toFixed(1) + " ms");

  // --- state in the address (#range=7d&provider=openai), so a view can be shared -------------
  function readHash() {
    const params = new URLSearchParams(location.hash.slice(1));
    for (const name of Object.keys(state)) if (params.has(name)) state[name] = params.get(name);
  }
  function writeHash() {
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(state)) if (value) params.set(name, value);
    history.replaceState(null, "", "#" + params.toString());
  }

  function status(text) {
    const line = $("#status");
    line.textContent = text;
    line.hidden = !text;
  }

  // --- loading ---------------------------------------------------------------------------------
  async function load() {
    const params = new URLSearchParams({ since: state.range });
    if (state.provider) params.set("provider", state.provider);
    if (state.model) params.set("model", state.model);
    const key = sessionStorage.getItem(KEY_STORE);
    const headers = key ? { Authorization: "Bearer " + key } : {};
    status("Loading…");
    let response;
    try {
      response = await fetch("/dashboard/api/overview?" + params, { headers, cache: "no-store" });
    } catch (err) {
      status("The gateway did not answer.");
      return;
    }
    if (response.status === 401) {
      showKeyForm(key ? "That key was not accepted." : "");
      return;
    }
    if (!response.ok) {
      let message = "HTTP " + response.status;
      try {
        const body = await response.json();
        message = (body.error && (body.error.message || body.error)) || message;
      } catch (err) { /* not JSON: keep the status */ }
      status("Could not load the figures: " + message);
      return;
    }
    const data = await response.json();
    $("#keyform").hidden = true;
    status("");
    $("#main").hidden = false; // shown first: the charts are drawn at the width they get
    render(data);
    document.body.dataset.loaded = String(Date.now());
  }

  function showKeyForm(error) {
    $("#main").hidden = true;
    status("");
    $("#keyform").hidden = false;
    $("#keyerror").textContent = error;
    $("#key").focus();
  }

  // --- rendering -----------------------------------------------------------------------------
  function render(data) {
    fillChoices($("#provider"), data.choices.providers, state.provider, "all providers");
    fillChoices($("#model"), data.choices.models, state.model, "all models");
    renderTiles(data.totals);
    const domain = timeDomain(data);
    lineChart(chart("truncation-rate"), truncationLines(data.series), domain, data.window.step, percent);
    stackedBars(chart("stop-reasons"), data.series, domain, data.window.step,
      Object.keys(STOP_COLORS).map((name) => ({ name, color: STOP_COLORS[name], value: (p) => p.stop_reasons[name] || 0 })),
      count);
    horizontalBars(chart("cut-reasons"), data.cut_reasons.map((c) => ({ label: c.reason, value: c.count })), "#e03131", "No cut answers in this window.");
    horizontalBars(chart("withheld-tools"), data.withheld_tools.map((t) => ({ label: t.name || "(unnamed)", value: t.count })), "#c2255c", "No withheld tool calls in this window.");
    stackedBars(chart("resilience"), data.series, domain, data.window.step, [
      { name: "retried", color: "#f59f00", value: (p) => p.retried },
      { name: "fell back", color: "#ae3ec9", value: (p) => p.fallbacks },
      { name: "recovered", color: "#2f9e44", value: (p) => p.recovered },
    ], count);
    stackedBars(chart("cost"), data.series, domain, data.window.step, [
      { name: "cost", color: "#1098ad", value: (p) => p.cost_usd || 0 },
    ], usd);
    renderGroups(data.by_provider, data.by_model);
    renderLatest(data.latest_cut);
  }

  const chart = (name) => document.querySelector(`[data-chart="${name}"]`);

  function fillChoices(select, values, current, allLabel) {
    const options = [["", allLabel], ...values.map((v) => [v, v])];
    if (current && !values.includes(current)) options.push([current, current]);
    select.replaceChildren(...options.map(([value, label]) => {
      const option = document.createElement("option");
      option.value = value;
      option.textContent = label;
      option.selected = value === current;
      return option;
    }));
  }

  function renderTiles(totals) {
    const set = (name, text) => { document.querySelector(`[data-tile="${name}"]`).textContent = text; };
    set("requests", count(totals.requests));
    set("truncated", count(totals.truncated));
    set("truncated_rate", percent(totals.truncated_rate) + " of answers");
    set("errors", count(totals.errors));
    set("withheld_tool_calls", count(totals.withheld_tool_calls));
    set("retried", count(totals.retried));
    set("fallbacks", count(totals.fallbacks));
    set("recovered", count(totals.recovered));
    set("cost_usd", usd(totals.cost_usd));
    set("cost_unknown", totals.cost_unknown ? count(totals.cost_unknown) + " answers of unknown cost" : "");
  }

  function cell(row, text, className) {
    const td = document.createElement("td");
    td.textContent = text;
    if (className) td.className = className;
    row.appendChild(td);
  }

  function renderGroups(providers, models) {
    const body = $("#groups tbody");
    const rows = [];
    for (const [kind, groups] of [["provider", providers], ["model", models]]) {
      for (const g of groups) {
        const row = document.createElement("tr");
        row.className = kind;
        row.dataset.group = kind + ":" + g.group;
        cell(row, (kind === "model" ? "model " : "") + g.group);
        cell(row, count(g.requests), "num");
        cell(row, count(g.truncated), g.truncated ? "num cut" : "num");
        cell(row, percent(g.truncated_rate), "num");
        cell(row, count(g.errors), "num");
        cell(row, count(g.withheld_tool_calls), "num");
        cell(row, count(g.retried), "num");
        cell(row, count(g.fallbacks), "num");
        cell(row, count(g.recovered), "num");
        cell(row, ms(g.ttfb_p50_ms), "num");
        cell(row, ms(g.ttfb_p95_ms), "num");
        cell(row, ms(g.total_p50_ms), "num");
        cell(row, ms(g.total_p95_ms), "num");
        cell(row, usd(g.cost_usd), "num");
        rows.push(row);
      }
    }
    body.replaceChildren(...rows);
  }

  function renderLatest(items) {
    const body = $("#latest tbody");
    if (!items.length) {
      const row = document.createElement("tr");
      cell(row, "No cut exchanges in this window.");
      body.replaceChildren(row);
      return;
    }
    body.replaceChildren(...items.map((t) => {
      const row = document.createElement("tr");
      row.dataset.id = t.id;
      cell(row, t.time.replace("T", " ").replace("Z", ""));
      cell(row, t.id);
      cell(row, t.provider || "-");
      cell(row, t.model || "-");
      cell(row, t.why || "-", "cut");
      cell(row, t.withheld_tools.join(", ") || "–");
      cell(row, t.ended_by || "");
      return row;
    }));
  }

  // --- charts (SVG) --------------------------------------------------------------------------
  function svgElement(name, attrs, parent) {
    const node = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    if (parent) parent.appendChild(node);
    return node;
  }

  function titled(node, text) {
    svgElement("title", {}, node).textContent = text;
    return node;
  }

  function emptyChart(container, text) {
    const p = document.createElement("p");
    p.className = "empty";
    p.textContent = text;
    container.replaceChildren(p);
    container.dataset.marks = "0";
  }

  function legend(container, items) {
    const box = document.createElement("div");
    box.className = "legend";
    for (const { name, color } of items) {
      const entry = document.createElement("span");
      const swatch = document.createElement("i");
      swatch.style.background = color;
      entry.append(swatch, name);
      box.appendChild(entry);
    }
    container.appendChild(box);
  }

  // Drawn at the size shown (one SVG unit a pixel), so text keeps its size in wide panels.
  const chartWidth = (container) => Math.max(320, Math.round(container.clientWidth || 640));

  function timeDomain(data) {
    const step = data.window.step;
    const times = data.series.map((p) => p.t);
    const end = data.window.until ?? Date.now() / 1000;
    const start = data.window.since ?? (times.length ? Math.min(...times) : end - 86400);
    return [Math.floor(start / step) * step, Math.max(end, start + step)];
  }

  function timeLabel(t, span) {
    const iso = new Date(t * 1000).toISOString();
    return span > 2 * 86400 ? iso.slice(5, 10) : iso.slice(11, 16);
  }

  // A frame with a time axis and a y axis from 0 to `top`; returns the scales.
  function frame(container, domain, top, format) {
    const width = chartWidth(container), height = 220, pad = { l: 58, r: 24, t: 10, b: 26 };
    container.replaceChildren();
    const svg = svgElement("svg", { viewBox: `0 0 ${width} ${height}`, role: "img" }, container);
    const x = (t) => pad.l + ((t - domain[0]) / (domain[1] - domain[0])) * (width - pad.l - pad.r);
    const y = (v) => height - pad.b - (top > 0 ? v / top : 0) * (height - pad.t - pad.b);
    for (let i = 0; i <= 4; i++) {
      const v = (top * i) / 4;
      svgElement("line", { x1: pad.l, x2: width - pad.r, y1: y(v), y2: y(v), stroke: "#e2e5ea" }, svg);
      svgElement("text", { x: pad.l - 6, y: y(v) + 4, "text-anchor": "end", "font-size": 11, fill: "#687085" }, svg)
        .textContent = format(v);
    }
    const span = domain[1] - domain[0];
    for (let i = 0; i <= 4; i++) {
      const t = domain[0] + (span * i) / 4;
      svgElement("text", { x: x(t), y: height - 8, "text-anchor": "middle", "font-size": 11, fill: "#687085" }, svg)
        .textContent = timeLabel(t, span);
    }
    return { svg, x, y, width: width - pad.l - pad.r };
  }

  function truncationLines(series) {
    const byProvider = new Map();
    for (const point of series) {
      for (const [provider, own] of Object.entries(point.providers)) {
        if (!own.requests) continue;
        if (!byProvider.has(provider)) byProvider.set(provider, []);
        byProvider.get(provider).push({ t: point.t, v: own.truncated / own.requests, n: own.requests, cut: own.truncated });
      }
    }
    return [...byProvider.entries()].sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([name, points], i) => ({ name, color: PALETTE[i % PALETTE.length], points }));
  }

  function lineChart(container, lines, domain, step, format) {
    if (!lines.length) return emptyChart(container, "No answers in this window.");
    const top = Math.max(0.05, ...lines.flatMap((l) => l.points.map((p) => p.v)));
    const { svg, x, y } = frame(container, domain, top, format);
    let marks = 0;
    for (const line of lines) {
      const middle = (p) => x(p.t + step / 2);
      if (line.points.length > 1) {
        const d = line.points.map((p, i) => `${i ? "L" : "M"}${middle(p).toFixed(1)},${y(p.v).toFixed(1)}`).join(" ");
        svgElement("path", { d, fill: "none", stroke: line.color, "stroke-width": 2 }, svg);
      }
      for (const p of line.points) {
        titled(svgElement("circle", { cx: middle(p), cy: y(p.v), r: 3.5, fill: line.color }, svg),
          `${line.name} ${timeLabel(p.t, 0)}: ${p.cut} of ${p.n} cut (${format(p.v)})`);
        marks++;
      }
    }
    container.dataset.marks = String(marks);
    legend(container, lines);
  }

  function stackedBars(container, series, domain, step, keys, format) {
    const totals = series.map((p) => keys.reduce((sum, k) => sum + k.value(p), 0));
    const top = Math.max(...totals, 0);
    if (!series.length || top <= 0) return emptyChart(container, "Nothing to show in this window.");
    const { svg, x, y } = frame(container, domain, top, format);
    const barWidth = Math.max(2, x(domain[0] + step) - x(domain[0]) - 2);
    let marks = 0;
    for (const point of series) {
      let base = 0;
      for (const key of keys) {
        const value = key.value(point);
        if (!value) continue;
        const rect = svgElement("rect", {
          x: x(point.t) + 1, width: barWidth, y: y(base + value), height: Math.max(1, y(base) - y(base + value)), fill: key.color,
        }, svg);
        titled(rect, `${timeLabel(point.t, 0)} ${key.name}: ${format(value)}`);
        base += value;
        marks++;
      }
    }
    container.dataset.marks = String(marks);
    legend(container, keys.filter((k) => series.some((p) => k.value(p))));
  }

  function horizontalBars(container, items, color, emptyText) {
    if (!items.length) return emptyChart(container, emptyText);
    const width = chartWidth(container), row = 26, labelWidth = 170, pad = 8;
    const height = items.length * row + pad * 2;
    container.replaceChildren();
    const svg = svgElement("svg", { viewBox: `0 0 ${width} ${height}`, role: "img" }, container);
    const top = Math.max(...items.map((i) => i.value));
    items.forEach((item, i) => {
      const yTop = pad + i * row;
      const label = item.label.length > 24 ? item.label.slice(0, 23) + "…" : item.label;
      svgElement("text", { x: labelWidth - 8, y: yTop + 17, "text-anchor": "end", "font-size": 12, fill: "#1d2330" }, svg).textContent = label;
      const barWidth = Math.max(2, ((width - labelWidth - 60) * item.value) / top);
      titled(svgElement("rect", { x: labelWidth, y: yTop + 4, width: barWidth, height: row - 8, rx: 3, fill: color }, svg),
        `${item.label}: ${count(item.value)}`);
      svgElement("text", { x: labelWidth + barWidth + 6, y: yTop + 17, "font-size": 12, fill: "#687085" }, svg).textContent = count(item.value);
    });
    container.dataset.marks = String(items.length);
  }

  // --- wiring --------------------------------------------------------------------------------
  function start() {
    readHash();
    $("#range").value = state.range;
    for (const name of ["range", "provider", "model"]) {
      $("#" + name).addEventListener("change", (event) => {
        state[name] = event.target.value;
        writeHash();
        load();
      });
    }
    $("#refresh").addEventListener("click", load);
    $("#keyform").addEventListener("submit", (event) => {
      event.preventDefault();
      sessionStorage.setItem(KEY_STORE, $("#key").value.trim());
      $("#key").value = "";
      load();
    });
    load();
  }

  document.addEventListener("DOMContentLoaded", start);
})();
