"""docs/json-output.md documents every key of the analyze --json result model.

GIVEN the msgspec result model, WHEN its field names are listed, THEN each
appears as a `key` in docs/json-output.md, and the documented schema version
is the model's.
"""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from expo_prof.analysis import model

DOC = Path(__file__).resolve().parents[2] / "docs" / "json-output.md"


def _structs():
    return [v for v in vars(model).values() if isinstance(v, type) and issubclass(v, msgspec.Struct) and v is not msgspec.Struct]


def test_every_field_is_documented():
    text = DOC.read_text(encoding="utf-8")
    documented = set(re.findall(r"`([a-z_0-9]+)`", text))
    missing = {f"{s.__name__}.{f}" for s in _structs() for f in s.__struct_fields__ if f not in documented}
    assert not missing


def test_schema_version_in_doc_title_matches():
    first = DOC.read_text(encoding="utf-8").splitlines()[0]
    assert f"schema version {model.SCHEMA}" in first


#: The section of docs/json-output.md that lists the keys each struct adds (to its base struct's).
SECTIONS = {
    "AnalysisResult": "## Top level",
    "RecordingEntry": "### `RecordingEntry`",
    "Totals": "### `Totals`",
    "WallTotals": "### `WallTotals`",
    "Summary": "### `summary` (adds)",
    "RankResult": "### each of `ranks` (adds)",
    "StepResult": "### each of `steps` (adds)",
    "StepBreakdown": "### `StepBreakdown`",
    "StepGroup": "### `StepBreakdown`",
    "QShape": "### `StepBreakdown`",
    "ClusterView": "### `ClusterView`",
    "ClusterStep": "### `ClusterStep`",
    "InstanceDists": "### `InstanceDists`",
    "StepDists": "### `InstanceDists`",
    "Dist": "### `InstanceDists`",
    "Saving": "### `Saving`",
    "Natural": "### `Natural`",
    "SamplingBound": "### `SamplingBound`",
    "SwitchbackArrival": "### `SwitchbackArrival`",
    "SwitchbackResult": "### `compare RUN --json` of a switchback run",
    "SwitchbackRuns": "### `compare RUN1 RUN2 … --json` of switchback runs",
    "SwitchbackRun": "### `compare RUN1 RUN2 … --json` of switchback runs",
    "Spread": "### `compare RUN1 RUN2 … --json` of switchback runs",
    "RunSaving": "### `compare RUN1 RUN2 … --json` of switchback runs",
    "Interval": "### `Saving`",
    "StepParts": "### `Saving`",
    "Shape": "### `Saving`",
    "Sequence": "### `Saving`",
    "SequentialSpec": "### `Saving`",
    "ArmGaps": "### `SwitchbackArrival`",
    "BurstFlag": "### `SwitchbackArrival`",
}


def _section(text: str, heading: str) -> str:
    """The text of the section that starts at ``heading``, up to the next heading."""
    start = text.index(heading)
    nxt = re.search(r"^#{1,3} ", text[start + len(heading):], re.MULTILINE)
    return text[start: start + len(heading) + (nxt.start() if nxt else len(text))]


def test_each_key_is_documented_in_its_own_section():
    """GIVEN each struct of the result model WHEN the keys it adds to its base struct are looked up THEN each is
    documented in that struct's own section (so summary.forward_source or a ClusterStep key cannot pass for
    documented because a rank's key of the same name is)."""
    text = DOC.read_text(encoding="utf-8")
    missing = []
    for s in _structs():
        base = next((b for b in s.__mro__[1:] if isinstance(b, type) and issubclass(b, msgspec.Struct)
                     and b is not msgspec.Struct), None)
        added = [f for f in s.__struct_fields__ if base is None or f not in base.__struct_fields__]
        section = set(re.findall(r"`([a-z_0-9]+)`", _section(text, SECTIONS[s.__name__])))
        missing += [f"{s.__name__}.{f}" for f in added if f not in section]
    assert not missing
