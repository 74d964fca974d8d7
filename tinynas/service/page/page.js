// The status page's only script: polls status.json once a second and redraws, without reloading.
// Plain DOM and SVG, no library: the device has no internet and the page must stay small.
"use strict";
const token = new URLSearchParams(location.search).get("token");
const withToken = (path) => path + (token ? "?token=" + encodeURIComponent(token) : "");
const statusUrl = withToken("status.json");
const formKey = (document.querySelector('meta[name="tinynas-form"]') || {}).content || "";
const SVG = "http://www.w3.org/2000/svg";
const $ = (id) => document.getElementById(id);
const show = (id, on) => { $(id).hidden = !on; };
const text = (id, value) => { $(id).textContent = value; };
const kib = (bytes) => (bytes / 1024).toFixed(1) + " KiB";
const pct = (x) => (100 * x).toFixed(0) + " %";
// "75 % (3 of 4 held-out windows, 95 % interval 30-95 %)": an accuracy is never shown without what it rests on.
// Windows cut with a hop share their recording: then the count is of recordings (tinynas.verdict.describe).
const counted = (h, what) => h.unit !== "recordings" ? what :
  what.replace("windows", "recordings") + (h.window_count != null ? `, ${h.window_hits} of their ${h.window_count} windows right` : "");
const verdict = (h, what = "held-out windows") => (h && h.windows) ? `${pct(h.hits / h.windows)} (${h.hits} of ${h.windows} ${counted(h, what)}, ` +
  `95 % interval ${(100 * h.interval[0]).toFixed(0)}-${(100 * h.interval[1]).toFixed(0)} %)` : null;
// What a count rests on, as tinynas.verdict.served_accuracy says it (one wording for the served line and the list): the
// deploy gate's held-out signs on the stream, a re-wear's signs of today's wear, a recalibration's new windows, or the
// deploy check's held-out windows.
const restsOn = (h) => {
  const measure = (h || {}).measure;
  if (measure === "on the stream") return ["signs recognised", "held-out signs, answered as live on the stream"];
  if (measure && String(measure).includes("stream")) return ["signs recognised", `signs of today's wear, ${measure}`];
  if (measure) return ["accuracy", `new windows, ${measure}`];
  return ["int8 accuracy", "held-out windows"];
};
const minutes = (seconds) => seconds >= 90 ? `${Math.round(seconds / 60)} min` : `${Math.max(0, Math.round(seconds))} s`;
let hint = "";  // " --config PATH" when the service runs with a config file: the page's commands must name it
const width = (x) => (100 * Math.max(0, Math.min(1, x))).toFixed(1) + "%";  // CSS wants no space

function el(tag, attrs, parent, ns) {
  const node = ns ? document.createElementNS(SVG, tag) : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "text") node.textContent = value; else node.setAttribute(key, value);
  }
  if (parent) parent.appendChild(node);
  return node;
}

function drawTraces(trace) {
  const box = $("traces");
  box.innerHTML = "";
  if (!trace || !trace.channels || !trace.channels.length) { text("trace-note", "(no samples yet)"); return; }
  text("trace-note", `(last ${trace.seconds} s, ${trace.rate_hz} Hz)`);
  trace.channels.forEach((ch) => {
    const row = el("div", { class: "trace " + (ch.flag || "") , "data-channel": ch.name }, box);
    const level = ch.rest ? `level ${ch.level.toFixed(1)} / rest ${ch.rest.toFixed(1)}` : `level ${ch.level.toFixed(1)}`;
    el("div", { class: "label", text: `${ch.name}: ${ch.flag ? ch.flag.toUpperCase() + " - " : ""}${level}` }, row);
    const svg = el("svg", { viewBox: "0 0 300 46", preserveAspectRatio: "none" }, row, true);
    const lo = Math.min(...ch.min), hi = Math.max(...ch.max), span = (hi - lo) || 1;
    const y = (v) => 43 - 40 * (v - lo) / span;
    const n = ch.min.length, dx = 300 / Math.max(1, n - 1);
    if (ch.rest) {  // the rest level as a band around the channel's middle
      const mid = (hi + lo) / 2;
      el("rect", { x: 0, width: 300, y: y(mid + ch.rest), height: Math.max(1, y(mid - ch.rest) - y(mid + ch.rest)),
                   fill: "#e8f0e8" }, svg, true);
    }
    let d = "";
    for (let i = 0; i < n; i++) d += `${i ? "L" : "M"}${(i * dx).toFixed(1)},${y(ch.max[i]).toFixed(1)}`;
    for (let i = n - 1; i >= 0; i--) d += `L${(i * dx).toFixed(1)},${y(ch.min[i]).toFixed(1)}`;
    el("path", { d: d + "Z", fill: ch.flag ? "#f3b0b0" : "#9db8ef", stroke: ch.flag ? "#b00020" : "#2f6fdf",
                 "stroke-width": 0.6, class: "envelope" }, svg, true);
  });
}

