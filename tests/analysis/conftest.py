"""Fixtures of the analysis tests (helpers live in analysis_helpers.py)."""

from __future__ import annotations

import pytest
from analysis_helpers import build_timeline  # type: ignore[import-not-found]


@pytest.fixture
def make_tl():
    """Build a Timeline by hand: ``make_tl(lanes, events, **kw)`` (see analysis_helpers.build_timeline)."""
    return build_timeline
