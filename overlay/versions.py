"""Which vLLM / vllm-ascend releases the overlay knows, and what it does on one it has not seen.

A release up to the newest minor the version matrix checked against its real sources
(tools/overlay_matrix.py) is known. On one newer than that, or whose version cannot be read, the overlay
checks the installed sources itself (:mod:`overlay.sourcecheck`): every function it re-implements must be
identical, as normalised source text, to a checked release's, and every seam it wraps must pass the matrix's
own structural checks. It applies when both hold, saying once which release it matched; otherwise it steps
aside with one notice naming the first function that fails, why, and the release it was compared with.

Why: a patch written against known sources, applied to unknown ones, can fail anywhere inside the server;
but stepping aside on every new minor would leave users waiting for a matrix row after each release even
where nothing the overlay touches changed. Older releases are left to the patches, which say themselves what
they cannot hook.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

#: The newest minor of each package in the version matrix (docs/overlay.md); a test keeps them equal.
NEWEST_CHECKED = {"vllm": (0, 34), "vllm-ascend": (0, 30)}
_VERSION = re.compile(r"^\s*v?(\d+)\.(\d+)")


def installed_version(dist: str) -> str | None:
    """The installed version of ``dist`` (``vllm.__version__`` when vLLM is loaded), None when absent."""
    if dist == "vllm" and "vllm" in sys.modules:
        version = getattr(sys.modules["vllm"], "__version__", None)
        if version is not None:
            return str(version)
    import importlib.metadata

    for name in (dist, dist + "-cpu") if dist == "vllm" else (dist,):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def unknown_reason(dist: str, version: str) -> str | None:
    """Why ``dist`` at ``version`` is not a release the version matrix covers, or None when it is."""
    match = _VERSION.match(version)
    if match is None:
        return f"{dist} version {version!r} cannot be read, so it is not a release the matrix checked"
    newest = NEWEST_CHECKED[dist]
    if (int(match[1]), int(match[2])) > newest:
        return (f"{dist} {version} is newer than the newest release checked against the overlay "
                f"({newest[0]}.{newest[1]})")
    return None


@dataclass(frozen=True)
class Verdict:
    """Whether the overlay runs on the installed engine."""

    #: Why it steps aside (one notice), or None.
    reason: str | None = None
    #: What it says once when it runs on a release the matrix has not seen (the release it matched).
    note: str | None = None


def check_installed() -> Verdict:
    """The verdict on the installed vLLM / vllm-ascend (never raises): a release the matrix covers runs; an unseen
    one runs only when its sources pass :func:`overlay.sourcecheck.check_installed_source`."""
    notes = []
    for dist in NEWEST_CHECKED:
        try:
            version = installed_version(dist)
        except Exception:  # noqa: BLE001 - broken metadata: treat as unreadable
            version = "?"
        if version is None or unknown_reason(dist, version) is None:
            continue
        try:
            from overlay.sourcecheck import check_installed_source

            checked = check_installed_source(dist, version)
        except Exception as exc:  # noqa: BLE001 - a check that breaks is no proof: step aside, naming why
            return Verdict(f"{unknown_reason(dist, version)}, and its sources could not be checked "
                           f"({type(exc).__name__}: {exc})")
        if checked.reason is not None:
            return Verdict(checked.reason)
        if checked.note is not None:
            notes.append(checked.note)
    return Verdict(None, "; ".join(notes) or None)
