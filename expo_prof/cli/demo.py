"""``expo-prof demo``: the main job on the built-in default, a tiny Llama on CPU.

Builds (or reuses) a random-weight tiny Llama offline, then does exactly what
``expo-prof record -- python -m vllm.entrypoints.openai.api_server --model
TINY …`` does: serves it on a real vLLM CPU server with the overlay on and the
torch profiler configured, drives the built-in sampled workload, and ends with
the analysis summary (hidden vs exposed exponential time) and where the run
directory, the traces and the HTML timeline are.

By default the run is a switchback run (``record --overlay switchback``): blocks
of steps alternate between the overlay and vLLM's own sampling inside the one
server run, and the load goes on until the answer is settled (at most 3 minutes
of load: ``--budget``), so the demo ends with the product's answer — enable,
keep off, or no effect beyond the margin, with the saving per step, its 95%
confidence sequence and what that means for output tok/s — instead of a
saving nobody measured. Overlap (hidden time) alone is not saving. The load is
fewer prompts with longer outputs than an on-only run needs: switchback compares
blocks of decode steps, so it is the number of steps (not requests) that makes
the CI; the server start (~35 s on 2 cores) dominates the wall time either way.
The switchback run has no torch profiler (its cost per op would be measured as
part of the arms, as ``ab --switchback`` also avoids); ``--overlay on`` is the
traced demo of before.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from expo_prof.errors import import_extra
from expo_prof.cli.base import command as cli_command
from expo_prof.cli.record import sequential_options
from expo_prof.analysis.saving.words import ci_text, tokps_ci_text, tokps_text
from expo_prof.words import fmt_ns, plural

if TYPE_CHECKING:
    from expo_prof.analysis.model import Saving

#: The load of an on / off / both demo.
DEMO_LOAD = {"num_prompts": 16, "input_len": 64, "output_len": 64}
#: The load of the default switchback demo: ~192 decode steps = 24 blocks of 8 = 12 block pairs (the CI needs
#: at least 2; more pairs narrow it), in about the wall time of the on-only demo (measured: docs/usage.md).
SWITCHBACK_LOAD = {"num_prompts": 4, "input_len": 32, "output_len": 192}


@cli_command(
    "demo",
    summary="The main job on the built-in default: a switchback run of a tiny Llama on a real vLLM CPU server, "
            "ending with what the overlay saves.",
    examples=["expo-prof demo", "expo-prof demo --overlay on    # overlay on throughout (no saving measured)",
              "expo-prof demo --overlay both --repeat 2    # off/on runs, then: expo-prof compare traces/<session>"],
)
@click.option("--overlay", "overlay_mode", type=click.Choice(["switchback", "on", "off", "both"]), default="switchback",
              show_default=True, help="Overlay switch; 'switchback' alternates blocks of steps off/on in the one run "
                                      "and measures the saving; 'both' alternates off/on runs.")
@click.option("--repeat", type=click.IntRange(1, 20), default=1, show_default=True,
              help="Runs per overlay mode (not with switchback).")
@click.option("--num-prompts", type=click.IntRange(1, 1000), default=None,
              help=f"Measured requests [default: {SWITCHBACK_LOAD['num_prompts']} with switchback, "
                   f"else {DEMO_LOAD['num_prompts']}].")
@click.option("--input-len", type=click.IntRange(1, 200), default=None,
              help=f"Prompt tokens [default: {SWITCHBACK_LOAD['input_len']} with switchback, "
                   f"else {DEMO_LOAD['input_len']}].")
@click.option("--output-len", type=click.IntRange(1, 200), default=None,
              help=f"Generated tokens per request [default: {SWITCHBACK_LOAD['output_len']} with switchback, "
                   f"else {DEMO_LOAD['output_len']}].")
@click.option("--traces-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("traces"), show_default=True,
              metavar="DIR", help="Where the run directory goes.")
@click.option("--model", "model_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              metavar="DIR", help="Serve this model instead of the built-in tiny Llama.")
@click.option("--ready-timeout", type=click.FloatRange(10), default=600.0, show_default=True,
              help="Seconds to wait for the server to be ready.")
@sequential_options
@click.pass_obj
def command(settings, overlay_mode, repeat, num_prompts, input_len, output_len, traces_dir, model_dir, ready_timeout,
            **seq) -> int:
    """Record the built-in tiny model on CPU in switchback (overlay off/on in blocks), report, and end with the
    measured saving, its CI and what it means for output tok/s."""
    import_extra("serve", "expo-prof demo (its built-in load)")
    from expo_prof.cli.record import check_run_dir_writable, sequential_settings, switchback_block
    from expo_prof.record.settle import DEMO_BUDGET
    from expo_prof.cli.run_summary import after_run
    from expo_prof.console import err_console
    from expo_prof.record.runner import RecordOptions
    from expo_prof.record.session import record_session
    from expo_prof.serving.launch import DEFAULT_ENV, free_port, vllm_argv
    from expo_prof.serving.tinymodel import build_tiny_llama
    from expo_prof.serving.load import WorkloadSpec

    check_run_dir_writable(traces_dir, "--traces-dir")  # one line, before the model is built or a server runs
    block = switchback_block(overlay_mode, None, repeat, "demo's default --overlay switchback")
    sequential, budget = sequential_settings(overlay_mode == "switchback", seq, "--overlay switchback",
                                             default_budget=DEMO_BUDGET)
    load = SWITCHBACK_LOAD if overlay_mode == "switchback" else DEMO_LOAD
    num_prompts = load["num_prompts"] if num_prompts is None else num_prompts
    input_len = load["input_len"] if input_len is None else input_len
    output_len = load["output_len"] if output_len is None else output_len
    if model_dir is None:
        with err_console.status("building the tiny Llama (offline, cached)"):
            model_dir = build_tiny_llama()
    # vllm_argv already passes --shutdown-timeout (vLLM's default 0 kills the worker at once on SIGINT, before
    # the overlay writes its summary line): passing it here too wrote it twice into the manifest.
    argv = vllm_argv(model_dir, free_port(), python=sys.executable)
    spec = WorkloadSpec(num_prompts=num_prompts, input_len=input_len, output_len=output_len, temperature=1.0, warmup=1)
    # Switchback records without the torch profiler, as `ab --switchback` does: the profiler's own cost per
    # op (the side lane's ops included) would be part of what the two arms compare, and its trace of every
    # step is most of the demo's time after the server start. The timeline page is drawn from the overlay log.
    opts = RecordOptions(workload=spec, ready_timeout_s=ready_timeout, extra_env=dict(DEFAULT_ENV),
                         switchback_block=block, profiler="none" if block is not None else "torch",
                         sequential=sequential, budget=budget)
    modes = {"on": [True], "off": [False], "both": [False, True], "switchback": [True]}[overlay_mode]
    closing = _answer if overlay_mode == "switchback" and not settings.quiet else None
    return record_session(
        argv, opts, modes=modes, repeat=repeat, out=None, traces_dir=traces_dir,
        quiet=settings.quiet, name="demo", after_run=after_run(settings.quiet, closing),
    )


def _answer(result) -> None:
    """Print the demo's last line (:func:`answer_line`) for the run's lowest rank."""
    from expo_prof.console import console, safe

    measured = [rr for rr in result.recordings if rr.savings]
    sv = measured[0].savings[0] if measured else None
    under = measured[0].measured_under if measured else ""
    console.print(f"[bold]answer:[/] {safe(answer_line(sv, under))}", highlight=False)


def answer_line(sv: Saving | None, under: str = "") -> str:
    """What the switchback run measured, in one line: its decision, the saving per step with its 95% confidence
    sequence (a run that decided as it went) or CI (a fixed length), and the output tok/s it means; words that
    follow the interval; ``under``: the load it was measured under (:func:`expo_prof.pipeline.result.measured_under`). Where nothing could
    be measured, it says why and what to run instead."""
    more = "run longer: expo-prof demo --budget 5m"
    if sv is None:
        return f"saving not measured: the run has no switchback blocks to compare ({more})"
    if sv.saving is None:
        return f"saving not measured: no pair of switchback blocks ran a batch shape in common ({more})"
    where = f"on this machine and load ({plural(sv.pairs, 'block pair')} of {sv.block_steps} steps)"
    if under:
        where = f"on this machine under {under} ({plural(sv.pairs, 'block pair')} of {sv.block_steps} steps)"
    if sv.sequence is not None:
        return _sequential_answer(sv, where)
    mean = sv.saving.mean_ns
    if sv.saving.ci_ns is None:
        return (f"saving {fmt_ns(mean, signed=True)}/step from {plural(sv.pairs, 'block pair')}: no confidence "
                f"interval (at least 2 pairs needed; {more})")
    lo, hi = sorted(sv.saving.ci_ns)
    tok = "" if sv.tokps_change_pct is None else tokps_text(sv.tokps_change_pct)
    tok_ci_words = tokps_ci_text(sv.tokps_ci_pct, sv.tokps_ci_note)
    tok_ci = f" ({tok_ci_words})" if tok_ci_words else ""
    if lo > 0:
        return (f"the overlay saves {fmt_ns(mean)}/step ({ci_text(sv.saving)}): output tok/s "
                f"{tok}{tok_ci} with it on, {where}")
    if hi < 0:
        return (f"the overlay costs {fmt_ns(-mean)}/step ({ci_text(sv.saving, -1)}): output tok/s "
                f"{tok}{tok_ci} with it on, {where} — keep it off here")
    settle = (f"; about {sv.steps_needed} steps would settle a saving this size" if sv.steps_needed is not None
              else "")
    return (f"no difference shown: saving {fmt_ns(mean, signed=True)}/step, 95% CI {fmt_ns(lo, signed=True)} to "
            f"{fmt_ns(hi, signed=True)} (width {fmt_ns(hi - lo)}) spans zero, so output tok/s {tok}{tok_ci} is "
            f"within this run's noise, {where}{settle}")


def _sequential_answer(sv: Saving, where: str) -> str:
    """The answer of a switchback that decided as it went: its decision first, then the figures."""
    from expo_prof.analysis.saving.sequential import MIN_PAIRS
    from expo_prof.analysis.saving.words import margin_words, sequence_words
    from expo_prof.words import ENABLE, KEEP_OFF, NO_EFFECT

    sq = sv.sequence
    assert sq is not None
    margin = margin_words(sq.margin_ns, sv.baseline_cadence_ns)
    if sq.lo_ns is None or sq.hi_ns is None:
        return (f"undecided: {plural(sq.pairs, 'block pair')} are too few for a confidence sequence (at least {MIN_PAIRS}), "
                f"{where}; run longer: expo-prof demo --budget 5m")
    if sq.decision in (ENABLE, KEEP_OFF):
        tail = "" if sq.decision == ENABLE else " — keep it off here"
        return (f"{sq.decision}: the overlay {sequence_words(sq, sv.baseline_cadence_ns)} with it on, {where}{tail}; another "
                "machine or load may differ in size, only the sign carries over")
    lo_hi = f"{fmt_ns(sq.lo_ns, signed=True)} to {fmt_ns(sq.hi_ns, signed=True)}"
    if sq.decision == NO_EFFECT:
        return (f"{sq.decision} {margin}: the saving's 95% confidence sequence {lo_hi}/step lies inside it — the "
                f"overlay does not matter here, {where}")
    needed = f"; about {sv.steps_needed} more steps would settle it" if sv.steps_needed is not None else ""
    return (f"{sq.decision} when the budget ended: saving {fmt_ns(sq.mean_ns, signed=True)}/step, 95% confidence "
            f"sequence {lo_hi} — neither outside 0 nor inside the margin {margin}, {where}{needed}")
