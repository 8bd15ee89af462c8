"""The plugin: idempotent registration, exact removal, lazy patching, failure policy."""

from __future__ import annotations

import sys
import textwrap

import pytest
import torch

from eventlog_schema import read_log
from overlay import importhook, plugin
from overlay.contract import ENV_OUT, ENV_SWITCH, ENV_SWITCH_ALIAS
from overlay.events import EventLog
from overlay.sampler import active

#: Test data drawn from its own generator: probs made after a launch must not move vLLM's
#: default generator, which the overlay's q is forked from (overlay/rng.py).
TEST_RNG = torch.Generator().manual_seed(0)


def _vllm_targets():
    import vllm.profiler.wrapper as profiler_wrapper
    import vllm.v1.sample.ops.topk_topp_sampler as topk
    import vllm.v1.worker.gpu_model_runner as runner

    return {
        (topk, "random_sample"): topk.random_sample,
        (topk.TopKTopPSampler, "__init__"): vars(topk.TopKTopPSampler)["__init__"],
        (topk.TopKTopPSampler, "forward_cpu"): vars(topk.TopKTopPSampler)["forward_cpu"],
        (runner.GPUModelRunner, "execute_model"): vars(runner.GPUModelRunner)["execute_model"],
        (runner.GPUModelRunner, "_model_forward"): vars(runner.GPUModelRunner)["_model_forward"],
        (runner.GPUModelRunner, "_dummy_run"): vars(runner.GPUModelRunner)["_dummy_run"],
        (runner.GPUModelRunner, "_dummy_sampler_run"): vars(runner.GPUModelRunner)["_dummy_sampler_run"],
        (profiler_wrapper.TorchProfilerWrapper, "_start"): vars(profiler_wrapper.TorchProfilerWrapper)["_start"],
    }


def _current(owner, name):
    return vars(owner).get(name)


@pytest.fixture
def switch_on(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV_SWITCH, "1")
    monkeypatch.delenv(ENV_SWITCH_ALIAS, raising=False)
    monkeypatch.setenv(ENV_OUT, str(tmp_path))


def test_switch_off_registers_nothing(monkeypatch, vllm_available):
    # GIVEN the switch unset
    monkeypatch.delenv(ENV_SWITCH, raising=False)
    monkeypatch.delenv(ENV_SWITCH_ALIAS, raising=False)
    originals = _vllm_targets()
    # WHEN vLLM loads the plugin
    plugin.register()
    # THEN nothing is patched and no overlay is active
    assert active() is None
    for (owner, name), original in originals.items():
        assert _current(owner, name) is original


def test_register_twice_patches_once_and_unregister_restores_identically(switch_on, vllm_available):
    # GIVEN vLLM's original functions
    originals = _vllm_targets()
    # WHEN the plugin is registered twice (vLLM loads it in several places)
    plugin.register()
    first = {key: _current(*key) for key in originals}
    overlay = active()
    plugin.register()
    # THEN every target is patched exactly once: wrappers of the originals, unchanged by the second call
    assert overlay is not None and active() is overlay
    for key, original in originals.items():
        patched = _current(*key)
        assert patched is not original, key
        assert patched is first[key], key
        assert getattr(patched, "__wrapped__", None) is original, key
    # WHEN it is unregistered
    plugin.unregister()
    # THEN every attribute holds the very original object again
    assert active() is None
    for (owner, name), original in originals.items():
        assert _current(owner, name) is original, (owner, name)


def test_patches_wait_until_vllm_imports_the_target(tmp_path, monkeypatch):
    # GIVEN a module that is not imported yet, and a patch targeting it
    pkg = tmp_path / "late_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "target.py").write_text("def original():\n    return 'original'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []

    class LatePatch:
        __name__ = "late_patch"
        TARGETS = ("late_pkg.target",)

        @staticmethod
        def apply(module):
            seen.append(module.__name__)
            module.original = lambda: "patched"

        @staticmethod
        def remove():
            pass

    plugin.enable(log=EventLog(None), patches=(LatePatch,))
    # WHEN nothing imports it THEN nothing was applied
    assert seen == [] and "late_pkg.target" not in sys.modules
    # WHEN it is imported
    import late_pkg.target as target

    # THEN the patch ran right after the module body, and the module keeps its real loader
    assert seen == ["late_pkg.target"] and target.original() == "patched"
    assert type(target.__loader__).__name__ == "SourceFileLoader"
    assert "def original" in __import__("inspect").getsource(target)
    sys.modules.pop("late_pkg.target", None)
    sys.modules.pop("late_pkg", None)