function drawPhase(c, now) {
  const phase = $("phase");
  const left = c.countdown_ends ? Math.ceil(c.countdown_ends - now) : 0;
  // GO only while its window can still be open (the service's own times), never while paused.
  const going = c.phase === "go" && !c.paused &&
    (!c.go_at || now < c.go_at + (c.late_seconds || 0) + (c.window_seconds || 0));
  phase.className = "phase" + (going ? " go" : "");
  // A machine plan holds a state for a block: the page counts the block down instead of "GO".
  const machine = c.kind === "continuous";
  const holding = going && machine ? `recording - hold the state, ${Math.max(0, Math.ceil(c.go_at + c.window_seconds - now))} s left` : "";
  phase.textContent = c.paused ? "paused" : (c.phase === "confirm" ? (c.confirm || "waiting for confirmation") :
    (going ? (holding || "GO - hold it") : (c.phase === "go" ? "checking..." :
    (c.phase === "ready" ? (left > 0 ? `get ready... ${left}` : "get ready...") : (c.last_line || "")))));
}

function drawCollecting(c, device, now) {
  const prompt = c.prompt ? `${c.verb || "Perform"}: ${c.prompt}` : (c.plan === "unlabelled" ? "Wear it as usual" : "Get ready");
  text("prompt", prompt);
  drawPhase(c, now);
  $("collect-bar").style.width = c.total ? width(c.accepted / c.total) : "0";
  text("collect-count", c.total ? `${c.accepted} of ${c.total} windows kept` + (c.attempt > 1 ? ` - attempt ${c.attempt}` : "") +
       (c.seconds_left != null ? `, about ${minutes(c.seconds_left)} left` : "") : "");
  drawTraces(c.trace || device);
  const last = c.last_rejected;
  show("rejected", !!last);
  if (last) text("rejected", `Last window of ${last.label} not kept: ${last.problems.join("; ")}. ${last.advice.charAt(0).toUpperCase()}${last.advice.slice(1)}.`);
  const table = $("classes");
  table.innerHTML = "";
  const per = c.per_class || {};
  if (Object.keys(per).length) {
    const head = el("tr", {}, table);
    ["class", "kept", "not kept"].forEach((h) => el("th", { text: h }, head));
    for (const [name, n] of Object.entries(per)) {
      const row = el("tr", {}, table);
      [name, n.accepted, n.rejected].forEach((v) => el("td", { text: String(v) }, row));
    }
  }
  show("paused", !!c.paused);
  if (c.paused) text("paused", `Paused: ${c.paused}. When the sensor is checked: tinynas onboard --user ${c.user || "NAME"} --continue${hint}`);
}

