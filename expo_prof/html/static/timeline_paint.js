/* expo-prof timeline page: painting per pixel column (used by timeline.js).
   Where a lane holds more than one item per DETAIL_PX pixels, each pixel column gets one bar whose
   height is the share of the column's time covered, split by kind in proportion (hidden : exposed
   for the instances); zoomed in, the items are drawn one by one. Tables are timeline.js's Table
   (per-lane sorted intervals in ms: s, e, lane, each(l, x0, x1, f)); F is a frame: l, W (plot left
   and width in px), x0, x1 (ms), sx (px per ms), rowH and yc(lane). */
"use strict";
const ExpoPaint = (() => {
  /** Covered length per pixel column (0..1 each; more where items overlap), O(1) per item. */
  function Cols(W) { this.W = W; this.a = new Float64Array(W + 2); this.d = new Float64Array(W + 2); }
  Cols.prototype.add = function (a, b) {
    const W = this.W;
    if (b <= 0 || a >= W) return;
    if (a < 0) a = 0;
    if (b > W) b = W;
    const ia = Math.floor(a), ib = Math.floor(b);
    if (ia === ib) { this.a[ia] += b - a; return; }
    this.a[ia] += ia + 1 - a; this.d[ia + 1] += 1; this.d[ib] -= 1;
    if (ib < W) this.a[ib] += b - ib;
  };
  Cols.prototype.done = function () {
    let run = 0;
    for (let c = 0; c < this.W; c++) { run += this.d[c]; this.a[c] += run; }
    return this.a;
  };
  /** A lane is drawn item by item when it holds at most one visible item per DETAIL_PX pixels. */
  const DETAIL_PX = 4;

  /** Bars of height ∝ covered share per column, centred on yc, adjacent equal columns merged. */
  function paintCover(g, F, cov, yc, h, color) {
    g.fillStyle = color;
    const X0 = Math.round(F.l);
    let run0 = -1, runH = 0;
    const flush = (c) => { if (run0 >= 0 && runH > 0) g.fillRect(X0 + run0, Math.round(yc - runH / 2), c - run0, runH); };
    for (let c = 0; c < F.W; c++) {
      const v = cov[c];
      const H = v <= 0 ? 0 : Math.max(1, Math.round(Math.min(v, 1) * h));
      if (H !== runH) { flush(c); run0 = c; runH = H; }
    }
    flush(F.W);
  }

  /** Exact busy time per bin of the gap-closed lanes (timeline_data ``busy_cover``); x in ms (``MS`` ms per ns). */
  function BusyGrid(bc, MS) {
    this.of = new Map();
    bc.lanes.forEach((l, k) => {
      const bins = bc.ns[k], P = new Float64Array(bins.length + 1);
      for (let i = 0; i < bins.length; i++) P[i + 1] = P[i] + bins[i];
      this.of.set(l, { bins, P });
    });
    this.binMs = bc.bin_ns * MS;
    this.MS = MS;
  }
  /** Exact busy share per pixel column of lane l, or null (no grid, or a pixel narrower than a bin). */
  BusyGrid.prototype.cover = function (l, F) {
    const G = this.of.get(l), binMs = this.binMs, MS = this.MS;
    if (!G || 1 / F.sx < binMs) return null; // a pixel narrower than a bin: draw the merged intervals
    const nb = G.bins.length;
    const C = (t) => {
      const u = t / binMs, k = Math.floor(u);
      if (k < 0) return 0;
      if (k >= nb) return G.P[nb];
      return G.P[k] + (u - k) * G.bins[k];
    };
    const out = new Float64Array(F.W), colNs = 1 / F.sx / MS;
    let prev = C(F.x0);
    for (let c = 0; c < F.W; c++) {
      const next = C(F.x0 + (c + 1) / F.sx);
      out[c] = (next - prev) / colNs;
      prev = next;
    }
    return out;
  };

  /** One layer of a table on every lane: item by item where sparse, else per-column coverage. */
  function paintLayer(g, F, nL, tab, color, hFrac, pick, grid) {
    let rects = 0;
    const h = F.rowH * hFrac;
    for (let l = 0; l < nL; l++) {
      const yc = F.yc(l);
      const gc = grid ? grid.cover(l, F) : null;
      if (gc) { paintCover(g, F, gc, yc, h, color); rects += F.W; continue; }
      let count = 0;
      tab.each(l, F.x0, F.x1, (i) => { if (!pick || pick(i)) count++; });
      if (!count) continue;
      if (count * DETAIL_PX <= F.W) {
        g.fillStyle = color;
        const y = yc - h / 2;
        let a0 = 0, a1 = -Infinity;
        tab.each(l, F.x0, F.x1, (i) => {
          if (pick && !pick(i)) return;
          let a = F.l + (tab.s[i] - F.x0) * F.sx, b = F.l + (tab.e[i] - F.x0) * F.sx;
          if (b - a < 1) { const c = (a + b) / 2; a = c - 0.5; b = c + 0.5; }
          if (a <= a1 + 0.5) { if (b > a1) a1 = b; return; }
          if (a1 > -Infinity) { g.fillRect(a0, y, a1 - a0, h); rects++; }
          a0 = a; a1 = b;
        });
        if (a1 > -Infinity) { g.fillRect(a0, y, a1 - a0, h); rects++; }
      } else {
        const C = new Cols(F.W);
        tab.each(l, F.x0, F.x1, (i) => { if (!pick || pick(i)) C.add((tab.s[i] - F.x0) * F.sx, (tab.e[i] - F.x0) * F.sx); });
        paintCover(g, F, C.done(), yc, h, color);
        rects += F.W;
      }
    }
    return rects;
  }

  /** Instances of every lane: exact pieces where sparse, else per column a bar of the covered share,
      split green (hidden) : red (exposed) in proportion to the time of each in that column. */
  function paintInstances(g, F, nL, inst, piece, pieceHidden, COL, show, hFrac, outline) {
    const h = F.rowH * hFrac, X0 = Math.round(F.l);
    let ni = 0, np = 0, bucketed = 0;
    const showH = show.hidden, showE = show.exposed;
    for (let l = 0; l < nL; l++) {
      const yc = F.yc(l);
      let count = 0;
      piece.each(l, F.x0, F.x1, () => { count++; });
      if (!count) continue;
      if (count * DETAIL_PX <= F.W) {
        // Exact: each piece, at least 3 px wide (1 px where instances are denser than that);
        // hidden first, exposed on top, so a draw too short to show both parts shows red when any is exposed.
        let c = 0;
        inst.each(l, F.x0, F.x1, () => { c++; });
        const mw = c * 4 > F.W ? 1 : 3, y = yc - h / 2;
        for (const part of [1, 0]) {
          if (part ? !showH : !showE) continue;
          g.fillStyle = part ? COL.hidden : COL.exposed;
          piece.each(l, F.x0, F.x1, (i) => {
            if (pieceHidden[i] !== part) return;
            let a = F.l + (piece.s[i] - F.x0) * F.sx, b = F.l + (piece.e[i] - F.x0) * F.sx;
            if (b - a < mw) { const m = (a + b) / 2; a = m - mw / 2; b = m + mw / 2; }
            g.fillRect(a, y, b - a, h);
            np++;
          });
        }
        if (outline) {
          g.strokeStyle = "rgba(20,20,20,0.55)";
          g.lineWidth = 1;
          inst.each(l, F.x0, F.x1, (i) => {
            const a = F.l + (inst.s[i] - F.x0) * F.sx, b = F.l + (inst.e[i] - F.x0) * F.sx;
            if (b - a >= 6) g.strokeRect(a + 0.5, y + 0.5, b - a - 1, h - 1);
          });
        }
      } else {
        bucketed++;
        const Hc = new Cols(F.W), Ec = new Cols(F.W);
        piece.each(l, F.x0, F.x1, (i) => {
          (pieceHidden[i] ? Hc : Ec).add((piece.s[i] - F.x0) * F.sx, (piece.e[i] - F.x0) * F.sx);
          np++;
        });
        const hc = Hc.done(), ec = Ec.done();
        for (let c = 0; c < F.W; c++) {
          const tot = hc[c] + ec[c];
          if (tot <= 0) continue;
          const H = Math.max(1, Math.round(Math.min(tot, 1) * h));
          let gh = Math.round(H * hc[c] / tot);
          const top = Math.round(yc - H / 2);
          if (showE && H - gh > 0) { g.fillStyle = COL.exposed; g.fillRect(X0 + c, top, 1, H - gh); }
          if (showH && gh > 0) { g.fillStyle = COL.hidden; g.fillRect(X0 + c, top + H - gh, 1, gh); }
        }
      }
      inst.each(l, F.x0, F.x1, () => { ni++; });
    }
    return { ni, np, bucketed };
  }
  return { Cols, DETAIL_PX, paintCover, BusyGrid, paintLayer, paintInstances };
})();
