"""``expo-prof collect RUN_DIR --ray ADDRESS``: every node's traces and overlay logs into one run directory."""

from __future__ import annotations

from pathlib import Path

import click

from expo_prof.words import plural
from expo_prof.cli.base import command as cli_command


@cli_command(
    "collect",
    summary="Copy every Ray node's traces and overlay logs of a multi-node run into its run directory.",
    examples=[
        "expo-prof collect traces/RUN --ray auto                 # each node's traces/RUN → this one",
        "expo-prof collect traces/RUN --ray 10.0.0.1:6379 --from gpu-b:/scratch/prof",
    ],
)
@click.argument("run_dir", metavar="RUN_DIR", type=click.Path(path_type=Path, file_okay=False))
@click.option("--ray", "address", default="auto", show_default=True, metavar="ADDRESS",
              help="The Ray cluster the run used (as ray.init takes it).")
@click.option("--from", "sources", multiple=True, metavar="NODE:DIR",
              help="Take NODE's DIR instead of each node's copy of RUN_DIR (repeatable). NODE: an expo-prof-host "
                   "resource name, hostname, IP or node id.")
@click.pass_obj
def command(settings, run_dir: Path, address: str, sources: tuple[str, ...]) -> int:
    """With vLLM's Ray executor each worker writes its profiler trace and overlay event log on its own
    node, under the same paths. Run after the run, from the head node: one Ray task per node lists
    the files under RUN_DIR's profiler/, overlay/ and msprof/ there, and they are copied (in 64 MB
    chunks) into RUN_DIR at the same relative path. Files already here with the same content are
    left alone; a different file of the same name goes to RUN_DIR/nodes/NODE/. collected.json says
    where each file came from. Then `expo-prof analyze RUN_DIR` sees every rank.
    """
    from expo_prof.console import console
    from expo_prof.record.collect import collect

    from expo_prof.errors import BadInput

    if not run_dir.is_dir():  # before Ray: the run directory's name is the mistake to report, not the cluster
        raise BadInput(f"{run_dir}: no such run directory (collect copies into the run directory of a run made here)")
    quiet = bool(getattr(settings, "quiet", False))
    res = collect(run_dir, address="" if address == "local" else address, sources=sources,
                  say=None if quiet else (lambda line: console.print(f"  {line}", markup=False)))
    if not quiet:
        total = sum(f["bytes"] for f in res.copied)
        nodes = len({f["node"] for f in res.copied})
        console.print(f"collected {plural(len(res.copied), 'file')}, {total / 1e6:.1f} MB from {plural(nodes, 'node')} into "
                      f"{run_dir}; {res.same} already here" + (f"; {len(res.aside)} under nodes/ (name taken)"
                                                             if res.aside else ""), markup=False)
    return 0
