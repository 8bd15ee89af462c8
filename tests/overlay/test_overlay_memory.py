"""Device memory of q: dropped when consumed, at most one beyond the running step, seen by profiling.

No device here: the device lane runs on FakeDeviceModule (FAKE streams/events)
with a FakeAllocator (FAKE allocator counting live bytes of real CPU tensors),
or a FakeCachingAllocator (FAKE: also keeps a freed block for the stream that
read it, as the caching allocator does after ``record_stream``).
"""

from __future__ import annotations

import gc

import torch

import pytest

from fake_device import FakeAllocator, FakeCachingAllocator, FakeDeviceModule
from overlay.events import EventLog
from overlay.lanes import CpuThreadLane, DeviceStreamLane
from overlay.patches._runner import q_size, reserve_during
from overlay.sampler import Overlay, overlay_random_sample, set_active

ROWS, VOCAB = 8, 1000
Q_BYTES = ROWS * VOCAB * 4


def _overlay(tmp_path, fake, alloc):
    lane = DeviceStreamLane("cpu", device_module=fake, record_stream=fake.record_stream, allocate=alloc)
    return Overlay(EventLog(str(tmp_path)), lane_factory=lambda device, instrument: lane)


def _step(ov):
    step = ov.begin_step(rows=ROWS, vocab=VOCAB, dtype=torch.float32, device="cpu", all_greedy=False, seeded_rows=0)
    ov.end_forward(step)
    return step


@pytest.mark.slow
def test_consumed_q_is_dropped_while_its_events_are_still_pending(tmp_path):
    # GIVEN the device lane whose events never complete (steps stay pending, unwritten)
    fake, alloc = FakeDeviceModule(), FakeAllocator()
    ov = _overlay(tmp_path, fake, alloc)
    probs = torch.softmax(torch.randn(ROWS, VOCAB), dim=-1)
    for _ in range(10):
        # WHEN a step launches q and the sampler consumes it
        _step(ov)
        assert alloc.live_bytes <= Q_BYTES  # only this step's q, the previous one is gone
        tokens = overlay_random_sample(probs.clone(), {}, False, inline=None, overlay=ov)
        assert tokens.shape == (ROWS,)
        gc.collect()
        # THEN no q is alive once the sampler returned, though the step waits for its events
        assert alloc.live_bytes == 0
    assert len(ov.lines.pending) == 10 and alloc.allocations == 10
    assert alloc.peak_bytes == Q_BYTES
    ov.shutdown()


def test_unconsumed_q_is_dropped_at_the_next_launch(tmp_path):
    # GIVEN steps whose q the sampler never takes (e.g. no random rows after all)
    fake, alloc = FakeDeviceModule(), FakeAllocator()
    ov = _overlay(tmp_path, fake, alloc)
    for _ in range(5):
        _step(ov)
        # THEN at most the running step's q is alive: at most one beyond it
        assert alloc.live_bytes <= Q_BYTES
    assert alloc.peak_bytes <= 2 * Q_BYTES
    ov.shutdown()


class _ProfiledRunner:
    """Stand-in runner (the real profile_run needs a device and a loaded model):
    ``profile_run`` records what the FAKE allocator holds while it runs, as
    vLLM's profiler reads the allocator's peak."""

    def __init__(self, model_config, sampler) -> None:
        self.max_num_reqs = ROWS
        self.model_config = model_config
        self.sampler = sampler
        self.device = torch.device("cpu")
        self.seen = None

    def profile_run(self, alloc):
        self.seen = alloc.live_bytes


@pytest.mark.slow
def test_memory_profiling_sees_the_largest_q(tmp_path, tiny_config_dir):
    # GIVEN vLLM's real ModelConfig (vocab 96) and a runner of max_num_reqs rows
    from vllm.config import ModelConfig
    from vllm.v1.sample.sampler import Sampler

    config = ModelConfig(model=str(tiny_config_dir), tokenizer=str(tiny_config_dir), dtype="float32",
                         max_model_len=64, skip_tokenizer_init=True)
    runner = _ProfiledRunner(config, Sampler())
    fake, alloc = FakeDeviceModule(), FakeAllocator()
    ov = _overlay(tmp_path, fake, alloc)
    set_active(ov)
    try:
        # WHEN profile_run runs under the overlay's wrapper
        reserve_during(_ProfiledRunner.profile_run)(runner, alloc)
    finally:
        set_active(None)
    gc.collect()
    # THEN the profiler saw max_num_reqs x vocab x 4 bytes, freed afterwards
    assert q_size(runner) == (ROWS, 96, torch.float32)
    assert runner.seen == ROWS * 96 * 4
    assert alloc.live_bytes == 0
    ov.shutdown()


