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
