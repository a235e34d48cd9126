// The hdsl playground's page: a CodeMirror 6 editor whose highlighting is built at load time
// from the token rules the server sends (hdsl/editor/tokens.py, the source of every editor
// grammar), the checker's errors as you type, and the controls around Run.
// Bundled by esbuild (package.json) into hdsl/playground/static/editor.js.

import {EditorView, minimalSetup} from "codemirror";
import {keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter} from "@codemirror/view";
import {EditorState} from "@codemirror/state";
import {StreamLanguage, syntaxHighlighting, defaultHighlightStyle, bracketMatching, indentUnit} from "@codemirror/language";
import {indentWithTab} from "@codemirror/commands";
import {linter, lintGutter} from "@codemirror/lint";
import {tags, classHighlighter, tagHighlighter} from "@lezer/highlight";

const $ = (id) => document.getElementById(id);

// --- highlighting from the server's rules ----------------------------------------------------

function resolveTag(text) {
  const m = /^(\w+)\((.+)\)$/.exec(text);
  if (m) return tags[m[1]](resolveTag(m[2]));
  if (!(text in tags)) throw new Error(`unknown highlighting tag ${text}`);
  return tags[text];
}

function compileRules(rules, nameOf = (tag) => tag) {
  return rules.map((r) => ({re: new RegExp(r.regex, "y"), tokens: r.tags.map(nameOf)}));
}

// The tokens at `pos` of a line (not at whitespace), as [length, token] pairs: the first rule
// that matches there wins; a rule with groups gives one token per non-empty group.
function nextTokens(compiled, line, pos) {
  for (const rule of compiled) {
    rule.re.lastIndex = pos;
    const m = rule.re.exec(line);
    if (!m || m[0].length === 0) continue;
    if (rule.tokens.length === 1) return [[m[0].length, rule.tokens[0]]];
    return rule.tokens.map((tok, i) => [(m[i + 1] || "").length, tok]).filter((p) => p[0] > 0);
  }
  return [[1, null]];
}

// A whole line as [start, end, tag] triples (tags as the server names them; null for a
// whitespace group): what the editor highlights, for tests/playground to compare with Python.
export function tokenizeLine(rules, line) {
  const compiled = compileRules(rules);
  const out = [];
  let pos = 0;
  while (pos < line.length) {
    const ws = /\s+/y;
    ws.lastIndex = pos;
    const w = ws.exec(line);
    if (w) { pos += w[0].length; continue; }
    for (const [len, tag] of nextTokens(compiled, line, pos)) {
      out.push([pos, pos + len, tag]);
      pos += len;
    }
  }
  return out;
}

export function hdslLanguage(rules) {
  const names = new Map();           // tag text -> token name ("h0", "h1", ...)
  const tokenTable = {};
  const nameOf = (tag) => {
    if (tag === null) return null;
    if (!names.has(tag)) {
      const n = "h" + names.size;
      names.set(tag, n);
      tokenTable[n] = resolveTag(tag);
    }
    return names.get(tag);
  };
  const compiled = compileRules(rules, nameOf);
  return StreamLanguage.define({
    name: "hdsl",
    startState: () => ({pending: []}),
    copyState: (s) => ({pending: s.pending.slice()}),
    token(stream, state) {
      if (!state.pending.length) {
        if (stream.eatSpace()) return null;
        state.pending = nextTokens(compiled, stream.string, stream.pos);
      }
      const [len, tok] = state.pending.shift();
      stream.pos += len;
      return tok;
    },
    tokenTable,
    languageData: {commentTokens: {line: "#"}},
  });
}

// classes for what classHighlighter leaves unnamed (tests/playground reads them too)
const hdslClasses = tagHighlighter([
  {tag: tags.function(tags.variableName), class: "tok-function"},
  {tag: tags.standard(tags.function(tags.variableName)), class: "tok-builtin"},
  {tag: tags.function(tags.propertyName), class: "tok-directive"},
]);

// --- state -----------------------------------------------------------------------------------

