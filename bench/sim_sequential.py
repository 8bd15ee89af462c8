#!/usr/bin/env python
"""Is the sequential switchback's error held when it looks after every block pair? (issue 39; not a test)

Real step series, resampled: each source is one arm's step cadences from a real switchback run on the vLLM CPU
server (the committed samples under traces/samples/, and any run directory given with ``--run``), in the order
the steps ran, idle gaps and steps without a cadence left out as the analysis leaves them out.

* **Null** — both arms from one series: a circular block bootstrap (blocks of ``2·K`` steps, so the series'
  own autocorrelation and drift travel with it) draws a long series, cut into blocks of K steps that alternate
  off, on, on, off … as the overlay runs them; each block's first step is dropped (washout) and each pair's
  difference is the on block's mean minus the off block's. After every pair from the 6th on, the run looks:
  the **confidence sequence** (expo_prof/analysis/saving/sequential.py) stops it at the first look that excludes 0,
  and the **fixed-horizon 95 % CI** (the paired t interval the fixed-length switchback reports) is looked at
  the same way. Any enable / keep off is a false decision. The fixed CI read once at the end is beside them.
* **Injected effects** — the same, with the on arm's steps made shorter (an overlay that saves) by a share of
  the series' mean step: how many steps the sequence needs to decide (median and 90th percentile), and how
  often it decides right, within the same budget of pairs.

    .venv/bin/python bench/sim_sequential.py                     # the table in docs/ab.md
    .venv/bin/python bench/sim_sequential.py --runs 200 --pairs 150   # quicker
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from expo_prof import stats  # noqa: E402
from expo_prof.analysis.model import DEFAULT_MARGIN_SHARE  # noqa: E402
from expo_prof.analysis.saving import sequential  # noqa: E402
from expo_prof.analysis.steps.facts import cadence  # noqa: E402
from expo_prof.readers.overlay_log import read_overlay_log  # noqa: E402
from expo_prof.timeline import overlay_log  # noqa: E402
from expo_prof.words import ENABLE, KEEP_OFF  # noqa: E402

SAMPLES = REPO / "traces" / "samples"
DEFAULT_RUNS = ("tiny-cpu-sequential", "tiny-cpu-switchback")
EFFECTS = (0.02, 0.05, 0.10)


@dataclass
class Source:
    """One arm's cadences of one real run (ns, in the order they ran)."""

    name: str
    cadences: np.ndarray


def sources(run_dirs: list[Path]) -> list[Source]:
    """Each arm of each run's overlay log, as a series of step cadences (analysis's rules: no idle gaps)."""
    out = []
    for run in run_dirs:
        for log in sorted((run / "overlay").glob("*.jsonl")):
            cols = overlay_log(read_overlay_log(log.read_bytes(), log)).steps  # type: ignore[union-attr]
            cad, idle = cadence(cols["step"], cols["t0_ns"], cols["host_end_ns"])
            phase = np.asarray(cols["phase"], dtype=object)
            for arm in ("off", "on"):
                keep = (phase == arm) & (cad >= 0) & ~idle
                if keep.sum() >= 50:
                    out.append(Source(f"{run.name} {arm}", cad[keep].astype(float)))
    return out


def bootstrap(series: np.ndarray, n: int, block: int, rng: np.random.Generator) -> np.ndarray:
    """A circular block bootstrap of ``series`` to length ``n``."""
    starts = rng.integers(0, len(series), size=math.ceil(n / block))
    idx = (starts[:, None] + np.arange(block)[None, :]) % len(series)
    return series[idx.ravel()[:n]]


