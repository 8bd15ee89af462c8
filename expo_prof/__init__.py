"""expo-prof: the offline half.

Reads overlay event logs and profiler traces (torch / Kineto, torch_npu,
msprof), measures how much exponential-sampling time hides under the forward
pass, and reports it. Importing this package never imports torch or vllm.

In a notebook::

    import expo_prof
    res = expo_prof.analyze(["trace.pt.trace.json.gz"])   # the same Result the CLI prints
    res.document.summary.hidden_fraction
    res.steps()["exposed_ns"]                              # numpy columns; res.to_pandas("steps")

See docs/api.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from expo_prof.version import __version__

if TYPE_CHECKING:  # pragma: no cover
    from expo_prof.pipeline import Result


def analyze(paths: Any, op: str | None = None, *, source: str = "auto", max_bytes: int | str | None = None) -> Result:
    """Analyse trace files, run directories or folders: the Result every command renders.

    ``paths``: one path or a list. ``op``: a regex of another side-lane op (e.g. ``"nccl"``) instead of the
    exponential draw. ``source``: ``auto`` | ``trace`` | ``overlay-log`` (where a rank has both).
    ``max_bytes``: cap on one file's decompressed size (``"800M"`` or bytes). Raises
    :class:`expo_prof.errors.BadInput` / :class:`expo_prof.errors.NothingFound` like the CLI's exit 2 / 1.
    """
    from pathlib import Path

    from expo_prof.pipeline import Options, run

    if isinstance(paths, (str, Path)):
        paths = [paths]
    return run(list(paths), Options.make(op=op, source=source, max_bytes=max_bytes))


__all__ = ["__version__", "analyze"]
