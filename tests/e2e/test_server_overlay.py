"""End to end: the overlay inside a REAL vLLM CPU server serving a tiny model made offline.

The servers are the session's shared overlay-off / overlay-on pair (``off_on_session``,
tests/support/off_on.py: two starts for this module and verify's equivalence case together):

* overlay ON  — one wave of every request the tests look at, then (after verify's requests) the server is
  stopped as a user stops their own: SIGTERM, no --shutdown-timeout; its event log must still be complete;
* overlay OFF — the greedy requests again, for the on/off comparison.

GIVEN/WHEN live in the fixture, each test is a THEN over what it recorded.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from overlay.contract import EVENT_LOG_GLOB, EVENT_LOG_SCHEMA
from support.off_on import GREEDY_PROMPTS, N, Run

FALLBACK_REASONS = {
    "all_greedy",
    "all_seeded",
    "rows_mismatch",
    "vocab_mismatch",
    "dtype_mismatch",
    "device_mismatch",
    "not_consumed",
    "no_pending",
    "error",
}


@pytest.fixture(scope="module")
def overlay_on(off_on_session) -> Run:
    """GIVEN a real vLLM CPU server with the overlay ON and EXPO_PROF_OUT set,
    WHEN it serves: a mixed batch (sampled, top-k/top-p, top-k=1, seeded, greedy),
    the seeded request again alone, a greedy-only batch, then stops."""
    return off_on_session.on


@pytest.fixture(scope="module")
def overlay_off(off_on_session) -> Run:
    """GIVEN a server with the overlay OFF, WHEN it serves the same greedy-only batch, plus greedy for the
    prompt that ran greedy inside the overlay-on server's mixed batch."""
    return off_on_session.off


def _event_logs(out: Path) -> dict[Path, list[dict]]:
    logs = {}
    for path in sorted(out.glob(EVENT_LOG_GLOB)):
        lines = path.read_text().splitlines()
        logs[path] = [json.loads(line) for line in lines if line.strip()]
    return logs


def _steps(run: Run) -> list[dict]:
    return [o for objs in _event_logs(run.out_dir).values() for o in objs if o["type"] == "step"]


def _wave_steps(run: Run) -> list[dict]:
    """The steps of the fixture's waves (the server served verify's requests after them)."""
    lo, hi = run.window_ns
    return [s for s in _steps(run) if lo <= s["t0_ns"] <= hi]


# --------------------------------------------------------------------------- serving


def test_sampled_requests_are_served_with_overlay_on(overlay_on):
    """THEN every request got exactly N in-vocabulary tokens, and sampling at
    temperature 1 does not just reproduce greedy decoding."""
    vocab = json.loads((overlay_on.model / "config.json").read_text())["vocab_size"]
    for name, toks in overlay_on.answers.items():
        assert len(toks) == N == overlay_on.completion_tokens[name], name
        assert all(0 <= t < vocab for t in toks), (name, toks)
    # Same prompt as the greedy row of the same batch: random noise at T=1
    # must change at least one of N tokens (a random 652-token model has no
    # near-certain continuations at logit std 2.5).
    assert overlay_on.answers["seeded_a"] != overlay_on.answers["mixed_greedy"]


def test_seeded_request_repeats_with_overlay_on(overlay_on):
    """THEN the seeded request gave the same tokens in a mixed batch and alone."""
    assert overlay_on.answers["seeded_a"] == overlay_on.answers["seeded_b"]


def test_top_k_1_only_samples_the_argmax(overlay_on):
    """THEN with top_k=1 every other token has probability 0, so sampling at T=1
    through the overlay gives exactly the greedy tokens of the same prompt."""
    assert overlay_on.answers["topk1"] == overlay_on.answers["mixed_greedy"]


