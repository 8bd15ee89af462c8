"""``expo-prof record [OPTIONS] -- CMD…``: capture a vLLM serving run into a run directory."""

from __future__ import annotations

import math
import os
from pathlib import Path

import click

from expo_prof.cli.base import command as cli_command, refuse_together
from expo_prof.errors import BadInput, import_extra

OVERLAY_MODES = ("on", "off", "both", "switchback")


def workload_options(f):
    """The built-in load generator's options (shared with ``ab``)."""
    opts = [
        click.option("--num-prompts", type=int, default=48, show_default=True, help="Measured requests."),
        click.option("--input-len", type=int, default=1536, show_default=True, help="Prompt tokens (clamped to the model's context)."),
        click.option("--output-len", type=int, default=2048, show_default=True, help="Generated tokens per request (ignore_eos)."),
        click.option("--range-ratio", type=float, default=0.0, show_default=True, help="Lengths vary by ± this fraction."),
        click.option("--max-concurrency", type=int, default=None, help="At most this many requests in flight."),
        click.option("--request-rate", type=float, default=math.inf, help="Requests per second (default: all at once)."),
        click.option("--temperature", type=float, default=1.0, show_default=True),
        click.option("--top-p", type=float, default=None),
        click.option("--top-k", type=int, default=None),
        click.option("--seeded/--no-seeded", default=False, help="Give each request its own sampling seed."),
        click.option("--warmup", type=int, default=1, show_default=True, help="Warm-up requests before measuring."),
        click.option("--no-load", is_flag=True, help="Send no load: record until Ctrl-C or --duration."),
        click.option("--load-cmd", metavar="'CMD'", default=None,
                     help="Drive the load with your own command, e.g. 'vllm bench serve --base-url {base_url} --model "
                          "{model} --dataset-name sharegpt … --save-result' ({base_url} {host} {port} {model} filled "
                          "in); its saved result becomes the run's metrics."),
        click.option("--duration", type=float, default=None, help="With --no-load: stop after this many seconds."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


#: The built-in load's options: meaningless with --no-load.
LOAD_OPTIONS = ("num_prompts", "input_len", "output_len", "range_ratio", "max_concurrency", "request_rate",
                "temperature", "top_p", "top_k", "seeded", "warmup")


def load_argv(kw: dict) -> list[str] | None:
    """``--load-cmd`` as an argv list (None without it)."""
    if kw.get("load_cmd") is None:
        return None
    from expo_prof.record.loadcmd import parse

    return parse(kw["load_cmd"])


def build_spec(kw: dict):
    """WorkloadSpec from the workload options (None with --no-load or --load-cmd)."""
    from expo_prof.serving.load import WorkloadSpec

    if kw["no_load"] or kw.get("load_cmd") is not None:
        return None
    # Checked before anything is launched: the built-in load's HTTP client is the optional extra "serve".
    import_extra("serve", "the built-in load (--load-cmd CMD drives your own)")
    for name in ("num_prompts", "input_len", "output_len", "warmup"):
        if kw[name] is not None and kw[name] < (0 if name == "warmup" else 1):
            raise BadInput(f"--{name.replace('_', '-')} must be at least {0 if name == 'warmup' else 1}")
    if kw["request_rate"] is not None and kw["request_rate"] <= 0:
        raise BadInput("--request-rate must be positive")
    return WorkloadSpec(
        num_prompts=kw["num_prompts"],
        input_len=kw["input_len"],
        output_len=kw["output_len"],
        range_ratio=kw["range_ratio"],
        max_concurrency=kw["max_concurrency"],
        request_rate=kw["request_rate"],
        temperature=kw["temperature"],
        top_p=kw["top_p"],
        top_k=kw["top_k"],
        per_request_seed=kw["seeded"],
        warmup=kw["warmup"],
    )


def check_run_dir_writable(path: Path, option: str) -> None:
    """One line (exit 2) before anything is launched when the run directory cannot be made at ``path``: the
    nearest folder on its way that exists is on a read-only file system or not writable by this user."""
    p = Path(os.path.abspath(path))
    while not p.exists() and p != p.parent:
        p = p.parent
    if not p.is_dir() or os.access(p, os.W_OK | os.X_OK):
        return  # a file in the way: the run directory's own guard says it (runs/layout.py)
    try:
        readonly = bool(os.statvfs(p).f_flag & os.ST_RDONLY)
    except OSError:
        readonly = False
    raise BadInput(f"{option} {path}: cannot write ({'Read-only file system' if readonly else 'Permission denied'})")


def switchback_block(overlay_mode: str, block_steps: int | None, repeat: int,
                     flag: str = "--overlay switchback") -> int | None:
    """Steps per block of a switchback run (None for the other modes); BadInput for flags that do not fit.

    ``flag``: how the command asks for switchback (named in the messages).
    """
    from overlay.contract import DEFAULT_SWITCHBACK_BLOCK

    if overlay_mode != "switchback":
        if block_steps is not None:
            raise BadInput(f"--block-steps only applies with {flag}")
        return None
    if repeat != 1:
        raise BadInput(f"{flag} measures both sides in one run: drop --repeat (run the command again "
                       "for another run)")
    if block_steps is not None and block_steps < 2:
        raise BadInput("--block-steps must be at least 2 (the first step of each block is dropped as washout)")
    return block_steps or DEFAULT_SWITCHBACK_BLOCK


def sequential_options(f=None, *, launches: bool = False):
    """``--margin``, ``--budget`` and ``--fixed-length``: how a switchback decides (shared by record, ab, demo);
    ``launches``: ab's help says how they decide across launches too (expo_prof/record/launches.py)."""
    from expo_prof.record.settle import DEFAULT_BUDGET

    if f is None:
        return lambda g: sequential_options(g, launches=launches)
    across = (" Across launches (ab without --switchback or --repeat): a share of output tok/s." if launches else "",
              " Across launches: a number of launches (20 launches, the default; at least 12) or a time (2h)."
              if launches else "")

    opts = [
        click.option("--margin", default="1%", show_default=True, metavar="M",
                     help="With switchback: the band of 'no effect'. The run stops with 'no effect beyond the "
                          "margin' once the saving's 95% confidence sequence lies inside ±M — a share of the step "
                          "(1%: about ±1% of output tok/s) or a time per step (20us, 0.05ms)." + across[0]),
        click.option("--budget", default=None, metavar="B",
                     help=f"With switchback: the most load to spend deciding — a time (90s, 3m) or a number of "
                          f"steps (5000 steps) [default: {DEFAULT_BUDGET}]. The run stops at the first of: the "
                          "confidence sequence excludes 0 (enable / keep off), it lies inside ±margin, the budget "
                          "ends (undecided: the interval so far and about how many more steps would settle it)."
                          + across[1]),
        click.option("--fixed-length", is_flag=True,
                     help="With switchback: send exactly --num-prompts requests and judge by the fixed-horizon 95% "
                          "CI instead of deciding as the run goes."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


#: What --margin / --budget / --fixed-length take (and what `refuse_together` names).
SEQUENTIAL_OPTIONS = ("margin", "budget", "fixed_length")


def sequential_settings(switchback: bool, kw: dict, flag: str = "--overlay switchback",
                        default_budget: str | None = None):
    """(SequentialSpec, Budget) of a switchback that decides as it goes, or (None, None) for a fixed length (and
    for anything but switchback); BadInput for flags that do not fit. Pops the options from ``kw``."""
    from expo_prof.record.settle import DEFAULT_BUDGET, parse_budget, parse_margin

    margin, budget, fixed = kw.pop("margin"), kw.pop("budget"), kw.pop("fixed_length")
    ctx = click.get_current_context()
    given = {n for n in SEQUENTIAL_OPTIONS if ctx.get_parameter_source(n) == click.core.ParameterSource.COMMANDLINE}
    if not switchback:
        if given:
            raise BadInput(f"--{sorted(given)[0].replace('_', '-')} only applies with {flag}")
        return None, None
    if fixed:
        if given - {"fixed_length"}:
            raise BadInput("--fixed-length judges the run's own length: drop --margin / --budget")
        return None, None
    if kw.get("no_load"):
        if given - {"fixed_length"}:
            raise BadInput("--margin / --budget need a load that expo-prof drives (the built-in one or --load-cmd), "
                           "which runs until the switchback settles; traffic of your own sets its own length")
        return None, None
    return parse_margin(margin), parse_budget(budget or default_budget or DEFAULT_BUDGET)


def switchback_arms_env(overlay_mode: str, arms: str | None, flag: str = "--overlay switchback") -> dict[str, str]:
    """The environment that selects the switchback arms (``--arms``); BadInput where it does not fit."""
    from overlay.contract import ENV_SWITCHBACK_ARMS, THREE_ARMS, TWO_ARMS

    if arms is None:
        return {}
    if overlay_mode != "switchback":
        raise BadInput(f"--arms only applies with {flag}")
    words = sorted(w.strip().lower() for w in arms.split(","))
    for known in (TWO_ARMS, THREE_ARMS):
        if words == sorted(known):
            # The canonical order, which the overlay (overlay.switch.switchback_arms) reads the same way.
            return {ENV_SWITCHBACK_ARMS: ",".join(known)}
    raise BadInput(f"--arms {arms!r} is not allowed; use off,on or off,on,native")


@cli_command(
    "record",
    summary="Run a vLLM server with the overlay and a profiler, drive a load, keep everything in a run directory.",
    examples=[
        "expo-prof record -- vllm serve Qwen/Qwen3-32B --port 8000",
        "expo-prof record --overlay both --repeat 3 -- python -m vllm.entrypoints.openai.api_server --model M",
        "expo-prof record --no-load --duration 120 -- ./my_launch_script.sh --port 8000   # your own traffic",
        "expo-prof record --overlay switchback --margin 2% --budget 5m -- vllm serve MODEL   # enable, keep off, "
        "or no effect beyond ±2%, in 5 min",
    ],
    context_settings={"ignore_unknown_options": False},
)
@click.option("-o", "--output", "--out", "out", type=click.Path(path_type=Path), default=None, metavar="DIR",
              help="Run directory (new or empty; default: traces/<UTC stamp>-<name>).")
@click.option("--traces-dir", type=click.Path(path_type=Path), default=Path("traces"), show_default=True, metavar="DIR",
              help="Where new run directories go.")
@click.option("--overlay", "overlay_mode", type=click.Choice(OVERLAY_MODES), default="on", show_default=True,
              help="Overlay switch; 'both' alternates off/on runs; 'switchback' alternates blocks of steps off/on "
                   "inside one run and measures what the overlay saves.")
@click.option("--block-steps", type=int, default=None, metavar="K",
              help="With --overlay switchback: steps per block (default 8; the first of each is washout).")
@click.option("--arms", default=None, metavar="ARMS",
              help="With --overlay switchback: off,on (default) or off,on,native — off drawn inline after the "
                   "forward, on the overlay, native the engine as shipped (docs/overlay.md, 'Switchback').")
@click.option("--repeat", type=int, default=1, show_default=True, help="Runs per overlay mode.")
@click.option("--profiler", type=click.Choice(["torch", "msprof", "nsys", "none"]), default="torch", show_default=True,
              help="torch: vLLM's torch profiler; msprof (Ascend) and nsys (Nsight Systems, CUDA) wrap the command.")
@click.option("--profile-requests", type=int, default=None, help="Close the profiler window after this many finished requests.")
@click.option("--profile-seconds", type=float, default=None, help="Close the profiler window after this many seconds.")
@click.option("--ready-timeout", type=float, default=600.0, show_default=True, help="Seconds to wait for /health.")
@click.option("--no-analyze", is_flag=True, help="Skip the analysis summary at the end.")
@sequential_options
@workload_options
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_obj
def command(settings, out, traces_dir, overlay_mode, block_steps, arms, repeat, profiler, profile_requests,
            profile_seconds, ready_timeout, no_analyze, cmd, **wl) -> int:
    """Run CMD — `vllm serve MODEL …`, `python -m vllm.entrypoints.openai.api_server …` or your own
    launch script — with the overlay switched as asked and a profiler configured, wait until it is
    ready, drive the built-in load, stop it cleanly, and keep everything in one run directory
    (manifest, server log, overlay logs, traces, workload, analysis, timeline page).
    """
    from expo_prof.cli.run_summary import after_run
    from expo_prof.record.runner import RecordOptions
    from expo_prof.record.session import record_session

    if repeat < 1:
        raise BadInput("--repeat must be at least 1")
    block = switchback_block(overlay_mode, block_steps, repeat)
    arms_env = switchback_arms_env(overlay_mode, arms)
    sequential, budget = sequential_settings(overlay_mode == "switchback", wl)
    spec = build_spec(wl)
    if wl["duration"] is not None and not wl["no_load"]:
        raise BadInput("--duration only applies with --no-load")
    ctx = click.get_current_context()
    refuse_together(ctx, "no_load", LOAD_OPTIONS + ("load_cmd",), "with --no-load nothing is sent")
    refuse_together(ctx, "load_cmd", LOAD_OPTIONS + ("duration",), "your load command sets its own load")
    if out is not None:
        check_run_dir_writable(out, "-o")
    else:
        check_run_dir_writable(traces_dir, "--traces-dir")
    opts = RecordOptions(
        profiler=profiler,
        workload=spec,
        load_cmd=load_argv(wl),
        duration_s=wl["duration"],
        ready_timeout_s=ready_timeout,
        profile_requests=profile_requests,
        profile_seconds=profile_seconds,
        switchback_block=block,
        extra_env=arms_env,
        sequential=sequential,
        budget=budget,
    )
    modes = {"on": [True], "off": [False], "both": [False, True], "switchback": [True]}[overlay_mode]
    return record_session(
        list(cmd), opts, modes=modes, repeat=repeat, out=out, traces_dir=traces_dir,
        quiet=settings.quiet, analyze_after=not no_analyze, after_run=after_run(settings.quiet),
    )
