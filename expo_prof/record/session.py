"""One ``record`` invocation: one run, or several (``--repeat``, ``--overlay both``).

Several runs go into a session directory, alternating off/on so slow drift of
the machine hits both sides alike (the A/B analysis pairs them run by run).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from expo_prof.console import console, err_console
from expo_prof.errors import EXIT_INTERRUPTED, ExpoProfError
from expo_prof.words import plural
from expo_prof.record.runner import Recorder, RecordOptions
from expo_prof.runs.layout import claim_out_dir, new_dir, short_name, utc_stamp
from expo_prof.runs.manifest import SessionRun, new_session, write_session


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
    after_run: Callable[[Path], None] | None = None,
    stop: Callable[[list[tuple[bool, Path]]], str | None] | None = None,
) -> int:
    """Record every planned run; returns the exit code of the session.

    A failed or interrupted run stops the session (its directory and every
    earlier one are kept, and ``session.json`` says how far it got).
    ``after_run(run_dir)`` is called after each successful run when ``analyze_after``: the CLI passes
    the run summary (the pipeline's analysis, analysis.json, the tables, timeline.html;
    expo_prof/cli/run_summary.py), which record itself never draws. ``stop(runs so far)``, asked after each
    run, ends the session early when it returns a reason (a sequential ab: expo_prof/record/launches.py).
    """
    from expo_prof.record.command import parse_target

    parse_target(argv)  # bad command: fail before creating anything
    runs = plan_runs(modes, repeat)
    name = name or short_name(argv)
    top = claim_out_dir(out) if out is not None else new_dir(traces_dir, name)
    single = len(runs) == 1
    session = new_session(top, argv, utc_stamp())
    code = 0
    done: list[tuple[bool, Path]] = []
    for i, overlay in enumerate(runs, 1):
        run_dir = top if single else top / f"{i:02d}-{'on' if overlay else 'off'}"
        if not single:
            run_dir.mkdir()
            most = f"up to {len(runs)}" if stop is not None else str(len(runs))
            err_console.rule(f"run {i}/{most}: overlay {'on' if overlay else 'off'}")
        rec = Recorder(argv, run_dir, RecordOptions(**{**opts.__dict__, "overlay": overlay}), quiet=quiet)
        try:
            rec.run()
        except ExpoProfError as exc:
            code = exc.exit_code
            session.runs.append(SessionRun(run_dir.name, overlay, rec.manifest["status"]))
            session.status = "interrupted" if code == EXIT_INTERRUPTED else "failed"
            if not single:
                write_session(session)
            err_console.print(f"[bold]kept:[/] {run_dir}")
            raise
        session.runs.append(SessionRun(run_dir.name, overlay, "ok"))
        if not single:
            write_session(session)
        if not quiet:
            describe_run(run_dir, rec)
        if analyze_after and after_run is not None:
            after_run(run_dir)
        done.append((overlay, run_dir))
        if stop is not None and stop(done) is not None:
            break
    session.status = "ok"
    if not single:
        write_session(session)
        if not quiet:
            console.print(f"[bold]session:[/] {top} ({plural(len(done), 'run')})")
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
    console.print(f"  overlay logs  {plural(len(overlay), 'file')} in {run_dir / 'overlay'}")
    if rec.inj.profiler_dir is not None:
        console.print(f"  profiler      {plural(len(prof), 'file')} in {rec.inj.profiler_dir}")
    if m:
        console.print(
            f"  workload      {m.get('completed')} requests, {m.get('output_throughput', 0):.1f} output tok/s, "
            f"TTFT p50 {m.get('median_ttft_ms') or 0:.1f} ms, TPOT p50 {m.get('median_tpot_ms') or 0:.2f} ms"
        )
