"""One ``record`` invocation: one run, or several (``--repeat``, ``--overlay both``).

Several runs go into a session directory, alternating off/on so slow drift of
the machine hits both sides alike (the A/B analysis pairs them run by run).
"""

from __future__ import annotations

from pathlib import Path

from expo_prof.console import console, err_console
from expo_prof.errors import EXIT_INTERRUPTED, ExpoProfError
from expo_prof.record.rundir import SESSION, claim_out_dir, new_dir, short_name, utc_stamp, write_json
from expo_prof.record.runner import Recorder, RecordOptions


def plan_runs(modes: list[bool], repeat: int) -> list[bool]:
    """Overlay setting of each run in order: off, on, off, on … for 'both'."""
    return [m for _ in range(repeat) for m in modes]


def record_session(
    argv: list[str],
    opts: RecordOptions,
    *,
    modes: list[bool],
    repeat: int,
    out: Path | None,
    traces_dir: Path,
    quiet: bool = False,
    analyze_after: bool = True,
    name: str | None = None,
) -> int:
    """Record every planned run; returns the exit code of the session.

    A failed or interrupted run stops the session (its directory and every
    earlier one are kept, and ``session.json`` says how far it got).
    """
    from expo_prof.record.command import parse_target

    parse_target(argv)  # bad command: fail before creating anything
    runs = plan_runs(modes, repeat)
    name = name or short_name(argv)
    top = claim_out_dir(out) if out is not None else new_dir(traces_dir, name)
    single = len(runs) == 1
    session = {"schema": 1, "command": argv, "started": utc_stamp(), "runs": [], "status": "running"}
    code = 0
    for i, overlay in enumerate(runs, 1):
        run_dir = top if single else top / f"{i:02d}-{'on' if overlay else 'off'}"
        if not single:
            run_dir.mkdir()
            err_console.rule(f"run {i}/{len(runs)}: overlay {'on' if overlay else 'off'}")
        rec = Recorder(argv, run_dir, RecordOptions(**{**opts.__dict__, "overlay": overlay}), quiet=quiet)
        try:
            rec.run()
        except ExpoProfError as exc:
            code = exc.exit_code
            session["runs"].append({"dir": run_dir.name, "overlay": overlay, "status": rec.manifest["status"]})
            session["status"] = "interrupted" if code == EXIT_INTERRUPTED else "failed"
            if not single:
                write_json(top / SESSION, session)
            err_console.print(f"[bold]kept:[/] {run_dir}")
            raise
        session["runs"].append({"dir": run_dir.name, "overlay": overlay, "status": "ok"})
        if not single:
            write_json(top / SESSION, session)
        if not quiet:
            describe_run(run_dir, rec)
        if analyze_after:
            summarize(run_dir, quiet=quiet)
    session["status"] = "ok"
    if not single:
        write_json(top / SESSION, session)
        if not quiet:
            console.print(f"[bold]session:[/] {top} ({len(runs)} runs)")
    return code


def describe_run(run_dir: Path, rec: Recorder) -> None:
    """Where everything of the run is."""
    files = sorted(p for p in run_dir.rglob("*") if p.is_file())
    overlay = [p for p in files if p.parent.name == "overlay"]
    prof = [p for p in files if rec.inj.profiler_dir and rec.inj.profiler_dir in p.parents]
    m = rec.manifest.get("metrics") or {}
    console.print(f"[bold]run:[/] {run_dir}")
    console.print(f"  manifest      {run_dir / 'manifest.json'}")
    console.print(f"  server log    {run_dir / 'server.log'}")
    console.print(f"  overlay logs  {len(overlay)} file(s) in {run_dir / 'overlay'}")
    if rec.inj.profiler_dir is not None:
        console.print(f"  profiler      {len(prof)} file(s) in {rec.inj.profiler_dir}")
    if m:
        console.print(
            f"  workload      {m.get('completed')} requests, {m.get('output_throughput', 0):.1f} output tok/s, "
            f"TTFT p50 {m.get('median_ttft_ms') or 0:.1f} ms, TPOT p50 {m.get('median_tpot_ms') or 0:.2f} ms"
        )


def summarize(run_dir: Path, *, quiet: bool = False) -> None:
    """Analyse the run (profiler traces and overlay logs) and save ``analysis.json`` next to them."""
    from expo_prof import readers
    from expo_prof.analysis import analyze
    from expo_prof.report import JsonReporter, TableReporter

    if not any(p.is_file() for sub in ("overlay", "profiler", "msprof") for p in (run_dir / sub).rglob("*")):
        # Overlay off and no profiler: nothing was traced, so there is nothing to analyse.
        if not quiet:
            console.print("  analysis      none: this run has no overlay log and no profiler trace")
        return
    try:
        loaded = readers.load([run_dir])
        result = analyze(loaded.timelines, warnings=loaded.warnings)
    except ExpoProfError as exc:
        err_console.print(f"[yellow]analysis:[/] {exc}")
        return
    with open(run_dir / "analysis.json", "w") as f:
        JsonReporter().render(result, file=f)
    page = write_timeline(run_dir)
    if not quiet:
        TableReporter(top=5).render(result)
        console.print(f"  analysis      {run_dir / 'analysis.json'}")
        if page is not None:
            console.print(f"  timeline      {page}")


def write_timeline(run_dir: Path) -> Path | None:
    """``timeline.html`` of the run (as ``expo-prof timeline RUN`` writes it); None when it cannot be drawn."""
    from expo_prof.html import output as out_mod
    from expo_prof.html.build import timeline_document

    target = run_dir / "timeline.html"
    try:
        doc = timeline_document([run_dir])
        out_mod.write(target, doc.text)
    except ExpoProfError as exc:
        err_console.print(f"[yellow]timeline:[/] {exc}")
        return None
    return target