function drawTrials(q) {
  const svg = $("trials");
  svg.innerHTML = "";
  const trials = q.trials_list || [];
  const budget = q.ram_budget_bytes || 0;
  const rams = trials.map((t) => t.ram_bytes).concat(budget ? [budget] : []);
  const maxRam = Math.max(1024, ...rams) * 1.1;
  const X = (ram) => 50 + 530 * ram / maxRam, Y = (acc) => 270 - 250 * acc;
  el("line", { x1: 50, y1: 270, x2: 580, y2: 270, stroke: "#999" }, svg, true);
  el("line", { x1: 50, y1: 20, x2: 50, y2: 270, stroke: "#999" }, svg, true);
  el("text", { x: 300, y: 295, "text-anchor": "middle", text: "RAM (KiB)" }, svg, true);
  // What the accuracy is: on the validation side, or out of fold where the search cross-validated.
  const measure = trials.some((t) => t.measure === "out-of-fold") ? "out-of-fold accuracy" : "val accuracy";
  el("text", { x: 12, y: 150, transform: "rotate(-90 12 150)", "text-anchor": "middle", text: measure }, svg, true);
  [0, 0.5, 1].forEach((a) => el("text", { x: 44, y: Y(a) + 4, "text-anchor": "end", text: a.toFixed(1) }, svg, true));
  if (budget) {
    el("line", { x1: X(budget), y1: 20, x2: X(budget), y2: 270, stroke: "#b00020", "stroke-dasharray": "5 4",
                 class: "budget" }, svg, true);
    el("text", { x: X(budget) - 4, y: 32, "text-anchor": "end", text: `RAM budget ${kib(budget)}` }, svg, true);
  }
  [0.25, 0.5, 0.75, 1].forEach((f) => el("text", { x: X(f * maxRam / 1.1), y: 284, "text-anchor": "middle",
                                                     text: (f * maxRam / 1.1 / 1024).toFixed(1) }, svg, true));
  // A candidate still training has no accuracy yet: listed under the chart, never drawn at 0.
  const running = trials.filter((t) => t.state === "running" || (t.state === "complete" && t.val_accuracy === null));
  text("running", running.length ? "training now: " + running.map((t) => `${t.name} (RAM ${kib(t.ram_bytes)})`).join(", ") : "");
  trials.filter((t) => !running.includes(t)).forEach((t) => {
    const trained = t.state === "complete";
    const acc = trained ? t.val_accuracy : 0.02;
    const colour = t.state === "infeasible" ? "#bbb" : (t.state === "failed" ? "#b00020" : (t.best ? "#0a7d28" : "#2f6fdf"));
    const dot = el("circle", { cx: X(t.ram_bytes), cy: Y(acc), r: t.best ? 7 : 4, fill: colour, class: "trial " + t.state },
                   svg, true);
    el("title", { text: `${t.name}: ${t.state}` + (trained ? `, ${measure} ${t.val_accuracy.toFixed(3)}` : "") +
                        `, RAM ${kib(t.ram_bytes)}` + (t.note ? ` - ${t.note}` : "") }, dot, true);
  });
}

function drawSearching(q) {
  const fraction = q.budget_seconds ? Math.min(1, 1 - (q.seconds_left || 0) / q.budget_seconds) : 0;
  $("search-bar").style.width = width(fraction);
  text("search-count", `${q.trials || 0} candidates` + (q.seconds_left !== undefined ?
       `, ${Math.round(q.seconds_left)} s of ${Math.round(q.budget_seconds || 0)} s left` : ""));
  text("incumbent", q.best ? `Best so far: ${q.best}` + (q.best_val_accuracy != null ?
       ` (${q.best_measure === "out-of-fold" ? "out-of-fold accuracy" : "val accuracy"} ` +
       `${q.best_val_accuracy.toFixed(3)}, RAM ${kib(q.best_ram_bytes || 0)})` : "") : "No result yet");
  drawTrials(q);
  const stopped = $("stopped");
  stopped.innerHTML = "";
  (q.trials_list || []).filter((t) => t.note).forEach((t) => el("li", { text: `${t.name}: ${t.note}` }, stopped));
  text("family-note", q.family_note || "");
}

function drawPerClass(h, classes) {  // recall per class and the confusion matrix on the held-out windows
  const box = $("per-class");
  box.innerHTML = "";
  if (!h || !h.confusion || !classes.length) return;
  const what = h.unit === "recordings" ? "recordings (each by most of its windows)" : "windows";
  el("div", { class: "muted", text: `On the held-out ${what} (rows: what was performed; columns: what the model said):` }, box);
  const table = el("table", { class: "confusion" }, box);
  const head = el("tr", {}, table);
  el("th", { text: "" }, head);
  classes.forEach((name) => el("th", { text: name }, head));
  el("th", { text: "recall" }, head);
  h.confusion.forEach((row, i) => {
    const tr = el("tr", {}, table);
    el("th", { text: classes[i] || String(i) }, tr);
    row.forEach((n, j) => el("td", { text: String(n), class: n ? (i === j ? "hit" : "miss") : "" }, tr));
    const recall = (h.recall || [])[i];
    el("td", { text: recall == null ? "-" : `${pct(recall)} of ${(h.support || [])[i]}`, class: "recall" }, tr);
  });
}