def test_internal_error_disables_with_exactly_one_warning(tmp_path, topk_module, warnings_of_overlay):
    # GIVEN the overlay on, with an event-log "directory" that is a file (writing will fail)
    from overlay.patches import topk_topp

    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    original = topk_module.random_sample
    # (lane placement "inherit": no placement notice, so the first write is the step's)
    ov = plugin.enable(log=EventLog(str(not_a_dir / "sub")), patches=(topk_topp,), lane_cpus="inherit")
    assert topk_module.random_sample is not original
    probs = torch.softmax(torch.randn(4, 32, generator=TEST_RNG), -1)
    # WHEN a step completes and the overlay fails to log it, inside vLLM's random_sample
    step = ov.begin_step(rows=4, vocab=32, dtype=torch.float32, device="cpu", all_greedy=False, seeded_rows=0)
    ov.end_forward(step)
    tokens = topk_module.random_sample(probs.clone(), {})
    # THEN sampling still returned tokens ...
    assert tokens.shape == (4,) and bool(((tokens >= 0) & (tokens < 32)).all())
    # ... the overlay is off and vLLM's original is back ...
    assert active() is None and topk_module.random_sample is original
    # ... and exactly one warning says so
    warnings = [r for r in warnings_of_overlay if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "disabled after an internal error" in warnings[0].getMessage()
    # WHEN vLLM samples again THEN no further warning
    topk_module.random_sample(probs.clone(), {})
    assert len([r for r in warnings_of_overlay if r.levelname == "WARNING"]) == 1


def test_flashinfer_sampler_is_partly_applicable_and_batches_without_topk_use_the_overlay(
        tmp_path, topk_module, warnings_of_overlay):
    # GIVEN the overlay on and vLLM's real TopKTopPSampler
    import torch

    from overlay.patches import topk_topp

    ov = plugin.enable(log=EventLog(str(tmp_path)), patches=(topk_topp,))
    sampler = topk_module.TopKTopPSampler()
    # WHEN a sampler turns out to use FlashInfer (what __init__ picks on CUDA)
    sampler.forward = sampler.forward_cuda
    topk_topp.check_sampler_kind(sampler)
    topk_topp.check_sampler_kind(sampler)
    # THEN one warning says which batches it cannot reach, and the overlay stays on
    warnings = [r.getMessage() for r in warnings_of_overlay if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "VLLM_USE_FLASHINFER_SAMPLER=0" in warnings[0]
    assert active() is ov and hasattr(topk_module.random_sample, "__wrapped__")
    # AND a batch without top-k/top-p goes through vLLM's real forward_cuda into the overlay's q
    step = ov.begin_step(rows=2, vocab=32, dtype=torch.float32, device="cpu", all_greedy=False, seeded_rows=0)
    ov.end_forward(step)
    sampler.forward_cuda(torch.randn(2, 32, generator=TEST_RNG), {}, None, None)
    assert step.used
    ov.shutdown()
    _, lines = read_log(tmp_path)
    assert [n["code"] for n in lines["notice"]] == ["partly_applicable", "lane_placement"]


def test_xpu_sampler_kernel_means_not_applicable_once(tmp_path, topk_module, warnings_of_overlay):
    # GIVEN the overlay on and vLLM's real TopKTopPSampler
    from overlay.patches import topk_topp

    ov = plugin.enable(log=EventLog(str(tmp_path)), patches=(topk_topp,))
    sampler = topk_module.TopKTopPSampler()
    assert active() is ov  # the CPU sampler is one the overlay hooks
    # WHEN a sampler turns out to use the fused XPU kernel
    sampler.forward = sampler.forward_xpu
    topk_topp.check_sampler_kind(sampler)
    topk_topp.check_sampler_kind(sampler)
    # THEN one warning and one notice name the flag, and vLLM is left untouched
    warnings = [r.getMessage() for r in warnings_of_overlay if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "VLLM_XPU_USE_SAMPLER_KERNEL=0" in warnings[0]
    assert active() is None and not hasattr(topk_module.random_sample, "__wrapped__")
    ov.shutdown()
    _, lines = read_log(tmp_path)
    (notice,) = lines["notice"]
    assert notice["code"] == "not_applicable" and "VLLM_XPU_USE_SAMPLER_KERNEL=0" in notice["message"]
    assert lines["header"][0]["backend"] == "xpu" and lines["step"] == []


def test_model_runner_v2_is_observed_and_not_applicable_removes_everything(tmp_path, warnings_of_overlay, vllm_available):
    # GIVEN the overlay on, and vLLM's real Model Runner V2 class (vllm/v1/worker/cpu/model_runner.py)
    import vllm.v1.worker.cpu.model_runner as v2
    import vllm.v1.worker.gpu.model_runner as v2_gpu

    from overlay import guard
    from overlay.patches import not_applicable, topk_topp

    runner_cls = v2.CPUModelRunner
    inherited_init = runner_cls.__init__
    assert "__init__" not in vars(runner_cls)  # vLLM 0.32: the CPU V2 runner inherits it
    plugin.enable(log=EventLog(str(tmp_path)), patches=(topk_topp, not_applicable))
    # THEN the V2 constructor is observed once, wrapping vLLM's own (the CPU runner inherits the observer)
    assert vars(v2_gpu.GPUModelRunner)["__init__"].__wrapped__ is inherited_init
    assert "__init__" not in vars(runner_cls) and runner_cls.__init__.__wrapped__ is inherited_init
    # WHEN a V2 constructor fails (here: no distributed setup) THEN the observer stays silent
    with pytest.raises(Exception):  # noqa: B017 - whatever vLLM raises without a distributed setup
        runner_cls(None, torch.device("cpu"))
    assert active() is not None and warnings_of_overlay == []
    # WHEN the observer reports V2 (what it does after a successful constructor)
    guard.not_applicable(
        "Model Runner V2 samples with a fused Triton Gumbel kernel that draws its own noise; "
        f"set {not_applicable.V2_FLAG} to use the V1 runner the overlay hooks", "cpu")
    # THEN one warning naming the flag, one notice, and every patch gone (V2 inherits its init again)
    warnings = [r.getMessage() for r in warnings_of_overlay if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "VLLM_USE_V2_MODEL_RUNNER=0" in warnings[0]
    assert "__init__" not in vars(runner_cls) and runner_cls.__init__ is inherited_init
    assert active() is None
    plugin.unregister()
    _, lines = read_log(tmp_path)
    assert [n["code"] for n in lines["notice"]] == ["not_applicable"]
    assert lines["header"][0]["backend"] == "cpu"


@pytest.mark.procs
def test_register_is_idempotent_in_a_fresh_process(tmp_path):
    # GIVEN a fresh interpreter with the switch on and vLLM importable
    import subprocess

    code = textwrap.dedent(
        """
        from overlay import plugin
        plugin.register(); plugin.register(); plugin.register()
        import vllm.v1.sample.ops.topk_topp_sampler as t
        f = t.random_sample
        # one wrapper around vLLM's original, not three
        assert f.__wrapped__.__module__ == 'vllm.v1.sample.ops.topk_topp_sampler'
        assert not hasattr(f.__wrapped__, '__wrapped__')
        print('ok')
        """
    )
    env = {"PATH": "/usr/bin:/bin", ENV_SWITCH: "yes", ENV_OUT: str(tmp_path), "HOME": str(tmp_path)}
    # WHEN registered three times before vLLM's sampler module is imported
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180,
                          cwd=str(__import__("pathlib").Path(__file__).resolve().parents[2]))
    # THEN the lazily applied patch wraps the original exactly once, and no log was opened
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().endswith("ok")
    assert list(tmp_path.glob("expo-prof-events-*.jsonl")) == []


def test_importhook_clear_forgets_pending_callbacks():
    # GIVEN a callback waiting for a module nobody imported
    called = []
    importhook.when_imported("overlay_never_imported_module_xyz", called.append)
    # WHEN cleared THEN no finder remains on sys.meta_path
    importhook.clear()
    assert not any(type(f).__name__ == "_PostImportFinder" for f in sys.meta_path)
    assert called == []
