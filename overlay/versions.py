"""Which vLLM / vllm-ascend releases the overlay knows: a version it cannot read, or newer than the newest
checked against its real sources (tools/overlay_matrix.py), makes the overlay step aside, naming it.

Why: a patch written against known sources, applied to unknown ones, can fail anywhere inside the server;
stepping aside with one notice that names the version is the honest answer until the release is checked.
Older releases are left to the patches, which say themselves what they cannot hook.
"""

from __future__ import annotations

import re
import sys

#: The newest minor of each package in the version matrix (docs/overlay.md); a test keeps them equal.
NEWEST_CHECKED = {"vllm": (0, 34), "vllm-ascend": (0, 26)}
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
    """Why ``dist`` at ``version`` is not a release the overlay knows, or None when it is."""
    match = _VERSION.match(version)
    if match is None:
        return f"{dist} version {version!r} cannot be read, so the overlay cannot tell whether it applies"
    newest = NEWEST_CHECKED[dist]
    if (int(match[1]), int(match[2])) > newest:
        return (f"{dist} {version} is newer than the newest release checked against the overlay "
                f"({newest[0]}.{newest[1]}); the overlay steps aside until it is checked (tools/overlay_matrix.py)")
    return None


def check_installed() -> str | None:
    """The reason to step aside for the installed vLLM / vllm-ascend, or None (never raises)."""
    for dist in NEWEST_CHECKED:
        try:
            version = installed_version(dist)
        except Exception:  # noqa: BLE001 - broken metadata: treat as unreadable
            version = "?"
        if version is not None:
            reason = unknown_reason(dist, version)
            if reason is not None:
                return reason
    return None