function drawScores(svg, history, threshold) {  // the score history against the threshold line
  svg.innerHTML = "";
  if (!history.length) return;
  const ns = SVG, w = 600, h = 120;
  const values = history.map((p) => p[1]).concat([threshold]);
  const low = Math.min(...values), high = Math.max(...values), span = (high - low) || 1;
  const y = (v) => (h - 10 - (v - low) / span * (h - 20)).toFixed(1);
  const x = (i) => (history.length > 1 ? i / (history.length - 1) * w : w / 2).toFixed(1);
  el("line", { x1: 0, x2: w, y1: y(threshold), y2: y(threshold), class: "threshold" }, svg, ns);
  el("polyline", { points: history.map((p, i) => `${x(i)},${y(p[1])}`).join(" "), class: "score" }, svg, ns);
  el("text", { x: 4, y: +y(threshold) - 4, text: "threshold" }, svg, ns);
}

// The last check of the served model on a chip (`tinynas hil`, or the service on a front-end that holds the model;
// recorded in its card), the service's check under way or refused, or how to make one.
function drawChip(m, check) {
  const c = m.chip;
  if (!m.name || m.damaged) { text("chip", ""); return; }
  if (m.no_chip_check) { text("chip", m.no_chip_check); return; }
  if (check && check.text && (check.state !== "stopped" || !c)) { text("chip", `on the sensor's chip: ${check.text}`); return; }
  if (!c) {
    text("chip", `not checked on a chip yet: tinynas hil ${m.folder} --qemu microbit (on your board: tinynas firmware, ` +
         "then tinynas hil --port; see docs/hil.md)");
    return;
  }
  const ms = c.seconds != null ? ` (${(c.seconds * 1000).toFixed(1)} ms at ${c.clock_hz / 1e6} MHz` +
    (c.counts === "instructions" ? ", cycles per instruction estimated)" : ")") : c.clock_hz ?
    ` (${(c.median / c.clock_hz * 1000).toFixed(1)} ms at ${c.clock_hz / 1e6} MHz` +
    (c.counts === "instructions" ? " if each took a cycle)" : ")") : "";
  text("chip", `on the chip (${c.board}): ${c.identical_to_host ?? "-"} of ${c.checked} windows identical to the ` +
       `host, ${Math.round(c.median).toLocaleString()} ${c.counts} per inference${ms}, stack ${c.stack_bytes} B` +
       (c.stopped ? `; stopped after ${c.checked} of ${c.windows}: ${c.stopped}` : ""));
}

// One inference of the served model on its target at its clock against serving's hop (the time model's estimate).
function drawTime(m) {
  const t = m.time;
  text("chip-time", m.name && !m.damaged && t ? t.words : "");
  $("chip-time").classList.toggle("warn", !!(t && !t.keeps_hop));
}

// A classical scorer keeping several operating conditions (loads): which, and which the windows are read under.
function conditionsText(m, a) {
  const kept = m.conditions || [];
  if (kept.length < 2) return "";
  const how = a.chosen && a.chosen !== "live" ? `the operator's: ${a.chosen}` : "the one each window looks most like";
  return `. Conditions kept: ${kept.join(", ")}; read under ${how}` + (a.condition ? ` (last window: ${a.condition})` : "");
}

