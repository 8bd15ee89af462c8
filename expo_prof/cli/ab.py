"""``expo-prof ab -- CMD…``: run CMD with the overlay off and on, alternating, then compare (docs/ab.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from expo_prof.cli.base import command as cli_command
from expo_prof.cli.common import resolve_format
from expo_prof.cli.compare import check_out, comparison_options, pairing, run_comparison, switchback_comparison
from expo_prof.cli.base import refuse_together
from expo_prof.cli.record import (
    LOAD_OPTIONS,
    build_spec,
    check_run_dir_writable,
    load_argv,
    sequential_options,
    sequential_settings,
    switchback_arms_env,
    switchback_block,
    workload_options,
)
from expo_prof.errors import BadInput


@cli_command(
    "ab",
    summary="Should the overlay be on here? Record off, on, off, on … runs, then compare them.",
    examples=[
        "expo-prof ab --switchback -- vllm serve Qwen/Qwen3-32B --port 8000   # one launch: blocks off/on",
        "expo-prof ab --margin 2% --budget '16 launches' -- vllm serve MODEL   # launch pairs until settled",
        "expo-prof ab --repeat 3 -- vllm serve Qwen/Qwen3-32B --port 8000",
        "expo-prof ab --repeat 2 --num-prompts 8 --input-len 64 --output-len 32 -- "
        "python -m vllm.entrypoints.openai.api_server --model ./tiny",
        "expo-prof ab --repeat 3 --json -o ab.json -- vllm serve MODEL",
        "expo-prof ab --switchback --repeat 3 -- vllm serve MODEL   # 3 launches: does the saving hold across them?",
    ],
    context_settings={"ignore_unknown_options": False},
)
@click.option("--switchback", is_flag=True,
              help="One server run whose blocks of steps alternate off and on: the saving with its CI from one "
                   "launch (docs/ab.md, 'Switchback').")
@click.option("--block-steps", type=int, default=None, metavar="K",
              help="With --switchback: steps per block (default 8; the first of each is washout).")
@click.option("--arms", default=None, metavar="ARMS",
              help="With --switchback: off,on (default) or off,on,native (docs/overlay.md, 'Switchback').")
@click.option("--repeat", type=int, default=None, metavar="N",
              help="A fixed number of runs per side (off, on, off, on … = 2×N runs), judged by the fixed-horizon "
                   "CI. Without it, ab launches pairs until their confidence sequence settles (--margin, --budget: "
                   "20 launches by default). With --switchback: N launches, each a whole switchback, and whether "
                   "they differ more than their intervals allow (the between-run spread).")
@click.option("--session-dir", "--out", "out", type=click.Path(path_type=Path), default=None, metavar="DIR",
              help="Session directory of the runs (default: traces/<UTC stamp>-<name>); -o is the comparison's file.")
@click.option("--traces-dir", type=click.Path(path_type=Path), default=Path("traces"), show_default=True,
              metavar="DIR", help="Where new session directories go.")
@click.option("--profiler", type=click.Choice(["torch", "msprof", "nsys", "none"]), default="none", show_default=True,
              help="Profile every run: gives the off runs' forward time (the 'why'), but slows both sides.")
@click.option("--profile-requests", type=int, default=None, help="Close the profiler window after this many finished requests.")
@click.option("--ready-timeout", type=float, default=600.0, show_default=True, help="Seconds to wait for /health.")
@sequential_options(launches=True)
@workload_options
@comparison_options
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_obj
def command(settings, switchback, block_steps, arms, repeat, out, traces_dir, profiler, profile_requests, ready_timeout, cmd,
            **kw) -> int:
    """Should the overlay be on for this model on this machine? Measure it: off, on, off, on … then compare.

    Every run is recorded as by `record` (same built-in workload, a fresh
    server each time) into one session directory; the runs are paired in
    the order they ran, so drift of the machine hits both sides alike.
    """
    from expo_prof.abtest.inputs.loader import load
    from expo_prof.record.command import parse_target
    from expo_prof.cli.run_summary import after_run
    from expo_prof.runs.layout import new_dir, short_name
    from expo_prof.record.runner import RecordOptions
    from expo_prof.record.session import record_session

    if repeat is not None and repeat < 1:
        raise BadInput("--repeat must be at least 1")
    ctx = click.get_current_context()
    launches = 1
    if switchback:
        refuse_together(ctx, "switchback", ("paired", "unpaired", "drop_warmup", "drop_outliers", "primary"),
                        "one switchback run measures both sides")
        # --repeat N with --switchback: N launches, each a whole switchback, and the spread between them.
        launches = repeat or 1
    block = switchback_block("switchback" if switchback else "on", block_steps, 1, "--switchback")
    arms_env = switchback_arms_env("switchback" if switchback else "on", arms, "--switchback")
    wl = {k: kw.pop(k) for k in list(kw) if k not in _COMPARISON_KEYS}
    rule = None if switchback else launch_rule(ctx, wl)
    sequential, budget = sequential_settings(switchback, wl, "--switchback") if switchback else (None, None)
    if wl["no_load"] or wl["duration"] is not None:
        raise BadInput("ab measures a load: --no-load / --duration do not apply (use --load-cmd for your own)")
    refuse_together(click.get_current_context(), "load_cmd", LOAD_OPTIONS, "your load command sets its own load")
    spec = build_spec(wl)
    argv = list(cmd)
    parse_target(argv)  # a bad command fails before any directory is created
    kw["fmt"] = resolve_format(kw["fmt"], kw.pop("as_json"), kw["output"])
    check_out(kw["output"], [out] if out is not None else [], kw["fmt"])
    check_run_dir_writable(*((out, "--session-dir") if out is not None else (traces_dir, "--traces-dir")))
    top = out if out is not None else new_dir(traces_dir, short_name(argv))
    if rule is not None:
        from expo_prof.console import err_console as _err
        from expo_prof.record.launches import Settler

        settler = Settler(top, rule, None if quiet_of(settings, kw) else
                          (lambda text: _err.print(text, markup=False, highlight=False)))
        # Pairs up to the launch budget (a time budget: the settler's clock ends it).
        repeat = rule.launches // 2 if rule.launches is not None else 10_000
    elif repeat is None:
        repeat = DEFAULT_REPEAT  # a fixed length without --repeat: --fixed-length, or the user's load command
    opts = RecordOptions(profiler=profiler, workload=spec, load_cmd=load_argv(wl), ready_timeout_s=ready_timeout,
                         profile_requests=profile_requests, switchback_block=block, extra_env=arms_env,
                         sequential=sequential, budget=budget)
    to_stdout = kw["fmt"] == "json" and kw["output"] is None
    quiet = quiet_of(settings, kw)
    from expo_prof.console import console

    saved = console.file
    if to_stdout:
        console.file = sys.stderr  # stdout carries only the JSON; the recording's lines go to stderr
    try:
        record_session(argv, opts, modes=[True] if switchback else [False, True],
                       repeat=launches if switchback else repeat,
                       out=top, traces_dir=traces_dir, quiet=quiet, analyze_after=True, after_run=after_run(quiet),
                       stop=settler if rule is not None else None)
    finally:
        console.file = saved
    if rule is not None:
        from expo_prof.console import err_console
        from expo_prof.record.launches import line

        # The answer leads: the sequence's decision, before the per-metric tables (fixed-horizon, looked at once).
        if settler.last is not None:
            con = err_console if to_stdout else console
            con.print(line(settler.last), markup=False, highlight=False)
            con.print("(the comparison below judges these launches as one fixed set, looked at once: the decision "
                      "is the confidence sequence's above)", markup=False, highlight=False)
    if switchback and launches > 1:
        from expo_prof.cli.compare import switchback_runs, switchback_runs_comparison

        runs = switchback_runs([top])
        if runs is None:
            raise BadInput(f"{top}: fewer than 2 of its switchback launches ended ok; see session.json")
        return switchback_runs_comparison(runs, kw, shown=not quiet)
    if switchback:
        # The run's summary (after_run) already printed the switchback block and the saving line unless quiet:
        # the comparison then only writes what was asked elsewhere (JSON, -o FILE), so each block shows once.
        return switchback_comparison(top, kw, settings, shown=not quiet)
    loaded = load([top], [], paired=pairing(kw))
    return run_comparison(loaded, kw, settings, [top])


def quiet_of(settings, kw: dict) -> bool:
    """Whether ab prints nothing but its result: -q, or the JSON on stdout."""
    return bool(getattr(settings, "quiet", False)) or (kw["fmt"] == "json" and kw["output"] is None)


#: Runs per side of a fixed-length ab without --repeat (--fixed-length, --load-cmd): ab's old default.
DEFAULT_REPEAT = 3


def launch_rule(ctx: click.Context, wl: dict):
    """The sequential rule of ab across launches (expo_prof/record/launches.py), or None for a fixed length:
    ``--repeat N`` given, or ``--fixed-length``, or the user's own load command (its length is its own)."""
    from expo_prof.cli.record import SEQUENTIAL_OPTIONS
    from expo_prof.record.launches import parse_rule

    given = {n for n in SEQUENTIAL_OPTIONS if ctx.get_parameter_source(n) == click.core.ParameterSource.COMMANDLINE}
    fixed = ctx.params.get("repeat") is not None or wl["fixed_length"]
    margin, budget = wl.pop("margin"), wl.pop("budget")
    wl.pop("fixed_length")
    if fixed or wl.get("load_cmd") is not None:
        if given - {"fixed_length"}:
            raise BadInput("--margin / --budget decide as the launches go; --repeat N (or --fixed-length) fixes "
                           "their number instead: give one or the other")
        return None
    return parse_rule(margin, budget)


_COMPARISON_KEYS = {
    "paired", "unpaired", "alpha", "primary", "drop_warmup", "drop_outliers", "allow_mismatch", "all_metrics", "fmt",
    "as_json", "output",
}
