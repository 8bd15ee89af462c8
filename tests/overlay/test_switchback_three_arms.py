"""Three-arm switchback: off = the exponential drawn inline after the forward, on = the overlay, native = as shipped.

On vllm-ascend the engine's own ``random_sample`` already draws on a side stream
(vllm_ascend/sample/sampler.py), so the seed's question needs three arms. Here
(no NPU) the arm logic runs on vLLM's real CPU sampler, where what stands in is:
``native`` = vLLM CPU's ``forward_cpu`` as shipped (the fused Gumbel-argmax op),
``off`` = vLLM's own native path with its inline ``random_sample``
(``q.exponential_()`` on the forward's thread, after it), ``on`` = the overlay's
lane. The vllm-ascend side is checked with a FAKE ``vllm_ascend.sample.sampler``
module (the real ``random_sample`` body minus its NPU stream, as in
test_overlay_ascend.py): its ``off`` arm must not call vllm-ascend's side-stream
draw, its ``native`` arm must.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from eventlog_schema import read_log  # type: ignore[import-not-found]
from test_overlay_ascend import fake_ascend_sampler_module  # type: ignore[import-not-found]
from test_overlay_switchback import ROWS, VOCAB, sample_steps  # type: ignore[import-not-found]

from overlay.arms import switchback_phase
from overlay.contract import ENV_SWITCHBACK_ARMS, THREE_ARMS, TWO_ARMS
from overlay.events import EventLog
from overlay.switch import SwitchError, switchback_arms

def test_three_arm_groups_balance_positions_and_cancel_a_linear_drift():
    # GIVEN three arms, blocks of 1 step WHEN the phases of 12 groups are asked
    phases = [switchback_phase(k, 1, THREE_ARMS) for k in range(36)]
    groups = [phases[3 * g : 3 * g + 3] for g in range(12)]
    # THEN every group runs each arm once
    assert all(sorted(g) == sorted(THREE_ARMS) for g in groups)
    # AND over every six groups each arm takes each position exactly twice
    for six in (groups[:6], groups[6:]):
        for pos in range(3):
            assert sorted(g[pos] for g in six) == sorted(THREE_ARMS * 2)
    # AND over every two groups each arm's mean block index is the same (a linear drift cancels)
    for g in range(0, 12, 2):
        where = {arm: [3 * g + i for i in range(6) if phases[3 * g + i] == arm] for arm in THREE_ARMS}
        assert len({sum(v) for v in where.values()}) == 1
    # AND blocks of K steps keep one arm per block
    assert [switchback_phase(k, 3, THREE_ARMS) for k in range(9)] == list(
        itertools.chain.from_iterable([a] * 3 for a in phases[:3]))


@pytest.mark.parametrize(("raw", "want"), [
    ("", TWO_ARMS), ("off,on", TWO_ARMS), (" On , OFF ", TWO_ARMS),
    ("off,on,native", THREE_ARMS), ("native, on,off", THREE_ARMS),
])
def test_the_arms_switch_takes_two_or_three_arms_in_any_order(raw, want):
    # GIVEN EXPO_PROF_SWITCHBACK_ARMS WHEN parsed THEN the arms in their canonical order
    assert switchback_arms({ENV_SWITCHBACK_ARMS: raw}) == want


@pytest.mark.parametrize("raw", ["on,native", "off,on,on", "off,on,inline", "3"])
def test_other_arms_are_one_line_errors(raw):
    # GIVEN arms that are not off,on or off,on,native WHEN parsed THEN a one-line error names variable and value
    with pytest.raises(SwitchError) as err:
        switchback_arms({ENV_SWITCHBACK_ARMS: raw})
    assert "\n" not in str(err.value) and ENV_SWITCHBACK_ARMS in str(err.value) and repr(raw) in str(err.value)


def test_vllm_cpu_sampler_runs_each_arm_on_its_own_path(tmp_path, topk_module, monkeypatch):
    # GIVEN the overlay in three-arm switchback (blocks of 2) with vLLM's real sampling patch and real Sampler,
    # and a spy on vLLM's native path (forward_native: where the inline exponential_ is drawn on CPU)
    from vllm.v1.sample.sampler import Sampler

    from overlay import plugin
    from overlay.patches import topk_topp

    native_calls: list[int] = []
    real_native = topk_module.TopKTopPSampler.forward_native

    def forward_native(self, *args, **kwargs):
        native_calls.append(ov.steps.current.index)
        return real_native(self, *args, **kwargs)

    monkeypatch.setattr(topk_module.TopKTopPSampler, "forward_native", forward_native)
    ov = plugin.enable(log=EventLog(str(tmp_path)), patches=(topk_topp,), mode="switchback", block_steps=2,
                       arms=THREE_ARMS)
    try:
        # WHEN vLLM's sampler samples 12 steps THEN every token is inside its row's top-k, whichever arm drew it
        sample_steps(ov, Sampler(), 12, seed=5)
        ov.shutdown()
    finally:
        plugin.unregister()
    _path, lines = read_log(tmp_path)
    header, steps = lines["header"][0], lines["step"]
    # AND the header names the three arms, and the steps follow the documented order
    assert header["arms"] == list(THREE_ARMS)
    assert [s["phase"] for s in steps] == [switchback_phase(k, 2, THREE_ARMS) for k in range(12)]
    by = {arm: [s["step"] for s in steps if s["phase"] == arm] for arm in THREE_ARMS}
    # AND on steps used the lane's q; off and native launched nothing
    assert all(s["launched"] and s["used"] for s in steps if s["phase"] == "on")
    assert all(not s["launched"] and s["fallback"] is None for s in steps if s["phase"] != "on")
    # AND off and on took vLLM's native path (off: its inline random_sample), native the shipped fused op
    assert native_calls == sorted(by["off"] + by["on"])
    assert by["native"] and not set(by["native"]) & set(native_calls)


def test_vllm_ascend_off_draws_inline_and_native_calls_its_side_stream_draw(tmp_path, vllm_available):
    # GIVEN the overlay in three-arm switchback (blocks of 1) and the FAKE vllm-ascend sampler module patched
    from overlay import plugin
    from overlay.lanes import CpuThreadLane
    from overlay.patches import ascend
    from overlay.sampler import Overlay, set_active

    module = fake_ascend_sampler_module()
    ov = Overlay(EventLog(str(tmp_path)), lane_factory=lambda device, instrument: CpuThreadLane(seed=2),
                 mode="switchback", block_steps=1, arms=THREE_ARMS)
    set_active(ov)
    try:
        ascend.apply(module)
        phases = []
        data = torch.Generator().manual_seed(7)
        for _ in range(6):
            step = ov.begin_step(rows=ROWS, vocab=VOCAB, dtype=torch.float32, device="cpu", all_greedy=False,
                                 seeded_rows=0)
            ov.end_forward(step)
            before = len(module.calls)
            # WHEN AscendTopKTopPSampler calls random_sample(probs, generators)
            # (test data from its own generator: q is forked from vLLM's default one, overlay/rng.py)
            tokens = module.random_sample(torch.softmax(torch.randn(ROWS, VOCAB, generator=data), -1), {})
            assert tokens.shape == (ROWS,)
            phases.append((step.phase, len(module.calls) - before, step.used))
        ov.shutdown()
    finally:
        ascend.remove()
        set_active(None)
        plugin.unregister()
    # THEN only native called vllm-ascend's own (side-stream) draw; off drew inline without it; on used the lane's q
    want = {"native": (1, False), "off": (0, False), "on": (0, True)}
    assert [p for p, _, _ in phases] == [switchback_phase(k, 1, THREE_ARMS) for k in range(6)]
    assert all((calls, used) == want[p] for p, calls, used in phases), phases


@pytest.fixture(scope="module")
def ascend_today(pypi_wheels):
    """vllm-ascend 0.30.0rc2's real ``vllm_ascend.sample.sampler``, loaded as the version matrix loads it (its
    real function definitions, run on CPU tensors with the matrix's stand-ins for the NPU stream)."""
    import sys

    from shared_paths import REPO

    sys.path.insert(0, str(REPO / "tools"))
    import overlay_matrix

    from overlay.patches import ascend

    src = pypi_wheels("vllm-ascend", "0.30.0rc2").read(overlay_matrix.A_SAMPLER).decode()
    module, mode = overlay_matrix.load_sampler(src, ascend.SAMPLER_MODULE, ascend=True)
    assert mode == "functions" and module.__name__ == ascend.SAMPLER_MODULE
    return module