function drawAlarm(s) {
  const m = s.model || {}, d = s.deployed || {}, a = s.alarm || {}, an = d.anomaly || {};
  text("model", `${m.name || "anomaly scorer"} for ${d.user}: RAM ${kib(m.ram_bytes)}, flash ${kib(m.flash_bytes)}` +
       (m.runtime ? ` with ${m.runtime}` : "") + "; " +
       `threshold set for ${pct(an.false_alarm_rate || 0)} false alarms on ${an.calibration_windows} held-out normal ` +
       `windows; alarm at ${a.debounce || "-"}` + conditionsText(m, a));
  drawChip(m, s.chip_check);
  drawTime(m);
  const stale = (s.serving || {}).stale;
  text("prediction", (a.raised ? "ALARM: not running normally" : "Running normally") + (stale ? " (not live)" : ""));
  $("prediction").classList.toggle("stale", !!stale);
  $("prediction").classList.toggle("alarm", !!a.raised);
  $("bars").innerHTML = "";
  const row = el("div", { class: "bar score" + (a.raised ? " raised" : "") }, $("bars"));
  el("div", { class: "name", text: "score" }, row);
  const ratio = a.threshold ? Math.max(0, Math.min(2, (a.score || 0) / Math.abs(a.threshold) || 0)) : 0;
  el("div", { class: "fill", style: `width:${(150 * ratio).toFixed(0)}px` }, row);
  el("div", { class: "pct", text: a.score != null ? `${a.score.toFixed(2)} (threshold ${a.threshold.toFixed(2)})` : "-" }, row);
  $("history").innerHTML = "";
  const svg = el("svg", { id: "scores", viewBox: "0 0 600 120", role: "img", "aria-label": "score history" },
                 $("history"), SVG);
  drawScores(svg, a.history || [], a.threshold || 0);
  text("rate", s.predictions_per_minute !== undefined ? `${s.predictions_per_minute} windows scored per minute` : "");
}

function drawServing(s) {
  if ((s.deployed || {}).task === "anomaly") return drawAlarm(s);
  const m = s.model || {};
  const d = s.deployed || {};
  // After a recalibration the count is of the new windows it was checked on, and says how (tinynas.verdict.served_accuracy).
  const [said, what] = restsOn(d.held_out);
  const own = verdict(d.held_out, what);
  const held = own || verdict(m.held_out);
  const accuracy = held ? `${own ? said : "int8 accuracy"} ${held}` : (d.accuracy != null ? `int8 accuracy ${pct(d.accuracy)} ` +
    `(${d.changed_by ? "on the new windows of its " + d.changed_by : "held-out count not recorded"})` : "int8 accuracy not measured");
  // A rejected re-wear: what the model did today, not the onboarding's figure as if it still held.
  const today = d.today && d.today.signs ? `today (re-worn): ${d.today.recognised} of ${d.today.signs} signs ` +
    `recognised on the stream` + (d.today.failing && d.today.failing.length ? `; fails ${d.today.failing.join(", ")} ` +
    `- record those classes again with the armband as it sits now (tinynas onboard --user ${d.user} --recalibrate)` : "") +
    `; at onboarding: ` : "";
  if (m.damaged) { text("model", `the served model's folder is damaged: ${m.damaged}`); }
  else text("model", m.name ? `${m.name} for ${d.user}: RAM ${kib(m.ram_bytes)}, flash ${kib(m.flash_bytes)}` +
       (m.runtime ? ` with ${m.runtime}` : "") + ", " + today + accuracy +
       (m.made ? `, made ${new Date(m.made * 1000).toLocaleString()}` : "") : "no model yet");
  drawChip(m, s.chip_check);
  drawTime(m);
  drawPerClass(d.held_out && d.held_out.confusion ? d.held_out : m.held_out, s.classes || []);
  const p = (s.predictions || []).slice(-1)[0];
  const stale = (s.serving || {}).stale;
  text("prediction", p ? p.smoothed + (stale ? " (not live)" : "") : "-");
  $("prediction").classList.toggle("stale", !!stale);
  // The big label is smoothed over the last windows; the bars are the newest window alone: say so when they differ.
  text("smoothing-note", p && p.smoothed !== p.label ? `the newest window alone says ${p.label}` +
       (p.why ? ` (${p.why})` : "") + `; the label above holds over the last ${s.smoothing || "few"} windows` : "");
  const bars = $("bars");
  bars.innerHTML = "";
  if (p && p.probabilities && s.classes) {
    s.classes.forEach((name, i) => {
      const row = el("div", { class: "bar" + (name === p.label ? " top" : "") }, bars);
      el("div", { class: "name", text: name }, row);
      el("div", { class: "fill", style: `width:${(300 * p.probabilities[i]).toFixed(0)}px` }, row);
      el("div", { class: "pct", text: pct(p.probabilities[i]) }, row);
    });
  }
  const history = $("history");
  history.innerHTML = "";
  (s.predictions || []).slice(-20).forEach((q) => el("span", { text: q.smoothed }, history));
  text("rate", s.predictions_per_minute !== undefined ? `${s.predictions_per_minute} predictions per minute` : "");
}

