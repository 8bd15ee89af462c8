"""A release the overlay has not seen: it checks the installed sources at start and applies only where they match.

GIVEN a FAKE vllm-ascend "0.31.0" installed in a folder on ``sys.path`` — built from vllm-ascend 0.30.0rc2's
real files (its PyPI source archive, tools/release_files.py: ``vllm_ascend/sample/sampler.py`` and
``vllm_ascend/worker/model_runner_v1.py`` byte for byte, plus a ``dist-info`` that says 0.31.0; no NPU can run
them here, so they are read, never imported) — WHEN the overlay's start-up check runs (overlay/versions.py,
overlay/sourcecheck.py), directly and through the plugin, THEN:

* unchanged, it applies, saying which checked release it matched;
* with one changed line in ``random_sample``, it steps aside naming ``random_sample`` and 0.30.0rc2;
* with ``_model_forward`` no longer called from ``execute_model``, it steps aside naming the seam.

The same rule serves vLLM (an unseen vLLM without the V1 runner gets the V2-only notice, which names the
in-kernel hash noise), and vllm-ascend's opt-in Model Runner V2 gets a notice saying what it samples with.
"""

from __future__ import annotations

import importlib
import logging
import sys

import pytest

from eventlog_schema import read_log  # type: ignore[import-not-found]
from overlay import plugin, sourcecheck, versions
from overlay.patches import not_applicable

SAMPLER = "vllm_ascend/sample/sampler.py"
RUNNER = "vllm_ascend/worker/model_runner_v1.py"
CATEGORICAL = not_applicable.ASCEND_CATEGORICAL


@pytest.fixture(scope="module")
def ascend_0302(pypi_wheels):
    """vllm-ascend 0.30.0rc2's real files the check reads (and the V2 sampler's), by path."""
    files = pypi_wheels("vllm-ascend", "0.30.0rc2")
    return {path: files.read(path).decode() for path in (SAMPLER, RUNNER, CATEGORICAL)}


def install_fake(root, files: dict[str, str], version: str = "0.31.0"):
    """A FAKE installed vllm-ascend ``version`` in ``root``: the given files, their packages, and its dist-info."""
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        for parent in target.relative_to(root).parents:
            if str(parent) != ".":
                (root / parent / "__init__.py").touch()
    info = root / f"vllm_ascend-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm-ascend\nVersion: {version}\n")
    return root


def with_changed(files: dict[str, str], path: str, qualname: str, old: str, new: str) -> dict[str, str]:
    """``files`` with one line of ``qualname`` in ``path`` changed (``old`` -> ``new``, once, inside that function)."""
    src = files[path]
    indexed = sourcecheck.Indexed(src)
    first, end, _ = indexed.locate(qualname)
    lo, hi = indexed.starts[first], indexed.starts[end]
    assert src[lo:hi].count(old) == 1, (qualname, old)
    at = src.index(old, lo)
    return {**files, path: src[:at] + new + src[at + len(old):]}


def check(root):
    return sourcecheck.check_installed_source("vllm-ascend", "0.31.0", site=root)


def test_unseen_release_with_identical_functions_applies(tmp_path, ascend_0302, monkeypatch):
    # GIVEN the FAKE 0.31.0 built from 0.30.0rc2's real files, installed on sys.path
    root = install_fake(tmp_path / "site", ascend_0302)
    monkeypatch.syspath_prepend(str(root))
    # WHEN the start-up check runs on what is installed (version from its metadata, files found by its spec)
    assert versions.installed_version("vllm-ascend") == "0.31.0"
    assert sourcecheck.site_of("vllm_ascend") == root
    verdict = versions.check_installed()
    # THEN it applies, naming the release whose random_sample it matched and the seams it checked
    assert verdict.reason is None, verdict.reason
    assert verdict.note is not None and "vllm-ascend 0.31.0" in verdict.note
    assert "random_sample is identical to vllm-ascend 0.30.0rc2's" in verdict.note
    assert "NPUModelRunner._model_forward" in verdict.note and "overlay applies" in verdict.note


