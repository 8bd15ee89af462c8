"""``expo-prof demo``: the main job on the built-in default, a tiny Llama on CPU.

Builds (or reuses) a random-weight tiny Llama offline, then does exactly what
``expo-prof record -- python -m vllm.entrypoints.openai.api_server --model
TINY …`` does: serves it on a real vLLM CPU server with the overlay on and the
torch profiler configured, drives the built-in sampled workload, and ends with
the analysis summary (hidden vs exposed exponential time) and where the run
directory, the traces and the HTML timeline are.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from expo_prof.errors import import_extra
from expo_prof.cli.base import command as cli_command

DEMO_LOAD = {"num_prompts": 16, "input_len": 64, "output_len": 64}


@cli_command(
    "demo",
    summary="The main job on the built-in default: record a tiny Llama on a real vLLM CPU server, and report.",
    examples=["expo-prof demo", "expo-prof demo --overlay both --repeat 2    # off/on runs, then: expo-prof compare traces/<session>"],
)
@click.option("--overlay", "overlay_mode", type=click.Choice(["on", "off", "both"]), default="on", show_default=True,
              help="Overlay switch; 'both' alternates off/on runs.")
@click.option("--repeat", type=click.IntRange(1, 20), default=1, show_default=True, help="Runs per overlay mode.")
@click.option("--num-prompts", type=click.IntRange(1, 1000), default=DEMO_LOAD["num_prompts"], show_default=True,
              help="Measured requests.")
@click.option("--input-len", type=click.IntRange(1, 200), default=DEMO_LOAD["input_len"], show_default=True,
              help="Prompt tokens.")
@click.option("--output-len", type=click.IntRange(1, 200), default=DEMO_LOAD["output_len"], show_default=True,
              help="Generated tokens per request.")
@click.option("--traces-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("traces"), show_default=True,
              metavar="DIR", help="Where the run directory goes.")
@click.option("--model", "model_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              metavar="DIR", help="Serve this model instead of the built-in tiny Llama.")
@click.option("--ready-timeout", type=click.FloatRange(10), default=600.0, show_default=True,
              help="Seconds to wait for the server to be ready.")
@click.pass_obj
def command(settings, overlay_mode, repeat, num_prompts, input_len, output_len, traces_dir, model_dir, ready_timeout) -> int:
    """Record the built-in tiny model on CPU with the overlay on, and report."""
    import_extra("serve", "expo-prof demo (its built-in load)")
    from expo_prof.cli.run_summary import after_run
    from expo_prof.console import err_console
    from expo_prof.record.runner import RecordOptions
    from expo_prof.record.session import record_session
    from expo_prof.serving.launch import DEFAULT_ENV, free_port, vllm_argv
    from expo_prof.serving.tinymodel import build_tiny_llama
    from expo_prof.serving.load import WorkloadSpec

    if model_dir is None:
        with err_console.status("building the tiny Llama (offline, cached)"):
            model_dir = build_tiny_llama()
    # vllm_argv already passes --shutdown-timeout (vLLM's default 0 kills the worker at once on SIGINT, before
    # the overlay writes its summary line): passing it here too wrote it twice into the manifest.
    argv = vllm_argv(model_dir, free_port(), python=sys.executable)
    spec = WorkloadSpec(num_prompts=num_prompts, input_len=input_len, output_len=output_len, temperature=1.0, warmup=1)
    opts = RecordOptions(workload=spec, ready_timeout_s=ready_timeout, extra_env=dict(DEFAULT_ENV))
    modes = {"on": [True], "off": [False], "both": [False, True]}[overlay_mode]
    return record_session(
        argv, opts, modes=modes, repeat=repeat, out=None, traces_dir=traces_dir,
        quiet=settings.quiet, name="demo", after_run=after_run(settings.quiet),
    )