// ---- actions: each button POSTs a request the service checks as the CLI would (tinynas.service.actions) ----
async function act(kind, fields) {
  const result = $("action-result");
  result.className = "muted";
  result.textContent = "asking...";
  try {
    const headers = { "Content-Type": "application/json", "X-Tinynas-Form": formKey };
    if (token) headers.Authorization = "Bearer " + token;
    const response = await fetch("action/" + kind, { method: "POST", headers, body: JSON.stringify(fields) });
    const answer = await response.json();
    result.className = response.ok ? "ok" : "warn";
    result.textContent = response.ok ? answer.message : "Refused: " + answer.error;
  } catch (e) {
    result.className = "warn";
    result.textContent = "The device does not answer: " + e.message;
  }
}

function drawActions(s, now) {
  const idle = s.state === "IDLE" || s.state === "SERVING";
  const c = s.collection || {};
  show("onboard-form", idle);
  const plans = s.plans || [], select = $("onboard-plan");
  if (select.options.length !== plans.length) {
    select.innerHTML = "";
    plans.forEach((name) => el("option", { value: name, text: name }, select));
  }
  const paused = s.state === "COLLECTING" && (s.paused || c.phase === "confirm");
  const redo = s.state === "COLLECTING" && c.redo_until && now < c.redo_until;
  show("collect-actions", paused || redo || s.state === "RECALIBRATING" || s.state === "COLLECTING");
  show("continue", !!paused);
  $("continue").textContent = c.phase === "confirm" && !s.paused ?
    (c.redon ? "The armband is on again: continue" : "The machine is ready: record") : "Continue";
  show("cancel", s.state === "COLLECTING" || s.state === "RECALIBRATING");
  show("redo", !!redo);
  show("serve-actions", s.state === "SERVING");
  const m = s.model || {}, kept = m.conditions || [];
  show("new-condition", s.state === "SERVING" && !!m.classical);
  show("condition-box", s.state === "SERVING" && kept.length > 1);
  const conditions = $("condition-select"), names = ["live"].concat(kept);
  if (conditions.dataset.keys !== names.join("\n")) {  // rebuilt only when the list changes
    conditions.dataset.keys = names.join("\n");
    conditions.innerHTML = "";
    names.forEach((name) => el("option", { value: name, text: name === "live" ? "the one each looks most like" : name },
                                conditions));
  }
  const models = s.models || [], choice = $("model-select");
  show("switch-box", idle && models.length > 0);
  const keys = models.map((m) => m.user + "/" + m.id).join(",");
  if (choice.dataset.keys !== keys) {  // rebuilt only when the list changes: a choice being made is kept
    choice.dataset.keys = keys;
    choice.innerHTML = "";
    models.slice().reverse().forEach((m) => {
      if (m.damaged) {  // listed, never served: the reason is in the option's text
        el("option", { value: "", disabled: "", text: `! ${m.user}: ${m.id} (damaged: ${m.damaged})` }, choice);
        return;
      }
      const held = verdict(m.held_out, restsOn(m.held_out)[1]);
      el("option", { value: JSON.stringify({ user: m.user, model: m.id }), text: `${m.served ? "* " : ""}${m.user}: ${m.id}` +
         ` (${m.architecture || "?"}, ${held || (m.task === "anomaly" ? "anomaly scorer" : "accuracy not recorded")})` }, choice);
    });
  }
  // What the deploy gate said of a model it did not serve (tinynas.service.gate): one more step is a normal state.
  const g = s.gate || {};
  const step = idle && g.decision === "undecided" && g.more_per_class > 0;
  show("gate-box", idle && !!g.decision);
  if (g.decision) {
    text("gate-title", g.decision === "undecided" ? `One more step for ${g.user}` : `${g.user}'s new model was not served`);
    text("gate-text", g.decision === "undecided" ?
      `${g.text}. Record ${g.more_per_class} more per class (about ${Math.max(1, Math.round(g.minutes))} min; ` +
      `${g.adds_held_out} more held-out ${g.unit || "windows"})` + (g.needed_per_class > g.more_per_class ? ", then the gate decides again." : ".") :
      `${g.text}. ${g.command}`);
    const list = $("gate-recall");
    list.innerHTML = "";
    Object.entries(g.recall || {}).forEach(([name, value]) =>
      el("li", { text: `${name}: ${value == null ? `no held-out ${g.unit === "recordings" ? "recording" : "window"}` : pct(value)}` }, list));
    text("gate-advice", g.advice || "");
  }
  show("more-box", step);
  if (step) {
    $("more").textContent = `Record ${g.more_per_class} more per class for ${g.user}`;
    $("more").dataset.user = g.user;
    $("more").dataset.count = String(g.more_per_class);
  }
  // Nothing to do in this state (searching, deploying): no empty "Do" card.
  show("actions", ["more-box", "collect-actions", "onboard-form", "serve-actions", "condition-box", "switch-box"]
    .some((id) => !$(id).hidden));
  const d = s.deployed || {};
  const box = $("downloads");
  // The served model's files as the service lists them (tinynas.service.models.DOWNLOADS): one owner of the names.
  const files = d.model ? ((s.model || {}).downloads || []) : [];
  if (box.dataset.model !== (d.model || "") + files.length) {
    box.dataset.model = (d.model || "") + files.length;
    box.innerHTML = "";
    if (files.length) el("span", { text: "Download: " }, box);
    files.forEach((name, i) => {
      const note = name === "firmware.zip" ? "C runtime, main.c, test firmware, README" : ((s.model || {}).download_notes || {})[name];
      el("a", { href: withToken("download/" + name), download: "", text: name + (note ? ` (${note})` : "") }, box);
      if (i < files.length - 1) el("span", { text: " · " }, box);
    });
  }
}

