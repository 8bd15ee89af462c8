"""The user's own accuracy set: a local JSONL of prompts and reference answers, scored off and on.

Each line is a JSON object with ``prompt`` (a string) and ``reference`` (a
string, or a list of accepted strings). A completion is correct when one
reference, normalised (case, spaces, a trailing period), equals the answer in
its last ``\\boxed{…}``, or otherwise occurs in its text. Requests are greedy.

The difference on-minus-off comes with the statistics ``compare`` uses
(expo_prof/stats.py): Welch's t on the per-question scores gives the
CI of one run per side (what a "84.90 → 85.36" comparison is), the paired t the
CI on these same questions, and ``runs_needed_unpaired`` how many whole runs of
the set per side would settle the observed difference (a run's score varies
by p(1−p)/N when answers are sampled).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from expo_prof import stats
from expo_prof.errors import BadInput

_BOXED = re.compile(r"\\boxed\{([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}")


def load(path: Path) -> list[dict]:
    """The items of ``path`` (BadInput naming the first bad line: exit 2)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"--accuracy {path}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    items = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            raise BadInput(f"--accuracy {path}:{i}: not a JSON object") from None
        if not isinstance(obj, dict):
            raise BadInput(f"--accuracy {path}:{i}: not a JSON object")
        ref = obj.get("reference")
        refs = [ref] if isinstance(ref, str) else ref
        if not isinstance(obj.get("prompt"), str) or not isinstance(refs, list) or not refs \
                or not all(isinstance(r, str) for r in refs):
            keys = ", ".join(sorted(obj)) or "none"
            raise BadInput(f"--accuracy {path}:{i}: needs a string 'prompt' and a string (or list of strings) "
                           f"'reference'; the line has: {keys}")
        items.append({"prompt": obj["prompt"], "references": refs})
    if len(items) < 2:
        raise BadInput(f"--accuracy {path}: needs at least 2 items, has {len(items)}")
    return items


def _norm(s: str) -> str:
    return " ".join(s.strip().lower().rstrip(".").split())


def correct(text: str, references: list[str]) -> bool:
    """Whether a completion ``text`` gives one of ``references``."""
    boxed = _BOXED.findall(text)
    if boxed:
        return any(_norm(boxed[-1]) == _norm(r) for r in references)
    t = _norm(text)
    return any(_norm(r) and _norm(r) in t for r in references)


def score(client, items: list[dict], max_tokens: int, out: list) -> list:
    """Greedy completions of every item; appends 0/1 per item to ``out`` (kept when a server dies)."""
    for it in items:
        ans = client.completion(it["prompt"], max_tokens=max_tokens, temperature=0.0, ignore_eos=False)
        out.append(int(correct(ans["choices"][0].get("text") or "", it["references"])))
    return out


def compare(off: list[int], on: list[int], alpha: float = 0.05, power: float = 0.8) -> dict:
    """Accuracy off and on, the difference with its CIs, and the runs of the whole set that would settle it."""
    n = min(len(off), len(on))
    if n < 2:
        return {"status": "not_run", "n": n}
    a, b = np.array(off[:n], float), np.array(on[:n], float)
    conf = 1 - alpha
    welch = stats.welch_t(a, b, conf)
    paired = stats.paired_t(a, b, conf)
    pa, pb = float(a.mean()), float(b.mean())
    var_run = (pa * (1 - pa) + pb * (1 - pb)) / 2 / n  # a whole run's score variance, binomial
    need = stats.runs_needed_unpaired(pb - pa, var_run, var_run, alpha, power)
    differs = welch.ci_low > 0 or welch.ci_high < 0
    return {"status": "differs" if differs else "ok", "n": n, "accuracy_off": pa, "accuracy_on": pb,
            "diff": pb - pa, "ci_low": welch.ci_low, "ci_high": welch.ci_high, "p": welch.p, "confidence": conf,
            "paired_ci_low": paired.ci_low, "paired_ci_high": paired.ci_high, "paired_p": paired.p,
            "questions_changed": int((a != b).sum()),
            "runs_needed_per_side": need, "runs_needed_max": stats.MAX_RUNS}


def from_rates(acc_off: float, acc_on: float, n: int, alpha: float = 0.05, power: float = 0.8) -> dict:
    """One run per side known only by its accuracy on ``n`` items: the difference, its CI (binomial spread,
    Welch's t as :func:`compare` does) and the whole runs per side that would settle it."""
    va, vb = acc_off * (1 - acc_off), acc_on * (1 - acc_on)
    se = ((va + vb) / n) ** 0.5
    df = (va + vb) ** 2 / ((va**2 + vb**2) / (n - 1))
    half = stats.t_ppf(1 - alpha / 2, df) * se
    diff = acc_on - acc_off
    need = stats.runs_needed_unpaired(diff, va / n, vb / n, alpha, power)
    return {"n": n, "accuracy_off": acc_off, "accuracy_on": acc_on, "diff": diff, "ci_low": diff - half,
            "ci_high": diff + half, "runs_needed_per_side": need}


def math500_example() -> dict:
    """The published Math-500 comparison: 84.90 → 85.36 on 500 questions, one run each (docs/verify.md)."""
    return from_rates(0.8490, 0.8536, 500)
