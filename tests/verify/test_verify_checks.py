"""The checks and verdict of verify on hand-made answers, the accuracy set, and its bad inputs (no server)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from expo_prof.errors import BadInput
from expo_prof.verify import accuracy, checks
from expo_prof.verify import run as vrun
from expo_prof.serving.client import ServerError
from expo_prof.verify.collect import new_side
from expo_prof.verify.spec import SamplingConfig, VerifySpec

EXPO_PROF = [str(Path(sys.executable).parent / "expo-prof")]
REPO = Path(__file__).resolve().parents[2]
SPEC = VerifySpec(prompts=("a", "b"), samples=400, positions=1,
                  configs=(SamplingConfig("T=1"), SamplingConfig("top-k 2", top_k=2)))
#: Position 1's reference: five tokens, probabilities 0.4 0.3 0.15 0.1 0.05.
REF = {str(i): math.log(p) for i, p in enumerate([0.4, 0.3, 0.15, 0.1, 0.05])}


def _side(label: str, *, greedy=([1, 2, 3], [4, 5, 6]), seeded=([7, 8], [7, 8], [7, 8]), draw=None, seed=0) -> dict:
    rng = np.random.default_rng(seed)
    s = new_side(label, "http://x")
    s.update(processed_logprobs=True, reference=REF, vocab_size=10, complete=True)
    s["greedy_alone"] = [list(g) for g in greedy]
    s["greedy_mixed"] = [list(g) for g in greedy]
    s["seeded"] = {"alone": [list(x) for x in seeded[:2]], "mixed": [list(x) for x in seeded[2:]]}
    probs = np.array([0.4, 0.3, 0.15, 0.1, 0.05])
    for cfg in SPEC.configs:
        if draw is not None:
            toks = draw(cfg, rng)
        elif cfg.top_k:
            toks = rng.choice(2, SPEC.samples, p=probs[:2] / probs[:2].sum())
        else:
            toks = rng.choice(5, SPEC.samples, p=probs)
        s["samples"][cfg.name] = {"tokens": [[int(t)] for t in toks], "logprobs": [[-1.0] for _ in toks]}
    return s


def _judge(off: dict, on: dict, device: str = "cpu") -> dict:
    result = vrun.new_result(SPEC, "urls", device, None)
    result["sides"] = {"off": off, "on": on}
    vrun.judge(result, SPEC)
    return result


def test_equal_sides_are_equivalent_with_a_stated_power():
    """GIVEN two sides drawn from the same distributions WHEN judged THEN exit 0 and the verdict names the TV."""
    r = _judge(_side("off", seed=1), _side("on", seed=2))
    assert r["verdict"]["exit_code"] == 0, r["verdict"]
    assert "total variation" in r["verdict"]["line"]
    assert r["checks"]["constraints"]["on"]["per_config"][1]["allowed_first"] == 2


def test_each_kind_of_difference_is_named():
    """GIVEN an on side with other greedy ids, an unrepeatable seed, top-k ignored, an out-of-vocab id and a NaN
    WHEN judged THEN exit 1 and every one is a line of the verdict."""
    def ignore_top_k(cfg, rng):
        return rng.choice(5, SPEC.samples, p=[0.4, 0.3, 0.15, 0.1, 0.05])

    on = _side("on", greedy=([1, 2, 3], [4, 9, 6]), seeded=([7, 8], [7, 1], [7, 8]), draw=ignore_top_k, seed=2)
    on["samples"]["T=1"]["tokens"][0] = [12]
    on["samples"]["T=1"]["logprobs"][1] = [float("nan")]
    r = _judge(_side("off", seed=1), on)
    v = r["verdict"]
    assert v["exit_code"] == 1 and v["verdict"] == "differs"
    heads = {d.split(":")[0] for d in v["differences"]}
    assert heads == {"greedy", "seeded", "sampling distribution", "constraints", "sanity"}
    assert r["checks"]["greedy"]["mismatches"][0]["first_diff"] == 1


def test_seeded_on_off_equality_is_judged_on_device_lanes_only():
    """GIVEN seeded tokens that repeat on each side but differ between off and on WHEN judged for cpu THEN ok
    (reported), for cuda THEN a difference."""
    off, on = _side("off", seeded=([1], [1], [1]), seed=1), _side("on", seeded=([2], [2], [2]), seed=2)
    assert _judge(off, on, "cpu")["checks"]["seeded"]["status"] == "ok"
    assert _judge(off, on, "cuda")["checks"]["seeded"]["status"] == "differs"


def test_a_failed_run_is_exit_3_and_keeps_what_was_collected(tmp_path):
    """GIVEN a run whose on side never came WHEN finished with the error THEN exit 3, status failed, verify.json
    written with the off side."""
    result = vrun.new_result(SPEC, "urls", "cpu", None)
    result["sides"]["off"] = _side("off")
    code = vrun.finish(result, SPEC, tmp_path, ServerError("http://x did not answer"))
    assert code == 3
    saved = json.loads((tmp_path / "verify.json").read_text())
    assert saved["status"] == "failed" and saved["sides"]["off"]["greedy_alone"] and saved["verdict"]["exit_code"] == 3


@pytest.mark.parametrize("cfg, expected", [
    (SamplingConfig("k", top_k=3), {0, 1, 2}),
    (SamplingConfig("p", top_p=0.65), {0, 1}),
    (SamplingConfig("m", min_p=0.3), {0, 1, 2}),
    (SamplingConfig("kp", top_k=2, top_p=0.5), {0}),
    (SamplingConfig("T", temperature=0.7, top_k=2), None),
])
def test_allowed_first_follows_vllms_order(cfg, expected):
    """GIVEN the reference 0.4 0.3 0.15 0.1 0.05 WHEN the allowed set is derived THEN min-p, top-k and top-p
    (renormalised over what is left) apply in vLLM's order; other temperatures are not derived."""
    assert checks.allowed_first(REF, cfg) == expected


