"""Fixtures for the in-engine overlay's unit tests (real vLLM CPU modules)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

# test_cuda_lane.py is a device check on a real CUDA device, run by bench/gpu_check.sh
# (EXPO_PROF_GPU_CHECK=1). Elsewhere it is not collected at all, so it is never a
# silently skipped core test; the core tests use fake_device.FakeDeviceModule.
collect_ignore = [] if os.environ.get("EXPO_PROF_GPU_CHECK") == "1" else ["test_cuda_lane.py"]

#: Needs an OpenMP team of 2 in the test process; under mutmut torch runs with one thread (below).
TEAM_CAP_TEST = "test_overlay_lane_placement.py::test_lane_thread_openmp_team_is_capped_at_its_cpus_and_only_its_own"

if "MUTANT_UNDER_TEST" in os.environ:
    # mutmut forks every mutant from one warm process. libgomp cannot run a parallel region in a
    # child forked after the parent ran one: every mutant whose tests touch torch hung in its first
    # softmax and was counted as a "timeout" kill. With one torch thread in that process no team
    # is ever formed. vLLM's sampler module (what topk_module imports, ~12 s) is imported here
    # once too, rather than in each forked mutant.
    try:
        import torch

        torch.set_num_threads(1)
        import vllm.v1.sample.ops.topk_topp_sampler  # noqa: F401
    except Exception:  # noqa: BLE001 - no torch/vLLM: the tests that need them say so themselves
        pass


def pytest_collection_modifyitems(config, items):
    """Under mutmut, leave out the one test that needs an OpenMP team of 2 (it covers no mutated code)."""
    if "MUTANT_UNDER_TEST" not in os.environ:
        return
    gone = [item for item in items if item.nodeid.endswith(TEAM_CAP_TEST)]
    if gone:
        config.hook.pytest_deselected(items=gone)
        items[:] = [item for item in items if item not in gone]


@pytest.fixture(autouse=True)
def overlay_clean():
    """Every test starts and ends with the overlay fully off and vLLM unpatched."""
    from overlay import plugin

    plugin.unregister()
    yield
    plugin.unregister()


@pytest.fixture(scope="session")
def topk_module(vllm_available):
    """vLLM's real ``vllm.v1.sample.ops.topk_topp_sampler`` module."""
    import vllm.v1.sample.ops.topk_topp_sampler as module

    return module


@pytest.fixture(scope="session")
def vllm_random_sample(topk_module):
    """vLLM 0.32's own ``random_sample`` (taken before any patch)."""
    from overlay import plugin

    plugin.unregister()
    fn = topk_module.random_sample
    assert not hasattr(fn, "__wrapped__"), "random_sample is already patched"
    return fn


@pytest.fixture
def warnings_of_overlay():
    """Records of the ``vllm.expo_prof`` logger (vLLM's logger may not propagate)."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(level=logging.DEBUG)
    logger = logging.getLogger("vllm.expo_prof")
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


@pytest.fixture(scope="session")
def tiny_config_dir(tmp_path_factory) -> Path:
    """A directory holding only a tiny Llama ``config.json`` (enough for ModelConfig)."""
    path = tmp_path_factory.mktemp("tiny-config")
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 1,
        "num_key_value_heads": 1, "head_dim": 64, "vocab_size": 96,
        "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "torch_dtype": "float32",
    }
    (path / "config.json").write_text(json.dumps(config))
    return path

