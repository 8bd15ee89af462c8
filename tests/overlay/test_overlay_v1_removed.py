"""vLLM 0.34 removed Model Runner V1: the overlay steps aside with one notice, never an internal error.

The real ``vllm/v1/sample/ops/topk_topp_sampler.py`` of the vLLM 0.34.0 wheel (fetched by range,
tools/release_files.py) is imported under its own name through the overlay's import hook, in place of
the installed 0.32 module, while ``vllm.v1.worker.gpu_model_runner`` is made absent (as in 0.34's
wheel). Before the fix the patch read ``TopKTopPSampler`` from the half-initialised module and the
overlay switched off with "internal error (... circular import)".
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

import pytest

from eventlog_schema import read_log
from overlay import plugin
from overlay.events import EventLog
from overlay.patches import not_applicable, topk_topp

SAMPLER = "vllm.v1.sample.ops.topk_topp_sampler"
V1_RUNNER = "vllm.v1.worker.gpu_model_runner"


class _Release034(importlib.abc.MetaPathFinder):
    """Serves 0.34's real sampler file for SAMPLER; says V1's runner module does not exist."""

    def __init__(self, sampler_file: str) -> None:
        self.sampler_file = sampler_file

    def find_spec(self, fullname, path=None, target=None):
        if fullname == SAMPLER:
            return importlib.util.spec_from_file_location(fullname, self.sampler_file)
        if fullname == V1_RUNNER:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


@pytest.fixture
def release_034(tmp_path, pypi_wheels, vllm_available):
    """0.34.0's sampler module file in place of the installed one (restored after)."""
    with pypi_wheels("vllm", "0.34.0") as z:
        assert "vllm/v1/worker/gpu_model_runner.py" not in z.namelist()  # V1 really is gone
        src = z.read("vllm/v1/sample/ops/topk_topp_sampler.py")
    path = tmp_path / "topk_topp_sampler_034.py"
    path.write_bytes(src)
    saved = {name: sys.modules.pop(name) for name in (SAMPLER, V1_RUNNER) if name in sys.modules}
    finder = _Release034(str(path))
    sys.meta_path.insert(0, finder)  # before the installed vLLM; the overlay's hook later goes before it
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        sys.modules.pop(SAMPLER, None)
        sys.modules.update(saved)


def test_overlay_steps_aside_on_0_34_sampler(tmp_path, release_034, warnings_of_overlay):
    # GIVEN the overlay on with all its patches, and vLLM 0.34's sampler module not yet imported
    log_dir = tmp_path / "log"
    plugin.enable(log=EventLog(str(log_dir)))
    # WHEN vLLM imports it (through the overlay's import hook)
    module = importlib.import_module(SAMPLER)
    # THEN the import succeeds untouched, and the overlay is off with one not_applicable notice
    assert not hasattr(module, "TopKTopPSampler") and not hasattr(module, "random_sample")
    assert not topk_topp._patcher.applied
    messages = [r.getMessage() for r in warnings_of_overlay]
    assert not any("internal error" in m for m in messages), messages
    assert len(messages) == 1 and "only Model Runner V2" in messages[0], messages
    # AND no advice to select V1 with a flag 0.34 rejects
    assert "VLLM_USE_V2_MODEL_RUNNER" not in messages[0]
    _, lines = read_log(log_dir)
    assert [n["code"] for n in lines["notice"]] == ["not_applicable"]
    assert lines["header"][0]["backend"] == "cpu"


def test_v2_notice_without_v1_gives_no_flag(release_034):
    # GIVEN a vLLM without the V1 runner module WHEN the V2 notice is composed THEN it names no flag
    assert not not_applicable.v1_selectable()
    assert "VLLM_USE_V2_MODEL_RUNNER" not in not_applicable.v2_message()


def test_v2_notice_with_v1_gives_the_flag(vllm_available):
    # GIVEN the installed vLLM 0.32 (V1 present, the flag declared) WHEN the notice is composed THEN it advises it
    assert not_applicable.v1_selectable()
    assert not_applicable.V2_FLAG in not_applicable.v2_message()