def test_real_gpu_model_runner_profile_run_is_wrapped():
    # GIVEN vLLM's real GPUModelRunner WHEN the runner patch applies THEN profile_run is wrapped and restored
    from overlay.patches._util import Patcher
    from overlay.patches._runner import patch_runner_class
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    original = GPUModelRunner.profile_run
    patcher = Patcher()
    assert patch_runner_class(patcher, GPUModelRunner) == "_model_forward"
    try:
        assert GPUModelRunner.profile_run is not original
        assert GPUModelRunner.profile_run.__wrapped__ is original
    finally:
        patcher.undo()
    assert GPUModelRunner.profile_run is original


def test_summary_reports_the_live_q_memory_the_lane_counted(tmp_path):
    # GIVEN the device lane and steps whose q the sampler consumes
    fake, alloc = FakeDeviceModule(), FakeAllocator()
    ov = _overlay(tmp_path, fake, alloc)
    probs = torch.softmax(torch.randn(ROWS, VOCAB), dim=-1)
    for _ in range(4):
        _step(ov)
        overlay_random_sample(probs.clone(), {}, False, inline=None, overlay=ov)
        gc.collect()
    # THEN the summary's meter agrees with the allocator: one q alive at a time
    assert ov.lane.held_bytes() == alloc.live_bytes == 0
    assert (ov.log.q_max_bytes, ov.log.q_peak_bytes, ov.log.q_reserved_bytes) == (Q_BYTES, Q_BYTES, 0)
    # WHEN something keeps a q alive past its step (a leak)
    _step(ov)
    leaked = ov.steps.current.draw.q
    _step(ov)
    # THEN the peak shows two q alive, as the allocator does
    assert ov.log.q_peak_bytes == alloc.live_bytes == 2 * Q_BYTES
    del leaked
    ov.shutdown()


def test_reserved_q_is_reported_and_freed(tmp_path):
    # GIVEN the overlay WHEN the runner hook reserves the largest q for memory profiling
    fake, alloc = FakeDeviceModule(), FakeAllocator()
    ov = _overlay(tmp_path, fake, alloc)
    draw = ov.reserve(4 * ROWS, VOCAB, torch.float32, "cpu")
    # THEN the summary holds its size, and releasing it frees it
    assert ov.log.q_reserved_bytes == ov.log.q_peak_bytes == 4 * Q_BYTES
    ov.release(draw)
    del draw
    gc.collect()
    assert alloc.live_bytes == 0 and ov.lane.held_bytes() == 0
    summary = ov.log.summary()
    assert summary["q_reserved_bytes"] == 4 * Q_BYTES and summary["q_max_bytes"] == 0
    ov.shutdown()


def test_reserve_on_the_cpu_lane_launches_exactly_the_asked_q(tmp_path):
    # GIVEN the overlay on vLLM CPU's lane (a drawing thread)
    ov = Overlay(EventLog(str(tmp_path)), lane_factory=lambda device, instrument: CpuThreadLane(seed=1))
    # WHEN the runner hook reserves a q with no rows or no vocabulary THEN nothing is launched
    assert ov.reserve(0, 8, torch.float64, "cpu") is None
    assert ov.reserve(3, 0, torch.float64, "cpu") is None
    # WHEN it reserves the smallest real shapes (1 row; a vocabulary of 1) in float64
    one_row = ov.reserve(1, 5, torch.float64, "cpu")
    ov.release(one_row)
    draw = ov.reserve(3, 1, torch.float64, "cpu")
    # THEN each is launched with that shape, dtype and device (sized as the sampler's q will be)
    assert one_row is not None and (one_row.rows, one_row.vocab) == (1, 5)
    assert tuple(draw.q.shape) == (3, 1) and draw.q.dtype == torch.float64 and draw.q.device.type == "cpu"
    assert ov.log.q_reserved_bytes == 5 * 8
    # AND releasing waits for it and drops it; releasing nothing is a no-op
    ov.release(draw)
    assert draw.q is None and draw.done.is_set()
    ov.release(None)
    ov.shutdown()


def test_a_profile_run_calling_its_base_holds_one_q_and_the_summary_says_so(tmp_path, tiny_config_dir):
    # GIVEN vllm-ascend's shape: the NPU runner's profile_run calls super().profile_run(), and both
    # classes' profile_run are wrapped (the ascend patch and the V1 patch each wrap their own)
    from vllm.config import ModelConfig
    from vllm.v1.sample.sampler import Sampler

    class NpuShapedRunner(_ProfiledRunner):
        def profile_run(self, alloc):
            return super().profile_run(alloc)

    config = ModelConfig(model=str(tiny_config_dir), tokenizer=str(tiny_config_dir), dtype="float32",
                         max_model_len=64, skip_tokenizer_init=True)
    base, sub = vars(_ProfiledRunner)["profile_run"], vars(NpuShapedRunner)["profile_run"]
    _ProfiledRunner.profile_run = reserve_during(base)
    NpuShapedRunner.profile_run = reserve_during(sub)
    runner = NpuShapedRunner(config, Sampler())
    fake, alloc = FakeDeviceModule(), FakeAllocator()
    ov = _overlay(tmp_path, fake, alloc)
    set_active(ov)
    try:
        # WHEN vLLM's memory profiling runs the outer profile_run
        runner.profile_run(alloc)
    finally:
        set_active(None)
        _ProfiledRunner.profile_run, NpuShapedRunner.profile_run = base, sub
    gc.collect()
    # THEN the profiler saw exactly one q of max_num_reqs x vocab held, and the summary says that
    one_q = ROWS * 96 * 4
    assert runner.seen == one_q
    assert ov.log.summary()["q_reserved_bytes"] == one_q
    assert alloc.live_bytes == 0
    ov.shutdown()


