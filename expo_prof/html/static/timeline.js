/* expo-prof timeline page.
   Plotly draws the axes, zoom, pan and range slider; the page's own legend (one) toggles layers.
   The bars are painted on a canvas under plotly's SVG, from the column-wise data, re-bucketed
   per pixel column on every repaint: where a lane holds more than a few items per pixel, each
   column shows what is in it — a bar whose height is the share of the column's time covered,
   split into hidden (green) and exposed (red) in proportion; zoomed in, the exact pieces are
   drawn one by one. This keeps a page of a million-event trace true and interactive
   (measured in bench/bench_html.py). */
"use strict";
(function () {
  const D = Expo.data();
  // Unpack the columns (timeline_data.encode_for_page; decode_page is the Python twin):
  // starts are differences to the previous row; pieces are signed lengths and gaps.
  for (const t of [D.inst, D.work, D.busy, D.fwd, D.wait]) {
    const a = t.start;
    for (let i = 1; i < a.length; i++) a[i] += a[i - 1];
  }
  (function unpackPieces() {
    const d = D.piece.d, n = d.length, gap = new Float64Array(n);
    for (let k = 0; k < D.piece.gap_at.length; k++) gap[D.piece.gap_at[k]] = D.piece.gap[k];
    const P = { inst: new Int32Array(n), start: new Float64Array(n), dur: new Float64Array(n), hidden: new Int8Array(n) };
    let k = 0;
    for (let i = 0; i < D.inst.np.length; i++) {
      let t = D.inst.start[i];
      for (let j = 0; j < D.inst.np[i]; j++, k++) {
        t += gap[k];
        const v = d[k];
        P.inst[k] = i; P.start[k] = t; P.dur[k] = v > 0 ? v : -v; P.hidden[k] = v > 0 ? 1 : 0;
        t += P.dur[k];
      }
    }
    D.piece = P;
  })();
  const gd = document.getElementById("plot");
  const nL = D.lanes.length;
  const MS = 1e-6; // ns -> ms (the x axis unit)
  const COL = {
    busy: "#b8c2cc", w0: "#7f97b2", w1: "#c9a26b", w2: "#d5dbe3", fwd: "#9ecae1", wait: "#9467bd",
    hidden: "#2ca02c", exposed: "#d62728", step: "rgba(31,41,51,0.45)",
  };
  COL.match = "#ff9f1c"; COL.cur = "#7a3e00";
  // A switchback run's phases (D.phases: off, on, native), light enough for their labels' dark text.
  COL.phase = ["#cfcfcf", "#f2cf5b", "#d4a6c8"];
  // Layers switched off in the page's legend (data-layer of each entry: hidden, exposed, fwd, wait, step, w0–w2, busy, phase).
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
  const phaseTab = new Table(D.phase);
  const phaseIdx = Int8Array.from(D.phase.phase);
  // The phase row of each group (-1: none): hover says which arm a step ran.
  const phaseLane = D.groups.map(() => -1);
  D.lanes.forEach((l, i) => { if (l.kind === "phase") phaseLane[l.group] = i; });
  const workCat = Int8Array.from(D.work.cat);
  const pieceHidden = Int8Array.from(D.piece.hidden);

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
  // One empty trace: plotly draws axes and slider; the bars are ours and the legend is the page's.
  const traces = [{ type: "scatter", mode: "lines", x: [null], y: [null], hoverinfo: "skip", showlegend: false }];
  const layout = {
    height: height,
    margin: { l: Math.round(marginL), r: 46, t: 16, b: 40 },
    modebar: { orientation: "v" },
    paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)",
    showlegend: false,
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
    return { l: sz.l, t: sz.t, w: sz.w, W: Math.max(1, Math.round(sz.w)), h: sz.h, x0: xr[0], x1: xr[1], sx, rowH,
      yc: (i) => sz.t + ya.l2p(i) };
  }

  // ---------------------------------------------------------------- painting (static/timeline_paint.js)
  const grid = new ExpoPaint.BusyGrid(D.busy_cover, MS);
  const paintLayer = (g, F, tab, color, hFrac, pick, useGrid) =>
    ExpoPaint.paintLayer(g, F, nL, tab, color, hFrac, pick, useGrid ? grid : null);
  const paintInstances = (g, F, hFrac, outline) => ExpoPaint.paintInstances(g, F, nL, inst, piece, pieceHidden, COL,
    { hidden: !hiddenLayers.has("hidden"), exposed: !hiddenLayers.has("exposed") }, hFrac, outline);

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
    if (!hiddenLayers.has("busy")) rects += paintLayer(ctx, F, busy, COL.busy, 0.62, null, true);
    for (const c of [2, 1, 0]) {
      if (!hiddenLayers.has("w" + c)) rects += paintLayer(ctx, F, work, COL["w" + c], 0.62, (i) => workCat[i] === c, false);
    }
    if (!hiddenLayers.has("fwd")) rects += paintLayer(ctx, F, fwd, COL.fwd, 0.7, null, false);
    if (!hiddenLayers.has("wait")) rects += paintLayer(ctx, F, wait, COL.wait, 0.7, null, false);
    if (!hiddenLayers.has("phase")) rects += paintPhases(ctx, F, true);
    stats.stepLabels = [];
    if (!hiddenLayers.has("step")) paintSteps(F);
    const r = paintInstances(ctx, F, 0.86, true);
    paintMatches(F);
    ctx.restore();
    stats.frames++; stats.inst = r.ni; stats.pieces = r.np; stats.bucketedLanes = r.bucketed; stats.rects = rects + r.np;
    stats.lastMs = performance.now() - t0;
    stats.range = [xr[0], xr[1]];
  }

  /** The phase track: one bar per block in its phase's colour, labelled with its arm where the label fits. */
  function paintPhases(g, F, labelled) {
    let rects = 0;
    for (let p = 0; p < COL.phase.length; p++) {
      rects += paintLayer(g, F, phaseTab, COL.phase[p], 0.8, (i) => phaseIdx[i] === p, false);
    }
    if (!labelled) return rects;
    g.fillStyle = "#1f2933";
    g.font = "11px system-ui, sans-serif";
    g.textBaseline = "middle";
    const drawn = [];
    for (const l of phaseLane) {
      if (l < 0) continue;
      phaseTab.each(l, F.x0, F.x1, (i) => {
        const a = Math.max(F.l + (phaseTab.s[i] - F.x0) * F.sx, F.l), b = Math.min(F.l + (phaseTab.e[i] - F.x0) * F.sx, F.l + F.w);
        // The arm's label, else only its phase word where the label does not fit.
        for (const label of [D.names[D.phase.name[i]], D.phases[phaseIdx[i]]]) {
          if (g.measureText(label).width + 8 > b - a) continue;
          g.fillText(label, a + 4, F.yc(l));
          drawn.push([i, label]);
          break;
        }
      });
    }
    g.textBaseline = "alphabetic";
    stats.phaseLabels = drawn;
    return rects;
  }
  /** The phase block of group g at ns (its row in D.phase), or null: no phase track, or between blocks. */
  function phaseAt(g, ns) {
    if (phaseLane[g] < 0) return null;
    let found = null;
    phaseTab.each(phaseLane[g], ns * MS, ns * MS, (i) => { if (found === null) found = i; });
    return found;
  }
  /** " · on (overlay)": the arm that ran at ns in group g (empty where none is known). */
  function phaseWords(g, ns) {
    const i = phaseAt(g, ns);
    return i === null ? "" : " · " + D.names[D.phase.name[i]];
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
      // Labels every k-th step id, k from 1, 2, 5, 10, 20, 50, … so that the widest label fits
      // between two labelled boundaries; a label is also skipped if it would touch the previous one.
      let maxId = 0;
      for (let k = lo; k < k1; k++) maxId = Math.max(maxId, Math.abs(steps.id[idx[k]]));
      const need = ctx.measureText("step " + maxId).width + 10;
      const pxPerStep = k1 - lo > 1 ? (steps.s[idx[k1 - 1]] - steps.s[idx[lo]]) * MS * F.sx / (k1 - lo - 1) : F.w;
      let stride = 1;
      for (let m = 1; stride * pxPerStep < need && m < 1e9; m *= 10) {
        for (const f of [1, 2, 5]) { stride = f * m; if (stride * pxPerStep >= need) break; }
        if (stride * pxPerStep >= need) break;
        stride = 10 * m;
      }
      let lastLabel = -Infinity;
      const drawn = [];
      for (let k = lo; k < k1; k++) {
        const i = idx[k];
        const px = Math.round(F.l + (steps.s[i] * MS - F.x0) * F.sx);
        ctx.fillRect(px, y0, 1, y1 - y0);
        if (steps.id[i] % stride !== 0) continue;
        const label = "step " + steps.id[i];
        if (px + 3 >= lastLabel) {
          ctx.fillText(label, px + 3, y0 + 10);
          const w = ctx.measureText(label).width;
          drawn.push([px + 3, px + 3 + w]);
          lastLabel = px + 3 + w + 4;
        }
      }
      stats.stepLabels = stats.stepLabels.concat(drawn);
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
    const rh = (H - 4) / Math.max(nL, 1);
    const F = { l: L, t: T, w: W, W: Math.max(1, Math.round(W)), h: H, x0: full[0], x1: full[1], sx: W / (full[1] - full[0]),
      rowH: rh, yc: (l) => T + 2 + (l + 0.5) * rh };
    paintLayer(octx, F, busy, COL.busy, 0.6, null, true);
    paintLayer(octx, F, work, COL.w0, 0.6, null, false);
    paintLayer(octx, F, fwd, COL.fwd, 0.7, null, false);
    paintPhases(octx, F, false);
    paintInstances(octx, F, 1.0, false);
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
  /** Most characters of a name in the tooltip (the rest counted; the page data keeps the whole name). */
  const TIP_NAME = 300;
  function pieceLines(i, part) {
    const dur = D.inst.dur[i], hid = D.inst.hidden[i], exp = D.inst.exposed[i];
    const step = D.inst.step[i];
    const g = D.groups[D.inst.group[i]];
    const out = [
      ["t", Expo.show(D.names[D.inst.name[i]], TIP_NAME)],
      ["", "lane: " + D.lanes[inst.lane[i]].label],
      ["", "rank " + g.rank + " · " + g.fmt + " · step " + (step >= 0 ? step : "-") + phaseWords(D.inst.group[i], D.inst.start[i])],
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
      ["t", Expo.show(name, TIP_NAME)],
      ["", what + " · lane: " + D.lanes[lane].label],
      ["", "step " + (step === null ? "-" : step) + phaseWords(g, s)],
      ["", "start: " + Expo.fmtAt(s)],
      ["", "duration: " + Expo.fmtNs(d)],
    ];
  }
  /** A phase block's tooltip: its arm, its steps, start and duration. */
  function phaseLines(i, lane) {
    const P = D.phase, n = P.n[i];
    return [
      ["t", D.names[P.name[i]]],
      ["", "switchback phase · lane: " + D.lanes[lane].label],
      ["", "steps " + P.first[i] + "–" + P.last[i] + " (" + n + " step" + (n === 1 ? "" : "s") + ")"],
      ["", "start: " + Expo.fmtAt(P.start[i])],
      ["", "duration: " + Expo.fmtNs(P.dur[i])],
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
    let ph = null;
    phaseTab.each(lane, x - tol, x + tol, (i) => { if (ph === null) ph = i; });
    if (ph !== null) return { kind: "phase", index: ph, lines: phaseLines(ph, lane) };
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

  // ------------------------------------------------------------------ search
  // Matches of a name search (case-insensitive substring of op / kernel / span names), sorted by
  // start: [start ms, end ms, lane]. Merged (busy) work has no names and cannot match.
  let matches = [], mCur = -1;
  const search = { n: 0, cur: -1, query: "" };
  function runSearch(q) {
    q = q.trim().toLowerCase();
    matches = []; mCur = -1;
    if (q) {
      const hit = new Uint8Array(D.names.length);
      for (let i = 0; i < D.names.length; i++) if (String(D.names[i]).toLowerCase().includes(q)) hit[i] = 1;
      for (const [tab, cols] of [[inst, D.inst], [work, D.work], [fwd, D.fwd], [wait, D.wait]]) {
        for (let i = 0; i < tab.n; i++) if (hit[cols.name[i]]) matches.push([tab.s[i], tab.e[i], tab.lane[i]]);
      }
      matches.sort((a, b) => a[0] - b[0] || a[2] - b[2]);
    }
    search.n = matches.length; search.cur = -1; search.query = q;
    let msg = q ? matches.length + " match" + (matches.length === 1 ? "" : "es") : "";
    if (q && D.lod.merged) msg += " (" + D.lod.merged.toLocaleString("en") + " merged events not searchable)";
    Expo.setText("smsg", msg);
    paint(currentRange());
  }
  function jumpMatch(dir) {
    if (!matches.length) return null;
    mCur = mCur < 0 ? (dir > 0 ? 0 : matches.length - 1) : (mCur + dir + matches.length) % matches.length;
    search.cur = mCur;
    const m = matches[mCur];
    Expo.setText("smsg", (mCur + 1) + " of " + matches.length + ": " + D.lanes[m[2]].label);
    return zoomTo(m[0] / MS, m[1] / MS);
  }
  /** Matches in view: an amber strip along the top of the lane (the current one also boxed). */
  function paintMatches(F) {
    if (!matches.length) return;
    ctx.fillStyle = COL.match;
    for (let k = 0; k < matches.length; k++) {
      const m = matches[k];
      if (m[0] > F.x1) break;
      if (m[1] < F.x0) continue;
      const a = F.l + (m[0] - F.x0) * F.sx, b = Math.max(F.l + (m[1] - F.x0) * F.sx, a + 3);
      ctx.fillRect(Math.floor(a), Math.round(F.yc(m[2]) - F.rowH / 2) + 1, Math.ceil(b - a), 3);
    }
    if (mCur >= 0) {
      const m = matches[mCur];
      const a = F.l + (m[0] - F.x0) * F.sx, b = Math.max(F.l + (m[1] - F.x0) * F.sx, a + 3);
      ctx.strokeStyle = COL.cur; ctx.lineWidth = 2;
      ctx.strokeRect(a - 2, F.yc(m[2]) - F.rowH / 2 + 1, b - a + 4, F.rowH - 2);
    }
  }
  const sbox = document.getElementById("search");
  let sTimer = null;
  sbox.addEventListener("input", () => { clearTimeout(sTimer); sTimer = setTimeout(() => runSearch(sbox.value), 150); });
  sbox.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter") { clearTimeout(sTimer); if (search.query !== sbox.value.trim().toLowerCase()) runSearch(sbox.value); jumpMatch(ev.shiftKey ? -1 : 1); }
  });
  document.getElementById("snext").addEventListener("click", () => { if (search.query !== sbox.value.trim().toLowerCase()) runSearch(sbox.value); jumpMatch(1); });
  document.getElementById("sprev").addEventListener("click", () => { if (search.query !== sbox.value.trim().toLowerCase()) runSearch(sbox.value); jumpMatch(-1); });

  // ------------------------------------------------------------------ the one legend: click an entry to hide that layer
  if (D.phase.start.length) {
    // One entry for the phase track: a swatch and the label of each phase the run has.
    const parts = ["switchback phase: "];
    for (let p = 0; p < COL.phase.length; p++) {
      const i = phaseIdx.indexOf(p);
      if (i < 0) continue;
      parts.push(Expo.el("span", { style: "margin-right:10px" }, Expo.el("span", { className: "sw", style: "background:" + COL.phase[p] }),
        D.names[D.phase.name[i]]));
    }
    document.getElementById("legend").appendChild(Expo.el("span", { "data-layer": "phase" }, ...parts));
  }
  for (const e of document.querySelectorAll(".legend [data-layer]")) {
    e.addEventListener("click", () => {
      const k = e.getAttribute("data-layer");
      if (hiddenLayers.has(k)) hiddenLayers.delete(k); else hiddenLayers.add(k);
      e.classList.toggle("off", hiddenLayers.has(k));
      paint(currentRange());
    });
  }

  // ------------------------------------------------------------------ header text
  /** What the overlap figures are, said before them where the measured saving leads (the report's words). */
  const OVERLAP = "overlap, not saving — ";
  Expo.setText("title", D.title);
  const nInst = D.inst.start.length;
  const summary = D.groups.map((g) => {
    const frac = g.total_ns ? g.hidden_ns / g.total_ns : null;
    return "rank " + g.rank + " (" + g.fmt + "): " + g.instances + " instances, hidden " + Expo.fmtPct(frac) +
      ", exposed " + Expo.fmtNs(g.exposed_ns) + " of " + Expo.fmtNs(g.total_ns);
  });
  if (D.answer) {
    // A switchback recording: the answer first (the saving line every command prints: the decision, the measured
    // saving and its interval), then the overlap figures, each saying what it is.
    const answer = Expo.setText("answer", D.answer);
    answer.hidden = false;
    Expo.setText("summary", OVERLAP + summary.join(" · "));
    Expo.setText("headline", OVERLAP + D.run.headline);
  } else {
    Expo.setText("summary", summary.join(" · "));
    // The pipeline's headline (overlap beside what the step pays) and what the overlay saves, as every command says.
    if (D.run) Expo.setText("headline", [D.run.headline, D.run.saving_line].filter((x) => x).join(" — "));
  }
  const nSteps = Array.from(stepWins.values()).reduce((m, w) => Math.max(m, w.size), 0);
  const target = D.run && D.run.target ? "matched-op" : "exponential";
  const notes = [D.lod.text + ".", nInst + " " + target + " instances drawn individually.", nSteps + " steps."];
  if (D.busy_cover.lanes.length) {
    notes.splice(1, 0, "Busy shares are exact while a pixel spans at least " + Expo.fmtNs(D.busy_cover.bin_ns) +
      "; zoomed in closer, the merged intervals are drawn.");
  }
  notes.push("Dense lanes: each pixel column shows the share of its time covered, hidden : exposed in proportion.");
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
      " · " + g.forward_label + " · steps from " + g.step_source + " · " + g.source));
  }

  // ------------------------------------------------------------------ go
  window.__expoT.built = performance.now();
  Plotly.newPlot(gd, traces, layout, config).then(() => {
    window.__expoT.plotted = performance.now();
    gd.on("plotly_relayouting", (ev) => { const r = rangeFrom(ev); if (r) paint(r); });
    gd.on("plotly_relayout", (ev) => { paint(rangeFrom(ev) || currentRange()); });
    gd.on("plotly_afterplot", () => { ensureCanvas(); paint(currentRange()); paintOverview(); });
    if (!stats.frames) { ensureCanvas(); paint(currentRange()); paintOverview(); } // afterplot has usually painted
    window.expoTimeline = {
      data: D, stats, hit, phaseAt, paint: () => paint(currentRange()), goStep, stepIds: () => stepIds, useStepSource,
      search, runSearch, jumpMatch, matches: () => matches,
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
