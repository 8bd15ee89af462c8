/* expo-prof report page: headline figures, per-step chart and distribution, per-rank table,
   A/B section, manifests. Every text from the data goes through textContent (Expo.el). */
"use strict";
(function () {
  const D = Expo.data();
  const COL = { hidden: "#2ca02c", exposed: "#d62728", fwd: "#4a8fc1" };
  const config = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["select2d", "lasso2d"] };
  const P = D.recordings[D.primary];
  const H = P.headline;
  // Forward named by its source (a forward span, or compute-busy time where the trace has none).
  const F = P.forward;
  // Several ranks lined up by step (the cluster view): per-step figures are the mean of ranks and the slowest
  // rank's, never a sum — the ranks run a step in parallel.
  const X = P.across;
  const plots = [];

  Expo.setText("title", D.title);
  Expo.setText("sub", D.tool + " · " + D.recordings.length + (D.recordings.length === 1 ? " recording: " : " recordings: ") + D.recordings.map((r) => r.label + (r.overlay ? " (overlay " + r.overlay + ")" : "")).join(", "));
  Expo.setText("headline-run", "— " + P.label + (P.overlay ? " (overlay " + P.overlay + ")" : ""));

  // ------------------------------------------------------------------ headline cards
  function card(id, label, value, detail) {
    return Expo.el("div", { className: "card", id: id }, Expo.el("div", { className: "k" }, label),
      Expo.el("div", { className: "v" }, value), Expo.el("div", { className: "d" }, detail || ""));
  }
  const signedPct = (x) => (x === null || x === undefined ? "-" : (x > 0 ? "+" : x < 0 ? "−" : "") + Math.abs(100 * x).toFixed(2) + "%");
  const cards = document.getElementById("cards");
  const draw = D.op === null || D.op === undefined;  // the exponential draw, or another op (--op)
  // What the overlay saves, measured by switchback in this run: the page's answer, so its first card — above the
  // overlap figures (hidden, the tok/s bound), which say what they are and never lead a measured figure.
  // The saving card prints the words analysis/saving/words.py made for it (page_words): the same digits as the
  // terminal, the JSON and the saving line; nothing of a saving is formatted here.
  function savingCard(sv, w) {
    const arms = sv.arms && sv.arms.length > 2 ? ", " + sv.compared[1] + " vs " + sv.compared[0] : "";  // 3 arms: the first comparison
    const detail = [w.ci, w.tokps, w.parts].filter((x) => x).join(" · ");
    return card("c-saving", "saved per step (switchback" + arms + "): " + sv.decision, w.value, detail);
  }
  const sv0 = (P.savings || [])[0];
  const measured = !!(draw && P.analysis && sv0 && sv0.saving);
  const what = draw ? "exponential" : "op";
  if (!P.analysis) {
    cards.appendChild(Expo.el("div", { className: "warn" }, "no analysis for this run: " + (P.error || "no traces")));
  } else {
    const ofRanks = H.across_ranks ? " — mean of ranks" : "";
    const slowest = (ns) => (H.across_ranks ? "slowest rank " + Expo.fmtNs(ns) + " · " : "");
    if (measured) cards.append(savingCard(sv0, P.saving_words[0]));
    cards.append(
      card("c-hidden", "hidden fraction (overlap, not saving)", Expo.fmtPct(H.hidden_fraction), H.line || ""),
      card("c-exposed", "exposed time per step" + ofRanks, Expo.fmtNs(H.exposed_per_step_ns),
        slowest(H.exposed_slowest_per_step_ns) + "p50 " + Expo.fmtNs(H.exposed_p50_ns) + " · p99 " + Expo.fmtNs(H.exposed_p99_ns)),
      card("c-forward", F.label + " per step" + ofRanks, Expo.fmtNs(H.forward_per_step_ns),
        slowest(H.forward_slowest_per_step_ns) + "own time " + Expo.fmtNs(H.own_ns) + (F.mixed ? " · " + F.mixed : "")),
    );
    const st = H.step_breakdown;
    if (draw && st && st.overall && st.overall.step_count) {  // --op: the page speaks of the op, not of q
      // The step itself: its own time, the critical path's share of it, prefill and decode apart, batch, q.
      const grp = (name, g) => (g ? name + " " + g.step_count + " (p50 " + Expo.fmtNs(g.own_ns ? g.own_ns.p50 : null) + ", " +
        Expo.fmtPct(g.critical_share) + ")" : null);
      const q = (st.q || []).slice(0, 2).map((x) => x.rows + " × " + x.vocab + " " + (x.dtype || "?")).join(", ");
      const parts = [(draw ? "critical path " : "exposed ") + Expo.fmtPct(st.overall.critical_share) + " of the step",
        st.overall.cadence_ns ? "cadence p50 " + Expo.fmtNs(st.overall.cadence_ns.p50) + " (to the next step)" : null,
        grp("prefill", st.prefill), grp("decode", st.decode),
        st.batch ? "batch p50 " + st.batch.p50 : null, q ? "q " + q : null]
        .concat(Object.keys(st.missing || {}).map((k) => k + ": not measured — " + st.missing[k]));
      cards.append(card("c-step", "own time (p50)",
        Expo.fmtNs(st.overall.own_ns ? st.overall.own_ns.p50 : null), parts.filter((x) => x).join(" · ")));
    }
    // A sampler that draws no noise over the vocabulary (vllm-ascend's categorical_sample): nothing to hide, nothing to save.
    const noNoise = !!(P.bound && P.bound.noise === false);
    if (draw) {
      const measured = H.tok_s !== null ? " · measured " + H.tok_s.toFixed(1) + " tok/s" : "";
      cards.append(
        card("c-wait", (H.wait_source ? "sampler wait (" + H.wait_source + ") per step" : "sampler wait per step") + ofRanks, Expo.fmtNs(H.wait_per_step_ns),
          H.wait_per_step_ns === null ? "not measured (no overlay spans or log)" : "waiting for q: the overlay's own cost"),
        noNoise
          ? card("c-toks", "tok/s upper bound", "–",
            "none: this sampler draws no noise over the vocabulary, so no draw can leave the step (sampling costs " +
            Expo.fmtNs(H.critical_per_step_ns) + "/step)" + measured)
          : card("c-toks", "tok/s upper bound", H.critical_share === null ? "–" : "≤ +" + Math.abs(100 * H.critical_share).toFixed(2) + "%",
            "if exposed ∪ wait (" + Expo.fmtNs(H.critical_per_step_ns) + "/step" + (H.across_ranks ? ", mean of ranks" : "") + ") left the step; ignores the forward-pass cost of overlap" +
            measured),
      );
    }
    if (draw) {
      // What the overlay saves: measured by switchback in this run, or said not to be measured (overlap is not saving).
      if (measured) {
        // The measured saving is the page's first card (above).
      } else if (noNoise) {
        // No noise to draw asynchronously: nothing can be saved; the saving line gives the sampling cost.
        cards.append(card("c-saving", "saved per step — none possible", Expo.fmtNs(0), P.saving_line || ""));
      } else if (P.bound) {
        // A fused sampling kernel (MRV2, FlashInfer, vLLM CPU's fused op): its critical-path time bounds any saving.
        cards.append(card("c-saving", "saved per step — " + (P.bound.switchback ? "not measured" : "no switchback on this engine"),
          "≤ " + Expo.fmtNs(P.bound.critical_ns), P.saving_line || ""));
      } else {
        cards.append(card("c-saving", "saved per step", "not measured", P.saving_line || ""));
      }
    }
    const mech = D.ab && D.ab.mechanism;
    if (mech && mech.available && mech.forward_slowdown_us !== null) {
      cards.append(card("c-fwdcost", "forward-pass cost of overlap", (mech.forward_slowdown_us > 0 ? "+" : "") + mech.forward_slowdown_us.toFixed(1) + " µs/step",
        "measured on the off/on runs (A/B below)"));
    } else if (mech && mech.cause_missing) {
      // Unlike measures name no cost (issue 33): the card says what is missing instead of a number.
      cards.append(card("c-fwdcost", "forward-pass cost of overlap", "not measured", mech.cause_missing));
    }
  }
  Expo.setText("headline-note", draw
    ? "Hidden: time of the exponential draw during which another lane of the same device computed. Exposed: the rest — it lengthens the step. The tok/s figure is an upper bound from this run alone; the A/B section measures the real effect."
    : "Hidden: time of the matched op during which another lane of the same device computed. Exposed: the rest.");

  // ------------------------------------------------------------------ per-step chart + distribution
  const S = P.steps;
  // A switchback run: each step's phase (S.phase, an index into S.phases; null outside the blocks) and its run of
  // consecutive steps in one phase (S.phase_run). The per-step lines break where the run changes — at a block
  // change, also across blocks that have no row (an off block without draws) — and hovers name the step's arm.
  const PH = !!S.phase;
  const PHASE_COL = { off: "#cfcfcf", on: "#f2cf5b", native: "#d4a6c8" };  // the timeline's phase colours
  const ranks = Array.from(new Set(S.rank)).sort((a, b) => a - b);
  const sel = document.getElementById("rank");
  if (X) sel.appendChild(Expo.el("option", { value: "all" }, "all ranks: mean of ranks and slowest rank"));
  for (const r of ranks) sel.appendChild(Expo.el("option", { value: String(r) }, "rank " + r));
  if (ranks.length <= 1) sel.parentNode.style.display = "none";
  Expo.setText("steps-note", "time per step, split into hidden and exposed; " + F.label + " on the right axis" +
    (X ? ". All ranks: the mean of ranks per step, and the slowest rank's (a synchronous step lasts as long as its slowest rank); ranks run in parallel, so their times are never summed" : "") +
    (PH ? ". Switchback: the band along the axis shows each block's phase (" + S.arms.join(", ") + "); the lines break wherever the phase changes, so no line joins steps across a block of another phase" : ""));

  /** {arm, run} of each step id of one rank (null: no phases); rank null: the lowest rank that has it. */
  function phaseOf(rank) {
    const m = new Map();
    if (!PH) return null;
    for (let i = 0; i < S.step.length; i++) {
      if ((rank !== null && S.rank[i] !== rank) || S.phase_run[i] === null) continue;
      const had = m.get(S.step[i]);
      if (had && had.rank <= S.rank[i]) continue;
      m.set(S.step[i], { arm: S.phase[i] === null ? null : S.arms[S.phase[i]], run: S.rank[i] + ":" + S.phase_run[i], rank: S.rank[i] });
    }
    return m.size ? m : null;  // none: this rank's steps were counted from another source than its log
  }
  /** One rank's series per step id (a rank counted from two sources has a row per source: they add up). */
  function rankSteps(rank) {
    const by = new Map();
    for (let i = 0; i < S.step.length; i++) {
      if (S.rank[i] !== rank) continue;
      const k = S.step[i];
      const v = by.get(k) || { hidden: 0, exposed: 0, forward: null };
      v.hidden += S.hidden[i]; v.exposed += S.exposed[i];
      if (S.forward[i] !== null) v.forward = (v.forward || 0) + S.forward[i];  // null: not measured
      by.set(k, v);
    }
    const ids = Array.from(by.keys()).sort((a, b) => a - b);
    const col = (f) => ids.map((k) => by.get(k)[f]);
    return { ids, hidden: col("hidden"), exposed: col("exposed"), forward: col("forward"), fwd: F.by_rank[String(rank)] || F.label,
      phase: phaseOf(rank), blockRank: rank };
  }
  function series(value) {
    if (value === "all") {
      const low = ranks.length ? ranks[0] : null;
      return { ids: X.step, hidden: X.hidden_mean, exposed: X.exposed_mean, forward: X.forward_mean, fwd: F.label,
        exposedMax: X.exposed_max, exposedWho: X.exposed_slowest, forwardMax: X.forward_max, forwardWho: X.forward_slowest,
        phase: phaseOf(null), blockRank: low };
    }
    return rankSteps(Number(value));
  }
  /** A switchback run's traces: every point's customdata [" · its arm" (empty outside the blocks), what the trace
      had], and each line over step ids broken by a null point (connectgaps off) between consecutive steps of
      different runs — never drawn across a block change. Other runs' traces are left as they are. */
  function byPhase(traces, ps) {
    if (!ps.phase) return traces;
    const at = ps.ids.map((k) => ps.phase.get(k) || null);
    const arm = at.map((a) => (a && a.arm ? " · " + Expo.ptext(a.arm) : ""));
    for (const t of traces) {
      const cd = ps.ids.map((_, i) => [arm[i], t.customdata ? t.customdata[i] : null]);
      if (t.type !== "scatter") { t.customdata = cd; continue; }
      const x = [], y = [], c = [];
      for (let i = 0; i < ps.ids.length; i++) {
        const prev = i ? at[i - 1] : null, cur = at[i];
        if (i && (!prev || !cur || prev.run !== cur.run)) { x.push((ps.ids[i - 1] + ps.ids[i]) / 2); y.push(null); c.push(null); }
        x.push(ps.ids[i]); y.push(t.y[i]); c.push(cd[i]);
      }
      Object.assign(t, { x, y, customdata: c, connectgaps: false });
    }
    return traces;
  }
  /** The phase band along the x axis: one strip per run of steps in a phase (blocks without rows included), in
      the timeline's colours, one legend entry per arm. */
  function phaseBand(rank) {
    if (!PH || rank === null) return [];
    const named = new Set();
    return S.phase_blocks.filter((b) => b[0] === rank).map((b) => {
      const p = S.phases[b[3]];
      const first = !named.has(p);
      named.add(p);
      return { type: "rect", xref: "x", yref: "paper", x0: b[1] - 0.5, x1: b[2] + 0.5, y0: -0.045, y1: -0.01, layer: "above",
        line: { width: 0 }, fillcolor: PHASE_COL[p] || "#999", opacity: 0.9, showlegend: first, legendgroup: "phase-" + p,
        name: "phase: " + Expo.ptext(S.arms[b[3]]) };
    });
  }
  function drawSteps() {
    const ps = series(sel.value || (X ? "all" : String(ranks[0])));
    const all = ps.exposedMax !== undefined;
    const of = all ? ", mean of ranks" : "";
    const us = (v) => v.map((x) => (x === null ? null : x / 1e3));
    const ms = (v) => v.map((x) => (x === null ? null : x / 1e6));
    // A switchback run's hover names the step's arm (customdata[0], byPhase); what a trace carried is customdata[1].
    const stepHv = ps.phase ? "step %{x}%{customdata[0]}" : "step %{x}";
    const whoHv = ps.phase ? "%{customdata[1]}" : "%{customdata}";
    const hover = stepHv + "<br>%{fullData.name}: %{y:.1f} µs<extra></extra>";
    const fwdName = Expo.ptext(ps.fwd);
    const traces = [
      { type: "bar", name: "hidden" + of, x: ps.ids, y: us(ps.hidden), marker: { color: COL.hidden }, hovertemplate: hover },
      { type: "bar", name: "exposed" + of, x: ps.ids, y: us(ps.exposed), marker: { color: COL.exposed }, hovertemplate: hover },
    ];
    if (all) {
      traces.push({ type: "scatter", mode: "lines+markers", name: "exposed, slowest rank", x: ps.ids, y: us(ps.exposedMax),
        customdata: ps.exposedWho, line: { color: "#7a0f10", width: 1.5, dash: "dot" }, marker: { size: 5, symbol: "triangle-up" },
        hovertemplate: stepHv + "<br>exposed, slowest rank (rank " + whoHv + "): %{y:.1f} µs<extra></extra>" });
    }
    traces.push({ type: "scatter", mode: "lines+markers", name: fwdName + of, x: ps.ids, y: ms(ps.forward),
      yaxis: "y2", line: { color: COL.fwd, width: 1.5 }, marker: { size: 4 }, hovertemplate: stepHv + "<br>%{fullData.name}: %{y:.3f} ms<extra></extra>" });
    if (all) {
      traces.push({ type: "scatter", mode: "lines+markers", name: fwdName + ", slowest rank", x: ps.ids, y: ms(ps.forwardMax),
        customdata: ps.forwardWho, yaxis: "y2", line: { color: COL.fwd, width: 1.5, dash: "dash" }, marker: { size: 4, symbol: "triangle-up" },
        hovertemplate: stepHv + "<br>%{fullData.name} (rank " + whoHv + "): %{y:.3f} ms<extra></extra>" });
    }
    byPhase(traces, ps);
    const layout = {
      barmode: "stack", height: 330, margin: { l: 60, r: 60, t: 36, b: 44 },
      xaxis: { title: { text: "step" } }, yaxis: { title: { text: what + " time (µs)" + of }, rangemode: "tozero" },
      yaxis2: { title: { text: fwdName + " (ms)" }, overlaying: "y", side: "right", rangemode: "tozero", showgrid: false },
      legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom" },
    };
    const band = phaseBand(ps.blockRank);
    if (band.length) Object.assign(layout, { shapes: band }, { xaxis: Object.assign(layout.xaxis, { ticklabelstandoff: 12 }) });
    plots.push(Plotly.react("steps-chart", traces, layout, config));
    // Distribution over steps as cumulative curves on a log axis: per-step times span orders of
    // magnitude (a few slow steps), and steps with 0 ns (nothing exposed) are counted in the name.
    const ecdf = (name, vals, color, dash) => {
      const pos = vals.filter((v) => v > 0).sort((a, b) => a - b);
      const n = vals.length;
      const zero = n - pos.length;
      return {
        type: "scatter", mode: "lines", line: { shape: "hv", color, width: 2, dash: dash || "solid" },
        name: name + " (" + pos.length + " of " + n + " steps > 0)",
        x: pos, y: pos.map((_, i) => (zero + i + 1) / n),
        hovertemplate: "%{x:.1f} µs: %{y:.1%} of steps at or below<extra></extra>",
      };
    };
    const dist = [ecdf("exposed per step" + of, us(ps.exposed), COL.exposed)];
    if (all) dist.push(ecdf("exposed per step, slowest rank", us(ps.exposedMax), "#7a0f10", "dot"));
    dist.push(
      ecdf("hidden per step" + of, us(ps.hidden), COL.hidden),
      ecdf("total per step" + of, ps.ids.map((_, i) => (ps.hidden[i] + ps.exposed[i]) / 1e3), "#555"),
    );
    const hl = {
      height: 290, margin: { l: 60, r: 60, t: 36, b: 44 },
      xaxis: { title: { text: "µs per step (log)" }, type: "log" }, yaxis: { title: { text: "share of steps ≤ x" }, range: [0, 1.02], tickformat: ".0%" },
      legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom" },
    };
    plots.push(Plotly.react("dist-chart", dist, hl, config));
  }
  sel.addEventListener("change", drawSteps);
  if (S.step.length) drawSteps();
  else document.getElementById("steps-chart").appendChild(Expo.el("p", { className: "note" }, "no per-step data in this run"));

  // ------------------------------------------------------------------ ranks × steps heat map (cluster view)
  const G = P.grid;
  if (G && G.ranks.length > 1) {
    Expo.setText("cluster-note", "Exposed time per rank and step: a synchronous step waits for its slowest rank. " +
      "Summed over steps: slowest rank " + Expo.fmtNs(G.slowest_ns) + " vs mean of ranks " + Expo.fmtNs(G.mean_ns) +
      "; median skew " + Expo.fmtNs(G.skew_p50_ns) + "; " + G.stragglers.length + " straggler cell(s) marked × (" + G.straggler_rule + ").");
    const ylab = G.ranks.map((r) => "rank " + r);
    const heat = { type: "heatmap", x: G.steps, y: ylab, z: G.exposed.map((row) => row.map((v) => (v === null ? null : v / 1e3))),
      colorscale: "Reds", colorbar: { title: { text: "exposed µs" } }, hoverongaps: false,
      hovertemplate: "%{y}, step %{x}<br>exposed %{z:.1f} µs<extra></extra>" };
    const marks = { type: "scatter", mode: "markers", name: "straggler", x: G.stragglers.map((f) => f[1]),
      y: G.stragglers.map((f) => "rank " + f[0]), marker: { symbol: "x", size: 9, color: "#000" },
      hovertemplate: "%{y}, step %{x}: straggler<extra></extra>" };
    plots.push(Plotly.react("cluster-heatmap", [heat, marks], {
      height: Math.min(900, 120 + 18 * G.ranks.length), margin: { l: 70, r: 20, t: 20, b: 44 }, showlegend: false,
      xaxis: { title: { text: "step" } }, yaxis: { autorange: "reversed", type: "category" } }, config));
  } else {
    document.getElementById("cluster").style.display = "none";
  }

  // ------------------------------------------------------------------ per-rank table
  const A = P.analysis;
  if (A) {
    const rows = A.ranks.map((r) => {
      const names = Object.entries(r.names).slice(0, 2).map(([n, c]) => Expo.shorten(n, 60) + " ×" + c).join(", ");
      return [String(r.rank), r.backend, r.fmt, r.rule, String(r.instances), String(r.step_count), Expo.fmtNs(r.total_ns),
        Expo.fmtNs(r.hidden_ns), Expo.fmtNs(r.exposed_ns), Expo.fmtPct(r.hidden_fraction), Expo.fmtNs(r.per_step.exposed_ns.p50),
        Expo.fmtNs(r.per_step.exposed_ns.p99), Expo.fmtNs(r.per_step.forward_ns ? r.per_step.forward_ns.mean : null),
        ...(F.mixed ? [F.by_rank[String(r.rank)]] : []), Expo.fmtNs(r.wait_ns), names];
    });
    // Forward is named by its source; where the ranks' sources differ, each rank's is a column of its own.
    const t = Expo.table(["rank", "backend", "format", "rule", "instances", "steps", "total", "hidden", "exposed", "hidden %",
      "exposed/step p50", "exposed/step p99", F.label + " per step", ...(F.mixed ? ["forward source"] : []), "wait", "names"], rows);
    t.id = "rank-tbl";
    document.getElementById("rank-table").appendChild(t);
  } else {
    document.getElementById("rank-table").appendChild(Expo.el("p", { className: "note" }, "no analysis"));
  }

  // ------------------------------------------------------------------ A/B
  function fmtVal(v, unit) {
    if (v === null || v === undefined || typeof v !== "number" || !isFinite(v)) return "-";
    if (unit === "ns") return Expo.fmtNs(v);
    if (unit === "%") return Expo.fmtPct(v);
    if (unit === "ms") return v.toFixed(2) + " ms";
    if (unit === "tok/s" || unit === "req/s") return v.toFixed(unit === "req/s" ? 3 : 1);
    return Number.isInteger(v) ? String(v) : v.toFixed(3);
  }
  const ab = D.ab;
  if (!ab) {
    document.getElementById("ab").remove();
  } else {
    Expo.setText("ab-sides", "off: " + ab.sides.off.join(", ") + " · on: " + ab.sides.on.join(", ") + " · " + ab.design.reason +
      " — the same result as `expo-prof compare`");
    const pct = (x) => (x === null || x === undefined ? "–" : (x > 0 ? "+" : x < 0 ? "−" : "") + Math.abs(x).toFixed(2) + "%");
    const rows = ab.rows.map((r) => [r.label, r.off.map((v) => fmtVal(v, r.unit)).join(" · "), r.on.map((v) => fmtVal(v, r.unit)).join(" · "),
      fmtVal(r.mean_off, r.unit), fmtVal(r.mean_on, r.unit), pct(r.change_pct),
      r.ci_pct ? pct(r.ci_pct[0]) + " … " + pct(r.ci_pct[1]) : "–", r.p === null || r.p === undefined ? "–" : r.p.toPrecision(3), r.not_compared ? r.outcome + ": " + r.not_compared : r.outcome]);
    const t = Expo.table(["metric", "off runs", "on runs", "mean off", "mean on", "change", "95% CI", "p", "outcome"], rows);
    t.id = "ab-tbl";
    const wrap = Expo.el("div", { className: "scroll" });
    wrap.appendChild(t);
    document.getElementById("ab-table").append(Expo.el("p", { id: "ab-verdict", className: "verdict" }, "verdict: " + ab.verdict.decision + " — " + ab.verdict_reason), wrap);
    const extra = document.getElementById("ab-compare");
    if (ab.mechanism) extra.append(Expo.el("p", { id: "ab-mechanism" }, "mechanism: " + ab.mechanism.statement));
    for (const f of ab.flags) extra.append(Expo.el("div", { className: "warn" }, f.kind + ": " + f.side + " run " + f.run + " (" + f.metric + ")"));
    for (const c of ab.verdict.caveats) extra.append(Expo.el("div", { className: "note" }, c));
  }

  // ------------------------------------------------------------------ manifests
  function flatten(obj, prefix, out) {
    if (obj !== null && typeof obj === "object" && !Array.isArray(obj)) {
      for (const k of Object.keys(obj)) flatten(obj[k], prefix ? prefix + "." + k : k, out);
    } else {
      out.push([prefix, Array.isArray(obj) ? JSON.stringify(obj) : String(obj)]);
    }
    return out;
  }
  /** Any JSON value as tables: arrays of objects become tables, the rest key/value rows. */
  function anyTable(v) {
    const box = Expo.el("div");
    if (Array.isArray(v) && v.length && v.every((x) => x && typeof x === "object" && !Array.isArray(x))) {
      const keys = Array.from(new Set(v.flatMap((x) => Object.keys(x))));
      box.appendChild(Expo.table(keys, v.map((x) => keys.map((k) => (typeof x[k] === "object" ? JSON.stringify(x[k]) : String(x[k] ?? "")))), "grid"));
      return box;
    }
    if (v && typeof v === "object" && !Array.isArray(v)) {
      const scalars = {};
      for (const [k, x] of Object.entries(v)) {
        if (Array.isArray(x) && x.length && typeof x[0] === "object") box.append(Expo.el("div", { className: "note" }, k), anyTable(x));
        else scalars[k] = x;
      }
      if (Object.keys(scalars).length) box.prepend(Expo.table(["key", "value"], flatten(scalars, "", []), "grid kv"));
      return box;
    }
    box.appendChild(Expo.el("div", null, JSON.stringify(v)));
    return box;
  }
  const list = document.getElementById("run-list");
  D.recordings.forEach((r, i) => {
    const d = Expo.el("details", { id: "run-" + i });
    if (i === D.primary) d.open = true;
    const m = r.metrics || {};
    const tok = typeof m.output_throughput === "number" ? " · " + m.output_throughput.toFixed(1) + " output tok/s" : "";
    d.appendChild(Expo.el("summary", null, r.label + (r.overlay ? " · overlay " + r.overlay : "") + tok + " · " + r.path));
    if (r.error) d.appendChild(Expo.el("div", { className: "warn" }, r.error));
    if (r.manifest) {
      const t = Expo.table(["manifest", "value"], flatten(r.manifest, "", []), "grid kv");
      t.className = "grid kv manifest";
      d.appendChild(t);
    } else d.appendChild(Expo.el("div", { className: "note" }, "no manifest (plain traces)"));
    list.appendChild(d);
  });

  const wl = document.getElementById("warnings");
  if (D.warnings.length) {
    wl.appendChild(Expo.el("summary", null, D.warnings.length + " warning(s)"));
    for (const w of D.warnings) wl.appendChild(Expo.el("div", { className: "warn" }, w));
  } else wl.remove();

  Promise.all(plots).then(() => Expo.ready("report"));
})();