def test_the_summary_counts_every_reserved_q_held_at_once(tmp_path):
    # GIVEN the overlay WHEN two q are reserved and held together (then released)
    fake, alloc = FakeDeviceModule(), FakeAllocator()
    ov = _overlay(tmp_path, fake, alloc)
    first = ov.reserve(ROWS, VOCAB, torch.float32, "cpu")
    second = ov.reserve(2 * ROWS, VOCAB, torch.float32, "cpu")
    ov.release(second)
    ov.release(first)
    third = ov.reserve(ROWS, VOCAB, torch.float32, "cpu")
    ov.release(third)
    # THEN q_reserved_bytes is what was held at once at most (3 q), not the largest single one (2 q)
    assert ov.log.summary()["q_reserved_bytes"] == 3 * Q_BYTES
    ov.shutdown()


def _vllm_runner(tiny_config_dir, async_scheduling):
    """A runner stand-in with vLLM's real ModelConfig (vocab 96), Sampler and VllmConfig."""
    from vllm.config import ModelConfig, SchedulerConfig, VllmConfig
    from vllm.v1.sample.sampler import Sampler

    config = ModelConfig(model=str(tiny_config_dir), tokenizer=str(tiny_config_dir), dtype="float32",
                         max_model_len=64, skip_tokenizer_init=True)
    vllm_config = VllmConfig(model_config=config,
                             scheduler_config=SchedulerConfig(max_model_len=64, is_encoder_decoder=False))
    # vLLM CPU switches async scheduling off (vllm/platforms/cpu.py); on CUDA vLLM 0.33 leaves it on by default.
    vllm_config.scheduler_config.async_scheduling = async_scheduling
    runner = _ProfiledRunner(config, Sampler())
    runner.vllm_config = vllm_config
    return runner


@pytest.mark.parametrize("async_scheduling", [True, False])
def test_profiling_reserves_every_q_block_async_scheduling_holds_at_once(tmp_path, tiny_config_dir,
                                                                        vllm_random_sample, async_scheduling):
    # GIVEN the device lane over a FAKE caching allocator, and a runner with vLLM's real VllmConfig
    # (max_concurrent_batches: 2 under async scheduling, else 1)
    runner = _vllm_runner(tiny_config_dir, async_scheduling)
    fake = FakeDeviceModule()
    alloc = FakeCachingAllocator(fake)
    lane = DeviceStreamLane("cpu", device_module=fake, record_stream=alloc.record_stream, allocate=alloc)
    ov = Overlay(EventLog(str(tmp_path)), lane_factory=lambda device, instrument: lane)
    set_active(ov)
    try:
        # WHEN vLLM's memory profiling runs under the overlay's wrapper (then vLLM synchronises the device)
        reserve_during(_ProfiledRunner.profile_run)(runner, alloc)
        fake.run_device()
        q_bytes = ROWS * 96 * 4
        probs = torch.softmax(torch.randn(ROWS, 96), dim=-1)
        for _ in range(6):
            # ... and steps run as vLLM 0.33's engine issues them: the next step's q is launched while
            # the device may still sample with the previous one (async scheduling), or after it has
            step = ov.begin_step(rows=ROWS, vocab=96, dtype=torch.float32, device="cpu", all_greedy=False,
                                 seeded_rows=0)
            if async_scheduling:
                fake.run_device()
            ov.end_forward(step)
            tokens = overlay_random_sample(probs.clone(), {}, False, inline=vllm_random_sample, overlay=ov)
            assert step.used and tokens.shape == (ROWS,)
            del tokens
            if not async_scheduling:
                fake.run_device()  # vLLM waits for the step's output before it schedules the next
    finally:
        set_active(None)
    gc.collect()
    # THEN the allocator never held more q than profiling saw held: two blocks under async scheduling
    blocks = 2 if async_scheduling else 1
    assert alloc.peak_held_bytes == blocks * q_bytes
    assert runner.seen >= alloc.peak_held_bytes
    # AND the summary reports what was reserved and what q occupied at once (a step's q is one q)
    summary = ov.log.summary()
    assert summary["q_reserved_bytes"] == runner.seen == blocks * q_bytes
    assert summary["q_block_peak_bytes"] == alloc.peak_held_bytes
    assert summary["q_max_bytes"] == q_bytes
    ov.shutdown()
