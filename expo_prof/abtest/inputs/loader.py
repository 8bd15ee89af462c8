"""Both sides of a comparison from the command line's paths (the accepted inputs: :mod:`expo_prof.abtest.inputs`).

Sets of runs per side, one session directory (paired in run order), or one table split by its side column;
then which side is which, from what the runs record (:func:`orient`), and the refusals: a side mixing off
and on runs, a run recording no usable state, a switchback run, the same run given twice.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from expo_prof.abtest.inputs import table_rows
from expo_prof.abtest.inputs.result_files import load_file
from expo_prof.abtest.inputs.run_dirs import load_run_dir, read_json
from expo_prof.abtest.inputs.sides import Loaded, Run, Side
from expo_prof.abtest.metrics import METRICS
from expo_prof.errors import BadInput
from expo_prof.runs.layout import inside
from expo_prof.runs.manifest import is_run_dir, is_session_dir, read_manifest, read_session

#: The overlay states that make a run one side of an A/B comparison (manifest "overlay").
_STATES = ("off", "on")
#: Manifest "overlay" of a run that alternates blocks of steps off and on inside one server: both states in one
#: run, so neither side of an A/B comparison (``compare RUN`` alone is its analysis).
SWITCHBACK = "switchback"


def _sort_key(run: Run) -> tuple:
    return (run.started or "", run.label)


def _runs_of(path: Path, warnings: list[str]) -> list[Run]:
    """The runs of one file or run directory, each with its :attr:`Run.identity`."""
    if path.is_file():
        runs = load_file(path, warnings)
    else:
        run = load_run_dir(path, warnings)
        runs = [run] if run else []
    # (device, inode) names the file or directory whatever the spelling (symlinks, `..`, bind mounts); the
    # loaders name a file's runs PATH or PATH#ROW, so what follows the path is the row.
    st = path.stat()
    for r in runs:
        r.identity = (st.st_dev, st.st_ino, r.source[len(str(path)):])
    return runs


def load_path(path: Path, warnings: list[str]) -> list[Run]:
    """Runs of one path of one side, in run order."""
    if not path.exists():
        raise BadInput(f"{path}: no such file or directory")
    if path.is_file():
        return _runs_of(path, warnings)
    if not path.is_dir():
        raise BadInput(f"{path}: not a regular file or directory (a FIFO, socket or device): not read")
    if is_session_dir(path):
        raise BadInput(f"{path}: a session directory holds both sides; pass it as the only input")
    if is_run_dir(path):
        return _runs_of(path, warnings)
    runs: list[Run] = []
    children = sorted(path.iterdir())
    for child in children:
        try:  # a symbolic link leading out of the folder given is never followed
            inside(path, child.name, "entry")
        except BadInput as exc:
            warnings.append(f"{exc}; left out")
            continue
        if (child.is_dir() and is_run_dir(child)) or (
                child.is_file() and child.suffix.lower() in (".json", ".jsonl", ".csv")):
            runs.extend(_runs_of(child, warnings))
    if not runs and not any(c.is_dir() and is_run_dir(c) for c in children):
        raise BadInput(f"{path}: no run directories or result files in it")
    return sorted(runs, key=_sort_key) if all(r.started for r in runs) else runs


def _side(name: str, paths: list[Path], warnings: list[str]) -> Side:
    side = Side(name=name, sources=[str(p) for p in paths])
    for p in paths:
        side.runs.extend(load_path(p, warnings))
    return side


def _not_one_side(source: str) -> BadInput:
    """The refusal of a switchback run as one side of an A/B comparison."""
    return BadInput(f"{source}: a switchback run (blocks of steps alternating overlay off and on in one server) is "
                    f"neither side of an A/B comparison; `expo-prof compare {source}` alone analyses it")


def _no_state(source: str, recorded: Any, where: str = "its manifest") -> BadInput:
    """The refusal of a run whose overlay state is not recorded (or not one compare knows)."""
    return BadInput(f"{source}: {where} records no usable overlay state (\"overlay\": {json.dumps(recorded)}; "
                    'expected "off" or "on"), so its side is unknown')


def _session_state(run_dir: Path, listed: Any) -> str:
    """A session run's overlay state: its manifest's, which its session.json entry must not contradict (the
    entry stands in for a manifest that records none)."""
    recorded = read_manifest(run_dir).raw.get("overlay")
    said = ("on" if listed else "off") if isinstance(listed, bool) else None
    if recorded == SWITCHBACK:
        raise _not_one_side(str(run_dir))
    if recorded in _STATES:
        if said is not None and said != recorded:
            raise BadInput(f"{run_dir}: its manifest records overlay {recorded} but session.json lists it as "
                           f"{said}; the session contradicts itself")
        return recorded
    if said is None:
        raise _no_state(str(run_dir), recorded, "neither session.json nor its manifest")
    return said


def load_session(path: Path, warnings: list[str]) -> Loaded:
    """A session directory: off runs vs on runs, paired in the order they ran (off, on, off, on …)."""
    session = read_session(path)
    a, b = Side("off", sources=[str(path)], overlay="off"), Side("on", sources=[str(path)], overlay="on")
    order: list[tuple[bool, int | None]] = []  # per entry: (overlay, index into its side or None)
    for e in session.runs:
        run = None
        if e.status == "ok":
            run = load_run_dir(path / e.dir, warnings)
            overlay = _session_state(path / e.dir, e.overlay) == "on"
        else:
            # Left out: its side only decides whether its neighbour still forms a pair (it does not).
            overlay = bool(e.overlay)
            warnings.append(f"{path / e.dir}: run status {e.status!r}; left out")
        side = b if overlay else a
        if run:
            side.runs.append(run)
        order.append((overlay, len(side.runs) - 1 if run else None))
    if session.status not in ("", "ok"):
        warnings.append(f"{path}: session status {session.status!r} (it stopped early)")
    if not a.runs or not b.runs:
        missing = "off" if not a.runs else "on"
        raise BadInput(f"{path}: the session has no usable overlay-{missing} run; nothing to compare")
    pairs: list[tuple[int, int]] = []
    for i in range(0, len(order) - 1, 2):
        (ov1, i1), (ov2, i2) = order[i], order[i + 1]
        if ov1 != ov2 and i1 is not None and i2 is not None:
            pairs.append((i1, i2) if not ov1 else (i2, i1))
    if len(pairs) >= 2:
        dropped = min(len(a.runs), len(b.runs)) - len(pairs)
        reason = "interleaved session: off/on runs alternated, paired in run order"
        if dropped > 0 or len(a.runs) != len(b.runs):
            reason += f" ({len(pairs)} complete pairs)"
        return Loaded(a, b, pairs, reason, warnings)
    return Loaded(a, b, None, "session with fewer than 2 complete off/on pairs: analysed unpaired", warnings)


def load(a_paths: list[Path], b_paths: list[Path], *, paired: bool | None = None,
         labels: tuple[str, str] = ("off", "on")) -> Loaded:
    """Both sides from the command line's paths.

    ``paired``: True pairs runs by position (``--paired``; equal counts
    needed), False forces the unpaired analysis (``--unpaired``), None
    decides from the inputs (a session directory is paired).
    """
    warnings: list[str] = []
    if not b_paths and len(a_paths) == 1:
        loaded = _load_single(a_paths[0], warnings, labels)
    else:
        if not a_paths or not b_paths:
            raise BadInput("give both sides: `compare A B`, `-a A… -b B…`, or one session directory / table with a side column")
        loaded = Loaded(_side(labels[0], a_paths, warnings), _side(labels[1], b_paths, warnings), None,
                        "separate inputs: runs not known to be interleaved, analysed unpaired", warnings)
        _refuse_repeats(loaded.a, loaded.b)
        labels = orient(loaded, labels)
    loaded.a.name, loaded.b.name = labels
    for side in (loaded.a, loaded.b):
        _refuse_impossible(side)
        _unique_labels(side)
    for side in (loaded.a, loaded.b):
        if not side.runs:
            raise BadInput(f"side {side.name!r} ({', '.join(side.sources)}) has no usable run")
    if paired is True:
        na, nb = len(loaded.a.runs), len(loaded.b.runs)
        if na != nb:
            raise BadInput(f"--paired needs as many runs on each side ({loaded.a.name}: {na}, {loaded.b.name}: {nb})")
        if loaded.pairs is None:
            loaded.pairs = [(i, i) for i in range(na)]
            loaded.design_reason = "declared paired (--paired): runs paired by position"
    elif paired is False and loaded.pairs is not None:
        loaded.pairs = None
        loaded.design_reason = "forced unpaired (--unpaired)"
    return loaded


def _refuse_repeats(a: Side, b: Side) -> None:
    """One run given twice, under any spelling: on both sides it would be compared with itself, on one side
    counted twice."""
    seen: dict[tuple, tuple[str, Run]] = {}
    for name, side in (("A", a), ("B", b)):
        for r in side.runs:
            if r.identity in seen:
                where, first = seen[r.identity]
                same = (f"{r.source} is" if r.source == first.source
                        else f"{first.source} and {r.source} are the same run,")
                how = ("given on both sides: a run compared with itself says nothing" if where != name
                       else f"given twice on side {name}: it would count twice")
                raise BadInput(f"{same} {how}; give different runs")
            seen[r.identity] = (name, r)


def _side_state(side: Side, given_as: str) -> str | None:
    """The overlay state ("off" / "on") the side's run directories record; None when none of its inputs is a
    run directory (tables and result files record none). BadInput for a run of no usable state, a switchback
    run, or a side of both states: any guess there could invert the verdict."""
    found: dict[str, Run] = {}
    for r in side.runs:
        if r.manifest is None:
            continue
        recorded = r.manifest.get("overlay")
        if recorded == SWITCHBACK:
            raise _not_one_side(r.source)
        if recorded not in _STATES:
            raise _no_state(r.source, recorded)
        found.setdefault(recorded, r)
    if len(found) > 1:
        raise BadInput(f"side {given_as} mixes overlay-off and overlay-on runs ({found['off'].source}: off, "
                       f"{found['on'].source}: on, by their manifests): give the runs of one overlay state per side")
    return next(iter(found), None)


def orient(loaded: Loaded, labels: tuple[str, str]) -> tuple[str, str]:
    """Side A the overlay-off runs, side B the overlay-on runs, as their manifests record — whatever the order
    the arguments gave. Returns the side names: --labels name side A and side B in that order, except that the
    words ``off`` / ``on`` always name the side of that state. The note on any swap goes to ``loaded.reordered``.
    """
    sa, sb = _side_state(loaded.a, "A"), _side_state(loaded.b, "B")
    if sa is None and sb is None:
        return labels  # no manifest on either side: the argument order is all there is
    if sa == sb:
        raise BadInput(f"both sides hold overlay-{sa} runs ({', '.join(loaded.a.sources + loaded.b.sources)}, by "
                       "their manifests): compare needs overlay-off runs on one side and overlay-on runs on the other")
    notes: list[str] = []
    if sa == "on" or sb == "off":
        # A side without a manifest (a table) takes the state the other side leaves it.
        loaded.a, loaded.b = loaded.b, loaded.a
        sa, sb = sb, sa
        notes.append("sides swapped to follow the run manifests")
    loaded.a.overlay, loaded.b.overlay = sa, sb
    if labels[0].lower() == "on" or labels[1].lower() == "off":
        notes.append(f"--labels {labels[0]},{labels[1]} swapped so that off / on name the side of that state")
        labels = (labels[1], labels[0])
    if notes:
        loaded.reordered = (f"{'; '.join(notes)}: {labels[0]} (A) = {', '.join(loaded.a.sources)}, "
                            f"{labels[1]} (B) = {', '.join(loaded.b.sources)}")
    return labels


def _refuse_impossible(side: Side) -> None:
    """Every known metric is a throughput, a latency or a time per step: none can be negative. A negative value
    is a sign error or a column of differences, and judged as it stands it would turn the verdict around (a
    "−200 % change" called better); a side of more runs than a table may hold is refused too."""
    if len(side.runs) > table_rows.MAX_ROWS:
        raise table_rows.too_many_rows(f"side {side.name!r} ({', '.join(side.sources)})")
    for r in side.runs:
        for name, v in r.values.items():
            if v < 0:
                raise BadInput(f"{r.source}: {name} = {v:g} is negative; a {METRICS[name].unit} figure cannot be "
                               "(a sign error, or a column of differences?): give each run's measured values")


def _unique_labels(side: Side) -> None:
    """Run labels are how flags and tables name runs: make them unique within the side."""
    seen: dict[str, int] = {}
    for r in side.runs:
        seen[r.label] = seen.get(r.label, 0) + 1
    if any(c > 1 for c in seen.values()):
        for r in side.runs:
            if seen[r.label] > 1:
                path, _, row = r.source.partition("#")
                r.label = f"{Path(path).name}#{row}" if row else f"{Path(path).parent.name}/{r.label}"


def _load_single(path: Path, warnings: list[str], labels: tuple[str, str]) -> Loaded:
    if is_session_dir(path):
        return load_session(path, warnings)
    if path.is_file() and path.suffix.lower() in (".csv", ".json", ".jsonl"):
        if path.suffix.lower() == ".csv":
            rows = table_rows.read_csv(path)
        else:
            data = read_json(path)
            rows = data if isinstance(data, list) and all(isinstance(r, dict) for r in data) else []
        split = table_rows.split_by_side(rows, str(path)) if rows else None
        if split:
            a_rows, b_rows, col = split
            if not a_rows or not b_rows:
                raise BadInput(f"{path}: column {col!r} names only one side")
            a = Side(labels[0], table_rows.rows_to_runs(a_rows, f"{path}[{labels[0]}]", warnings), [str(path)])
            b = Side(labels[1], table_rows.rows_to_runs(b_rows, f"{path}[{labels[1]}]", warnings), [str(path)])
            return Loaded(a, b, None, f"one table split by its {col!r} column, analysed unpaired", warnings)
    if not path.exists():
        raise BadInput(f"{path}: no such file or directory")
    raise BadInput(
        f"{path}: one input must be a session directory (expo-prof ab / record --overlay both) or a table "
        "with a side column; otherwise give both sides: compare A B"
    )
