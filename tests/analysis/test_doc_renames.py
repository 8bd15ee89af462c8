"""Schema 3 renamed keys, it did not change figures: every document of every committed sample and real trace
that schema 2 wrote equals today's, through the rename table of docs/json-output.md.

GIVEN the ``analyze --json`` documents written at schema 2 (tests/data/docs-schema2/, by
tests/analysis/doc_cases.py at 421b706) WHEN each case is analysed again and the old document's keys are
renamed by the documented table THEN the two are equal, except under the keys the documentation lists as
changed (each with why), and except ``schema`` itself.
"""

from __future__ import annotations

import gzip
import json
import re

import pytest

from doc_cases import REPO, cases, document

DOC = REPO / "docs" / "json-output.md"
BEFORE = REPO / "tests" / "data" / "docs-schema2"


def _block(name: str) -> list[list[str]]:
    text = DOC.read_text(encoding="utf-8")
    body = text[text.index(f"<!-- {name}:begin"):text.index(f"<!-- {name}:end -->")]
    rows = [ln for ln in body.splitlines() if ln.startswith("| `")]
    return [[c.strip().strip("`") for c in r.strip("|").split("|")] for r in rows]


def _pattern(p: str) -> re.Pattern:
    """A documented path: ``**.`` any prefix, ``*`` one key, ``[]`` a list's items, ``{k}`` a key with spaces."""
    out, i = "", 0
    while i < len(p):
        if p.startswith("**.", i):
            out, i = out + r"(?:.*\.)?", i + 3
        elif p[i] == "*":
            out, i = out + r"[^.]*", i + 1
        elif p[i] == "{":
            j = p.index("}", i)
            out, i = out + re.escape(p[i + 1:j]), j + 1
        else:
            out, i = out + re.escape(p[i]), i + 1
    return re.compile(out + r"\Z")


RENAMES = [(_pattern(old), new.split(".")[-1]) for old, new, *_ in _block("renames")]
#: (pattern, where): "any", "no step" (only where the enclosing object counts no step), or "views, drawless".
CHANGED = [(_pattern(key), where) for key, where, *_ in _block("changed")]
SKIP = {"schema"}
#: The warnings whose words changed (the rest are compared exactly).
CHANGED_WARNINGS = ("the views count different steps", "without a draw:")


def _no_step(obj) -> bool:
    """Whether a document object (summary, rank) counts no numbered step."""
    return isinstance(obj, dict) and (obj.get("rank_steps", obj.get("step_count", 1)) == 0)


def _allowed(path: str, parent, a, b) -> bool:
    """Whether the documented changes allow ``a`` (renamed schema 2) and ``b`` (now) to differ at ``path``."""
    for pat, where in CHANGED:
        if pat.match(path):
            if where == "any":
                return True
            if where == "no step":
                return _no_step(parent) or (isinstance(b, str) and "no steps, so no critical path" in b)
            if where == "views, drawless":
                return isinstance(b, str) and any(w in b for w in CHANGED_WARNINGS)
    return False


def renamed(doc, path: str = ""):
    """``doc`` with every key that matches a rename (by its schema-2 path) given its schema-3 name."""
    if isinstance(doc, list):
        return [renamed(x, path + "[]") for x in doc]
    if not isinstance(doc, dict):
        return doc
    out = {}
    for k, v in doc.items():
        p = f"{path}.{k}" if path else k
        new = next((n for pat, n in RENAMES if pat.match(p)), k)
        out[new] = renamed(v, p)
    return out


def differences(a, b, path: str = "", parent=None) -> list[str]:
    """Paths (schema 3) where ``a`` and ``b`` differ, outside the documented changes."""
    if path in SKIP or (a != b and _allowed(path, parent, a, b)):
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            p = f"{path}.{k}" if path else k
            if k not in a or k not in b:
                if not _allowed(p, b, a.get(k), b.get(k)):
                    out.append(f"{p}: only in {'schema 3' if k in b else 'schema 2'}")
                continue
            out += differences(a[k], b[k], p, b)
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items before, {len(b)} now"]
        return [d for x, y in zip(a, b) for d in differences(x, y, path + "[]", parent)]
    return [] if a == b else [f"{path}: {a!r} before, {b!r} now"]


def test_the_rename_table_maps_keys_that_exist():
    """Every rename names a key some schema-2 document holds (a stale row would pass everything)."""
    paths: set[str] = set()

    def walk(d, path=""):
        if isinstance(d, list):
            for x in d:
                walk(x, path + "[]")
        elif isinstance(d, dict):
            for k, v in d.items():
                p = f"{path}.{k}" if path else k
                paths.add(p)
                walk(v, p)

    for f in BEFORE.glob("*.json.gz"):
        walk(json.loads(gzip.decompress(f.read_bytes())))
    unused = [old for (old, *_), (pat, _) in zip(_block("renames"), RENAMES) if not any(pat.match(p) for p in paths)]
    assert not unused


@pytest.mark.parametrize("name,argv", cases(), ids=[c[0] for c in cases()])
def test_every_figure_is_the_same_under_its_new_key(name, argv):
    before = json.loads(gzip.decompress((BEFORE / f"{name}.json.gz").read_bytes()))
    now = document(argv)
    assert now.get("schema", 3) == 3
    assert differences(renamed(before), now) == []
