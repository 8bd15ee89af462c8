"""``expo-prof compare A B``: per-metric A/B statistics and a verdict (method: docs/ab.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from expo_prof.cli.base import command as cli_command
from expo_prof.cli.common import output_options, resolve_format, says
from expo_prof.errors import BadInput, import_extra
from expo_prof.version import __version__


def comparison_options(f):
    """Options of the analysis itself (shared with ``ab``)."""
    opts = [
        click.option("--paired", is_flag=True,
                     help="Runs of the two sides were interleaved: pair them by position (paired t + sign-flip test)."),
        click.option("--unpaired", is_flag=True,
                     help="Analyse unpaired (Welch t + permutation test) even for an interleaved session."),
        click.option("--alpha", type=float, default=0.05, show_default=True, help="Significance level."),
        click.option("--primary", metavar="METRIC", default=None,
                     help="Metric of the verdict (default: output_throughput, else the first throughput present)."),
        click.option("--drop-warmup", is_flag=True, help="Leave flagged warm-up runs out of the main analysis."),
        click.option("--drop-outliers", is_flag=True, help="Leave flagged outlier runs out of the main analysis."),
        click.option("--allow-mismatch", is_flag=True, help="Compare even when the workloads differ (warns)."),
        click.option("--all-metrics", is_flag=True, help="Show every metric, not only the main ones."),
    ]
    for o in reversed(opts):
        f = o(f)
    return output_options(f)


def pairing(kw: dict) -> bool | None:
    """``--paired`` → True, ``--unpaired`` → False, neither → decided by the inputs; both → refused."""
    paired, unpaired = kw.pop("paired"), kw.pop("unpaired")
    if paired and unpaired:
        raise BadInput("--paired and --unpaired contradict each other: give one")
    return True if paired else False if unpaired else None


def check_out(output: Path | None, inputs: list[Path], fmt: str) -> None:
    """The one output guard for ``-o`` in ``fmt``: never an input, never a file that is not an earlier compare output."""
    if output is None:
        return
    from expo_prof.output import COMPARE_JSON, COMPARE_PAGE, COMPARE_TEXT, check_target

    check_target(output, inputs, {"json": COMPARE_JSON, "html": COMPARE_PAGE, "text": COMPARE_TEXT}[fmt], "-o")
    if fmt == "html":  # its charts are plotly figures: the optional extra "compare-html", checked before loading
        import_extra("compare-html", "compare --format html")


def write_result(result, *, fmt: str, output: Path | None, all_metrics: bool) -> None:
    """The tables, the JSON document or the page, on stdout or in ``output``."""
    import io

    from expo_prof.abtest.reporters import json_reporter, tables
    from expo_prof.console import console
    from expo_prof.output import write

    if fmt == "html":
        from expo_prof.abtest.reporters import html_section

        assert output is not None  # resolve_format: a page needs -o

        write(output, html_section.page(result))  # a failed write: one line, the earlier page kept
        return
    if output is None:
        if fmt == "json":
            json_reporter.write(result, sys.stdout)
        else:  # --quiet still prints results (it silences progress and notes)
            tables.render(result, console, all_metrics=all_metrics)
        return
    if fmt == "json":
        write(output, json_reporter.encode(result))
    else:
        from expo_prof.console import TextConsole

        buf = io.StringIO()
        tables.render(result, TextConsole(file=buf, width=100, highlight=False), all_metrics=all_metrics)
        write(output, buf.getvalue())


def run_comparison(loaded, kw: dict, settings, inputs: list[Path]) -> int:
    """Compare the loaded sides with the comparison options ``kw`` and report; returns the exit code."""
    from expo_prof.abtest import compare

    result = compare(
        loaded, alpha=kw["alpha"], primary=kw["primary"], drop_warmup=kw["drop_warmup"],
        drop_outliers=kw["drop_outliers"], allow_mismatch=kw["allow_mismatch"],
    )
    write_result(result, fmt=kw["fmt"], output=kw["output"], all_metrics=kw["all_metrics"])
    if kw["output"] is not None and not getattr(settings, "quiet", False):
        says(kw["output"]).print(f"{kw['fmt']}: {kw['output']}")
    return 0


@cli_command(
    "compare",
    summary="Is B (overlay on) better than A (overlay off)? Change, 95% CI, test and verdict per metric.",
    examples=[
        "expo-prof compare traces/SESSION            # an `ab` / `record --overlay both` session: paired",
        "expo-prof compare off/ on/                  # run directories (sets of them): unpaired",
        "expo-prof compare off.csv on.csv            # tables: one row per run",
        "expo-prof compare -a r1.json -a r2.json -b r3.json -b r4.json   # vllm bench serve results",
        "expo-prof compare traces/SESSION --json -o ab.json",
    ],
)
@click.argument("paths", nargs=-1, metavar="[A B | SESSION]", type=click.Path(path_type=Path))
@click.option("-a", "a_paths", multiple=True, type=click.Path(path_type=Path),
              help="A run / result / table of side A (repeatable).")
@click.option("-b", "b_paths", multiple=True, type=click.Path(path_type=Path),
              help="A run / result / table of side B (repeatable).")
@click.option("--labels", default="off,on", show_default=True,
              help="Names of side A (overlay off) and side B (overlay on); the words off/on always name that side.")
@comparison_options
@click.pass_obj
def command(settings, paths, a_paths, b_paths, labels, **kw) -> int:
    """Is B (overlay on) better than A (overlay off)? Per metric: each run, the means, the change
    with its 95 % confidence interval, a paired or unpaired test, and a verdict (docs/ab.md).

    A and B are run directories, folders of them, `vllm bench serve
    --save-result` files or CSV tables; one session directory holds both.
    Run directories go to the side their manifest records (overlay off: A,
    on: B), whatever the argument order; tables and result files keep it.
    Exit 0 whatever the verdict; 2 on unusable inputs (mismatched workloads,
    no common metric, a side mixing off and on runs, the same run twice).
    """
    from expo_prof.abtest.inputs.loader import load

    names = tuple(s.strip() for s in labels.split(","))
    if len(names) != 2 or not all(names) or names[0] == names[1]:
        raise BadInput(f"--labels {labels!r}: give two different names, e.g. off,on")
    paths = list(paths)
    if paths and (a_paths or b_paths):
        raise BadInput("give the sides either as two arguments (A B) or with -a/-b, not both")
    several = None if a_paths or b_paths else switchback_runs(paths)
    if several is not None:  # runs of one configuration, each measuring both sides: the spread between them
        kw["fmt"] = resolve_format(kw["fmt"], kw.pop("as_json"), kw["output"])
        check_out(kw["output"], paths, kw["fmt"])
        return switchback_runs_comparison(several, kw)
    if a_paths or b_paths:
        a_list, b_list = list(a_paths), list(b_paths)
    elif len(paths) == 1:
        a_list, b_list = paths, []
    elif len(paths) == 2:
        a_list, b_list = [paths[0]], [paths[1]]
    elif not paths:
        raise BadInput("compare needs inputs: A B, -a A… -b B…, or one session directory")
    else:
        raise BadInput(f"{len(paths)} arguments: give A and B (use -a/-b for several runs per side)")
    every = a_list + b_list
    kw["fmt"] = resolve_format(kw["fmt"], kw.pop("as_json"), kw["output"])
    check_out(kw["output"], every, kw["fmt"])
    if not b_list and len(a_list) == 1 and is_switchback_run(a_list[0]):
        return switchback_comparison(a_list[0], kw, settings)
    loaded = load(a_list, b_list, paired=pairing(kw), labels=names)
    return run_comparison(loaded, kw, settings, every)


def switchback_runs(paths: list[Path]) -> list[Path] | None:
    """The run directories of ``paths`` when they are two or more switchback runs (session directories of
    switchback runs stand for their runs, in the order they ran); None otherwise."""
    from expo_prof.runs.manifest import is_session_dir, read_session

    found: list[Path] = []
    if len({p.resolve() for p in paths}) < len(paths):
        return None  # the same run twice: the A/B path refuses it in its own words
    for p in paths:
        if is_session_dir(p):
            runs = [p / r.dir for r in read_session(p).runs if r.status == "ok"]
            if not runs or not all(is_switchback_run(r) for r in runs):
                return None
            found.extend(runs)
        elif is_switchback_run(p):
            found.append(p)
        else:
            return None
    return found if len(found) >= 2 else None


def switchback_runs_comparison(paths: list[Path], kw: dict, shown: bool = False) -> int:
    """``compare RUN1 RUN2 …`` of switchback runs (``ab --switchback --repeat N``): each run's saving line, then
    the spread between them — whether they differ more than their intervals allow (analysis/saving/spread.py).

    ``shown``: each run's block is already on the terminal; the spread line is still printed.
    """
    import msgspec

    from expo_prof.analysis.model import SwitchbackRun, SwitchbackRuns
    from expo_prof.analysis.saving.spread import between_runs, spread_words
    from expo_prof.console import TextConsole, console
    from expo_prof.output import write
    from expo_prof.pipeline import run

    if kw["fmt"] == "html":
        raise BadInput("several switchback runs have no page of their own: `expo-prof report RUN1 RUN2 -o PAGE.html`")
    result = run(paths)
    entries = [e for e in result.document.recordings if e.savings]
    if len(entries) < 2:
        raise BadInput(f"{len(entries)} of {len(paths)} switchback runs measured a saving: at least 2 are needed to "
                       "compare runs (see each run's server.log)")
    spread = between_runs([(e.label, e.savings[0]) for e in entries])
    line = spread_words(spread) if spread is not None else "between runs: fewer than 2 runs measured a saving"
    doc = SwitchbackRuns(tool_version=__version__, runs=[SwitchbackRun(run=e.path, saving_line=e.saving_line,
                                                                       savings=e.savings) for e in entries],
                         spread_line=line, spread=spread, warnings=result.warnings)
    if kw["fmt"] == "json":
        data = msgspec.json.format(msgspec.json.encode(doc)).decode() + "\n"
        if kw["output"] is None:
            sys.stdout.write(data)
        else:
            write(kw["output"], data)
        return 0
    import io

    buf = io.StringIO() if kw["output"] is not None else None
    con = TextConsole(file=buf, width=100, highlight=False) if buf is not None else console
    con.print(line, markup=False)  # the answer across runs leads; each run's own line follows
    if not shown or buf is not None:
        for e in entries:
            con.print(f"{e.label}: {e.saving_line}", markup=False)
    if buf is not None:
        write(kw["output"], buf.getvalue())
    return 0


def is_switchback_run(path: Path) -> bool:
    """Whether ``path`` is a run directory recorded with ``--overlay switchback``."""
    from expo_prof.runs.manifest import is_run_dir, read_manifest

    return path.is_dir() and is_run_dir(path) and read_manifest(path).overlay == "switchback"


def switchback_comparison(path: Path, kw: dict, settings, shown: bool = False) -> int:
    """``compare RUN`` of a switchback run: what the overlay saves, measured in that one run (text or JSON).

    ``shown``: the block and the saving line are already on the terminal (``ab --switchback``'s run summary
    printed them), so text for the terminal is not printed again; JSON and ``-o FILE`` are still written.
    """
    import io

    import msgspec
    from expo_prof.console import TextConsole

    from expo_prof.analysis.model import SwitchbackResult
    from expo_prof.console import console
    from expo_prof.output import write
    from expo_prof.pipeline import run
    from expo_prof.terminal.saving import render_saving

    if kw["fmt"] == "html":
        raise BadInput(f"{path}: a switchback run's page is the report's: `expo-prof report {path} -o PAGE.html`")
    result = run([path])
    entry = result.document.recordings[0]
    if not entry.savings:
        raise BadInput(f"{path}: no switchback steps in its overlay event logs (did the server run any steps "
                       "with the overlay applied? see its server.log)")
    doc = SwitchbackResult(tool_version=__version__, run=str(path), saving_line=entry.saving_line, arrival=entry.arrival,
                           savings=entry.savings, natural=entry.natural, warnings=result.warnings)
    if kw["fmt"] == "json":
        data = msgspec.json.format(msgspec.json.encode(doc)) + b"\n"
        if kw["output"] is None:
            sys.stdout.write(data.decode())
        else:
            write(kw["output"], data)
        return 0
    if shown and kw["output"] is None:
        return 0
    con, buf = console, None
    if kw["output"] is not None:
        buf = io.StringIO()
        con = TextConsole(file=buf, width=100, highlight=False)
    render_saving(con, entry.savings, entry.natural, entry.measured_under, entry.arrival)
    con.print(entry.saving_line, markup=False)
    if buf is not None:
        write(kw["output"], buf.getvalue())
    return 0
