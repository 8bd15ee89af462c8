"""How ``record`` reads and adapts the command it runs (no server needed)."""

from __future__ import annotations

import json
import sys

import pytest

from expo_prof.errors import BadInput
from expo_prof.record.command import inject, package_versions, parse_target
from expo_prof.runs.layout import claim_out_dir, new_dir, short_name
from expo_prof.serving.load import WorkloadSpec, clamp_lengths

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
    # WHEN no profiler THEN nothing but the overlay environment (and the shutdown grace vLLM >= 0.18 takes)
    none = inject(t, run_dir=tmp_path, overlay=True, profiler="none", vllm_version="0.32.0", run_id="r")
    assert none.argv == [*API, "--shutdown-timeout", "10"] and none.profiler_dir is None


def test_switchback_sets_the_mode_and_the_block_length(tmp_path):
    # GIVEN a recorded run asked to switch back in blocks of 6 steps
    inj = inject(parse_target(API), run_dir=tmp_path, overlay=True, profiler="none", vllm_version="0.32.0", run_id="r",
                 switchback_block=6)
    # THEN the overlay runs in switchback mode with that block length; the alias just says "on" (it takes no mode)
    assert (inj.env["EXPO_PROF_ASYNC_EXPONENTIAL"], inj.env["EXPO_PROF_SWITCHBACK_BLOCK"]) == ("switchback", "6")
    assert inj.env["VLLM_ASCEND_ENABLE_ASYNC_EXPONENTIAL"] == "1"
    from overlay.switch import overlay_mode, switchback_block

    assert overlay_mode(inj.env) == "switchback" and switchback_block(inj.env) == 6
    # AND without it the run is a plain on run: no block length in its environment
    plain = inject(parse_target(API), run_dir=tmp_path, overlay=True, profiler="none", vllm_version="0.32.0",
                   run_id="r")
    assert plain.env["EXPO_PROF_ASYNC_EXPONENTIAL"] == "1" and "EXPO_PROF_SWITCHBACK_BLOCK" not in plain.env


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


def test_a_ray_command_is_told_apart_and_asks_vllm_to_copy_the_overlay_variables(tmp_path, monkeypatch):
    py = sys.executable
    # GIVEN commands with and without vLLM's Ray executor, and a user who already asks vLLM to copy MY_
    ray_cmd = parse_target([py, "-m", "vllm.entrypoints.openai.api_server", "--distributed-executor-backend", "ray"])
    dp_ray = parse_target([py, "-m", "vllm.entrypoints.openai.api_server", "--data-parallel-backend=ray"])
    plain = parse_target([py, "-m", "vllm.entrypoints.openai.api_server", "--distributed-executor-backend", "mp"])
    monkeypatch.setenv("VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY", "MY_")
    # WHEN record builds their environment
    inj = inject(ray_cmd, run_dir=tmp_path, overlay=True, profiler="none", vllm_version="0.32.0", run_id="r")
    old = inject(ray_cmd, run_dir=tmp_path, overlay=True, profiler="none", vllm_version="0.16.0", run_id="r")
    # THEN Ray is recognised from either flag, and only there
    assert ray_cmd.uses_ray and dp_ray.uses_ray and not plain.uses_ray
    # AND the overlay's prefix is added to the user's own, once
    assert inj.env["VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY"] == "MY_,EXPO_PROF_"
    monkeypatch.setenv("VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY", " EXPO_PROF_ ")
    again = inject(ray_cmd, run_dir=tmp_path, overlay=True, profiler="none", vllm_version="0.32.0", run_id="r")
    assert again.env["VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY"] == "EXPO_PROF_"
    # AND a vLLM too old to copy them says what to do instead
    assert not any("ray start" in n for n in inj.notes) and any("ray start" in n for n in old.notes)


def test_vllms_own_ray_executor_copies_what_record_sets_to_its_workers(tmp_path, monkeypatch, vllm_available):
    from overlay.contract import ENV_OUT, ENV_RUN_ID, ENV_SWITCH

    # GIVEN the environment record gives a command on vLLM's Ray executor
    target = parse_target([sys.executable, "-m", "vllm.entrypoints.openai.api_server",
                           "--distributed-executor-backend", "ray"])
    inj = inject(target, run_dir=tmp_path, overlay=True, profiler="torch", vllm_version="0.32.0", run_id="r")
    monkeypatch.delenv("VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY", raising=False)
    for k, v in inj.env.items():
        monkeypatch.setenv(k, v)
    # WHEN the installed vLLM's own code picks the variables its Ray executor copies to every worker
    from vllm.ray.ray_env import get_env_vars_to_copy

    copied = get_env_vars_to_copy(destination="workers")
    # THEN the overlay's switch, output folder and run id are among them
    assert {ENV_SWITCH, ENV_OUT, ENV_RUN_ID} <= copied, sorted(copied)
    # AND without record's variable they would not be (the check can fail)
    monkeypatch.delenv("VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY")
    assert ENV_OUT not in get_env_vars_to_copy(destination="workers")


def test_after_a_ray_run_with_no_cluster_left_nothing_is_collected(tmp_path):
    from expo_prof.record.collect import after_run, cluster_address

    # GIVEN a run whose command started its own Ray (gone with it): no RAY_ADDRESS, and the address file of a
    # `ray start` that no longer answers
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text("127.0.0.1:1\n")
    env = {"RAY_TMPDIR": str(tmp_path)}
    # WHEN record's last step looks for the cluster
    got = after_run(tmp_path / "run", env)
    # THEN nothing is collected, and the manifest says why; a RAY_ADDRESS is taken as given
    assert cluster_address(env) is None and got["status"] == "skipped" and "already here" in got["why"]
    assert cluster_address({"RAY_ADDRESS": "10.0.0.1:6379"}) == "10.0.0.1:6379"
    assert cluster_address({"RAY_ADDRESS": "local"}) is None
