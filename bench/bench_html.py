"""HTML timeline benchmark: file size and load-to-interactive time against event count, in headless Chromium.

Traces of 10k, 100k and 1M events are built from the real events of real
traces, replicated with shifted timestamps (every copy keeps its exponential
draws, steps and forward windows):

* ``vllm-cpu`` — the vLLM 0.32 CPU trace with 32 ``aten::exponential_`` draws
  (``../shared/realtraces/vllm-cpu/rank0-fp64-gumbel.pt.trace.json.gz``, 15k events, 1 thread);
* ``a100-nccl`` — an A100 training trace, 5 lanes, NCCL kernels partly under
  compute, drawn as the instances with ``--op nccl`` (``hta/…/nccl_data.json.gz``, 27k events);
* ``dense-cuda`` — issue 12's generated CUDA trace (``tests/html/dense_trace.py``): per step 99
  forward kernels on stream 7 and one exponential kernel on stream 20 under them, 76 % hidden,
  ~118 hidden/exposed pieces per draw (1M events = 9,901 steps, 1.17M pieces);
* ``kineto-big`` (``--big``) — the vLLM CPU trace recorded with stacks
  (``vllm-cpu/rank0-default-with-stack.pt.trace.json.gz``: 15k events in 72 MB of JSON) repeated
  to 3.3M events. The page depends only on the events, so the Timeline is repeated in memory; the
  equivalent JSON file would be far larger than 1 GB (a 1 GB file of it holds ~210k events).
  Reading such a file is bench_ingest.py's subject, not this one's.

Each page is opened in a *fresh* headless Chromium (cold: nothing cached), and
the page reports its own milestones (``performance.now()``, ms since navigation
start): ``plotly`` when plotly.js has run, ``ready`` when the plot is drawn and
answers input. The ``plotly.js alone`` row is a page with nothing but
plotly.js: the floor every plotly page pays. Measurements go round-robin (one
load of each page per round) and the table shows medians; ``× floor`` is the
ratio of a page's ready time to that floor, measured in the same run.
Goals (issues 5 and 12): a 1M-event page ≤ 20 MB and ready ≤ 3 s; the 3.3M-event Kineto page
≤ 25 MB and ≤ 3 s. The floors are a page with nothing but the pinned partial plotly.js bundle the
pages ship (``plotly.js basic``) and one with the full plotly.js of the ``plotly`` package (what
every page carried before). The ``33-instance page`` rows are the committed sample run
``traces/samples/tiny-cpu-off-on/02-on`` rendered with each bundle.

    .venv/bin/python bench/bench_html.py                 # 10k, 100k, 1M; 3 rounds; ~5 min
    .venv/bin/python bench/bench_html.py --rounds 5 --sizes 1000000 --sources dense-cuda --big
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # support.headless: the tests' browser driver
REAL = (REPO / ".." / "shared" / "realtraces").resolve()
OUT = REPO / ".bench" / "html"

SOURCES = {
    "vllm-cpu": ("vllm-cpu/rank0-fp64-gumbel.pt.trace.json.gz", None),
    "a100-nccl": ("hta/tests/data/nccl_parser_config/nccl_data.json.gz", "nccl"),
    "dense-cuda": (None, None),
}
BIG = ("kineto-big", "vllm-cpu/rank0-default-with-stack.pt.trace.json.gz", 3_300_000)
GOAL_MB, GOAL_S = 20.0, 3.0
GOAL_BIG_MB = 25.0
SAMPLE_33 = REPO / "traces" / "samples" / "tiny-cpu-off-on" / "02-on"


def replicate(tl, n: int):
    """``tl``'s events repeated (each copy shifted past the previous one) until there are ``n``."""
    from expo_prof.timeline import Timeline

    k = -(-n // len(tl))
    span = int(tl.end.max() - tl.start.min()) + 1_000
    idx = np.tile(np.arange(len(tl)), k)[:n]
    rep = np.repeat(np.arange(k, dtype=np.int64), len(tl))[:n]
    step = None
    if tl.step is not None:
        smax = int(tl.step.max()) + 1 if len(tl.step) else 1
        step = np.where(tl.step[idx] >= 0, tl.step[idx] + rep * smax, -1)
    meta = {key: v for key, v in tl.meta.items() if key not in ("correlation", "flows")}
    corr = tl.meta.get("correlation")
    if corr is not None and len(corr) == len(tl):
        c = np.asarray(corr, dtype=np.int64)
        cmax = int(c.max()) + 1 if len(c) else 1
        meta["correlation"] = np.where(c[idx] >= 0, c[idx] + rep * cmax, -1)
    # ProfilerStep#N markers: number each copy's steps on (the same id twice would merge two windows).
    names = list(tl.names)
    name = tl.name[idx].astype(np.int64)
    prof = {i: int(m.group(1)) for i, nm in enumerate(tl.names) if (m := re.fullmatch(r"ProfilerStep#(\d+)", nm))}
    if prof:
        smax = max(prof.values()) + 1
        for r in np.unique(rep).tolist():
            for i, sid in prof.items():
                sel = (rep == r) & (name == i)
                if sel.any():
                    name[sel] = len(names)
                    names.append(f"ProfilerStep#{sid + r * smax}")
    return Timeline(
        rank=tl.rank, source=f"{tl.source} ×{k}", fmt=tl.fmt, backend=tl.backend, lanes=tl.lanes, names=names,
        start=tl.start[idx] + rep * span, dur=tl.dur[idx], lane=tl.lane[idx], name=name.astype(np.int32), kind=tl.kind[idx],
        step=step, meta=meta,
    )


def build_page(name: str, n: int) -> dict:
    """Write the page for ``n`` events of source ``name``; returns what was built and how long it took."""
    from expo_prof import readers
    from expo_prof.analysis.overlap.hidden import analyze_timeline
    from expo_prof.pipeline.options import compile_op
    from expo_prof.html.timeline_data import build_payload
    from expo_prof.html.timeline_page import render

    if name == BIG[0]:
        rel, op = BIG[1], None
    else:
        rel, op = SOURCES[name]
    if rel is None:  # generated: issue 12's dense CUDA trace, 101 events per step
        sys.path.insert(0, str(REPO / "tests" / "html"))
        from dense_trace import dense_cuda_timeline

        tl = dense_cuda_timeline(max(1, -(-n // 101)))
    else:
        tl = replicate(readers.load([REAL / rel]).timelines[0], n)
    t0 = time.perf_counter()
    a = analyze_timeline(tl, compile_op(op))
    payload = build_payload([a], title=f"bench {name} {n}")
    html = render(payload)
    build_s = time.perf_counter() - t0
    path = OUT / f"{name}-{n}.html"
    path.write_text(html)
    return {
        "name": name, "n": len(tl), "path": path, "mb": path.stat().st_size / 1e6, "build_s": build_s,
        "inst": len(payload["inst"]["start"]), "work": len(payload["work"]["start"]), "pieces": len(payload["piece"]["start"]),
        "busy": len(payload["busy"]["start"]), "lanes": len(payload["lanes"]),
    }


def floor_page(full: bool = False) -> Path:
    """A page holding nothing but plotly.js: the pinned basic bundle the pages use, or the full one."""
    from expo_prof.html.assets import plotly_js, plotly_js_full

    path = OUT / ("plotly-full-only.html" if full else "plotly-only.html")
    path.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'></head><body><script>"
        + (plotly_js_full() if full else plotly_js())
        + "</script><script>window.__expoT={plotly: performance.now()};document.body.dataset.ready='1';"
        "window.__expoT.ready=performance.now();</script></body></html>"
    )
    return path


def sample_pages() -> list[dict]:
    """The 33-instance sample run's timeline page with the basic bundle (now) and with the full one (before)."""
    from unittest import mock

    from expo_prof.html import assets
    from expo_prof.html.build import timeline_document

    out = []
    if not SAMPLE_33.is_dir():
        return out
    for label, full in (("sample-33 basic", False), ("sample-33 full (before)", True)):
        with mock.patch.object(assets, "plotly_js", assets.plotly_js_full if full else assets.plotly_js):
            doc = timeline_document([SAMPLE_33])
        path = OUT / ("sample33-full.html" if full else "sample33.html")
        path.write_text(doc.text)
        p = doc.payload
        out.append({"name": label, "n": int(sum(g["events"] for g in p["groups"])), "path": path,
                    "mb": path.stat().st_size / 1e6, "build_s": float("nan"), "inst": len(p["inst"]["start"]),
                    "work": len(p["work"]["start"]), "pieces": len(p["piece"]["start"]), "busy": len(p["busy"]["start"]),
                    "lanes": len(p["lanes"])})
    return out


def load_once(path: Path) -> dict:
    """Open ``path`` in a fresh headless Chromium; the page's milestones in seconds."""
    from support.headless import Chromium

    with Chromium() as c:
        page = c.new_page(timeout=120)
        page.send("Emulation.setDeviceMetricsOverride", {"width": 1400, "height": 900, "deviceScaleFactor": 1, "mobile": False})
        page.navigate(path.as_uri(), timeout=120)
        deadline = time.monotonic() + 120
        while not page.evaluate("document.body && document.body.dataset.ready === '1'"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{path.name} never became ready: {page.errors()}")
            time.sleep(0.02)
        t = page.evaluate("window.__expoT")
        errors = page.errors()
        paint = page.evaluate("window.expoTimeline ? expoTimeline.stats.lastMs : null")
        zoom_ms = None
        if paint is not None:
            # Interaction: zoom into the middle tenth and time the repaint.
            zoom_ms = page.evaluate(
                "(() => { const r = expoTimeline.stats.range, w = r[1] - r[0], t0 = performance.now();"
                " return Plotly.relayout('plot', {'xaxis.range': [r[0] + 0.45 * w, r[0] + 0.55 * w]})"
                ".then(() => performance.now() - t0); })()"
            )
        page.close()
    return {"plotly": t.get("scripts", t.get("plotly")) / 1e3, "ready": t["ready"] / 1e3, "paint_ms": paint,
            "zoom_ms": zoom_ms, "errors": errors}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000,1000000", help="event counts, comma-separated")
    ap.add_argument("--sources", default=",".join(SOURCES), help=f"of {', '.join(SOURCES)}")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--big", action="store_true", help=f"also the {BIG[2]:,}-event Kineto page (several minutes to build)")
    args = ap.parse_args()
    from rich.console import Console
    from rich.table import Table

    from support.headless import find_chromium

    if find_chromium() is None:
        print("no chromium found (Debian: apt-get install -y chromium)", file=sys.stderr)
        return 2
    con = Console(width=200)
    OUT.mkdir(parents=True, exist_ok=True)
    sizes = [int(s) for s in args.sizes.split(",")]
    pages = []
    with con.status("building pages"):
        for name in args.sources.split(","):
            for n in sizes:
                pages.append(build_page(name, n))
        if args.big:
            pages.append(build_page(BIG[0], BIG[2]))
        pages.extend(sample_pages())
    floor, floor_full = floor_page(), floor_page(full=True)
    runs: dict[str, list[dict]] = {str(p["path"]): [] for p in pages}
    runs[str(floor)] = []
    runs[str(floor_full)] = []
    load_before = os.getloadavg()[0]
    for _ in range(args.rounds):
        for path in [floor, floor_full] + [p["path"] for p in pages]:
            runs[str(path)].append(load_once(path))
    load_after = os.getloadavg()[0]
    med = lambda xs: statistics.median(xs)  # noqa: E731
    floor_ready = med([x["ready"] for x in runs[str(floor)]])

    cpu = re.sub(r"\s+", " ", next((ln.split(":", 1)[1] for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")).strip()
    t = Table(
        title=f"timeline page vs event count — medians of {args.rounds} cold loads each, headless Chromium, "
        f"{os.cpu_count()} cpus ({cpu}), load avg {load_before:.1f}→{load_after:.1f}; goals: 1M events "
        f"≤ {GOAL_MB:.0f} MB, {BIG[2] / 1e6:.1f}M ≤ {GOAL_BIG_MB:.0f} MB, ready ≤ {GOAL_S:.0f} s",
        title_justify="left",
    )
    for col, just in (("source", "left"), ("events", "right"), ("lanes", "right"), ("instances", "right"),
                      ("pieces", "right"), ("drawn 1-by-1", "right"), ("busy ivals", "right"), ("file MB", "right"), ("build s", "right"),
                      ("plotly.js s", "right"), ("ready s", "right"), ("× floor", "right"), ("paint ms", "right"),
                      ("zoom ms", "right"), ("goal", "left")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for label, fl in (("plotly basic alone", floor), ("plotly full alone", floor_full)):
        r_ = med([x["ready"] for x in runs[str(fl)]])
        t.add_row(label, "-", "-", "-", "-", "-", "-", f"{fl.stat().st_size / 1e6:.1f}", "-",
                  f"{med([x['plotly'] for x in runs[str(fl)]]):.2f}", f"{r_:.2f}", f"{r_ / floor_ready:.2f}", "-", "-", "")
    for p in pages:
        rs = runs[str(p["path"])]
        ready = med([x["ready"] for x in rs])
        goal = ""
        if p["n"] >= 1_000_000:
            ok = p["mb"] <= (GOAL_BIG_MB if p["n"] > 1_500_000 else GOAL_MB) and ready <= GOAL_S
            goal = "met" if ok else "MISSED"
        errs = sum(len(x["errors"]) for x in rs)
        t.add_row(
            p["name"], f"{p['n']:,}", str(p["lanes"]), f"{p['inst']:,}", f"{p['pieces']:,}", f"{p['work']:,}", f"{p['busy']:,}",
            f"{p['mb']:.1f}", "-" if p["build_s"] != p["build_s"] else f"{p['build_s']:.1f}",
            f"{med([x['plotly'] for x in rs]):.2f}", f"{ready:.2f}",
            f"{ready / floor_ready:.2f}", f"{med([x['paint_ms'] for x in rs]):.0f}", f"{med([x['zoom_ms'] for x in rs]):.0f}",
            goal + (f" {errs} console errors!" if errs else ""),
        )
    con.print(t)
    con.print("ready = navigation start → plot drawn and answering input (the page's own performance.now()); "
              "plotly.js = when our first script started (plotly.js has run); paint = one full repaint of the canvas; "
              "zoom = Plotly.relayout to the middle tenth incl. repaint.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
