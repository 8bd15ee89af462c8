"""The overlay's rarely taken paths: a draw that fails on the lane thread, and a forked worker process.

GIVEN the real CPU lane and vLLM 0.32's own ``random_sample``, WHEN the lane's
draw fails or the process forks, THEN the step falls back inline (counted, one
notice) or the child gets a lane of its own, and tokens keep coming.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from eventlog_schema import check_lines, read_log  # type: ignore[import-not-found]
from overlay.events import EventLog
from overlay.lanes import CpuThreadLane
from overlay.sampler import Overlay, overlay_random_sample

#: Test data drawn from its own generator: probs made after a launch must not move vLLM's
#: default generator, which the overlay's q is forked from (overlay/rng.py).
TEST_RNG = torch.Generator().manual_seed(0)

VOCAB = 32


def _overlay(out: Path) -> Overlay:
    return Overlay(EventLog(str(out)), lane_factory=lambda device, instrument: CpuThreadLane(seed=1))


def _probs(rows: int):
    return torch.softmax(torch.randn(rows, VOCAB, generator=TEST_RNG), dim=-1)


def _step(ov: Overlay, rows: int = 4):
    step = ov.begin_step(rows=rows, vocab=VOCAB, dtype=torch.float32, device="cpu", all_greedy=False, seeded_rows=0)
    ov.end_forward(step)
    return step


def test_draw_failing_on_the_lane_thread_falls_back_at_wait(tmp_path, vllm_random_sample, warnings_of_overlay):
    # GIVEN a CPU lane whose worker-side draw raises (its generator is not a generator)
    ov = _overlay(tmp_path)
    _step(ov)
    assert overlay_random_sample(_probs(4), {}, False, inline=vllm_random_sample, overlay=ov).shape == (4,)
    fork = ov.draws.fork
    ov.draws.fork = lambda device: SimpleNamespace(generator="not a generator", commit=fork(device).commit)
    for _ in range(2):
        # WHEN the launch succeeds but the draw fails on the lane thread, and the sampler waits for it
        step = _step(ov)
        assert step.launched
        tokens = overlay_random_sample(_probs(4), {}, False, inline=vllm_random_sample, overlay=ov)
        # THEN the sampler still returns tokens (vLLM's inline draw)
        assert tokens.shape == (4,) and int(tokens.max()) < VOCAB
    ov.shutdown()
    # AND both steps are counted as `error`, with one notice and one warning naming the failure
    _, lines = read_log(tmp_path)
    assert [s["fallback"] for s in lines["step"]] == [None, "error", "error"]
    assert [s["used"] for s in lines["step"]] == [True, False, False]
    assert [n["code"] for n in lines["notice"]] == ["lane_error"]
    assert "exponential draw failed" in lines["notice"][0]["message"]
    assert sum(r.levelname == "WARNING" for r in warnings_of_overlay) == 1


_FORK_SCRIPT = r"""
import json, os, sys, time
import torch
DATA_RNG = torch.Generator().manual_seed(0)  # test data: never vLLM's generator
torch.set_num_threads(1)  # libgomp cannot run a parallel region in a child forked after one: not our subject
from overlay.events import EventLog
from overlay.lanes import CpuThreadLane
from overlay.sampler import Overlay, overlay_random_sample


def inline(probs, generators, fp64):
    return probs.div(torch.empty_like(probs).exponential_()).argmax(dim=-1)

ov = Overlay(EventLog(sys.argv[1]), lane_factory=lambda device, instrument: CpuThreadLane(seed=1))
def step():
    s = ov.begin_step(rows=4, vocab=32, dtype=torch.float32, device="cpu", all_greedy=False, seeded_rows=0)
    ov.end_forward(s)
def probs():
    return torch.softmax(torch.randn(4, 32, generator=DATA_RNG), dim=-1)

step()
overlay_random_sample(probs(), {}, False, inline=inline, overlay=ov)
step()  # launched, still open at fork time
parent_lane = ov.lane
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    code = 1
    try:
        step()
        tokens = overlay_random_sample(probs(), {}, False, inline=inline, overlay=ov)
        ov.shutdown()
        os.write(w, json.dumps({"new_lane": ov.lane is not parent_lane, "rows": int(tokens.shape[0]),
                                "log": ov.log.path}).encode())
        code = 0
    finally:
        os._exit(code)
os.close(w)
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    time.sleep(0.05)
else:
    os.kill(pid, 9)
    print(json.dumps({"hung": True}))
    sys.exit(0)
child = json.loads(os.read(r, 4096) or b"{}")
ov.shutdown()
print(json.dumps({"hung": False, "exit": os.waitstatus_to_exitcode(status), "child": child,
                  "parent_log": ov.log.path, "same_lane": ov.lane is parent_lane}))
"""


@pytest.mark.procs
def test_forked_child_gets_its_own_lane_and_log(tmp_path):
    # GIVEN a process whose overlay lane thread runs, with a launched step still open, that forks
    # (vLLM's multiprocessing workers may be forked from a process that already loaded the plugin)
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", _FORK_SCRIPT, str(tmp_path)], capture_output=True, text=True,
                          timeout=240, cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    # WHEN the child steps and samples THEN it does not hang (the parent's lane thread does not exist there)
    assert not got["hung"], "the forked child hung: it waited on the parent's lane thread"
    # AND it exited cleanly with a lane of its own, and sampled
    assert got["exit"] == 0 and got["child"]["new_lane"] and got["child"]["rows"] == 4
    # AND its log (a file of its own) holds only its own step, drawn on its lane and used
    assert got["child"]["log"] != got["parent_log"]
    child = check_lines([json.loads(x) for x in Path(got["child"]["log"]).read_text().splitlines()])
    assert [(s["used"], s["fallback"]) for s in child["step"]] == [(True, None)]
    # AND the parent's open step stayed the parent's: it completes there as not consumed
    assert got["same_lane"]
    parent = check_lines([json.loads(x) for x in Path(got["parent_log"]).read_text().splitlines()])
    assert [(s["used"], s["fallback"]) for s in parent["step"]] == [(True, None), (False, "not_consumed")]


def test_an_error_while_shutting_down_still_writes_the_summary_and_never_raises(tmp_path):
    """GIVEN an overlay with a step in flight whose bookkeeping raises (a FAKE internal error) WHEN it shuts down
    (vLLM's exit: an atexit hook, where an exception is a traceback on the user's terminal) THEN shutdown returns,
    the lane is closed, and the log still ends with the final summary (stop 47's CI: a two-rank script's log)."""
    ov = _overlay(tmp_path)
    _step(ov)
    assert overlay_random_sample(_probs(4), {}, False, inline=lambda p, g: p.argmax(-1), overlay=ov).shape == (4,)
    _step(ov)

    def failing() -> None:
        raise RuntimeError("FAKE internal error while closing the step")

    ov.steps.close_current = failing
    ov.shutdown()
    assert not ov.lanes.lane._thread.is_alive()
    _, lines = read_log(tmp_path)
    assert lines["summary"][-1]["final"] is True
