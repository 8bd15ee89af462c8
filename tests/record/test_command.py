"""How ``record`` reads and adapts the command it runs (no server needed)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from expo_prof.errors import BadInput
from expo_prof.record.command import inject, package_versions, parse_target
from expo_prof.runs.layout import claim_out_dir, new_dir, short_name
from expo_prof.workload import WorkloadSpec, clamp_lengths

API = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "/m/Qwen3-32B"]


def test_host_and_port_come_from_the_commands_own_arguments():
    # GIVEN commands with and without --host/--port, in both spellings
    # WHEN parsed THEN vLLM's defaults apply unless overridden; 0.0.0.0 is reached on loopback
    assert parse_target(API).port == 8000
    t = parse_target(API + ["--port=9123", "--host", "0.0.0.0"])
    assert (t.kind, t.host, t.port, t.base_url) == ("api-server", "127.0.0.1", 9123, "http://127.0.0.1:9123")
    assert parse_target(API + ["--host", "::1", "--port", "7"]).base_url == "http://[::1]:7"
    with pytest.raises(BadInput, match="--port 'x'"):
        parse_target(API + ["--port", "x"])


def test_unknown_command_is_refused_before_anything_runs():
    with pytest.raises(BadInput, match="command not found: nope-nope"):
        parse_target(["nope-nope", "serve"])
    with pytest.raises(BadInput, match="no command"):
        parse_target([])


def test_profiler_config_fits_the_installed_vllm(tmp_path):
    # GIVEN an api-server command
    t = parse_target(API)
    # WHEN vLLM is new (>= 0.13) THEN --profiler-config JSON points into the run dir, stacks off
    new = inject(t, run_dir=tmp_path, overlay=True, profiler="torch", vllm_version="0.32.0", run_id="r")
    cfg = json.loads(new.argv[new.argv.index("--profiler-config") + 1])
    assert cfg == {
        "profiler": "torch", "torch_profiler_dir": str(tmp_path / "profiler"),
        "torch_profiler_with_stack": False, "torch_profiler_use_gzip": True,
    }
    assert new.env["EXPO_PROF_ASYNC_EXPONENTIAL"] == "1" and new.env["EXPO_PROF_OUT"] == str(tmp_path / "overlay")
    # WHEN vLLM is old THEN the environment variable, argv untouched
    old = inject(t, run_dir=tmp_path, overlay=False, profiler="torch", vllm_version="0.11.2", run_id="r")
    assert old.argv == API and old.env["VLLM_TORCH_PROFILER_DIR"] == str(tmp_path / "profiler")
    assert old.env["EXPO_PROF_ASYNC_EXPONENTIAL"] == "0"
    # WHEN no profiler THEN nothing but the overlay environment
    none = inject(t, run_dir=tmp_path, overlay=True, profiler="none", vllm_version="0.32.0", run_id="r")
    assert none.argv == API and none.profiler_dir is None


def test_wrapper_scripts_get_no_injected_flags(tmp_path):
    # GIVEN a wrapper script whose argument handling is unknown
    script = tmp_path / "serve.sh"
    script.write_text("#!/bin/sh\nexec true\n")
    script.chmod(0o755)
    t = parse_target([str(script), "--port", "8100"])
    inj = inject(t, run_dir=tmp_path, overlay=True, profiler="torch", vllm_version="0.32.0", run_id="r")
    # THEN its argv is left alone and the note says how to add the profiler config
    assert t.kind == "other" and t.port == 8100 and inj.argv == [str(script), "--port", "8100"]
    assert any("--profiler-config" in n for n in inj.notes)


def test_msprof_missing_is_a_clear_error(tmp_path):
    with pytest.raises(BadInput, match="msprof.*not found"):
        inject(parse_target(API), run_dir=tmp_path, overlay=True, profiler="msprof", vllm_version="0.32.0",
               run_id="r", msprof="msprof-not-installed-here")


def test_versions_are_read_from_the_commands_python():
    v = package_versions(sys.executable)
    assert v["vllm"] and v["torch"] and v["torch_npu"] is None


def test_run_directories_never_overwrite(tmp_path):
    a = new_dir(tmp_path, "x")
    b = new_dir(tmp_path, "x")
    assert a != b and a.is_dir() and b.is_dir()
    (a / "manifest.json").write_text("{}")
    with pytest.raises(BadInput, match="already holds a recording"):
        claim_out_dir(a)
    assert short_name(API) == "Qwen3-32B"
    assert short_name(["vllm", "serve", "org/Model-7B", "--port", "1"]) == "Model-7B"


def test_lengths_that_do_not_fit_the_context_are_clamped():
    # GIVEN the default 1536 in -> 2048 out and a 256-token model
    spec, note = clamp_lengths(WorkloadSpec(), 256)
    # THEN both shrink by one factor to fit, with a warning that says so
    assert spec.input_len + spec.output_len <= 255 and spec.input_len > 0 and spec.output_len > 0
    assert abs(spec.input_len / spec.output_len - 1536 / 2048) < 0.05
    assert note and "max_model_len 256" in note
    same, none = clamp_lengths(WorkloadSpec(input_len=10, output_len=10), 256)
    assert none is None and same.input_len == 10
