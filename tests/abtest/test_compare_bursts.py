"""compare with tokens that arrive in bursts: the flag, the ITL rows it withdraws as speed-ups, and where it shows.

GIVEN two sides of real inputs — ``vllm bench serve --save-detailed`` result files (their ``itls``) and run
directories whose ``workload.json`` is the built-in load's (``requests[].itl_s``) — where side B's tokens come in
bursts of ten (nine gaps of 10 µs, then one long wait) at the same mean gap, so the same tok/s, as side A's even
10 ms gaps, WHEN compared THEN the "tokens arrive in bursts" flag fires on B, ITL p50 (−99.9 %) is no improvement in
the JSON, the terminal and the HTML section, and its caveat is no speed-up; a pair that is really faster in every
gap is not flagged; inputs that keep no gaps (old workload.json, tables) compare as before with the check
silently not measurable.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from ab_helpers import bench_result, metric, ok_json, run_dir  # type: ignore[import-not-found]
from rich.console import Console

from expo_prof.abtest.inputs.loader import load
from expo_prof.abtest.judging.judge import compare
from expo_prof.abtest.model import BURSTS, KEEP_OFF
from expo_prof.abtest.reporters import html_section, tables

REQUESTS, GAPS = 4, 50  # per run: 4 requests of 51 tokens → 50 gaps each
SAMPLE = Path(__file__).resolve().parents[2] / "traces" / "samples" / "tiny-cpu-off-on"


def smooth(mean_ms: float) -> list[list[float]]:
    """Every gap ``mean_ms`` (seconds out, as the loads keep them)."""
    return [[mean_ms / 1e3] * GAPS for _ in range(REQUESTS)]


def bursty(mean_ms: float) -> list[list[float]]:
    """Bursts of ten: nine gaps of 10 µs, then the rest of ten gaps' time at once — the mean gap is ``mean_ms``."""
    burst = [0.01] * 9 + [10 * mean_ms - 0.09]
    return [[g / 1e3 for g in burst * (GAPS // 10)] for _ in range(REQUESTS)]


def itl_metrics(itls: list[list[float]]) -> dict[str, float]:
    """The summary vllm bench serve writes beside its itls (ms; numpy's percentiles, as vLLM computes them)."""
    g = np.array([x for r in itls for x in r]) * 1e3
    return {"mean_itl_ms": float(g.mean()), "median_itl_ms": float(np.median(g)),
            "p99_itl_ms": float(np.percentile(g, 99))}


def result_file(path: Path, tput: float, itls: list[list[float]]) -> Path:
    return bench_result(path, output_throughput=tput, output_len=GAPS + 1, completed=REQUESTS, itls=itls,
                        **itl_metrics(itls))


MEANS = (10.0, 10.1, 9.9)  # each run's mean gap (ms), alike on both sides: the same tok/s


def _sides(tmp_path: Path, b_gaps, b_tput=(1001.0, 1009.0, 992.0)) -> tuple[list[Path], list[Path]]:
    a = [result_file(tmp_path / f"off{i}.json", t, smooth(m)) for i, (t, m) in enumerate(zip((1000.0, 1010.0, 990.0), MEANS))]
    b = [result_file(tmp_path / f"on{i}.json", t, b_gaps(m)) for i, (t, m) in enumerate(zip(b_tput, MEANS))]
    return a, b


def _render(result, *, all_metrics: bool = False) -> str:
    buf = io.StringIO()
    tables.render(result, Console(file=buf, width=220, force_terminal=True, color_system="standard"),
                  all_metrics=all_metrics)
    return buf.getvalue()


def _row(text: str, label: str) -> str:
    return next(ln for ln in text.splitlines() if label in ln and "%" in ln)


def test_bursty_side_is_flagged_and_itl_p50_is_no_improvement(tmp_path, cli):
    a, b = _sides(tmp_path, bursty)
    args = ["compare", *(x for p in a for x in ("-a", str(p))), *(x for p in b for x in ("-b", str(p)))]
    out = ok_json(cli(*args, "--json"))
    # THEN the flag is in the JSON: side B, both rules, the two rows it withdraws
    ta = out["mechanism"]["token_arrival"]
    assert ta["measured"] is True and ta["bursts"] is True and ta["bursty_side"] == "on"
    assert len(ta["reasons"]) == 2 and ta["metrics"] == ["median_itl_ms", "mean_itl_ms"]
    assert "not a speed-up" in ta["statement"]
    # AND each side's shape is its construction: 3 runs × 4 requests × 50 gaps; B: 9 in 10 gaps of 10 µs (under
    # 5 % of its ~10 ms mean), its longest gap the wait of run 2's bursts (10 × 10.1 ms − 0.09 ms); A: none near 0
    assert ta["a"]["gaps"] == ta["b"]["gaps"] == 3 * REQUESTS * GAPS
    assert ta["a"]["near_zero_share"] == 0.0 and ta["b"]["near_zero_share"] == pytest.approx(0.9)
    assert ta["b"]["p50_ms"] == pytest.approx(0.01) and ta["b"]["max_ms"] == pytest.approx(101.0 - 0.09)
    assert ta["a"]["mean_ms"] == pytest.approx(ta["b"]["mean_ms"]) == pytest.approx(np.mean(MEANS))
    # AND ITL p50 fell 99.9 % and is significant, but is not called better: its outcome is the flag
    p50 = metric(out, "median_itl_ms")
    assert p50["change_pct"] == pytest.approx(100 * (0.01 - np.mean(MEANS)) / np.mean(MEANS))
    assert p50["significant"] is True and p50["outcome"] == BURSTS
    assert any("not a speed-up" in n for n in p50["notes"])
    # AND ITL mean (equal by construction) keeps its outcome, with the note; p99 (a real wait) is still worse
    assert metric(out, "mean_itl_ms")["outcome"] == "no significant difference"
    assert any("not a speed-up" in n for n in metric(out, "mean_itl_ms")["notes"])
    assert metric(out, "p99_itl_ms")["outcome"] == "worse"
    # AND no ITL row is called better
    assert [m["outcome"] for m in out["metrics"] if "itl" in m["name"] and m["outcome"] == "better"] == []
    # AND the terminal shows the ITL p50 row (not a main metric: the flag names it), yellow, not green, and the flag
    loaded = load(a, b)
    result = compare(loaded)
    text = _render(result)
    row = _row(text, "ITL p50")
    assert BURSTS in row and "better" not in row and "\x1b[32m" not in row and "\x1b[33m" in row
    assert "flag: tokens arrive in bursts" in text and "how tokens arrive" in text
    # AND the HTML section: the row's class is 'unsure', never 'good', and the flag with the arrival table
    page = html_section.section_html(result)
    html_row = page[page.index("<tr><td>ITL p50 (ms)</td>"):]
    html_row = html_row[:html_row.index("</tr>")]
    assert f"<td class='unsure'>{BURSTS}</td>" in html_row and "class='good'" not in html_row
    assert "<b>flag: tokens arrive in bursts</b>" in page and "table class='ab arrival'" in page


def test_keep_off_caveat_does_not_call_bursty_itl_better(tmp_path):
    """GIVEN B bursty and its output tok/s 10 % lower (keep off) THEN the verdict's caveat about ITL p50 (which
    verdict_of words "significantly better" for a metric going the other way) says the change and that it is no
    speed-up; and with --primary median_itl_ms the verdict carries the flag as a caveat."""
    a, b = _sides(tmp_path, bursty, b_tput=(900.0, 905.0, 895.0))
    result = compare(load(a, b))
    assert result.verdict.decision == KEEP_OFF
    assert not any("ITL p50 is significantly better" in c for c in result.verdict.caveats)
    caveat = next(c for c in result.verdict.caveats if c.startswith("ITL p50"))
    assert "not a speed-up" in caveat and "-99.9" in caveat
    primary = compare(load(a, b), primary="median_itl_ms")
    assert any(c.startswith("ITL p50: tokens arrive in bursts on the on side") for c in primary.verdict.caveats)


def test_real_speedup_in_every_gap_is_not_flagged(tmp_path, cli):
    """GIVEN B smooth and 10 % faster in every gap (9.0, 9.09, 8.91 ms) THEN measured, no flag, ITL p50 better (a
    real speed-up), and the terminal prints neither the flag nor, without --all-metrics, the arrival table."""
    a, b = _sides(tmp_path, lambda m: smooth(0.9 * m))
    result = compare(load(a, b))
    ta = result.mechanism.token_arrival
    assert ta is not None and ta.measured and ta.bursts is False and ta.metrics == []
    by = {r.name: r for r in result.metrics}
    assert by["median_itl_ms"].outcome == "better" and not any("speed-up" in n for n in by["median_itl_ms"].notes)
    text = _render(result)
    assert "flag:" not in text and "how tokens arrive" not in text and "ITL p50" not in text
    assert "how tokens arrive" in _render(result, all_metrics=True)
    assert "<b>flag:" not in html_section.section_html(result)


def _old_run_dirs(tmp_path: Path, *, with_requests_key: bool) -> tuple[Path, Path]:
    """An off and an on run directory whose workload.json keeps no gaps: `requests: []` (a run without per-request
    records) or no `requests` key at all (an older file)."""
    dirs = []
    for name, overlay, tput in (("01-off", False, 1000.0), ("02-on", True, 1050.0)):
        d = run_dir(tmp_path / name, overlay=overlay,
                    metrics={"output_throughput": tput, "median_itl_ms": 10.0 if overlay else 11.0})
        if not with_requests_key:
            wl = json.loads((d / "workload.json").read_text())
            del wl["requests"]
            (d / "workload.json").write_text(json.dumps(wl))
        dirs.append(d)
    return dirs[0], dirs[1]


@pytest.mark.parametrize("with_requests_key", [True, False])
def test_old_workload_json_still_compares(tmp_path, cli, with_requests_key):
    """GIVEN run directories whose workload.json keeps no gaps THEN compare works as before; the check is not
    measurable, and says nothing on the terminal."""
    off, on = _old_run_dirs(tmp_path, with_requests_key=with_requests_key)
    out = ok_json(cli("compare", str(off), str(on), "--json"))
    ta = out["mechanism"]["token_arrival"]
    assert ta["measured"] is False and ta["bursts"] is None and ta["a"] is None and ta["b"] is None
    assert metric(out, "output_throughput")["change_pct"] == pytest.approx(5.0)
    assert metric(out, "median_itl_ms")["outcome"] == "not testable"  # one run per side, as before
    text = cli("compare", str(off), str(on), "--all-metrics").stdout
    assert "how tokens arrive" not in text and "flag:" not in text and "not measurable" not in text


def _workload(spec_requests: list[tuple[bool, bool, list[float]]]) -> dict:
    """A built-in load's workload.json with the given (ok, warm-up, gaps) requests (expo_prof/serving/load.py)."""
    return {"spec": {"num_prompts": 48, "input_len": 1536, "output_len": 2048, "range_ratio": 0.0,
                     "request_rate": "inf", "max_concurrency": None, "temperature": 1.0},
            "metrics": {}, "notes": [], "window_ns": None,
            "requests": [{"ok": ok, "prompt_len": 1536, "output_tokens": len(g) + 1, "ttft_s": 0.1,
                          "latency_s": 0.1 + sum(g), "start_s": 0.0, "itl_s": g, "error": "", "warmup": warm}
                         for ok, warm, g in spec_requests]}


def test_session_of_run_dirs_with_bursty_on_runs(tmp_path, cli):
    """GIVEN an ab session (3 off/on pairs) whose workload.json files are the built-in load's, the on runs' gaps in
    bursts, each run with a slow warm-up request (gaps of 1 s: left out) THEN the paired compare flags the on side
    and its ITL p50 is no improvement."""
    from ab_helpers import session_dir  # type: ignore[import-not-found]

    runs = []
    for i, m in enumerate(MEANS):
        for overlay, gaps_of in ((False, smooth), (True, bursty)):
            itls = gaps_of(m)
            metrics = {"output_throughput": 1000.0 + 5 * i + overlay, **itl_metrics(itls)}
            runs.append((overlay, metrics, None))
    s = session_dir(tmp_path / "s", runs)
    for k, d in enumerate(sorted(p for p in s.iterdir() if p.is_dir())):
        itls = (bursty if d.name.endswith("on") else smooth)(MEANS[k // 2])
        wl = _workload([(True, True, [1.0] * GAPS)] + [(True, False, g) for g in itls])
        wl["metrics"] = json.loads((d / "workload.json").read_text())["metrics"]
        (d / "workload.json").write_text(json.dumps(wl))
    out = ok_json(cli("compare", str(s), "--json"))
    assert out["design"]["paired"] is True
    ta = out["mechanism"]["token_arrival"]
    assert ta["bursts"] is True and ta["bursty_side"] == "on"
    assert ta["a"]["gaps"] == ta["b"]["gaps"] == 3 * REQUESTS * GAPS  # the warm-up's gaps left out
    assert ta["a"]["max_ms"] == pytest.approx(max(MEANS))  # no 1 s warm-up gap among them
    assert metric(out, "median_itl_ms")["outcome"] == BURSTS


def test_load_cmd_run_reads_the_saved_bench_result(tmp_path):
    """GIVEN a run driven by the user's load command (`record --load-cmd`): its workload.json names the vllm bench
    serve result it left in load/ (kept with --save-detailed), or a path whose file is not in load/ THEN the gaps
    come from that result's itls, and from nowhere else."""
    from expo_prof.abtest.inputs.run_dirs import run_gaps

    d = tmp_path / "run"
    (d / "load").mkdir(parents=True)
    bench_result(d / "load" / "r.json", output_throughput=1.0, itls=[[0.01, 0.02], [0.03]])
    wl = {"source": "load-cmd", "result_file": str(d / "load" / "r.json"), "spec": None, "metrics": {}}
    assert run_gaps(d, wl).tolist() == [0.01, 0.02, 0.03]
    outside = tmp_path / "elsewhere.json"
    bench_result(outside, output_throughput=1.0, itls=[[0.5]])
    assert run_gaps(d, {**wl, "result_file": str(outside)}) is None
    assert run_gaps(d, {**wl, "result_file": None}) is None


def test_committed_real_off_on_runs_are_not_flagged():
    """GIVEN the committed real off/on runs of the vLLM CPU server (traces/samples/tiny-cpu-off-on), whose off run
    has some gaps near zero and its on run none — computed here from their workload.json with json and numpy —
    THEN the difference (about 10 points) stays under the 25-point rule, the ITL rows tell the (real) slowdown, and
    the near-zero shares are those computed."""
    shares = {}
    for name in ("01-off", "02-on"):
        wl = json.loads((SAMPLE / name / "workload.json").read_text())
        g = np.array([x for r in wl["requests"] if r["ok"] and not r["warmup"] for x in r["itl_s"]])
        shares[name] = float(np.count_nonzero(g < 0.05 * g.mean())) / len(g)
    assert shares["01-off"] > 0.05 and shares["02-on"] == 0.0  # the data is what the docstring says
    ta = compare(load([SAMPLE], [])).mechanism.token_arrival
    assert ta is not None and ta.measured and ta.bursts is False
    assert ta.a is not None and ta.b is not None
    assert (ta.a.near_zero_share, ta.b.near_zero_share) == pytest.approx((shares["01-off"], shares["02-on"]))
