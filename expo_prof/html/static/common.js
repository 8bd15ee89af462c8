/* expo-prof pages: shared helpers. Names from traces reach the screen only through
   textContent (el(), setText()) or through ptext() for plotly labels: never innerHTML. */
"use strict";
/** Milestones (ms since navigation start) for the benchmark: scripts start, data parsed, ready. */
window.__expoT = { scripts: performance.now() };
const Expo = (() => {
  function data() {
    const d = JSON.parse(document.getElementById("expo-data").textContent);
    window.__expoT.parsed = performance.now();
    return d;
  }
  /** Compact duration of a number of nanoseconds: 812 ns, 12.3 µs, 4.56 ms, 1.234 s. */
  function fmtNs(ns) {
    if (ns === null || ns === undefined || !isFinite(ns)) return "–";  // not measured
    const a = Math.abs(ns);
    if (a < 1e3) return ns.toFixed(0) + " ns";
    if (a < 1e6) return (ns / 1e3).toFixed(1) + " µs";
    if (a < 1e9) return (ns / 1e6).toFixed(2) + " ms";
    return (ns / 1e9).toFixed(3) + " s";
  }
  /** A time on the page's axis (ns from the origin) as milliseconds with ns resolution. */
  function fmtAt(ns) {
    return (ns / 1e6).toFixed(6) + " ms";
  }
  function fmtPct(x) {
    return x === null || x === undefined || !isFinite(x) ? "–" : (100 * x).toFixed(1) + "%";
  }
  /** Plotly renders a small HTML subset in labels: escape so a name always shows as itself. */
  function ptext(s) {
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }
  function shorten(s, n) {
    s = String(s);
    return s.length <= n ? s : s.slice(0, n - 1) + "…";
  }
  /** Build an element; string children become text nodes (never parsed as markup). */
  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    if (props) {
      for (const k of Object.keys(props)) {
        if (k === "style") e.style.cssText = props[k];
        else if (k === "className" || k === "id" || k === "title" || k === "type" || k === "value") e[k] = props[k];
        else if (k.startsWith("data-")) e.setAttribute(k, String(props[k]));
      }
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      e.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
    }
    return e;
  }
  function setText(id, s) {
    const e = document.getElementById(id);
    if (e) e.textContent = s;
    return e;
  }
  /** A table from a header row and rows of cells (strings / numbers / elements). */
  function table(header, rows, className) {
    const t = el("table", { className: className || "grid" });
    const thead = el("thead");
    thead.appendChild(el("tr", null, ...header.map((h) => el("th", null, h))));
    t.appendChild(thead);
    const tb = el("tbody");
    for (const r of rows) tb.appendChild(el("tr", null, ...r.map((c) => el("td", null, c))));
    t.appendChild(tb);
    return t;
  }
  function ready(name) {
    document.body.dataset.ready = "1";
    window.__expoReadyAt = window.__expoT.ready = performance.now();
    document.dispatchEvent(new CustomEvent("expo-ready", { detail: name }));
  }
  return { data, fmtNs, fmtAt, fmtPct, ptext, shorten, el, setText, table, ready };
})();