def test_greedy_tokens_equal_with_overlay_on_and_off(overlay_on, overlay_off):
    """THEN greedy requests give the same tokens with the overlay on and off,
    and a greedy row inside a mixed (sampled) batch stays greedy."""
    for i in range(len(GREEDY_PROMPTS)):
        assert overlay_on.answers[f"greedy{i}"] == overlay_off.answers[f"greedy{i}"], GREEDY_PROMPTS[i]
    # With the overlay on, PROMPTS[3] ran greedy inside a batch of sampled rows.
    assert overlay_on.answers["mixed_greedy"] == overlay_off.answers["mixed_greedy"]


def test_overlay_off_writes_no_event_log(overlay_off):
    """THEN with the switch off the plugin does nothing: no event log at all."""
    assert list(overlay_off.out_dir.glob(EVENT_LOG_GLOB)) == []


def test_server_leaves_no_process_behind(overlay_on):
    """THEN after stop every process of the server (API server, engine core,
    worker, trackers) is gone."""
    from expo_prof.serving.launch import live_processes

    assert overlay_on.pids, "no server process was ever seen"
    assert live_processes(overlay_on.pgid, overlay_on.pgid, overlay_on.pids) == set()


def test_lane_thread_is_not_confined_to_the_model_core(overlay_on):
    """GIVEN vLLM CPU pins its worker process to the OpenMP core(s) and
    reserves the rest (2 cores here: model on one, one reserved)
    THEN some thread of the worker — the overlay's lane — may run on a core
    outside the model thread's set; otherwise the draw only time-slices with
    the forward on one core and nothing is really hidden."""
    import os

    if len(os.sched_getaffinity(0)) < 2:
        pytest.fail("needs at least 2 CPUs to place the lane beside the model")
    assert overlay_on.worker_threads, "no vLLM worker process was seen"
    for pid, threads in overlay_on.worker_threads.items():
        model_cpus = threads[pid]  # the main thread runs the forward
        if model_cpus >= os.sched_getaffinity(0):
            continue  # worker not pinned: the lane is free to use any core
        outside = {tid: cpus for tid, cpus in threads.items() if cpus - model_cpus}
        assert outside, f"worker {pid}: every thread is confined to the model's CPUs {sorted(model_cpus)}"


# --------------------------------------------------------------------------- event log


def test_event_log_has_header_and_valid_steps(overlay_on):
    """THEN the overlay wrote one log per model-running process, each starting
    with a schema-1 CPU/thread header, with steps numbered 0,1,2,… and
    launched/used/fallback consistent on every step."""
    logs = _event_logs(overlay_on.out_dir)
    assert logs, f"no {EVENT_LOG_GLOB} in {overlay_on.out_dir}"
    for path, objs in logs.items():
        header = objs[0]
        assert header["type"] == "header", path
        assert header["schema"] == EVENT_LOG_SCHEMA
        assert header["backend"] == "cpu" and header["lane"] == "thread"
        assert sum(o["type"] == "header" for o in objs) == 1
        steps = [o for o in objs if o["type"] == "step"]
        assert [s["step"] for s in steps] == list(range(len(steps))), f"{path}: step counter not contiguous from 0"
        for s in steps:
            assert s["fallback"] is None or s["fallback"] in FALLBACK_REASONS, s
            if s["used"]:
                # used ⇒ it was launched, sized for a real batch, and no fallback
                assert s["launched"] and s["fallback"] is None and s["rows"] >= 1 and s["vocab"] > 0, s
                assert s["timing"] == "host" and s["exp"] and s["fwd"] and s["wait"] is not None, s
            elif s["launched"]:
                # launched but not used ⇒ a reason says why
                assert s["fallback"] in FALLBACK_REASONS, s
            else:
                # nothing launched ⇒ either a reason, or nothing needed sampling
                assert s["fallback"] in FALLBACK_REASONS or s["rows"] == 0, s