def test_allowed_first_refuses_to_guess_past_the_known_tokens():
    """GIVEN only the top 3 of a flat distribution WHEN top-p 0.9 or top-k 5 is asked THEN None (not derivable)."""
    ref = {str(i): math.log(0.05) for i in range(3)}
    assert checks.allowed_first(ref, SamplingConfig("p", top_p=0.9)) is None
    assert checks.allowed_first(ref, SamplingConfig("k", top_k=5)) is None
    assert checks.allowed_first(ref, SamplingConfig("k", top_k=2)) == {0, 1, 2}  # ties at the boundary kept


def test_accuracy_scoring_and_the_math500_example():
    """GIVEN boxed and free-text answers WHEN scored THEN matched after normalisation; GIVEN Math-500's published
    84.90 → 85.36 on 500 questions (one run each) THEN the CI spans 0 and about a hundred runs would be needed."""
    assert accuracy.correct(r"so \boxed{42}.", ["42"]) and not accuracy.correct(r"\boxed{41} 42", ["42"])
    assert accuracy.correct("The capital is Paris.", ["paris"])
    ex = accuracy.math500_example()
    assert ex["ci_low"] == pytest.approx(-0.0398, abs=5e-4) and ex["ci_high"] == pytest.approx(0.0490, abs=5e-4)
    assert 150 < ex["runs_needed_per_side"] < 250
    per_item = accuracy.compare([1] * 424 + [0] * 76, [1] * 427 + [0] * 73)  # the same through per-item scores
    assert per_item["ci_low"] < 0 < per_item["ci_high"] and per_item["status"] == "ok"