@pytest.mark.parametrize("seeded", [False, True], ids=["batch noise", "a seeded row"])
def test_todays_ascend_random_sample_off_arm_draws_what_it_draws(ascend_today, seeded):
    # GIVEN 0.30.0rc2's real random_sample (side stream stood in) and the three-arm off arm's inline draw
    from overlay.arms import inline_random_sample
    from overlay.sampler import sample_with_noise

    probs = torch.softmax(torch.randn(ROWS, VOCAB, generator=torch.Generator().manual_seed(3)), -1)

    def gens():
        return {1: torch.Generator().manual_seed(11)} if seeded else {}

    # WHEN both sample the same probabilities from the same generator states
    torch.manual_seed(5)
    shipped = ascend_today.random_sample(probs.clone(), gens())
    torch.manual_seed(5)
    inline = inline_random_sample(probs.clone(), gens(), finish=sample_with_noise)
    # THEN the off arm draws the same q in the same order, only not on the side stream: the same tokens
    assert torch.equal(shipped, inline)


def test_todays_ascend_arms_off_inline_native_shipped_on_the_lane(tmp_path, ascend_today, vllm_available):
    # GIVEN the overlay in three-arm switchback (blocks of 1), patching 0.30.0rc2's real sampler module, whose
    # random_sample is counted (native must call it as shipped; off and on must not)
    import functools

    from overlay import plugin
    from overlay.lanes import CpuThreadLane
    from overlay.patches import ascend
    from overlay.sampler import Overlay, set_active

    shipped = ascend_today.random_sample
    calls = []

    @functools.wraps(shipped)
    def counted(probs, generators):
        calls.append(probs.shape)
        return shipped(probs, generators)

    ascend_today.random_sample = counted
    ov = Overlay(EventLog(str(tmp_path)), lane_factory=lambda device, instrument: CpuThreadLane(seed=2),
                 mode="switchback", block_steps=1, arms=THREE_ARMS)
    set_active(ov)
    phases = []
    try:
        ascend.apply(ascend_today)
        data = torch.Generator().manual_seed(7)
        for _ in range(6):
            step = ov.begin_step(rows=ROWS, vocab=VOCAB, dtype=torch.float32, device="cpu", all_greedy=False,
                                 seeded_rows=0)
            ov.end_forward(step)
            before = len(calls)
            # WHEN AscendTopKTopPSampler.forward_native calls random_sample(probs, generators) by its global name
            tokens = ascend_today.random_sample(torch.softmax(torch.randn(ROWS, VOCAB, generator=data), -1), {})
            assert tokens.shape == (ROWS,)
            phases.append((step.phase, len(calls) - before, step.used))
        ov.shutdown()
    finally:
        ascend.remove()
        set_active(None)
        plugin.unregister()
        ascend_today.random_sample = shipped
    # THEN only native called the shipped (side-stream) draw; off drew inline without it; on used the lane's q
    want = {"native": (1, False), "off": (0, False), "on": (0, True)}
    assert [p for p, _, _ in phases] == [switchback_phase(k, 1, THREE_ARMS) for k in range(6)]
    assert all((n, used) == want[p] for p, n, used in phases), phases
