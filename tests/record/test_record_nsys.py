"""``record --profiler nsys``: the command line it builds, the export at the end of the run, missing nsys.

nsys is not installed here: a FAKE ``nsys`` executable written by the test stands in where one must exist
(it only logs its arguments, or writes a GENERATED export, tests/nsys_gen.py); the missing-nsys exit runs
through the real CLI. No server runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from nsys_gen import write_nsys_export  # type: ignore[import-not-found]
from shared_paths import REPO  # type: ignore[import-not-found]

from expo_prof.errors import BadInput
from expo_prof.record.command import SHUTDOWN_TIMEOUT_S, inject, parse_target

API = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "/m/Qwen3-32B", "--port", "8123"]
FAKE = """#!{python}
# FAKE nsys (a test stand-in, not NVIDIA's): logs argv; on `export` writes a GENERATED export to --output.
import json, shutil, sys
args = sys.argv[1:]
open({log!r}, "a").write(json.dumps(args) + "\\n")
if args[:1] == ["export"]:
    shutil.copyfile({export!r}, args[args.index("--output") + 1])
"""


@pytest.fixture
def fake_nsys(tmp_path):
    export = tmp_path / "generated.sqlite"
    write_nsys_export(export)
    exe = tmp_path / "bin" / "nsys"
    exe.parent.mkdir()
    log = tmp_path / "nsys-calls.jsonl"
    exe.write_text(FAKE.format(python=sys.executable, log=str(log), export=str(export)))
    exe.chmod(0o755)
    return exe, log


def test_nsys_wraps_the_server_with_serving_options_and_vllms_cuda_profiler(tmp_path, fake_nsys, monkeypatch):
    # GIVEN an api-server command, vLLM 0.32 and nsys (FAKE) found
    exe, _ = fake_nsys
    monkeypatch.delenv("VLLM_WORKER_MULTIPROC_METHOD", raising=False)
    run = tmp_path / "run"
    # WHEN record injects --profiler nsys
    inj = inject(parse_target(API), run_dir=run, overlay=True, profiler="nsys", vllm_version="0.32.0", run_id="r",
                 nsys=str(exe))
    # THEN the command runs under `nsys profile`: CUDA + NVTX only, the capture range opened and closed by the
    # CUDA profiler API, one report into the run's nsys/ folder, overwriting only it
    assert inj.argv[:11] == [str(exe), "profile", "--trace=cuda,nvtx", "--sample=none", "--cpuctxsw=none",
                             "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
                             "--trace-fork-before-exec=true", "--cuda-graph-trace=node",
                             f"--output={run / 'nsys' / 'profile'}", "--force-overwrite=true"]
    # AND vLLM's own command follows (given time to shut down, so the overlay writes its summary), with its CUDA
    # profiler selected (so /start_profile opens the range)
    assert inj.argv[11:-4] == API and inj.argv[-4:-2] == ["--shutdown-timeout", str(SHUTDOWN_TIMEOUT_S)]
    assert inj.argv[-2] == "--profiler-config"
    assert json.loads(inj.argv[-1]) == {"profiler": "cuda"}
    # AND workers are spawned (vLLM's advice under nsys), the overlay on, the tool and folder known
    assert inj.env["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn" and inj.env["EXPO_PROF_ASYNC_EXPONENTIAL"] == "1"
    assert (inj.tool, inj.profiler_dir, inj.profiler) == (str(exe), run / "nsys", "nsys")


def test_older_vllm_gets_the_environment_switch_and_the_oldest_is_refused(tmp_path, fake_nsys, monkeypatch):
    exe, _ = fake_nsys
    monkeypatch.setenv("VLLM_WORKER_MULTIPROC_METHOD", "fork")
    # GIVEN vLLM 0.12 (CUDA profiler by environment, no --profiler-config)
    inj = inject(parse_target(API), run_dir=tmp_path, overlay=False, profiler="nsys", vllm_version="0.12.0",
                 run_id="r", nsys=str(exe))
    # THEN the variable is set and the command left as the user wrote it; the user's own method is kept
    assert inj.env["VLLM_TORCH_CUDA_PROFILE"] == "1" and inj.argv[11:] == API
    assert "VLLM_WORKER_MULTIPROC_METHOD" not in inj.env
    # GIVEN vLLM 0.11, whose /start_profile drives only the torch profiler THEN one clear line, nothing run
    with pytest.raises(BadInput, match=r"vLLM 0.11.2's /start_profile drives only the torch profiler"):
        inject(parse_target(API), run_dir=tmp_path, overlay=False, profiler="nsys", vllm_version="0.11.2",
               run_id="r", nsys=str(exe))


def test_missing_nsys_is_a_clear_error(tmp_path):
    with pytest.raises(BadInput, match=r"--profiler nsys: `nsys-not-installed-here` not found on PATH"):
        inject(parse_target(API), run_dir=tmp_path, overlay=True, profiler="nsys", vllm_version="0.32.0",
               run_id="r", nsys="nsys-not-installed-here")


def test_missing_nsys_exits_2_with_one_line_through_the_real_cli(tmp_path):
    # GIVEN a PATH without nsys WHEN `expo-prof record --profiler nsys -- CMD` runs as a user would
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "expo_prof", "record", "--profiler", "nsys", "--traces-dir",
                        str(tmp_path / "traces"), "--", *API], capture_output=True, text=True, env=env, timeout=300)
    # THEN exit 2 and exactly one error line naming the missing tool, before any server started
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2, r.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and "`nsys` not found on PATH" in lines[0], r.stderr
    assert not list((tmp_path / "traces").glob("*/server.log"))


def test_the_report_is_exported_to_sqlite_at_the_end_of_the_run(tmp_path, fake_nsys):
    # GIVEN a recorder set up for nsys (FAKE), whose server wrote nsys/profile.nsys-rep
    from expo_prof.record.runner import Recorder, RecordOptions

    exe, log = fake_nsys
    run = tmp_path / "run"
    run.mkdir()
    rec = Recorder(API, run, RecordOptions(profiler="nsys", nsys=str(exe)), quiet=True)
    rep = run / "nsys" / "profile.nsys-rep"
    rep.write_bytes(b"report")
    # WHEN the run ends
    rec._export_nsys()
    # THEN nsys exported the report next to it, and the manifest says where
    (call,) = [json.loads(x) for x in log.read_text().splitlines()]
    assert call[:6] == ["export", "--type", "sqlite", "--force-overwrite", "true", "--output"] and call[-1] == str(rep)
    assert rec.manifest["nsys_export"] == {"status": "ok", "sqlite": "nsys/profile.sqlite"}
    # AND the run directory reads as one nsys Timeline, from the export (the report skipped as the same profile)
    from expo_prof.readers import load

    res = load([run])
    assert [t.fmt for t in res.timelines] == ["nsys"] and res.timelines[0].source == str(run / "nsys" / "profile.sqlite")
    # GIVEN a run where nsys wrote no report WHEN it ends THEN the manifest and a note say so
    rep.unlink()
    rec._export_nsys()
    assert rec.manifest["nsys_export"]["status"] == "no report" and "nsys wrote no report" in rec.manifest["notes"][-1]