$("onboard-form").addEventListener("submit", (event) => {
  event.preventDefault();
  act("onboard", { user: $("onboard-user").value.trim(), plan: $("onboard-plan").value });
});
["continue", "cancel", "redo"].forEach((kind) => $(kind).addEventListener("click", () =>
  act(kind, { user: (last || {}).user || "" })));
$("recalibrate").addEventListener("click", () => {
  const named = $("condition-name").value.trim(), fields = { user: ((last || {}).deployed || {}).user || "",
                                                            unlabelled: $("unlabelled").checked };
  if (named && !$("new-condition").hidden) fields.condition = named;
  act("recalibrate", fields);
});
$("condition-set").addEventListener("click", () =>
  act("condition", { user: ((last || {}).deployed || {}).user || "", condition: $("condition-select").value }));
$("switch").addEventListener("click", () => act("serve", JSON.parse($("model-select").value)));
$("more").addEventListener("click", () => act("more", { user: $("more").dataset.user, count: Number($("more").dataset.count) }));

// ---- live test: prompt signs in random order and count the served model's answers (what the user really gets) ----
const TEST_SECONDS = 4, TEST_SETTLE = 1.5;  // a sign is held 4 s; the answer is read after the first 1.5 s
const test = { on: false, sign: null, until: 0, seen: {}, hits: 0, trials: 0 };
function wilson(hits, n) {
  if (!n) return [0, 1];
  const z = 1.96, p = hits / n, d = 1 + z * z / n, c = (p + z * z / (2 * n)) / d;
  const h = z * Math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d;
  return [hits ? Math.max(0, c - h) : 0, hits === n ? 1 : Math.min(1, c + h)];
}
function testStep(s, now) {
  if (!test.on) return;
  const p = (s.predictions || []).slice(-1)[0];
  if (test.sign && now >= test.until - TEST_SECONDS + TEST_SETTLE && p && !(s.serving || {}).stale) {
    test.seen[p.smoothed] = (test.seen[p.smoothed] || 0) + 1;
  }
  if (!test.sign || now >= test.until) {
    if (test.sign) {  // the answer most often seen while the sign was held
      const answer = Object.entries(test.seen).sort((a, b) => b[1] - a[1])[0];
      test.trials += 1;
      test.hits += answer && answer[0] === test.sign ? 1 : 0;
      const [lo, hi] = wilson(test.hits, test.trials);
      text("test-score", `Live test: ${test.hits} of ${test.trials} signs right (95 % interval ` +
           `${(100 * lo).toFixed(0)}-${(100 * hi).toFixed(0)} %); last: ${test.sign} -> ${answer ? answer[0] : "nothing"}`);
    }
    const classes = s.classes || [];
    test.sign = classes[Math.floor(Math.random() * classes.length)];
    test.until = now + TEST_SECONDS;
    test.seen = {};
  }
  text("test-prompt", `Perform: ${test.sign} (${Math.max(0, Math.ceil(test.until - now))} s)`);
}
$("test-start").addEventListener("click", () => {
  Object.assign(test, { on: true, sign: null, hits: 0, trials: 0, seen: {} });
  show("test-start", false); show("test-stop", true); show("test-prompt", true);
  text("test-score", "Live test: perform each sign shown until the next one");
});
$("test-stop").addEventListener("click", () => {
  test.on = false;
  show("test-start", true); show("test-stop", false); show("test-prompt", false);
});

