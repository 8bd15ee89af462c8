"""``expo-prof compare A B``: per-metric A/B statistics and a verdict (method: docs/ab.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from expo_prof.errors import BadInput


def comparison_options(f):
    """Options of the analysis itself (shared with ``ab``)."""
    opts = [
        click.option("--paired", "pairing", flag_value="paired", default=None,
                     help="Runs of the two sides were interleaved: pair them by position (paired t + sign-flip test)."),
        click.option("--unpaired", "pairing", flag_value="unpaired",
                     help="Analyse unpaired (Welch t + permutation test) even for an interleaved session."),
        click.option("--alpha", type=float, default=0.05, show_default=True, help="Significance level."),
        click.option("--primary", metavar="METRIC", default=None,
                     help="Metric of the verdict (default: output_throughput, else the first throughput present)."),
        click.option("--drop-warmup", is_flag=True, help="Leave flagged warm-up runs out of the main analysis."),
        click.option("--drop-outliers", is_flag=True, help="Leave flagged outlier runs out of the main analysis."),
        click.option("--allow-mismatch", is_flag=True, help="Compare even when the workloads differ (warns)."),
        click.option("--all-metrics", is_flag=True, help="Show every metric, not only the main ones."),
        click.option("--json", "json_out", is_flag=False, flag_value="-", default=None, metavar="[FILE|-]",
                     help="Write the JSON result (docs/ab.md) to FILE, or to stdout with '-' (put it last or use --json=FILE)."),
        click.option("--html", "html_out", type=click.Path(path_type=Path), default=None,
                     help="Write a self-contained HTML page with the figures."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def check_out(target: str, inputs: list[Path], what: str) -> None:
    """Never overwrite an input, nor a file that is not an earlier compare output (``--json`` / ``--html``)."""
    from expo_prof.output import COMPARE_JSON, COMPARE_PAGE, check_target

    check_target(target, inputs, COMPARE_JSON if what == "--json" else COMPARE_PAGE, what)


def report(result, *, settings, json_out: str | None, html_out: Path | None, all_metrics: bool) -> None:
    """Print the tables (unless JSON goes to stdout) and write the requested files."""
    from expo_prof.abtest import report_json, report_table
    from expo_prof.console import console

    if json_out == "-":
        report_json.write(result, sys.stdout)
    else:  # --quiet still prints results (it silences progress and notes)
        report_table.render(result, console, all_metrics=all_metrics)
    if json_out not in (None, "-"):
        try:
            Path(json_out).write_bytes(report_json.encode(result))
        except OSError as exc:
            raise BadInput(f"--json {json_out}: cannot write ({exc.strerror or exc})") from None
    if html_out is not None:
        from expo_prof.abtest import report_html

        try:
            report_html.write_page(result, html_out)
        except OSError as exc:
            raise BadInput(f"--html {html_out}: cannot write ({exc.strerror or exc})") from None


def run_comparison(loaded, kw: dict, settings, inputs: list[Path]) -> int:
    """Compare the loaded sides with the comparison options ``kw`` and report; returns the exit code."""
    from expo_prof.abtest import compare

    result = compare(
        loaded, alpha=kw["alpha"], primary=kw["primary"], drop_warmup=kw["drop_warmup"],
        drop_outliers=kw["drop_outliers"], allow_mismatch=kw["allow_mismatch"],
    )
    report(result, settings=settings, json_out=kw["json_out"], html_out=kw["html_out"], all_metrics=kw["all_metrics"])
    return 0


@click.command("compare")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("-a", "a_paths", multiple=True, type=click.Path(path_type=Path),
              help="A run / result / table of side A (repeatable).")
@click.option("-b", "b_paths", multiple=True, type=click.Path(path_type=Path),
              help="A run / result / table of side B (repeatable).")
@click.option("--labels", default="off,on", show_default=True, help="Names of side A and side B.")
@comparison_options
@click.pass_obj
def command(settings, paths, a_paths, b_paths, labels, **kw) -> int:
    """Is B (overlay on) better than A (overlay off)? Per metric: each run, means, change, 95% CI, test, verdict.

    \b
    expo-prof compare traces/SESSION            # an `ab` session: paired
    expo-prof compare off/ on/                  # run directories (sets of them)
    expo-prof compare off.csv on.csv            # tables: one row per run
    expo-prof compare -a r1.json -a r2.json -b r3.json -b r4.json   # vllm bench serve results

    Exit codes: 0 result printed (whatever the verdict), 2 bad input
    (unreadable inputs, mismatched workloads, no common metric).
    """
    from expo_prof.abtest import inputs

    names = tuple(s.strip() for s in labels.split(","))
    if len(names) != 2 or not all(names) or names[0] == names[1]:
        raise BadInput(f"--labels {labels!r}: give two different names, e.g. off,on")
    paths = list(paths)
    if paths and (a_paths or b_paths):
        raise BadInput("give the sides either as two arguments (A B) or with -a/-b, not both")
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
    for target, what in ((kw["json_out"], "--json"), (str(kw["html_out"]) if kw["html_out"] else None, "--html")):
        if target is not None:
            check_out(target, every, what)
    pairing = kw.pop("pairing")
    loaded = inputs.load(a_list, b_list, paired={"paired": True, "unpaired": False}.get(pairing), labels=names)
    return run_comparison(loaded, kw, settings, every)
