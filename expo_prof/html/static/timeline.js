/* expo-prof timeline page.
   Plotly draws the axes, zoom, pan, range slider and legend; the bars are painted on a
   canvas under plotly's SVG, from the column-wise data, at most ~one rect per pixel per
   lane per layer (instances: always one rect each). This keeps a page of a million-event
   trace interactive (measured in bench/bench_html.py; docs/html.md has the numbers). */
"use strict";
(function () {
  const D = Expo.data();
  const gd = document.getElementById("plot");
  const nL = D.lanes.length;
  const MS = 1e-6; // ns -> ms (the x axis unit)
  const COL = {
    busy: "#b8c2cc", w0: "#7f97b2", w1: "#c9a26b", w2: "#d5dbe3", fwd: "#9ecae1", wait: "#9467bd",
    hidden: "#2ca02c", exposed: "#d62728", step: "rgba(31,41,51,0.45)",
  };
  // Layers in drawing order; "key" is the legend entry that toggles it.
  const LEGEND = [
    { key: "hidden", name: "exp. hidden part", color: COL.hidden },
    { key: "exposed", name: "exp. exposed part", color: COL.exposed },
    { key: "fwd", name: "forward pass", color: COL.fwd },
    { key: "wait", name: "sampler wait", color: COL.wait },
    { key: "step", name: "step boundary", color: COL.step },
    { key: "w0", name: "kernel / operator", color: COL.w0 },
    { key: "w1", name: "comm / copy", color: COL.w1 },
    { key: "w2", name: "annotation / other", color: COL.w2 },
    { key: "busy", name: "busy (merged)", color: COL.busy },
  ];
  const hiddenLayers = new Set();

  // ------------------------------------------------------------------ columns
  /** A table of intervals sorted by lane then start, with per-lane ranges and a prefix max of ends. */
  function Table(t, laneOf) {
    const n = t.start.length;
    this.n = n;
    this.s = new Float64Array(n);
    this.e = new Float64Array(n);
    this.lane = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      this.s[i] = t.start[i] * MS;
      this.e[i] = (t.start[i] + t.dur[i]) * MS;
      this.lane[i] = laneOf ? laneOf(i) : t.lane[i];
    }
    this.lo = new Int32Array(nL + 1).fill(-1);
    this.hi = new Int32Array(nL + 1).fill(-1);
    this.pmax = new Float64Array(n);
    let prev = -1, m = -Infinity;
    for (let i = 0; i < n; i++) {
      const l = this.lane[i];
      if (l !== prev) { if (l >= 0) this.lo[l] = i; if (prev >= 0) this.hi[prev] = i; prev = l; m = -Infinity; }
      m = Math.max(m, this.e[i]);
      this.pmax[i] = m;
    }
    if (prev >= 0) this.hi[prev] = n;
  }
  /** Call f(i) for every interval of lane l overlapping [x0, x1]. */
  Table.prototype.each = function (l, x0, x1, f) {
    let a = this.lo[l];
    const b = this.hi[l];
    if (a < 0) return;
    let lo = a, hi = b; // first index whose prefix max end reaches x0
    while (lo < hi) { const mid = (lo + hi) >> 1; if (this.pmax[mid] < x0) lo = mid + 1; else hi = mid; }
    for (let i = lo; i < b && this.s[i] <= x1; i++) if (this.e[i] >= x0) f(i);
  };

  const inst = new Table(D.inst);
  const instLane = inst.lane;
  const piece = new Table(D.piece, (i) => instLane[D.piece.inst[i]]);
  const work = new Table(D.work);
  const busy = new Table(D.busy);
  const fwd = new Table(D.fwd);
  const wait = new Table(D.wait);
  const workCat = Int8Array.from(D.work.cat);
  const pieceHidden = Int8Array.from(D.piece.hidden);
  const instExposed = Float64Array.from(D.inst.exposed);

  // Steps per group, and windows per step id for "jump to step": per source format, over all
  // ranks of it (one format numbers steps one way; the overlay log and a trace may differ).
  const steps = { g: D.step.group, id: D.step.id, s: D.step.start, d: D.step.dur };
  const stepsOfGroup = D.groups.map(() => []);
  const stepWins = new Map(); // fmt -> Map(id -> [start, end])
  for (let i = 0; i < steps.s.length; i++) {
    stepsOfGroup[steps.g[i]].push(i);
    const fmt = D.groups[steps.g[i]].fmt;
    if (!stepWins.has(fmt)) stepWins.set(fmt, new Map());
    const m = stepWins.get(fmt);
    const id = steps.id[i], s = steps.s[i], e = steps.s[i] + steps.d[i];
    const w = m.get(id);
    if (w) { w[0] = Math.min(w[0], s); w[1] = Math.max(w[1], e); } else m.set(id, [s, e]);
  }
  let stepWin = new Map(), stepIds = [];
  function useStepSource(fmt) {
    stepWin = stepWins.get(fmt) || new Map();
    stepIds = Array.from(stepWin.keys()).sort((a, b) => a - b);
    const inp = document.getElementById("step");
    if (stepIds.length) { inp.min = String(stepIds[0]); inp.max = String(stepIds[stepIds.length - 1]); inp.value = String(stepIds[0]); }
  }
  function stepAt(group, ns) {
    const idx = stepsOfGroup[group];
    let lo = 0, hi = idx.length - 1, found = null;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1, i = idx[mid];
      if (steps.s[i] <= ns) { found = i; lo = mid + 1; } else hi = mid - 1;
    }
    return found !== null && ns < steps.s[found] + Math.max(steps.d[found], 1) ? steps.id[found] : null;
  }

  // ------------------------------------------------------------------ plotly frame
  const span = Math.max(D.span_ns * MS, 1e-3);
  const pad = span * 0.01;
  const full = [-pad, span + pad];
  const labels = D.lanes.map((l) => l.label);
  const longest = labels.reduce((m, s) => Math.max(m, Math.min(s.length, 56)), 8);
  const marginL = Math.min(40 + longest * 6.6, 420);
  const laneH = nL > 40 ? 18 : 28;
  const height = Math.max(360, 90 + 150 + nL * laneH);
  const bands = D.groups.map((g, i) => ({
    type: "rect", xref: "paper", yref: "y", x0: 0, x1: 1, y0: g.lane0 - 0.5, y1: g.lane1 - 0.5,
    fillcolor: i % 2 ? "rgba(0,0,0,0)" : "rgba(120,140,170,0.07)", line: { width: 0 }, layer: "below",
  }));
  const traces = LEGEND.map((L) => ({
    type: "scatter", mode: "lines", x: [null], y: [null], name: L.name, hoverinfo: "skip",
    line: { color: L.color, width: 10 }, showlegend: true, legendgroup: L.key,
  }));
  const layout = {
    height: height,
    margin: { l: marginL, r: 46, t: 58, b: 40 },
    modebar: { orientation: "v" },
    paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)",
    showlegend: true, legend: { orientation: "h", x: 0, y: 1.0, yanchor: "bottom", font: { size: 11 }, itemclick: "toggle", itemdoubleclick: "toggleothers" },
    dragmode: "zoom", hovermode: false,
    xaxis: {
      range: full.slice(), autorange: false, title: { text: "time since start (ms)", standoff: 6 }, zeroline: false,
      showgrid: true, gridcolor: "rgba(0,0,0,0.07)", ticks: "outside",
      rangeslider: { visible: true, range: full.slice(), autorange: false, thickness: 0.09, bgcolor: "rgba(0,0,0,0)", bordercolor: "#c5ccd4", borderwidth: 1 },
    },
    yaxis: {
      range: [nL - 0.5, -0.5], autorange: false, fixedrange: true, zeroline: false, showgrid: false,
      tickmode: "array", tickvals: labels.map((_, i) => i), ticktext: labels.map((s) => Expo.ptext(Expo.shorten(s, 56))),
      tickfont: { size: 11 },
    },
    shapes: bands,
  };
  const config = { scrollZoom: true, displaylogo: false, responsive: true, modeBarButtonsToRemove: ["select2d", "lasso2d", "autoScale2d"] };

  // ------------------------------------------------------------------ canvas painting
  let canvas = null, ctx = null, over = null, octx = null;
  const stats = { frames: 0, inst: 0, pieces: 0, rects: 0, lastMs: 0 };

  function ensureCanvas() {
    const box = gd.querySelector(".svg-container");
    if (!box) return false;
    if (!canvas || canvas.parentNode !== box) {
      canvas = document.createElement("canvas");
      canvas.id = "bars";
      canvas.style.cssText = "position:absolute;left:0;top:0;pointer-events:none";
      box.insertBefore(canvas, box.firstChild); // under plotly's SVG: grid, zoom box, slider mask stay on top
      over = document.createElement("canvas");
      over.id = "overview";
      over.style.cssText = "position:absolute;left:0;top:0;pointer-events:none";
      box.insertBefore(over, box.firstChild);
      ctx = canvas.getContext("2d");
      octx = over.getContext("2d");
    }
    const dpr = window.devicePixelRatio || 1;
    const w = box.clientWidth, h = box.clientHeight;
    for (const c of [canvas, over]) {
      if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
        c.width = Math.round(w * dpr); c.height = Math.round(h * dpr);
        c.style.width = w + "px"; c.style.height = h + "px";
      }
    }
    return true;
  }

  /** Geometry of the plot area for an x range: data -> pixel transforms. */
  function frame(xr) {
    const fl = gd._fullLayout, sz = fl._size;
    const sx = sz.w / (xr[1] - xr[0]);
    const ya = fl.yaxis;
    const rowH = Math.abs(ya.l2p(1) - ya.l2p(0));
    return { l: sz.l, t: sz.t, w: sz.w, h: sz.h, x0: xr[0], x1: xr[1], sx, rowH, yc: (i) => sz.t + ya.l2p(i) };
  }

  /** Paint one layer of a table: rects merged per pixel within a lane. */
  function paintTable(tab, color, F, hFrac, pick, minW) {
    ctx.fillStyle = color;
    const h = F.rowH * hFrac;
    let rects = 0;
    for (let l = 0; l < nL; l++) {
      const y = F.yc(l) - h / 2;
      let a0 = 0, a1 = -Infinity;
      tab.each(l, F.x0, F.x1, (i) => {
        if (pick && !pick(i)) return;
        let a = F.l + (tab.s[i] - F.x0) * F.sx, b = F.l + (tab.e[i] - F.x0) * F.sx;
        if (b - a < minW) { const c = (a + b) / 2; a = c - minW / 2; b = c + minW / 2; }
        if (a <= a1 + 0.5) { if (b > a1) a1 = b; return; }
        if (a1 > -Infinity) { ctx.fillRect(a0, y, a1 - a0, h); rects++; }
        a0 = a; a1 = b;
      });
      if (a1 > -Infinity) { ctx.fillRect(a0, y, a1 - a0, h); rects++; }
    }
    return rects;
  }

  function paint(xr) {
    if (!ensureCanvas()) return;
    const t0 = performance.now();
    const dpr = window.devicePixelRatio || 1;
    const F = frame(xr);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    ctx.save();
    ctx.beginPath();
    ctx.rect(F.l, F.t, F.w, F.h);
    ctx.clip();
    let rects = 0;
    if (!hiddenLayers.has("busy")) rects += paintTable(busy, COL.busy, F, 0.62, null, 1);
    for (const c of [2, 1, 0]) {
      if (!hiddenLayers.has("w" + c)) rects += paintTable(work, COL["w" + c], F, 0.62, (i) => workCat[i] === c, 1);
    }
    if (!hiddenLayers.has("fwd")) rects += paintTable(fwd, COL.fwd, F, 0.7, null, 1);
    if (!hiddenLayers.has("wait")) rects += paintTable(wait, COL.wait, F, 0.7, null, 2);
    if (!hiddenLayers.has("step")) paintSteps(F);
    // Instances: never merged; each at least 3 px wide (1 px where they are denser than
    // that). Hidden first, exposed on top, so a draw too short to show both parts shows red
    // when any of it is exposed.
    let ni = 0, np = 0;
    const h = F.rowH * 0.86;
    const minW = new Float64Array(nL);
    for (let l = 0; l < nL; l++) {
      let c = 0;
      inst.each(l, F.x0, F.x1, () => { c++; });
      minW[l] = c * 4 > F.w ? 1 : 3;
    }
    for (const part of [1, 0]) {
      if (hiddenLayers.has(part ? "hidden" : "exposed")) continue;
      ctx.fillStyle = part ? COL.hidden : COL.exposed;
      for (let l = 0; l < nL; l++) {
        const y = F.yc(l) - h / 2, mw = minW[l];
        piece.each(l, F.x0, F.x1, (i) => {
          if (pieceHidden[i] !== part) return;
          let a = F.l + (piece.s[i] - F.x0) * F.sx, b = F.l + (piece.e[i] - F.x0) * F.sx;
          if (b - a < mw) { const c = (a + b) / 2; a = c - mw / 2; b = c + mw / 2; }
          ctx.fillRect(a, y, b - a, h);
          np++;
        });
      }
    }
    // Outline each instance so neighbours stay distinguishable.
    ctx.strokeStyle = "rgba(20,20,20,0.55)";
    ctx.lineWidth = 1;
    for (let l = 0; l < nL; l++) {
      const y = F.yc(l) - h / 2;
      inst.each(l, F.x0, F.x1, (i) => {
        ni++;
        const a = F.l + (inst.s[i] - F.x0) * F.sx, b = F.l + (inst.e[i] - F.x0) * F.sx;
        if (b - a >= 6) ctx.strokeRect(a + 0.5, y + 0.5, b - a - 1, h - 1);
      });
    }
    ctx.restore();
    stats.frames++; stats.inst = ni; stats.pieces = np; stats.rects = rects + np; stats.lastMs = performance.now() - t0;
    stats.range = [xr[0], xr[1]];
  }

  function paintSteps(F) {
    ctx.fillStyle = COL.step;
    ctx.font = "10px system-ui, sans-serif";
    for (let g = 0; g < D.groups.length; g++) {
      const G = D.groups[g];
      if (G.lane1 <= G.lane0) continue;
      const idx = stepsOfGroup[g];
      let lo = 0, hi = idx.length; // first step starting at or after x0
      while (lo < hi) { const mid = (lo + hi) >> 1; if (steps.s[idx[mid]] * MS < F.x0) lo = mid + 1; else hi = mid; }
      let k1 = lo;
      while (k1 < idx.length && steps.s[idx[k1]] * MS <= F.x1) k1++;
      // Boundaries closer than 5 px apart would only paint the lane grey: leave them out.
      if ((k1 - lo) * 5 > F.w) continue;
      const y0 = F.yc(G.lane0) - F.rowH / 2, y1 = F.yc(G.lane1 - 1) + F.rowH / 2;
      let lastLabel = -Infinity;
      for (let k = lo; k < k1; k++) {
        const i = idx[k];
        const px = Math.round(F.l + (steps.s[i] * MS - F.x0) * F.sx);
        ctx.fillRect(px, y0, 1, y1 - y0);
        const label = "step " + steps.id[i];
        if (px > lastLabel) { ctx.fillText(label, px + 3, y0 + 10); lastLabel = px + ctx.measureText(label).width + 8; }
      }
    }
  }

  /** The range slider's overview: every instance (red if any part is exposed) and the work, at full range. */
  function paintOverview() {
    const bg = gd.querySelector(".rangeslider-bg");
    if (!bg || !octx) return;
    const box = gd.querySelector(".svg-container").getBoundingClientRect();
    const r = bg.getBoundingClientRect();
    const dpr = window.devicePixelRatio || 1;
    octx.setTransform(dpr, 0, 0, dpr, 0, 0);
    octx.clearRect(0, 0, over.width, over.height);
    const L = r.left - box.left, T = r.top - box.top, W = r.width, H = r.height;
    if (W <= 2 || H <= 2) return;
    const sx = W / (full[1] - full[0]);
    const rh = (H - 4) / Math.max(nL, 1);
    const px = (x) => L + (x - full[0]) * sx;
    const lanePaint = (tab, color, hf) => {
      octx.fillStyle = color;
      for (let l = 0; l < nL; l++) {
        const y = T + 2 + l * rh + rh * (1 - hf) / 2;
        let a0 = 0, a1 = -Infinity;
        tab.each(l, full[0], full[1], (i) => {
          let a = px(tab.s[i]), b = Math.max(px(tab.e[i]), a + 1);
          if (a <= a1 + 0.5) { if (b > a1) a1 = b; return; }
          if (a1 > -Infinity) octx.fillRect(a0, y, a1 - a0, rh * hf);
          a0 = a; a1 = b;
        });
        if (a1 > -Infinity) octx.fillRect(a0, y, a1 - a0, rh * hf);
      }
    };
    lanePaint(busy, COL.busy, 0.6);
    lanePaint(work, COL.w0, 0.6);
    lanePaint(fwd, COL.fwd, 0.7);
    for (const exposed of [false, true]) {
      octx.fillStyle = exposed ? COL.exposed : COL.hidden;
      for (let l = 0; l < nL; l++) {
        const y = T + 2 + l * rh;
        inst.each(l, full[0], full[1], (i) => {
          if ((instExposed[i] > 0) !== exposed) return;
          const a = px(inst.s[i]);
          octx.fillRect(a - 1, y, Math.max(px(inst.e[i]) - a, 2), Math.max(rh, 2));
        });
      }
    }
  }

  function currentRange() {
    const r = gd._fullLayout.xaxis.range;
    return [Number(r[0]), Number(r[1])];
  }
  function rangeFrom(ev) {
    if (!ev) return null;
    if (ev["xaxis.range[0]"] !== undefined) return [Number(ev["xaxis.range[0]"]), Number(ev["xaxis.range[1]"])];
    if (Array.isArray(ev["xaxis.range"])) return [Number(ev["xaxis.range"][0]), Number(ev["xaxis.range"][1])];
    return null;
  }

  // ------------------------------------------------------------------ hover
  const tip = document.getElementById("tip");
  function pieceLines(i, part) {
    const dur = D.inst.dur[i], hid = D.inst.hidden[i], exp = D.inst.exposed[i];
    const step = D.inst.step[i];
    const g = D.groups[D.inst.group[i]];
    const out = [
      ["t", D.names[D.inst.name[i]]],
      ["", "lane: " + D.lanes[inst.lane[i]].label],
      ["", "rank " + g.rank + " · " + g.fmt + " · step " + (step >= 0 ? step : "-")],
      ["", "start: " + Expo.fmtAt(D.inst.start[i])],
      ["", "duration: " + Expo.fmtNs(dur)],
      ["", "hidden: " + Expo.fmtNs(hid) + " (" + Expo.fmtPct(dur ? hid / dur : null) + ")"],
      ["", "exposed: " + Expo.fmtNs(exp) + " (" + Expo.fmtPct(dur ? exp / dur : null) + ")"],
    ];
    if (part !== null) {
      out.push(["", "this part: " + (D.piece.hidden[part] ? "hidden " : "exposed ") + Expo.fmtNs(D.piece.dur[part]) + " at " + Expo.fmtAt(D.piece.start[part])]);
    }
    return out;
  }
  function spanLines(what, tab, cols, i, lane) {
    const g = D.lanes[lane].group;
    const s = cols.start[i], d = cols.dur[i];
    const step = stepAt(g, s);
    const name = cols.name ? D.names[cols.name[i]] : what;
    return [
      ["t", name],
      ["", what + " · lane: " + D.lanes[lane].label],
      ["", "step " + (step === null ? "-" : step)],
      ["", "start: " + Expo.fmtAt(s)],
      ["", "duration: " + Expo.fmtNs(d)],
    ];
  }
  /** What is under (x ms, lane): instance first, then windows, then the innermost work event. */
  function hit(x, lane, tol) {
    if (lane < 0 || lane >= nL) return null;
    let best = null, bestD = Infinity;
    inst.each(lane, x - tol, x + tol, (i) => {
      const d = x < inst.s[i] ? inst.s[i] - x : x > inst.e[i] ? x - inst.e[i] : 0;
      if (d < bestD) { bestD = d; best = i; }
    });
    if (best !== null) {
      let part = null;
      const xs = Math.min(Math.max(x, inst.s[best]), inst.e[best]);
      piece.each(lane, xs, xs, (k) => { if (D.piece.inst[k] === best) part = k; });
      return { kind: "instance", index: best, lines: pieceLines(best, part) };
    }
    for (const [what, tab, cols] of [["forward pass", fwd, D.fwd], ["sampler wait", wait, D.wait]]) {
      let found = null;
      tab.each(lane, x - tol, x + tol, (i) => { if (found === null) found = i; });
      if (found !== null) return { kind: what, index: found, lines: spanLines(what, tab, cols, found, lane) };
    }
    let inner = null;
    work.each(lane, x - tol, x + tol, (i) => {
      if (!hiddenLayers.has("w" + workCat[i]) && (inner === null || work.e[i] - work.s[i] < work.e[inner] - work.s[inner])) inner = i;
    });
    if (inner !== null) return { kind: "work", index: inner, lines: spanLines(D.work_cats[workCat[inner]], work, D.work, inner, lane) };
    let b = null;
    busy.each(lane, x - tol, x + tol, (i) => { if (b === null) b = i; });
    if (b !== null) {
      const lines = spanLines("busy", busy, D.busy, b, lane);
      lines[0] = ["t", "busy (other work merged at this level of detail)"];
      return { kind: "busy", index: b, lines };
    }
    return null;
  }
  function showTip(h, cx, cy) {
    if (!h) { tip.hidden = true; return; }
    tip.replaceChildren(...h.lines.map(([c, s]) => Expo.el("div", { className: c }, s)));
    tip.hidden = false;
    const w = tip.offsetWidth, hh = tip.offsetHeight;
    tip.style.left = Math.min(cx + 14, window.innerWidth - w - 4) + "px";
    tip.style.top = Math.min(cy + 14, window.innerHeight - hh - 4) + "px";
  }
  let dragging = false;
  gd.addEventListener("mousedown", () => { dragging = true; tip.hidden = true; });
  window.addEventListener("mouseup", () => { dragging = false; });
  gd.addEventListener("mouseleave", () => { tip.hidden = true; });
  gd.addEventListener("mousemove", (ev) => {
    if (dragging || !gd._fullLayout || !gd._fullLayout._size) return;
    const sz = gd._fullLayout._size;
    const r = gd.getBoundingClientRect();
    const px = ev.clientX - r.left - sz.l, py = ev.clientY - r.top - sz.t;
    if (px < 0 || py < 0 || px > sz.w || py > sz.h) { tip.hidden = true; return; }
    const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
    const x = xa.p2l(px);
    const lane = Math.round(ya.p2l(py));
    const tol = 3 / (sz.w / (xa.range[1] - xa.range[0]));
    showTip(hit(x, lane, tol), ev.clientX, ev.clientY);
  });

  // ------------------------------------------------------------------ controls
  function zoomTo(s, e) {
    const w = Math.max(e - s, 1000);
    return Plotly.relayout(gd, { "xaxis.range": [(s - 0.08 * w) * MS, (e + 0.08 * w) * MS] });
  }
  let curStep = null;
  function goStep(id) {
    const w = stepWin.get(id);
    const msg = document.getElementById("stepmsg");
    if (!w) { msg.textContent = stepIds.length ? "no step " + id + " (steps " + stepIds[0] + "–" + stepIds[stepIds.length - 1] + ")" : "no steps in this trace"; return null; }
    msg.textContent = "step " + id + ": " + Expo.fmtNs(w[1] - w[0]);
    curStep = id;
    document.getElementById("step").value = String(id);
    return zoomTo(w[0], w[1]);
  }
  function neighbour(dir) {
    if (!stepIds.length) return;
    if (curStep === null) return goStep(stepIds[0]);
    const k = stepIds.indexOf(curStep) + dir;
    if (k >= 0 && k < stepIds.length) goStep(stepIds[k]);
  }
  document.getElementById("go").addEventListener("click", () => goStep(Number(document.getElementById("step").value)));
  document.getElementById("step").addEventListener("keydown", (ev) => { if (ev.key === "Enter") goStep(Number(ev.target.value)); });
  document.getElementById("prev").addEventListener("click", () => neighbour(-1));
  document.getElementById("next").addEventListener("click", () => neighbour(1));
  document.getElementById("reset").addEventListener("click", () => { curStep = null; Plotly.relayout(gd, { "xaxis.range": full.slice() }); });
  const srcSel = document.getElementById("stepsrc");
  for (const fmt of stepWins.keys()) srcSel.appendChild(Expo.el("option", { value: fmt }, fmt));
  if (stepWins.size < 2) srcSel.style.display = "none";
  srcSel.addEventListener("change", () => { curStep = null; useStepSource(srcSel.value); });
  useStepSource(stepWins.size ? stepWins.keys().next().value : "");

  // ------------------------------------------------------------------ header text
  Expo.setText("title", D.title);
  const nInst = D.inst.start.length;
  const summary = D.groups.map((g) => {
    const frac = g.total_ns ? g.hidden_ns / g.total_ns : null;
    return "rank " + g.rank + " (" + g.fmt + "): " + g.instances + " instances, hidden " + Expo.fmtPct(frac) +
      ", exposed " + Expo.fmtNs(g.exposed_ns) + " of " + Expo.fmtNs(g.total_ns);
  });
  Expo.setText("summary", summary.join(" · "));
  const nSteps = Array.from(stepWins.values()).reduce((m, w) => Math.max(m, w.size), 0);
  const target = D.run && D.run.target ? "matched-op" : "exponential";
  const notes = [D.lod.text + ".", nInst + " " + target + " instances drawn individually.", nSteps + " steps."];
  if (D.clock_note) notes.push(D.clock_note + ".");
  if (D.origin_is_epoch) notes.push("t = 0 is " + new Date(Number(BigInt(D.origin_ns) / 1000000n)).toISOString() + ".");
  Expo.setText("lod", notes.join(" "));
  const wl = document.getElementById("warnings");
  if (D.warnings.length) {
    wl.appendChild(Expo.el("summary", null, D.warnings.length + " warning(s) while reading"));
    for (const w of D.warnings) wl.appendChild(Expo.el("div", { className: "warn" }, w));
  } else wl.remove();
  const src = document.getElementById("sources");
  for (const g of D.groups) {
    src.appendChild(Expo.el("div", null, "rank " + g.rank + " · " + g.fmt + " · " + g.events + " events · rule " + g.rule +
      " · forward from " + g.forward_source + " · steps from " + g.step_source + " · " + g.source));
  }

  // ------------------------------------------------------------------ go
  window.__expoT.built = performance.now();
  Plotly.newPlot(gd, traces, layout, config).then(() => {
    window.__expoT.plotted = performance.now();
    gd.on("plotly_relayouting", (ev) => { const r = rangeFrom(ev); if (r) paint(r); });
    gd.on("plotly_relayout", (ev) => { paint(rangeFrom(ev) || currentRange()); });
    gd.on("plotly_afterplot", () => { ensureCanvas(); paint(currentRange()); paintOverview(); });
    gd.on("plotly_restyle", () => {
      hiddenLayers.clear();
      gd.data.forEach((t, k) => { if (t.visible === "legendonly" || t.visible === false) hiddenLayers.add(LEGEND[k].key); });
      paint(currentRange());
    });
    ensureCanvas();
    paint(currentRange());
    paintOverview();
    window.expoTimeline = {
      data: D, stats, hit, paint: () => paint(currentRange()), goStep, stepIds: () => stepIds, useStepSource,
      /** Page coordinates (CSS px) of (x ms, lane) — for tests that move a real mouse there. */
      toClient(xms, lane) {
        const sz = gd._fullLayout._size, r = gd.getBoundingClientRect();
        return [r.left + sz.l + gd._fullLayout.xaxis.l2p(xms), r.top + sz.t + gd._fullLayout.yaxis.l2p(lane)];
      },
      pixel(cx, cy) {
        const dpr = window.devicePixelRatio || 1, box = canvas.getBoundingClientRect();
        return Array.from(ctx.getImageData(Math.round((cx - box.left) * dpr), Math.round((cy - box.top) * dpr), 1, 1).data);
      },
    };
    Expo.ready("timeline");
  });
})();
