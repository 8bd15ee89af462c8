#!/usr/bin/env python
"""Switchback vs `ab`: the same question answered by one launch or by 2·N launches (not a test).

For each configuration of ``bench/switchback_proof.py`` (one where the overlay
should win, one where it should lose) it runs ``expo-prof ab --repeat N`` and
``expo-prof ab --switchback`` on the real vLLM CPU server with the tiny
32k-vocabulary Llama, as a user does, and prints side by side: each method's
output tok/s change with its 95 % CI, whether the switchback estimate lies
inside ab's CI (and has its sign), the wall time of each, and switchback's
wall time at ab's CI width (start-up + measuring time × (CI width ratio)²: the
CI narrows with the square root of the steps measured). Goal (issue 23):
switchback ≤ 1/4 of ab's wall time at equal CI width.

    .venv/bin/python bench/bench_switchback.py                  # both configurations, ab --repeat 3
    .venv/bin/python bench/bench_switchback.py --repeat 5 --configs lane-free-fp64
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from switchback_proof import CONFIGS, inside, measure, model_dir  # noqa: E402


def _pct(x: float) -> str:
    return f"{x:+.1f}%"


def _ci(ci: list[float] | None) -> str:
    return "–" if ci is None else f"[{ci[0]:+.1f}, {ci[1]:+.1f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    ap.add_argument("--repeat", type=int, default=3, help="ab runs per side")
    ap.add_argument("--block-steps", type=int, default=8)
    ap.add_argument("--keep", type=Path, default=None, help="keep the runs under this folder")
    args = ap.parse_args()
    model = model_dir()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-switchback-") as tmp:
        work = args.keep or Path(tmp)
        for name in args.configs:
            m = measure(name, work, repeat=args.repeat, block_steps=args.block_steps, model=model)
            t, s = m.ab_tput, m.saving
            ready = json.loads((m.switchback_dir / "manifest.json").read_text()).get("ready_after_s") or 0.0
            w_ab = t["ci_pct"][1] - t["ci_pct"][0] if t["ci_pct"] else None
            w_sb = s["tokps_ci_pct"][1] - s["tokps_ci_pct"][0] if s["tokps_ci_pct"] else None
            at_ab = ready + (m.switchback_wall_s - ready) * (w_sb / w_ab) ** 2 if w_ab and w_sb else None
            rows.append((name, t, s, m, w_ab, w_sb, at_ab))
            print(f"{name}: done (ab {m.ab_wall_s:.0f} s, switchback {m.switchback_wall_s:.0f} s)", file=sys.stderr)
    print(f"\nab --repeat {args.repeat} vs ab --switchback (blocks of {args.block_steps} steps); output tok/s change, "
          "95% CI\n")
    print("| configuration | expected | ab change | ab 95% CI | switchback change | switchback 95% CI | same sign, "
          "inside ab's CI | ab wall s | switchback wall s | switchback wall at ab's CI width | ÷ ab wall |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, t, s, m, _w_ab, _w_sb, at_ab in rows:
        exp = "wins" if CONFIGS[name]["expect"] > 0 else "loses"
        ok = (t["change_pct"] * s["tokps_change_pct"] > 0) and t["ci_pct"] is not None and inside(
            s["tokps_change_pct"], t["ci_pct"])
        print(f"| {name} ({CONFIGS[name]['what']}) | {exp} | {_pct(t['change_pct'])} | {_ci(t['ci_pct'])} | "
              f"{_pct(s['tokps_change_pct'])} | {_ci(s['tokps_ci_pct'])} | {'yes' if ok else 'NO'} | "
              f"{m.ab_wall_s:.0f} | {m.switchback_wall_s:.0f} | "
              f"{'–' if at_ab is None else f'{at_ab:.0f}'} | {'–' if at_ab is None else f'{at_ab / m.ab_wall_s:.2f}'} |")
    print("\nswitchback verdicts: " + "; ".join(f"{n}: {s['statement']}" for n, _t, s, *_ in rows))


if __name__ == "__main__":
    main()