def pair_diffs(steps: np.ndarray, k: int, effect_ns: float = 0.0) -> np.ndarray:
    """Per pair, (off block mean − on block mean) of a series laid out off, on, on, off … in blocks of ``k``,
    each block's first step dropped; ``effect_ns`` is taken off every on step (an overlay that saves it)."""
    blocks = steps[: len(steps) // k * k].reshape(-1, k)[:, 1:].mean(axis=1)
    n_pairs = len(blocks) // 2
    first, second = blocks[0:2 * n_pairs:2], blocks[1:2 * n_pairs:2]
    off_first = (np.arange(n_pairs) % 2) == 0  # pair p runs off, on when p is even, on, off when odd
    off = np.where(off_first, first, second)
    on = np.where(off_first, second, first) - effect_ns
    return off - on


def fixed_peeking(d: np.ndarray) -> tuple[bool, bool]:
    """(the fixed-horizon 95 % t CI excluded 0 at some look from MIN_PAIRS on, it excludes 0 at the end)."""
    n = len(d)
    k = np.arange(1, n + 1)
    mean = np.cumsum(d) / k
    sd = np.sqrt(np.maximum(np.cumsum(d * d) - k * mean ** 2, 0.0) / np.maximum(k - 1, 1))
    t = np.array([stats.t_ppf(0.975, i) for i in range(1, n + 1)])
    half = np.where(k >= 2, t * sd / np.sqrt(k), np.inf)
    out = np.abs(mean) > half
    return bool(out[sequential.MIN_PAIRS - 1:].any()), bool(out[-1])


def simulate(src: Source, runs: int, pairs: int, k: int, rng: np.random.Generator) -> dict:
    """Null rates and steps to decide under injected effects, for one source."""
    mean_step = float(src.cadences.mean())
    steps_per_pair = 2 * k
    null_seq = null_peek = null_end = 0
    to_decide: dict[float, list[int]] = {e: [] for e in EFFECTS}
    right: dict[float, int] = {e: 0 for e in EFFECTS}
    for _ in range(runs):
        series = bootstrap(src.cadences, pairs * steps_per_pair, 2 * k, rng)
        d = pair_diffs(series, k)
        s = sequential.sequence(d, 1e-9)  # margin ~0: only enable / keep off can stop it
        null_seq += s.decision in (ENABLE, KEEP_OFF)
        peek, end = fixed_peeking(d)
        null_peek += peek
        null_end += end
        for e in EFFECTS:
            de = pair_diffs(series, k, e * mean_step)
            se = sequential.sequence(de, DEFAULT_MARGIN_SHARE * mean_step)
            if se.settled_at is not None:
                to_decide[e].append(se.settled_at * steps_per_pair)
                right[e] += se.decision == ENABLE
    row = {"source": src.name, "steps": len(src.cadences), "mean_step_ns": mean_step,
           "null_sequence": null_seq / runs, "null_fixed_peeking": null_peek / runs, "null_fixed_end": null_end / runs}
    for e in EFFECTS:
        got = to_decide[e]
        row[f"effect_{e}"] = {"decided": len(got) / runs, "right": right[e] / runs,
                              "median_steps": float(np.median(got)) if got else None,
                              "p90_steps": float(np.percentile(got, 90)) if got else None}
    return row


def table(rows: list[dict], runs: int, pairs: int, k: int) -> str:
    """The Markdown table docs/ab.md shows."""
    head = ["source (real steps)", "steps", "null: sequence, a look every pair", "null: fixed 95% CI, a look every "
            "pair", "null: fixed CI, once at the end"] + [f"saves {100 * e:g} %: decided right / steps to decide "
                                                         "(median, p90)" for e in EFFECTS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["source"], str(r["steps"]), f"{100 * r['null_sequence']:.1f} %",
                 f"{100 * r['null_fixed_peeking']:.1f} %", f"{100 * r['null_fixed_end']:.1f} %"]
        for e in EFFECTS:
            x = r[f"effect_{e}"]
            steps = "–" if x["median_steps"] is None else f"{x['median_steps']:.0f}, {x['p90_steps']:.0f}"
            cells.append(f"{100 * x['right']:.0f} % / {steps}")
        lines.append("| " + " | ".join(cells) + " |")
    binom = 2 * math.sqrt(0.05 * 0.95 / runs)
    lines.append("")
    lines.append(f"{runs} simulated runs per source, up to {pairs} block pairs of {k} steps each, a look after every "
                 f"pair from the {sequential.MIN_PAIRS}th; margin 1 % of the mean step under effects, ~0 under the "
                 f"null (±{100 * binom:.1f} points is two binomial standard errors at 5 %).")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="append", type=Path, default=None, metavar="DIR",
                    help="a switchback run directory (repeatable; default: the committed samples)")
    ap.add_argument("--runs", type=int, default=1000, help="simulated runs per source")
    ap.add_argument("--pairs", type=int, default=300, help="block pairs per simulated run (its budget)")
    ap.add_argument("--block-steps", type=int, default=8)
    ap.add_argument("--seed", type=int, default=20261204)
    args = ap.parse_args(argv)
    dirs = args.run or [SAMPLES / name for name in DEFAULT_RUNS]
    rng = np.random.default_rng(args.seed)
    rows = [simulate(src, args.runs, args.pairs, args.block_steps, rng) for src in sources(dirs)]
    print(table(rows, args.runs, args.pairs, args.block_steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
