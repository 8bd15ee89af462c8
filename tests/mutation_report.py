"""Kill rate per module of the last ``mutmut run`` (``make mutate`` prints it; docs/testing.md keeps it).

Reads ``mutmut results --all true`` and counts, per module, the mutants the
fast tests killed (a failing test, or a timeout: the mutant hung) against
those that survived. Survivors reviewed as *equivalent* (behaviour unchanged,
no test can kill them) are listed in ``tests/mutation_equivalent.txt`` with
the reason, and shown in their own column: the score without them is the one
the goal (>= 90 % per module) is measured on. Mutants a stopped run never
reached are counted as "not checked" (not killed), and such a module fails the goal.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
LINE = re.compile(r"^\s*(?P<key>\S+__mutmut_\d+): (?P<status>.+)$")
KILLED = {"killed", "timeout", "caught by type check"}


def equivalent() -> dict[str, str]:
    """Reviewed equivalent mutants: name -> why (``tests/mutation_equivalent.txt``, ``name  # why``)."""
    out: dict[str, str] = {}
    path = HERE / "mutation_equivalent.txt"
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                name, _, why = line.partition("#")
                out[name.strip()] = why.strip()
    return out


def module_of(key: str) -> str:
    # expo_prof.analysis.intervals.x_union__mutmut_3 / overlay.sampler.xǁOverlayǁtake__mutmut_7
    return re.split(r"\.(?:x_|xǁ)", key, maxsplit=1)[0]


def main() -> int:
    mutmut = Path(sys.executable).with_name("mutmut")
    text = subprocess.run([str(mutmut), "results", "--all", "true"], capture_output=True, text=True, check=True).stdout
    eq = equivalent()
    per: dict[str, Counter] = defaultdict(Counter)
    survivors: list[str] = []
    seen: dict[str, str] = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        key, status = m.group("key"), m.group("status").strip()
        seen[key] = status
        c = per[module_of(key)]
        c["total"] += 1
        if status in KILLED:
            c["killed"] += 1
        elif key in eq:
            c["equivalent"] += 1
        else:
            c[status] += 1
            if status != "not checked":
                survivors.append(f"{key}: {status}")
    # "not checked": the run stopped before reaching the mutant; such a module has no result yet.
    print("| module | mutants | killed | equivalent (reviewed) | survived | no tests | not checked | kill rate "
          "| without equivalents |")
    print("|---|---|---|---|---|---|---|---|---|")
    ok = True
    for mod in sorted(per):
        c = per[mod]
        live = c["total"] - c["equivalent"]
        raw = c["killed"] / c["total"] if c["total"] else 1.0
        adj = c["killed"] / live if live else 1.0
        ok &= adj >= 0.9 and not c["not checked"]
        print(f"| {mod} | {c['total']} | {c['killed']} | {c['equivalent']} | {c['survived']} | {c['no tests']} "
              f"| {c['not checked']} | {raw:.1%} | {adj:.1%} |")
    stale = sorted(set(eq) - {k for k in eq if module_of(k) in per})
    if survivors:
        print("\nsurvivors not reviewed:")
        print("\n".join(f"  {s}" for s in survivors))
    if stale:
        print(f"\n{len(stale)} reviewed name(s) from modules not in this run")
    # A reviewed equivalent that a test kills, or that this run does not have, is a stale name
    # (mutmut numbers a function's mutants in order: editing the function renumbers them).
    wrong = sorted(k for k in eq if module_of(k) in per and (k not in seen or seen[k] in KILLED))
    if wrong:
        print("\nreviewed as equivalent but killed or absent (stale name? review again):")
        print("\n".join(f"  {k}: {seen.get(k, 'absent')}" for k in wrong))
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
