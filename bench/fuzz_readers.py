"""A longer fuzz run over the readers with new seeds (``make fuzz``); CI runs a fixed range instead.

    .venv/bin/python bench/fuzz_readers.py                       # 2000 new seeds per format from a random start
    .venv/bin/python bench/fuzz_readers.py --seeds 20000 --start 7000000
    .venv/bin/python bench/fuzz_readers.py --format op_summary_1.csv --seed 4   # one case, to reproduce

Cases are ``(format, seed)`` pairs from tests/readers/fuzz_cases.py, so each
failure printed here reproduces exactly; add it to ``REGRESSIONS`` there once
the reader is fixed. Exit status: 0 no failure, 1 failures found.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "tests" / "readers")]

from fuzz_cases import SEED_FILES, mutations, run_case  # noqa: E402
from shared_paths import REALTRACES  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=2000, help="seeds per format (default 2000)")
    ap.add_argument("--start", type=int, default=None, help="first seed (default: random, printed)")
    ap.add_argument("--seed", type=int, default=None, help="run this one seed only")
    ap.add_argument("--format", choices=sorted(SEED_FILES), action="append", help="only these formats")
    args = ap.parse_args()
    if not REALTRACES.is_dir():
        print(f"error: the real traces are not at {REALTRACES} (set EXPO_PROF_REALTRACES)", file=sys.stderr)
        return 2
    if args.seed is not None:
        seeds = range(args.seed, args.seed + 1)
    else:
        start = args.start if args.start is not None else random.SystemRandom().randrange(10**6, 10**9)
        seeds = range(start, start + args.seeds)
        print(f"seeds {seeds.start}..{seeds.stop - 1} per format (rerun with --start {seeds.start})")
    formats = args.format or sorted(SEED_FILES)
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        for name in formats:
            data = SEED_FILES[name](REALTRACES)
            t0, bad = time.perf_counter(), 0
            for seed in seeds:
                muts = mutations(seed, len(data))
                why = run_case(data, name, muts, Path(d))
                if why is not None:
                    bad += 1
                    print(f"FAIL {name} seed {seed}: {why}\n     edits: {muts!r}")
            failures += bad
            print(f"{name:28s} {len(seeds):6d} cases  {bad:3d} failing  {time.perf_counter() - t0:6.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