def test_every_sampling_step_is_accounted_for(overlay_on):
    """THEN the steps match what the server did:
    * each token of a non-seeded sampled request came from a step that used
      the side-lane q, so used steps cover them (Σ rows ≥ those tokens) and
      there are at least N of them (one request's tokens are N distinct steps);
    * the greedy-only wave ran ≥ N all-greedy steps that launched nothing;
    * the waves ran one after another, each ≥ N steps, and no step produced
      nothing: N·waves ≤ steps ≤ all tokens + one spare step per request
    (the steps inside the waves' window: the shared server served verify's requests after them)."""
    steps = _wave_steps(overlay_on)
    assert len(steps) < len(_steps(overlay_on))  # the window really leaves verify's steps out
    used = [s for s in steps if s["used"]]
    sampled_tokens = sum(overlay_on.completion_tokens[k] for k in ("sampled0", "sampled1", "topkp", "topk1"))
    assert sum(s["rows"] for s in used) >= sampled_tokens
    assert len(used) >= N
    all_greedy = [s for s in steps if s["fallback"] == "all_greedy"]
    assert len(all_greedy) >= N and not any(s["launched"] for s in all_greedy)
    total_tokens = sum(overlay_on.completion_tokens.values())
    assert N * overlay_on.waves <= len(steps) <= total_tokens + len(overlay_on.completion_tokens)


def test_summary_line_matches_the_steps(overlay_on):
    """THEN each log ends with a summary whose counts equal the counts recomputed from its step lines —
    though the server was stopped as a user stops their own (SIGTERM, no --shutdown-timeout: see the next test)."""
    for path, objs in _event_logs(overlay_on.out_dir).items():
        assert objs[-1]["type"] == "summary", f"{path}: no summary line after SIGTERM"
        steps = [o for o in objs if o["type"] == "step"]
        summary = objs[-1]
        assert summary["steps"] == len(steps)
        assert summary["launched"] == sum(s["launched"] for s in steps)
        assert summary["used"] == sum(s["used"] for s in steps)
        fallbacks: dict[str, int] = {}
        for s in steps:
            if s["fallback"]:
                fallbacks[s["fallback"]] = fallbacks.get(s["fallback"], 0) + 1
        assert summary["fallbacks"] == fallbacks


def test_sigterm_without_shutdown_timeout_keeps_the_summary(overlay_on):
    """GIVEN the overlay-on server started as a user starts it — no --shutdown-timeout (vLLM's default 0 makes
    the API server SIGTERM the engine and SIGKILL it at once, so the overlay's exit code never runs) — having
    served sampled requests WHEN it is stopped with SIGTERM to its API server (kill PID, systemd, docker stop)
    THEN every event log with step lines ends with a summary line counting them, record's check finds nothing
    missing, and `analyze` reads the counts from it with no "no summary line" warning (issue 33, item 7)."""
    import subprocess
    import sys

    from expo_prof.readers.overlay_log import NO_SUMMARY, missing_summary

    assert overlay_on.argv and "--shutdown-timeout" not in overlay_on.argv
    stepped = {p: objs for p, objs in _event_logs(overlay_on.out_dir).items() if any(o["type"] == "step" for o in objs)}
    assert stepped, overlay_on.stop_log[-2000:]
    for path, objs in stepped.items():
        assert objs[-1]["type"] == "summary", (path.name, objs[-1], overlay_on.stop_log[-2000:])
        assert objs[-1]["steps"] == sum(o["type"] == "step" for o in objs) >= N
        assert missing_summary(path) is None
    res = subprocess.run([sys.executable, "-m", "expo_prof", "analyze", str(overlay_on.out_dir), "--json"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert not [w for w in json.loads(res.stdout)["warnings"] if NO_SUMMARY in w]


def test_windows_are_ordered_and_the_wait_follows_the_forward(overlay_on):
    """THEN on the host-timed CPU lane every window is well-formed, the draw
    starts after the step launched, and the sampler's wait starts after the
    forward pass ended (it consumes q once the logits exist)."""
    for s in _steps(overlay_on):
        if not s["used"]:
            continue
        for key in ("fwd", "exp", "wait"):
            a, b = s[key]
            assert 0 <= a <= b, (key, s)
        assert s["wait"][0] >= s["fwd"][1], s