const state = {
  meta: null,
  pipeline: null,         // the last checked program's declarations (inputs, params, schedules)
  diagnostics: [],
  params: {},             // name -> value chosen on the page
  inputs: {},             // name -> {sample: NAME} | {upload: BASE64, name: FILE}
  running: false,
  rerun: false,
  lastRun: null,
  view: null,
};

async function post(path, body) {
  const r = await fetch(path, {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
  return r.json();
}

function source() { return view.state.doc.toString(); }

function request() {
  const size = $("size").value.trim();
  return {source: source(), target: $("target").value, schedule: $("schedule").value || null,
          inputs: state.inputs, params: state.params,
          size: size ? size.split(/[ ,x]+/).map((v) => parseInt(v, 10)) : null};
}

// --- errors as you type ----------------------------------------------------------------------

function toRange(doc, d) {
  const pos = (line, col) => {
    const l = doc.line(Math.min(Math.max(line, 1), doc.lines));
    return Math.min(l.from + Math.max(col - 1, 0), l.to);
  };
  let from = pos(d.line, d.col), to = pos(d.end_line, d.end_col);
  if (to <= from) to = Math.min(from + 1, doc.length);
  if (to <= from && from > 0) from = to - 1;
  return {from, to};
}

function showDiagnostics(list) {
  state.diagnostics = list;
  const box = $("diagnostics");
  box.textContent = "";
  for (const d of list) {
    const pre = document.createElement("pre");
    pre.className = "diagnostic " + d.severity;
    pre.textContent = d.text;
    pre.dataset.line = d.line;
    pre.dataset.col = d.col;
    box.appendChild(pre);
  }
  box.hidden = list.length === 0;
}

const checker = linter(async (v) => {
  const text = v.state.doc.toString();
  const answer = await post("/api/check", {source: text});
  if (answer.busy) return lastLint;             // (the server is busy: keep what was shown)
  if (v.state.doc.toString() !== text) return [];   // (typed on meanwhile: the next check says)
  const list = answer.diagnostics || [];
  showDiagnostics(list);
  $("check-status").textContent = answer.ok ? "no errors" : `${list.length} error${list.length === 1 ? "" : "s"}`;
  $("check-status").className = answer.ok ? "ok" : "bad";
  if (answer.ok) setPipeline(answer.pipeline);
  lastLint = list.map((d) => ({...toRange(v.state.doc, d), severity: d.severity === "warning" ? "warning" : "error",
                               message: d.message + (d.hint ? `\nhint: ${d.hint}` : ""), source: "hdsl"}));
  return lastLint;
}, {delay: 250});
let lastLint = [];

// --- controls built from the program ---------------------------------------------------------

function option(select, value, text) {
  const o = document.createElement("option");
  o.value = value;
  o.textContent = text ?? value;
  select.appendChild(o);
  return o;
}

function setPipeline(p) {
  const old = state.pipeline;
  state.pipeline = p;
  const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  if (!old || !same(old.schedules, p.schedules)) {
    const sel = $("schedule"), keep = sel.value;
    sel.textContent = "";
    option(sel, "", "(default)");
    for (const s of p.schedules) option(sel, s);
    sel.value = p.schedules.includes(keep) ? keep : (pendingSchedule && p.schedules.includes(pendingSchedule) ? pendingSchedule : "");
    pendingSchedule = null;
  }
  if (!old || !same(old.inputs, p.inputs)) buildInputs(p.inputs);
  if (!old || !same(old.params, p.params)) buildParams(p.params);
}
let pendingSchedule = null;

function buildInputs(inputs) {
  const box = $("inputs");
  box.textContent = "";
  const kept = state.inputs;
  state.inputs = {};
  for (const b of inputs) {
    const row = document.createElement("div");
    row.className = "input-row";
    const label = document.createElement("label");
    label.textContent = `${b.name}: ${b.type}[${b.dims}] `;
    const sel = document.createElement("select");
    sel.id = `input-${b.name}`;
    const fits = state.meta.images.filter((s) => s.type === b.type && s.dims === b.dims);
    for (const s of fits) option(sel, s.name, `${s.name} (${s.shape.join("x")})`);
    for (const s of state.meta.images.filter((s) => !fits.includes(s)))
      option(sel, s.name, `${s.name} (${s.type}[${s.dims}])`).className = "misfit";
    option(sel, "__upload__", "upload…");
    const file = document.createElement("input");
    file.type = "file";
    file.accept = ".png,.jpg,.jpeg,.npy";
    file.hidden = true;
    file.id = `upload-${b.name}`;
    const k = kept[b.name];      // (what was chosen before an edit, while it still fits)
    if (k && k.sample && fits.some((s) => s.name === k.sample)) sel.value = k.sample;
    if (k && k.upload) { sel.value = "__upload__"; state.inputs[b.name] = k; }
    const choose = () => {
      if (sel.value === "__upload__") { file.hidden = false; file.click(); return; }
      file.hidden = true;
      state.inputs[b.name] = {sample: sel.value};
      showInput(b.name, `/api/image/${encodeURIComponent(sel.value)}`);
    };
    sel.addEventListener("change", () => { choose(); scheduleRun(); });
    file.addEventListener("change", async () => {
      const f = file.files[0];
      if (!f) return;
      const bytes = new Uint8Array(await f.arrayBuffer());
      let bin = "";
      for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
      state.inputs[b.name] = {upload: btoa(bin), name: f.name};
      if (/\.(png|jpe?g)$/i.test(f.name)) showInput(b.name, URL.createObjectURL(f));
      scheduleRun();
    });
    label.append(sel, file);
    row.appendChild(label);
    box.appendChild(row);
    if (sel.value !== "__upload__") choose();
    else file.hidden = false;
  }
  if (!inputs.length) box.textContent = "(no inputs)";
}

function showInput(name, url) {
  if (state.pipeline && state.pipeline.inputs.length && state.pipeline.inputs[0].name !== name) return;
  const img = new Image();
  img.onload = () => drawImage($("input-canvas"), img);
  img.src = url;
  $("input-caption").textContent = `input ${name}`;
}

function sliderRange(p) {
  const d = p.default ?? 0;
  if (p.type.startsWith("f")) {
    const hi = d > 0 ? 4 * d : (d < 0 ? 0 : 1), lo = d < 0 ? 4 * d : 0;
    return {min: lo, max: hi, step: (hi - lo) / 200};
  }
  const unsigned = p.type.startsWith("u");
  const hi = d > 0 ? Math.max(4 * d, 10) : (d < 0 ? 0 : 10), lo = d < 0 ? 4 * d : 0;
  return {min: unsigned ? Math.max(lo, 0) : lo, max: hi, step: 1};
}

function buildParams(params) {
  const box = $("params");
  box.textContent = "";
  const kept = state.params;
  state.params = {};
  for (const p of params) {
    const row = document.createElement("div");
    row.className = "param-row";
    const label = document.createElement("label");
    label.textContent = `${p.name}: ${p.type} `;
    row.appendChild(label);
    const start = kept[p.name] ?? p.default;
    if (start !== null && start !== undefined) state.params[p.name] = start;
    if (p.type === "bool") {
      const box2 = document.createElement("input");
      box2.type = "checkbox";
      box2.id = `param-${p.name}`;
      box2.checked = !!start;
      box2.addEventListener("change", () => { state.params[p.name] = box2.checked; scheduleRun(); });
      row.appendChild(box2);
    } else {
      const r = sliderRange(p);
      const slider = document.createElement("input");
      slider.type = "range";
      slider.id = `param-${p.name}`;
      Object.assign(slider, {min: r.min, max: r.max, step: r.step});
      const field = document.createElement("input");
      field.type = "number";
      field.id = `param-${p.name}-value`;
      field.step = p.type.startsWith("f") ? "any" : "1";
      if (start !== null && start !== undefined) { slider.value = start; field.value = start; }
      const set = (v, from) => {
        const num = p.type.startsWith("f") ? parseFloat(v) : parseInt(v, 10);
        if (Number.isNaN(num)) return;
        state.params[p.name] = num;
        if (from !== slider) slider.value = num;
        if (from !== field) field.value = num;
        scheduleRun();
      };
      slider.addEventListener("input", () => set(slider.value, slider));
      field.addEventListener("change", () => set(field.value, field));
      row.append(slider, field);
    }
    box.appendChild(row);
  }
  if (!params.length) box.textContent = "(no params)";
}

// --- run -------------------------------------------------------------------------------------

let runTimer = null;
function scheduleRun() {            // (sliders: run again as they move, at most one run in flight)
  if (!state.lastRun) return;
  clearTimeout(runTimer);
  runTimer = setTimeout(run, 120);
}

function drawImage(canvas, img) {
  canvas.width = img.naturalWidth;
  canvas.height = img.naturalHeight;
  const ctx = canvas.getContext("2d", {willReadFrequently: true});
  ctx.drawImage(img, 0, 0);
}

export async function run() {
  if (state.running) { state.rerun = true; return; }
  state.running = true;
  $("run").disabled = true;
  $("run-status").textContent = "running…";
  $("run-status").className = "";
  let answer;
  try {
    answer = await post("/api/run", request());
  } catch (e) {
    answer = {ok: false, error: `no answer from the server: ${e}`};
  }
  state.lastRun = answer;
  await showRun(answer);
  state.running = false;
  $("run").disabled = false;
  if (state.rerun) { state.rerun = false; run(); }
}

async function showRun(a) {
  const status = $("run-status");
  if (!a.ok) {
    status.className = "bad";
    if (a.diagnostics) {
      showDiagnostics(a.diagnostics);
      status.textContent = a.diagnostics.map((d) => d.message).join("; ");
    } else {
      status.textContent = a.error + (a.hint ? ` (hint: ${a.hint})` : "");
    }
    $("printed").textContent = a.printed || "";
    return;
  }
  showDiagnostics([]);
  status.className = "ok";
  status.textContent = `${a.target}: compile ${a.compile_ms.toFixed(1)} ms${a.cached ? " (cached)" : ""}, ` +
                       `run ${a.run_ms.toFixed(2)} ms`;
  $("printed").textContent = a.printed || "";
  const box = $("outputs");
  box.textContent = "";
  const loads = [];
  for (const o of a.outputs) {
    const fig = document.createElement("figure");
    const canvas = document.createElement("canvas");
    canvas.id = `output-${o.name}`;
    canvas.className = "image";
    const cap = document.createElement("figcaption");
    cap.textContent = `${o.name}: ${o.dtype} ${o.shape.join("x")}, values ${o.min} .. ${o.max}`;
    fig.append(canvas, cap);
    box.appendChild(fig);
    loads.push(new Promise((done) => {
      const img = new Image();
      img.onload = () => { drawImage(canvas, img); done(); };
      img.onerror = done;
      img.src = o.png;
    }));
  }
  const first = state.pipeline && state.pipeline.inputs[0];
  if (first && a.inputs[first.name]) showInput(first.name, a.inputs[first.name]);
  await Promise.all(loads);
  box.dataset.runs = String((parseInt(box.dataset.runs || "0", 10)) + 1);
}

// --- compiled forms --------------------------------------------------------------------------

export async function showView() {
  const kind = $("view-kind").value;
  $("view-after").hidden = kind !== "stmt";
  const out = $("view-text"), frame = $("view-html");
  out.textContent = "compiling…";
  const a = await post("/api/view", {...request(), kind, after: kind === "stmt" ? $("view-after").value : null});
  if (!a.ok) {
    frame.hidden = true;
    out.hidden = false;
    out.textContent = a.diagnostics ? a.diagnostics.map((d) => d.text).join("\n") : a.error;
    return;
  }
  if (kind === "html") {
    out.hidden = true;
    frame.hidden = false;
    frame.srcdoc = a.text;
  } else {
    frame.hidden = true;
    out.hidden = false;
    out.textContent = a.text + (a.truncated ? "\n… (cut: the playground shows at most 1 MiB)" : "");
  }
  out.dataset.kind = kind;
}

// --- share links -----------------------------------------------------------------------------

function toBase64Url(text) {
  const bytes = new TextEncoder().encode(text);
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function fromBase64Url(text) {
  const bin = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  return new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
}

export function shareLink() {
  const q = new URLSearchParams({code: toBase64Url(source()), target: $("target").value});
  if ($("schedule").value) q.set("schedule", $("schedule").value);
  return `${location.origin}${location.pathname}#${q}`;
}

// --- start -----------------------------------------------------------------------------------

let view;

function setSource(text) {
  view.dispatch({changes: {from: 0, to: view.state.doc.length, insert: text}});
}

async function openModule(kind, name) {
  const r = await fetch(`/api/source/${kind}/${encodeURIComponent(name)}`);
  if (r.ok) setSource(await r.text());
}

async function start() {
  const [meta, rules] = await Promise.all([fetch("/api/meta").then((r) => r.json()),
                                           fetch("/api/tokens").then((r) => r.json())]);
  state.meta = meta;
  for (const t of meta.targets) option($("target"), t);
  for (const p of meta.passes) option($("view-after"), p);
  $("view-after").value = meta.passes[meta.passes.length - 1];
  const opens = $("open");
  const group = (label, kind, names) => {
    if (!names.length) return;
    const g = document.createElement("optgroup");
    g.label = label;
    for (const n of names) option(g, `${kind}/${n}`, n);
    opens.appendChild(g);
  };
  group("examples", "example", meta.examples);
  group("stdlib", "stdlib", meta.stdlib);
  group("playground", "starter", meta.starter);
  $("limits").textContent = `each compile or run: ${meta.limits.cpu_s} s CPU, ${meta.limits.memory_mb} MiB`;

  const hash = new URLSearchParams(location.hash.slice(1));
  let text = hash.has("code") ? fromBase64Url(hash.get("code")) : null;
  if (hash.has("target") && meta.targets.includes(hash.get("target"))) $("target").value = hash.get("target");
  pendingSchedule = hash.get("schedule");

  view = new EditorView({
    parent: $("editor"),
    state: EditorState.create({
      doc: "",
      extensions: [minimalSetup, lineNumbers(), highlightActiveLine(), highlightActiveLineGutter(), bracketMatching(),
                   keymap.of([indentWithTab, {key: "Mod-Enter", run: () => { run(); return true; }}]), indentUnit.of("    "), hdslLanguage(rules),
                   syntaxHighlighting(defaultHighlightStyle), syntaxHighlighting(classHighlighter), syntaxHighlighting(hdslClasses),
                   checker, lintGutter()],
    }),
  });
  if (text === null) {
    const first = meta.examples.includes("blur") ? "example/blur" : "starter/" + meta.starter[0];
    opens.value = first;
    await openModule(...first.split("/"));
  } else {
    setSource(text);
  }
  opens.addEventListener("change", () => { if (opens.value) openModule(...opens.value.split("/")); });
  $("run").addEventListener("click", run);
  $("target").addEventListener("change", scheduleRun);
  $("schedule").addEventListener("change", scheduleRun);
  $("size").addEventListener("change", scheduleRun);
  $("view-kind").addEventListener("change", showView);
  $("view-after").addEventListener("change", showView);
  $("view-show").addEventListener("click", showView);
  $("share").addEventListener("click", async () => {
    const link = shareLink();
    $("share-link").value = link;
    $("share-link").hidden = false;
    $("share-link").select();
    try { await navigator.clipboard.writeText(link); } catch (e) { /* (no clipboard without https) */ }
  });
  window.addEventListener("hashchange", () => location.reload());
  document.body.dataset.ready = "1";
}

window.hdslPlayground = {state, run, showView, shareLink, get view() { return view; }};
start();
