/* expo-prof pages: shared helpers. Names from traces reach the screen only through
   textContent (el(), setText()) or through ptext() for plotly labels: never innerHTML. Both show
   text through show(): control and bidirectional-formatting characters as visible \uXXXX escapes
   (a right-to-left override in a name cannot reorder the text around it), and at most TEXT_MAX
   characters with a count of the rest (a 1 MB name stays a line; the page data keeps it whole). */
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
  /** Characters shown as escapes: C0 controls but tab, DEL and C1 controls, the
      Arabic letter mark, LRM / RLM, the embeddings and overrides U+202A–202E, the isolates U+2066–2069 and the
      line / paragraph separators (expo_prof/words.py ``visible`` is the twin for the terminal and server pages). */
  const HIDDEN = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/g;
  /** Most characters of one text shown (the rest counted). */
  const TEXT_MAX = 4096;
  /** ``s`` as the page shows it: hidden characters as \uXXXX, cut at ``n`` (default TEXT_MAX) characters. */
  function show(s, n) {
    s = String(s);
    const max = n || TEXT_MAX;
    let out = s.length > max ? s.slice(0, max) : s;
    out = out.replace(HIDDEN, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
    if (s.length > max) out += "… (+" + (s.length - max).toLocaleString("en") + " characters)";
    return out;
  }
  /** Plotly renders a small HTML subset in labels: escape so a name always shows as itself. */
  function ptext(s, n) {
    return show(s, n).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
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
        else if (k === "title") e.title = show(props[k]);
        else if (k === "className" || k === "id" || k === "type" || k === "value") e[k] = props[k];
        else if (k.startsWith("data-")) e.setAttribute(k, String(props[k]));
      }
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      e.appendChild(typeof c === "object" ? c : document.createTextNode(show(c)));
    }
    return e;
  }
  function setText(id, s) {
    const e = document.getElementById(id);
    if (e) e.textContent = show(s);
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
  return { data, fmtNs, fmtAt, fmtPct, show, ptext, shorten, el, setText, table, ready };
})();