def test_one_changed_line_in_random_sample_steps_aside_naming_it(tmp_path, ascend_0302):
    # GIVEN the FAKE 0.31.0 whose random_sample draws with another rate (one line changed)
    files = with_changed(ascend_0302, SAMPLER, "random_sample", "q.exponential_()", "q.exponential_(2.0)")
    # WHEN checked THEN it steps aside, naming random_sample, its file and the release compared with
    reason = check(install_fake(tmp_path / "site", files)).reason
    assert reason is not None
    assert "random_sample in vllm_ascend/sample/sampler.py differs from every checked release's" in reason
    assert "compared with vllm-ascend 0.30.0rc2, the newest checked" in reason
    assert reason.startswith("vllm-ascend 0.31.0 is not among the releases checked")


def test_a_comment_or_docstring_change_is_not_a_change(tmp_path, ascend_0302):
    # GIVEN the FAKE 0.31.0 whose random_sample has another docstring and a new comment (no code changed)
    files = with_changed(ascend_0302, SAMPLER, "random_sample", '"""Randomly sample from the probabilities.',
                         '# a comment\n    """Sample at random (reworded).')
    # WHEN checked THEN it applies: normalised source text ignores both
    assert check(install_fake(tmp_path / "site", files)).reason is None


def test_seam_no_longer_called_from_execute_model_steps_aside_naming_it(tmp_path, ascend_0302):
    # GIVEN the FAKE 0.31.0 whose execute_model calls the model some other way than through _model_forward
    files = with_changed(ascend_0302, RUNNER, "NPUModelRunner.execute_model", "self._model_forward(",
                         "self._run_the_model(")
    # WHEN checked THEN it steps aside, naming the seam and where it is no longer called from
    reason = check(install_fake(tmp_path / "site", files)).reason
    assert reason is not None
    assert "NPUModelRunner._model_forward is no longer called from NPUModelRunner.execute_model" in reason
    assert "compared with vllm-ascend 0.30.0rc2" in reason


def test_wrapped_seam_with_other_parameters_steps_aside_naming_it(tmp_path, ascend_0302):
    # GIVEN the FAKE 0.31.0 whose profile_run takes a new parameter
    files = with_changed(ascend_0302, RUNNER, "NPUModelRunner.profile_run", "def profile_run(self)",
                         "def profile_run(self, budget)")
    # WHEN checked THEN it steps aside, naming the method and both parameter lists
    reason = check(install_fake(tmp_path / "site", files)).reason
    assert reason is not None and "NPUModelRunner.profile_run in vllm_ascend/worker/model_runner_v1.py takes " \
                                  "(self, budget), not (self)" in reason


def test_the_plugin_applies_or_steps_aside_on_the_unseen_release(tmp_path, ascend_0302, monkeypatch,
                                                                 warnings_of_overlay, vllm_available):
    # GIVEN the switch on, the installed vLLM 0.32 (checked) and the FAKE vllm-ascend 0.31.0 on sys.path
    from overlay.contract import ENV_OUT, ENV_SWITCH
    from overlay.sampler import active

    monkeypatch.setenv(ENV_SWITCH, "1")
    for name, files in (("same", ascend_0302),
                        ("changed", with_changed(ascend_0302, SAMPLER, "random_sample", "q.exponential_()",
                                                 "q.exponential_(2.0)"))):
        root = install_fake(tmp_path / name / "site", files)
        monkeypatch.syspath_prepend(str(root))
        monkeypatch.setenv(ENV_OUT, str(tmp_path / name / "log"))
        warnings_of_overlay.clear()
        try:
            # WHEN vLLM loads the plugin
            plugin.register()
            messages = [r.getMessage() for r in warnings_of_overlay if r.levelno >= logging.WARNING]
            if name == "same":
                # THEN unchanged: the overlay stays on, with no warning
                assert active() is not None and not messages, messages
            else:
                # THEN changed: one warning naming random_sample, one not_applicable notice, nothing armed
                assert active() is None
                assert len(messages) == 1 and "random_sample in vllm_ascend/sample/sampler.py" in messages[0]
                _, lines = read_log(tmp_path / name / "log")
                assert [n["code"] for n in lines["notice"]] == ["not_applicable"]
                assert "vllm-ascend 0.31.0" in lines["notice"][0]["message"]
        finally:
            plugin.unregister()
            sys.path.remove(str(root))  # the next fake alone is installed
            importlib.invalidate_caches()


