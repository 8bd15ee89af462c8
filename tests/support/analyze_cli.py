"""Run ``expo-prof analyze`` in process for the CLI tests (one helper, not a copy per test file)."""

from __future__ import annotations

import pytest

from expo_prof.cli.main import main


def analyze_out(capsys, *args: str) -> str:
    """What ``expo-prof analyze ARGS`` prints (exit 0)."""
    with pytest.raises(SystemExit) as ei:
        main(["analyze", *args])
    out, err = capsys.readouterr()
    assert ei.value.code == 0, err
    return out
