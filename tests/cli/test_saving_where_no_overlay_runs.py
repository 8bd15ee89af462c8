"""Issue 32, item 2: an honest saving line where no overlay can run.

GIVEN a trace whose sampler draws its noise inside its own kernel — vLLM Model Runner V2's
``_gumbel_sample_kernel``, FlashInfer's sampling kernels (GENERATED / FAKE Kineto traces from
tests/support/fused_sampling.py with the real kernel names and figures set by construction: no GPU and no
CUDA vLLM exist here to record one), or vLLM CPU's fused op (the real vLLM 0.32 CPU traces of
../shared/realtraces/vllm-cpu)
WHEN analyze, report and timeline run on it
THEN the saving line says that no switchback exists on MRV2 / FlashInfer and gives the sampling kernel's time
on the critical path per step, its share of the step and that it bounds what any async draw could save; it
suggests switchback only where the overlay can run (vLLM CPU's V1 fused op); and the JSON (``recordings[].bound``),
the tables' line and the report's data say the same figures.

Issue 43, item 3: vllm-ascend's opt-in Model Runner V2 (0.28.0rc1 on) samples with ``categorical_sample`` (two
Triton kernels, one uniform per row, no noise over the vocabulary; GENERATED / FAKE trace with its real kernel
names): the line says no async draw can save anything and gives the kernels' time as a sampling cost, the JSON
says ``noise`` false, and the report's cards show no saving bound and no tok/s bound.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from expo_prof.cli.main import main
from expo_prof.pipeline.result import NOT_MEASURED
from expo_prof.words import fmt_ns
from support.fused_sampling import (Built, ascend_v2_categorical_trace, ascend_v2_mixed_trace, flashinfer_trace,
                                    mixed_trace, mrv2_trace)

REPO = Path(__file__).resolve().parents[2]
ADVICE = "--overlay switchback"


def flat(text: str) -> str:
    """The terminal wraps long lines: compare with whitespace collapsed."""
    return " ".join(text.split())


def analyze(capsys, *args) -> tuple[int, str]:
    with pytest.raises(SystemExit) as ei:
        main(["analyze", *map(str, args)])
    out, err = capsys.readouterr()
    assert ei.value.code == 0, err
    return ei.value.code, out


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "expo_prof", *args], capture_output=True, text=True, timeout=300,
                          cwd=REPO, env={"COLUMNS": "120", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})


BUILDERS = {
    "mrv2": (mrv2_trace, ["_gumbel_sample_kernel", "Model Runner V2"]),
    "flashinfer": (flashinfer_trace, ["FlashInfer"]),
    "mrv2+flashinfer": (mixed_trace, ["_gumbel_sample_kernel", "FlashInfer"]),
    # vllm-ascend's Ascend Triton Gumbel kernel beside its categorical kernels: still a bound (a looser one)
    "ascend-gumbel+categorical": (ascend_v2_mixed_trace, ["_gumbel_sample_kernel", "categorical_sample",
                                                          "a looser bound"]),
}


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_no_switchback_engine_gets_the_kernels_bound(capsys, tmp_path, kind):
    # GIVEN a FAKE trace of a sampler that draws its own noise (figures set by construction)
    make, named = BUILDERS[kind]
    built: Built = make(tmp_path / kind)
    # WHEN analysed, as tables and as JSON
    _, text = analyze(capsys, built.path)
    _, out = analyze(capsys, built.path, "--json")
    doc = json.loads(out)
    entry = doc["recordings"][0]
    line = entry["saving_line"]
    # THEN the line says no switchback exists on this engine, names the engine's kernel, and never advises it
    assert line.startswith("saving: no switchback on this engine — "), line
    assert all(n in line for n in named), line
    assert ADVICE not in line and ADVICE not in text
    # AND it gives the kernel's critical-path time per step and its share of the step, as built
    assert f"holds the critical path {fmt_ns(built.critical_ns)}/step ({100 * built.share:.1f} % of the step)" in line
    assert "the most any async draw could save" in line and "the noise is only part of that kernel" in line
    # AND the JSON states the same figures (recordings[].bound), exact
    b = entry["bound"]
    assert b["switchback"] is False and b["what"] == "kernel" and b["noise"] is True
    assert b["critical_ns"] == pytest.approx(built.critical_ns, abs=1e-6)
    assert b["own_ns"] == pytest.approx(built.step_ns, abs=1e-6)
    assert b["share"] == pytest.approx(built.share, rel=1e-12)
    # AND the bound is the headline's critical path per step (one figure everywhere)
    assert f"critical path {fmt_ns(built.critical_ns)}/step" in entry["headline"]
    # AND the tables end with that very line
    assert flat(line) in flat(text)


def test_every_command_says_the_same_bound_line(tmp_path):
    # GIVEN the FAKE MRV2 trace
    built = mrv2_trace(tmp_path / "mrv2")
    # WHEN analyze --json, analyze, report and timeline run on it
    doc = json.loads(cli("analyze", str(built.path), "--json").stdout)
    line = doc["recordings"][0]["saving_line"]
    page = tmp_path / "r.html"
    outs = {"analyze": cli("analyze", str(built.path)),
            "report": cli("report", str(built.path), "-o", str(page)),
            "timeline": cli("timeline", str(built.path), "-o", str(tmp_path / "t.html"))}
    # THEN each prints the same line, and none advises switchback
    for name, proc in outs.items():
        assert proc.returncode == 0, (name, proc.stderr)
        assert flat(line) in flat(proc.stdout), (name, proc.stdout)
        assert ADVICE not in proc.stdout, name
    # AND the report's data carries the same line and the same bound (what its "saved per step" card shows)
    from expo_prof.html.build import report_document

    (run,) = report_document([built.path]).payload["recordings"]
    assert run["saving_line"] == line and run["bound"] == doc["recordings"][0]["bound"]
    # AND the report's step time and tok/s bound are the bound's step time and share
    assert run["headline"]["own_ns"] == doc["recordings"][0]["bound"]["own_ns"]
    assert run["headline"]["critical_share"] == pytest.approx(doc["recordings"][0]["bound"]["share"], rel=1e-12)


def test_cpu_v1_fused_op_keeps_switchback_and_states_the_bound(capsys, realtraces):
    # GIVEN the real vLLM 0.32 CPU trace of default sampling: V1's forward_cpu runs _C::fused_gumbel_argmax (its
    # stack shows vllm/v1/worker/gpu_model_runner.py), a path the overlay replaces, so switchback can run there
    path = realtraces / "vllm-cpu" / "rank0-default-with-stack.pt.trace.json.gz"
    raw = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    ops = [e for e in raw if e.get("name") == "_C::fused_gumbel_argmax" and e.get("ph") == "X"]
    assert any("vllm/v1/worker/gpu_model_runner.py" in str(e.get("name")) for e in raw)
    # WHEN analysed
    _, out = analyze(capsys, path, "--json")
    entry = json.loads(out)["recordings"][0]
    line, b = entry["saving_line"], entry["bound"]
    # THEN the line still names the command that measures the saving, and states the op's bound
    assert ADVICE in line and "no switchback on this engine" not in line
    assert b["rule"] == "cpu-fused-gumbel" and b["switchback"] is True and b["what"] == "op"
    # AND the bound is the ops' own time per step, from the file (one op per step, nothing beside it on the
    # model's thread, so all of it is on the critical path)
    steps = json.loads(out)["summary"]["rank_steps"]
    assert len(ops) == steps == 24
    assert b["critical_ns"] == pytest.approx(sum(round(e["dur"] * 1000) for e in ops) / steps, abs=1)
    assert 0 < b["share"] < 1 and b["share"] == pytest.approx(b["critical_ns"] / b["own_ns"], rel=1e-12)
    assert f"holds the critical path {fmt_ns(b['critical_ns'])}/step ({100 * b['share']:.1f} % of the step)" in line
    _, text = analyze(capsys, path)
    assert flat(line) in flat(text)


def test_exponential_draw_keeps_the_plain_advice(capsys, realtraces):
    # GIVEN the real vLLM 0.32 CPU trace run with --use-fp64-gumbel: V1's random_sample draws aten::exponential_
    path = realtraces / "vllm-cpu" / "rank0-fp64-gumbel.pt.trace.json.gz"
    _, out = analyze(capsys, path, "--json")
    entry = json.loads(out)["recordings"][0]
    # THEN there is no fused kernel to bound: the line is the plain "not measured" with the switchback command
    assert entry["bound"] is None and entry["saving_line"] == NOT_MEASURED
    assert re.search(r"aten::exponential_", json.dumps(json.loads(out)["ranks"][0]["names"]))


def test_categorical_sampler_says_nothing_can_be_saved_and_its_cost(capsys, tmp_path):
    # GIVEN the FAKE vllm-ascend Model Runner V2 trace: per 1 ms step, _categorical_prepare_mass_kernel 35 µs (10 µs
    # of it under another stream) then _categorical_sample_kernel 15 µs: 40 µs on the critical path, 4.0 % of the step
    built = ascend_v2_categorical_trace(tmp_path / "ascend")
    assert (built.critical_ns, built.share) == (40_000.0, 0.04)
    # WHEN analysed, as tables and as JSON
    _, text = analyze(capsys, built.path)
    _, out = analyze(capsys, built.path, "--json")
    doc = json.loads(out)
    entry = doc["recordings"][0]
    # THEN both kernels of every step are instances of the new rule
    assert doc["summary"]["instances"] == 2 * built.steps and doc["ranks"][0]["rule"] == "ascend-v2-categorical"
    # AND the line says there is nothing for an async draw to save, and the sampling cost as built — no bound
    line = entry["saving_line"]
    assert line == (
        "saving: no switchback on this engine — vllm-ascend's Model Runner V2 samples with categorical_sample "
        "(_categorical_prepare_mass_kernel, _categorical_sample_kernel): one uniform per row, no noise over the "
        "vocabulary, so no async draw can save anything; sampling costs 40.0 µs/step on the critical path (4.0 % of "
        "the step) — vllm-ascend's default Model Runner V1 (VLLM_USE_V2_MODEL_RUNNER unset) draws the exponential "
        "noise in random_sample and is where the overlay runs: measure the saving there")
    assert "could save" not in line and ADVICE not in line and ADVICE not in text
    assert flat(line) in flat(text)
    # AND recordings[].bound carries the same figures, marked as drawing no noise
    b = entry["bound"]
    assert b["rule"] == "ascend-v2-categorical" and b["noise"] is False and b["switchback"] is False
    assert b["critical_ns"] == pytest.approx(built.critical_ns, abs=1e-6)
    assert b["share"] == pytest.approx(built.share, rel=1e-12)


def test_categorical_report_data_has_no_saving_or_tok_s_bound(tmp_path):
    # GIVEN the FAKE vllm-ascend Model Runner V2 trace
    built = ascend_v2_categorical_trace(tmp_path / "ascend")
    from expo_prof.html.build import report_document

    # WHEN the report's data is built
    (run,) = report_document([built.path]).payload["recordings"]
    # THEN it carries the bound marked noise-free (what the card reads to say "none possible") and the saving line
    assert run["bound"]["noise"] is False and "so no async draw can save anything" in run["saving_line"]
    # AND no tok/s gain is offered (nothing can leave the step), while the cost per step stays the headline's
    h = run["headline"]
    assert h["critical_share"] is None and "tok_s_if_hidden" not in h
    assert h["critical_per_step_ns"] == pytest.approx(built.critical_ns, abs=1e-6)
    assert h["own_ns"] == pytest.approx(built.step_ns, abs=1e-6)