def test_the_same_rule_serves_vllm_without_v1(tmp_path, pypi_wheels):
    # GIVEN an unseen vLLM whose sources are vLLM 0.34.0's real sampler module and no V1 runner file
    with pypi_wheels("vllm", "0.34.0") as z:
        src = z.read("vllm/v1/sample/ops/topk_topp_sampler.py").decode()
    root = tmp_path / "site"
    (root / "vllm/v1/sample/ops").mkdir(parents=True)
    (root / "vllm/v1/sample/ops/topk_topp_sampler.py").write_text(src)
    # WHEN checked
    reason = sourcecheck.check_installed_source("vllm", "0.35.0", site=root).reason
    # THEN it steps aside with the V2-only notice, which names the in-kernel hash noise and gives no flag
    assert reason is not None and "only Model Runner V2" in reason
    assert "murmur3_uniform32(seed, pos, token)" in reason and "VLLM_USE_V2_MODEL_RUNNER" not in reason


def test_the_same_rule_serves_vllm_with_a_changed_seam(tmp_path, vllm_available):
    # GIVEN an unseen vLLM built from the installed vLLM 0.32's real files, its _model_forward renamed
    from pathlib import Path

    import vllm

    site = Path(vllm.__file__).parent.parent
    files = {p: (site / p).read_text() for p in ("vllm/v1/sample/ops/topk_topp_sampler.py",
                                                 "vllm/v1/worker/gpu_model_runner.py")}
    same = tmp_path / "same"
    for path, text in files.items():
        (same / path).parent.mkdir(parents=True, exist_ok=True)
        (same / path).write_text(text)
    assert sourcecheck.check_installed_source("vllm", "0.35.0", site=same).reason is None
    runner = files["vllm/v1/worker/gpu_model_runner.py"].replace("def _model_forward(", "def _forward_model(")
    (same / "vllm/v1/worker/gpu_model_runner.py").write_text(runner)
    # WHEN checked THEN it steps aside: no forward seam is defined, and it says so naming the runner
    reason = sourcecheck.check_installed_source("vllm", "0.35.0", site=same).reason
    assert reason is not None and "GPUModelRunner" in reason and "_model_forward" in reason
    assert "compared with vllm 0.33.0" in reason


@pytest.mark.parametrize("categorical", [True, False], ids=["0.28-on categorical", "0.27 ascend gumbel"])
def test_ascend_v2_notice_says_what_that_engine_samples_with(tmp_path, ascend_0302, monkeypatch, categorical):
    # GIVEN a FAKE vllm-ascend install with (0.28.0rc1 on) or without (0.27.1rc1) the categorical V2 sampler
    files = dict(ascend_0302) if categorical else {k: v for k, v in ascend_0302.items() if k != CATEGORICAL}
    monkeypatch.syspath_prepend(str(install_fake(tmp_path / "site", files)))
    # WHEN vllm-ascend's V2 runner is built on the NPU (the notice the V2 observer writes)
    message = not_applicable.v2_message("npu")
    # THEN it names what V2 samples with there, and that the default V1 runner is where the overlay runs
    if categorical:
        assert "categorical_sample" in message and "one uniform per row and no noise over the vocabulary" in message
        assert "_categorical_prepare_mass_kernel" in message and "_categorical_sample_kernel" in message
    else:
        assert "Ascend Triton Gumbel kernel (_gumbel_sample_kernel)" in message
    assert "the default V1 runner" in message and "is where the overlay runs" in message


def test_cut_functions_match_the_whole_parse_on_todays_ascend(ascend_0302):
    # GIVEN 0.30.0rc2's real files WHEN fingerprinted from cut-out functions and from whole-file parses
    def read(path):
        return ascend_0302.get(path)

    # THEN they agree, and the release is one the overlay applies to
    fast = sourcecheck.fingerprint("vllm-ascend", read)
    assert fast == sourcecheck.fingerprint("vllm-ascend", read, whole=True)
    assert sourcecheck.applies(fast) and fast["seam"] == "_model_forward"
