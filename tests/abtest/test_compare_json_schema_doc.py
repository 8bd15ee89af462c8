"""docs/ab.md documents every key of the compare --json result model.

GIVEN the msgspec result model WHEN its field names are listed THEN each
appears as a `key` in docs/ab.md, and the documented schema version is the
model's; the decisions and outcomes the doc lists are the model's constants.
"""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from expo_prof.abtest import model

DOC = Path(__file__).resolve().parents[2] / "docs" / "ab.md"


def _structs():
    return [v for v in vars(model).values() if isinstance(v, type) and issubclass(v, msgspec.Struct) and v is not msgspec.Struct]


def test_every_field_is_documented():
    text = DOC.read_text(encoding="utf-8")
    documented = set(re.findall(r"`([a-z_0-9]+)`", text)) | set(re.findall(r"`([a-z_0-9]+)`, `", text))
    missing = {f"{s.__name__}.{f}" for s in _structs() for f in s.__struct_fields__ if f not in documented}
    assert not missing


def test_schema_version_and_vocabulary_match():
    text = DOC.read_text(encoding="utf-8")
    assert f"schema version {model.SCHEMA}" in text.splitlines()[0]
    for word in (model.ENABLE, model.KEEP_OFF, model.NO_DIFFERENCE, model.INCONCLUSIVE, model.BETTER, model.WORSE,
                 model.UNTESTABLE, model.MISSING):
        assert f"`{word}`" in text or f"**{word}**" in text, word
