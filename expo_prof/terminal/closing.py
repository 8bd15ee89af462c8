"""The end of ``analyze``'s text for several recordings (or files skipped): the recordings without a target
instance in one short list, what was looked for and the next step once, then one closing line that counts
what was read, found, passed over and skipped, by kind (issue 34, item 9)."""

from __future__ import annotations

import os
import re

from rich.console import Console
from rich.padding import Padding

from expo_prof.analysis.model import AnalysisResult
from expo_prof.console import safe as escape  # markup escaped, control / bidi characters visible
from expo_prof.words import plural

#: The parts of a "no target instance" error that are the same for every recording (said once, after the list).
_SAID_ONCE = ("looked for:", "no similar names", "next:")
#: Where the error's details begin (expo_prof.analysis.rollup joins them with "; ", as the lists inside do).
_DETAIL = re.compile(r"; (?=looked for: |no similar names|similar names present: |next: )")
#: What every line of the list would start with (its heading says it once).
_NOT_FOUND = "no target instance found in "
#: The info line of the pipeline that counts expo-prof's own and duplicate files it passed over
#: (expo_prof.pipeline.run: "passed over: N KIND; N KIND").
_PASSED_OVER = "passed over: "


def skip_kind(why: str) -> str:
    """The kind of a skipped file: its reason up to the first detail (a path, a position, a parenthesis), so
    that files skipped for the same cause count together."""
    return re.split(r" \(|: |; |, at ", why, maxsplit=1)[0]


def by_kind(skipped: list[tuple[str, str]]) -> list[tuple[str, int, str]]:
    """``(kind, count, first path)`` of skipped ``(path, why)`` pairs, the commonest kind first."""
    kinds: dict[str, list[str]] = {}
    for path, why in skipped:
        kinds.setdefault(skip_kind(why), []).append(path)
    return sorted(((k, len(ps), ps[0]) for k, ps in kinds.items()), key=lambda t: -t[1])


def _folder(result: AnalysisResult) -> str | None:
    """The one folder the inputs were given as, so that the list names files under it (shorter lines)."""
    if len(result.inputs) == 1 and os.path.isdir(result.inputs[0]):
        return result.inputs[0].rstrip("/") + "/"
    return None


def misses(con: Console, result: AnalysisResult, files: int | None = None) -> None:
    """After the results: the recordings without a target instance, one line each, what was looked for and the
    next step once (the same for all of them), and a closing line (:func:`closing`)."""
    missed = [e for e in result.recordings if e.summary is None]
    if missed:
        under = _folder(result)
        con.print()
        con.print(f"[bold]No target instance in {plural(len(missed), 'recording')}[/]"
                  + (f" (under {escape(under)})" if under else ""))
        shared: list[str] = []
        for e in missed:
            own, *rest = _DETAIL.split(e.error or "no instance found")
            own = own.removeprefix(_NOT_FOUND)
            mine = [r for r in rest if not r.startswith(_SAID_ONCE)]
            label = e.label.removeprefix(under) if under and e.label != under.rstrip("/") else e.label
            why = "; ".join([own, *mine])
            if len(label) + len(why) + 4 <= con.width:
                con.print(f"  {escape(label)}: {escape(why)}")
            else:  # the reason on its own line: a path is never parted from it mid-line
                con.print(f"  {escape(label)}:")
                con.print(Padding(escape(why), (0, 0, 0, 6)))  # its continuation lines indented alike
            shared += [r for r in rest if r.startswith(_SAID_ONCE) and r not in shared]
        similar = any("similar names present: " in (e.error or "") for e in missed)
        for part in shared:  # "looked for: …", "no similar names …", the next step: said once for all
            if similar and part.startswith("no similar names"):
                part += " in the others"  # some lines above do name similar names
            con.print(escape(part))
    con.print()
    con.print(escape(closing(result, files)))


def closing(result: AnalysisResult, files: int | None = None) -> str:
    """One line: files read, recordings with and without a result, files passed over and skipped by kind."""
    missed = sum(e.summary is None for e in result.recordings)
    found = len(result.recordings) - missed
    head = f"{plural(files, 'file')} read: " if files is not None else ""
    line = (head + f"{plural(len(result.recordings), 'recording')}, {found} with a result"
            + (" (above)" if found else "") + (f", {missed} without" if missed else ""))
    passed = next((i.removeprefix(_PASSED_OVER) for i in result.info if i.startswith(_PASSED_OVER)), None)
    if passed:
        n = sum(int(p.split(" ", 1)[0]) for p in passed.split("; ") if p.split(" ", 1)[0].isdigit())
        line += f"; {plural(n, 'file')} passed over ({passed})"
    if result.skipped:
        kinds = "; ".join(f"{n} {k}" for k, n, _first in by_kind([(p, w) for p, w in result.skipped]))
        line += f"; {plural(len(result.skipped), 'file')} skipped ({kinds})"
    return line