@pytest.mark.parametrize("version", ["0.35.0", "nightly-unknown"], ids=["future", "unparsable"])
def test_unseen_vllm_version_with_checked_sources_keeps_the_overlay_on(tmp_path, monkeypatch, vllm_available,
                                                                       warnings_of_overlay, version):
    # GIVEN the switch on and a vLLM whose version the matrix has not checked (future or unreadable), whose
    # installed sources are the real vLLM 0.32 files (random_sample identical to the checked releases')
    import logging

    import vllm

    from overlay.contract import ENV_OUT, ENV_SWITCH
    from overlay.sampler import active

    monkeypatch.setenv(ENV_SWITCH, "1")
    monkeypatch.setenv(ENV_OUT, str(tmp_path))
    monkeypatch.setattr(vllm, "__version__", version)
    logging.getLogger("vllm.expo_prof").setLevel(logging.INFO)
    try:
        # WHEN vLLM loads the plugin
        plugin.register()
        # THEN the overlay stays on, saying once which checked release the sources matched; no warning
        assert active() is not None
        said = [r.getMessage() for r in warnings_of_overlay if "not among the releases checked" in r.getMessage()]
        assert len(said) == 1 and "identical to vllm 0.33.0's" in said[0] and "overlay applies" in said[0], said
        assert not [r for r in warnings_of_overlay if r.levelno >= logging.WARNING]
    finally:
        logging.getLogger("vllm.expo_prof").setLevel(logging.NOTSET)


@pytest.mark.parametrize("version", ["0.35.0", "nightly-unknown"], ids=["future", "unparsable"])
def test_unseen_vllm_version_with_changed_sources_steps_aside_naming_it(tmp_path, monkeypatch, vllm_available,
                                                                        warnings_of_overlay, version):
    # GIVEN the same, but a store of checked releases in which no random_sample is the installed one (as if the
    # installed vLLM had changed it)
    import vllm

    from overlay import sourcecheck
    from overlay.contract import ENV_OUT, ENV_SWITCH

    real = sourcecheck.checked_releases

    def changed(dist):
        store = real(dist)
        for fp in store.values():
            fp["replaced"] = {k: "0" * 16 for k in fp["replaced"]}
        return store

    monkeypatch.setattr(sourcecheck, "checked_releases", changed)
    monkeypatch.setenv(ENV_SWITCH, "1")
    monkeypatch.setenv(ENV_OUT, str(tmp_path))
    monkeypatch.setattr(vllm, "__version__", version)
    # WHEN vLLM loads the plugin
    plugin.register()
    # THEN no exception reaches vLLM: one warning naming the version and the function, one not_applicable notice
    messages = [r.getMessage() for r in warnings_of_overlay]
    assert len(messages) == 1 and version in messages[0] and "internal error" not in messages[0], messages
    assert "random_sample in vllm/v1/sample/ops/topk_topp_sampler.py differs" in messages[0]
    assert "compared with vllm 0.33.0" in messages[0]
    _, lines = read_log(tmp_path)
    assert [n["code"] for n in lines["notice"]] == ["not_applicable"]
    assert version in lines["notice"][0]["message"]
    from overlay.sampler import active

    assert active() is None


def test_known_vllm_version_keeps_the_overlay_on(tmp_path, monkeypatch, vllm_available, warnings_of_overlay):
    # GIVEN the installed vLLM 0.32 (checked in the matrix) WHEN the plugin registers THEN the overlay stays on
    from overlay.contract import ENV_OUT, ENV_SWITCH
    from overlay.sampler import active

    monkeypatch.setenv(ENV_SWITCH, "1")
    monkeypatch.setenv(ENV_OUT, str(tmp_path))
    plugin.register()
    assert active() is not None and not warnings_of_overlay


def test_newest_checked_matches_the_matrix():
    # GIVEN the version matrix's rows WHEN the newest minor per package is taken THEN overlay.versions agrees
    sys.path.insert(0, str(__import__("shared_paths").REPO / "tools"))
    import overlay_matrix

    from overlay.versions import NEWEST_CHECKED, unknown_reason

    for dist, versions in (("vllm", overlay_matrix.VLLM), ("vllm-ascend", overlay_matrix.ASCEND)):
        newest = max(tuple(int(x) for x in v.split(".")[:2]) for v in versions)
        assert NEWEST_CHECKED[dist] == newest
        assert all(unknown_reason(dist, v) is None for v in versions)
