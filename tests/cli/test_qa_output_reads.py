"""The output reads clearly to a newcomer, piped at 80 columns (a QA pass over issues 33 and 34): on the committed
samples and the real CPU traces, each figure says what it is."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
OFF = REPO / "traces" / "samples" / "tiny-cpu-off-on" / "01-off"
SWITCHBACK = REPO / "traces" / "samples" / "tiny-cpu-switchback"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "expo_prof", *args], capture_output=True, text=True, timeout=600,
                          cwd=REPO, env={"COLUMNS": "80", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})


def drawless_warning(path: Path) -> str:
    proc = cli("analyze", str(path))
    assert proc.returncode == 0, proc.stderr
    notes = [ln for ln in proc.stderr.splitlines() if "step windows the inputs mark" in ln]
    assert len(notes) == 1, proc.stderr
    return notes[0]


def test_steps_without_a_draw_name_their_ids_apart_from_the_count(realtraces):
    """GIVEN the off run (one step with no token scheduled), a real CPU trace (4 such steps) and the switchback
    sample (200 off-block steps)
    WHEN analyze runs on each
    THEN the warning gives the count, then the ids in parentheses ("1 step (step 42)"), never a bare id
    straight after the count ("1 step 42" reads as a duration or a typo)."""
    off = drawless_warning(OFF)
    assert re.search(r"no token scheduled \(execute_context_0\(0\)_generation_0\(0\)\): 1 step \(step \d+\)$", off), off
    real = drawless_warning(realtraces / "vllm-cpu/rank0-default-with-stack.pt.trace.json.gz")
    assert re.search(r"no token scheduled [^:]*: \d+ steps \(steps \d+(, \d+)+\);", real), real
    sb = drawless_warning(SWITCHBACK)
    assert re.search(r"overlay drew none\): \d+ steps \(steps \d+–\d+(, \d+–\d+)*\)$", sb), sb
    for note in (off, real, sb):
        assert not re.search(r"\d+ steps? \d", note), note


def test_compare_says_each_fact_of_its_why_once():
    """GIVEN the committed off/on pair (the critical path fell, TPOT rose, the two forward measures differ)
    WHEN compared at 80 columns
    THEN the "why" paragraph states the TPOT change once, as a change beside the fall (not "less than" it), and
    that the forward measures differ once (the "no cause named" reason, no second "compare with care" note)."""
    on = OFF.parent / "02-on"
    proc = cli("compare", str(OFF), str(on))
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    why = text[text.index("why:"):text.index("verdict:")]
    tpot = re.findall(r"[+−-]\d+\.\d+ ms per token|changed by [+−-]\d+\.\d+ ms", why)
    assert len(tpot) == 1, why
    # The critical paths time different things (the fused op against the draw alone): no "fell by" figure.
    assert "fell by" not in why and "less than the" not in why
    assert "no cause named: the forward time is measured differently" in why
    assert "compare with care" not in text


def test_switchback_block_and_its_headline_print_one_tokps_figure():
    """GIVEN the switchback sample WHEN analyzed at 80 columns THEN the block's "output tok/s" row and the
    headline under it print the change and both CI bounds as the same figures (one quantity, one value)."""
    proc = cli("analyze", str(SWITCHBACK))
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    row = re.search(r"output tok/s (\S+%) 95% CI (\S+%) to (\S+%)", text)
    head = re.search(r"output tok/s (\S+%) \((\S+%) to (\S+%)\), \d+ block pairs", text)
    assert row and head, text
    assert row.groups() == head.groups()


@pytest.mark.slow
def test_help_never_breaks_a_word_at_its_hyphen():
    """GIVEN every command's --help, piped at 80 columns (report's names `expo-prof compare`, compare's
    `vllm bench serve --save-result`, analyze's "expo-prof run or session directories")
    WHEN printed
    THEN no line ends inside a hyphenated word or command ("`expo-" above "prof compare`'s result"): a
    command is never broken; and every line stays within 80 columns."""
    names = ["analyze", "report", "compare", "export", "timeline", "record", "ab", "demo", "verify", "collect"]
    for name in ["", *names]:
        proc = cli(*([name] if name else []), "--help")
        assert proc.returncode == 0, proc.stderr
        for line in proc.stdout.splitlines():
            assert not re.search(r"\w-$", line), f"{name} --help: {line!r}"
            assert len(line) <= 80, f"{name} --help: {line!r}"
    assert "`expo-prof compare`'s result" in cli("report", "--help").stdout


def test_q_shapes_say_how_many_steps_each_in_words():
    """GIVEN 02-on (its overlay log records three q shapes) WHEN analyzed at 80 columns THEN the q line gives each
    shape with "in N steps" (the JSON's counts), never "float32 ×33" (read as one more dimension of the shape),
    and the shapes left out as "+1 more shape"."""
    on = OFF.parent / "02-on"
    q = json.loads(cli("analyze", str(on), "--json").stdout)["summary"]["step_breakdown"]["q"]
    text = " ".join(cli("analyze", str(on)).stdout.split())
    line = text[text.index("q (all overlay-log steps):"):text.index("Worst steps")]
    for x in q[:2]:
        assert f"{x['rows']} × {x['vocab']} {x['dtype']} in {x['step_count']} steps" in line, line
    assert line.rstrip().endswith(f"+{len(q) - 2} more shape") and not re.search(r"\d ×\d", line)