@pytest.mark.parametrize("content, word", [
    ('{"question": "x", "answer": "y"}\n{"question": "x", "answer": "y"}\n', "'prompt'"),
    ('{"prompt": "x", "reference": 3}\n{"prompt": "x", "reference": "y"}\n', "'reference'"),
    ("not json\n", "not a JSON object"),
    ('{"prompt": "x", "reference": "y"}\n', "at least 2"),
])
def test_accuracy_file_with_wrong_fields_is_bad_input(tmp_path, content, word):
    """GIVEN an accuracy file with other fields / a bad line / one item WHEN loaded THEN BadInput naming it."""
    p = tmp_path / "a.jsonl"
    p.write_text(content)
    with pytest.raises(BadInput, match=word):
        accuracy.load(p)


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "120"}
    return subprocess.run([*EXPO_PROF, "verify", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def test_cli_bad_inputs_are_one_line_exit_2_and_unreachable_is_exit_3(tmp_path):
    """GIVEN a wrong accuracy file, one URL only, a URL without scheme, or no target WHEN verify runs THEN exit 2
    with one error line; GIVEN URLs where nothing listens THEN exit 3, one line; never a traceback, no
    session directory."""
    bad = tmp_path / "acc.jsonl"
    bad.write_text('{"question": "q", "answer": "a"}\n{"question": "q", "answer": "a"}\n')
    cases = [
        (["--accuracy", str(bad), "--off-url", "http://127.0.0.1:9", "--on-url", "http://127.0.0.1:9"], 2, "'prompt'"),
        (["--off-url", "http://127.0.0.1:9"], 2, "--on-url"),
        (["--off-url", "localhost:9", "--on-url", "localhost:9"], 2, "base URL"),
        ([], 2, "nothing to verify"),
        (["--samples", "1", "--off-url", "http://127.0.0.1:9", "--on-url", "http://127.0.0.1:9"], 2, "--samples"),
        (["--off-url", "http://127.0.0.1:9", "--on-url", "http://127.0.0.1:9"], 3, "nothing answers"),
    ]
    for args, code, word in cases:
        res = _cli(args, tmp_path)
        assert res.returncode == code, (args, res.stderr)
        errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
        assert len(errors) == 1 and word in errors[0], (args, res.stderr)
        assert "Traceback" not in res.stderr
    assert not (tmp_path / "traces").exists()


def test_json_schema_section_documents_every_key():
    """GIVEN a judged result WHEN its keys (top level, verdict, each check) are listed THEN each is a `key` in the
    verify section of docs/json-output.md, which names schema 1."""
    import re

    text = (REPO / "docs" / "json-output.md").read_text()
    section = text[text.index("# `expo-prof verify --json`"):]
    assert f"schema version {vrun.SCHEMA}" in section.splitlines()[0]
    documented = set(re.findall(r"`([a-z_0-9]+)`", section))
    r = _judge(_side("off", seed=1), _side("on", seed=2))
    r["accuracy"] = accuracy.compare([1, 0, 1, 1], [1, 1, 1, 0])
    keys = set(r) | set(r["verdict"]) | set(r["accuracy"]) | set(r["sides"]["on"])
    c = r["checks"]
    keys |= set(c) | set(c["greedy"]) | set(c["seeded"]) | set(c["distribution"]) | set(c["distribution"]["tests"][0])
    keys |= set(c["constraints"]["on"]) | set(c["constraints"]["on"]["per_config"][0]) | set(c["sanity"]["on"])
    assert not keys - documented


def test_json_is_strict_even_with_nan_logprobs(tmp_path):
    """GIVEN an on side holding a NaN and an inf logprob WHEN saved THEN verify.json is strict JSON (they become
    the strings "NaN" / "Infinity") and the sanity check counted both."""
    on = _side("on", seed=2)
    on["samples"]["T=1"]["logprobs"][0] = [float("nan")]
    on["samples"]["T=1"]["logprobs"][1] = [float("inf")]
    result = vrun.new_result(SPEC, "urls", "cpu", None)
    result["sides"] = {"off": _side("off", seed=1), "on": on}
    assert vrun.finish(result, SPEC, tmp_path) == 1
    text = (tmp_path / "verify.json").read_text()
    doc = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    assert doc["checks"]["sanity"]["on"]["nonfinite_logprobs"] == 2
    assert doc["sides"]["on"]["samples"]["T=1"]["logprobs"][0] == ["NaN"]