let last = null, clockOffset = 0;  // the last status, and the service's clock minus ours (seconds)

function tick() {  // between polls: the countdown and GO follow the service's event times on our clock
  if (last && last.state === "COLLECTING") {
    drawPhase(last.collection || {}, Date.now() / 1000 + clockOffset);
  }
}

async function refresh() {
  let s;
  try {
    const response = await fetch(statusUrl, { cache: "no-store" });
    if (response.status === 401) throw new Error("this page needs ?token=... (the service's http_token)");
    s = await response.json();
  } catch (e) {
    show("error", true);
    text("error", "The device does not answer: " + e.message + ". Is the service running? (tinynas service status)");
    return;
  }
  last = s;
  clockOffset = s.time - Date.now() / 1000;
  hint = s.config_hint || "";
  // The config's path said once, above the commands, not after each of them.
  document.querySelectorAll(".config-hint").forEach((node) => { node.textContent = hint.trim(); });
  show("config-note", !!hint);
  const r = s.rewear || {};
  text("state", ({ IDLE: "Idle", COLLECTING: "Recording", SEARCHING: "Searching", SERVING: "Serving",
                   RECALIBRATING: "Recalibrating" }[s.state] || s.state) + (s.paused ? " - paused" : ""));
  document.body.dataset.state = s.state;
  text("who", s.user ? "user " + s.user : `no user yet: tinynas onboard --user NAME${hint}`);
  text("updated", "updated " + new Date(s.time * 1000).toLocaleTimeString());
  const dev = s.device || {}, link = s.link || {};
  const problem = [dev.waiting, link.problem].filter(Boolean).join("; ");
  show("error", !!(s.error || problem));
  if (s.error || problem) text("error", [problem, s.error].filter(Boolean).join(" - "));
  show("collecting", s.state === "COLLECTING");
  if (s.state === "COLLECTING") drawCollecting({ ...(s.collection || {}), user: s.user }, s.trace, s.time);
  show("searching", s.state === "SEARCHING");
  if (s.state === "SEARCHING") drawSearching(s.search || {});
  show("serving", !!(s.deployed && s.deployed.model));
  if (s.deployed && s.deployed.model) drawServing(s);
  drawActions(s, s.time);
  if (s.state === "SERVING" && (s.deployed || {}).task !== "anomaly") testStep(s, s.time); else if (test.on) $("test-stop").click();
  show("live-test", s.state === "SERVING" && (s.deployed || {}).task !== "anomaly");
  show("rewear", !!r.phase);
  // recalibrate's and adapt's texts begin with their verdict ("accepted: ...") already: not said twice.
  if (r.phase) text("rewear-text", `${r.user}: ` + (r.text && r.text.startsWith(r.phase) ? r.text :
                                                      r.phase + (r.text ? ` - ${r.text}` : "")) +
                    ((r.phase === "recalibrating" || r.phase === "adapting") && r.phase_started ?
                      ` (running for ${minutes(s.time - r.phase_started)})` : ""));
}

refresh();
setInterval(refresh, 1000);
setInterval(tick, 100);
