"""docs/glossary.md: one word per idea, and every figure label of the outputs held to it.

GIVEN the glossary's entries and their "Appears as" lines, WHEN the labels of the terminal tables (``analyze`` run
on a switchback run, an overlay-on run and a real vLLM CPU trace), the report page's card titles and the JSON
model's keys are collected, THEN each is listed under exactly one entry (a JSON key may instead be one of the
"Keys that are not figures"), and every terminal label the glossary quotes is still printed (a renamed label
fails here).
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

import msgspec
import pytest

from expo_prof.analysis import model
from shared_paths import REALTRACES, REPO  # noqa: E402  (tests/shared_paths.py)

GLOSSARY = REPO / "docs" / "glossary.md"
REPORT_JS = REPO / "expo_prof" / "html" / "static" / "report.js"
#: The three inputs: a switchback run (its saving table), an overlay-on run (a wait by the trace's span), a real
#: vLLM CPU trace (no wait measured).
INPUTS = {
    "switchback": REPO / "traces" / "samples" / "tiny-cpu-switchback",
    "on": REPO / "traces" / "samples" / "tiny-cpu-off-on" / "02-on",
    "realtrace": REALTRACES / "vllm-cpu" / "rank0-fp64-gumbel.pt.trace.json.gz",
}
#: Where the terminal's labels are written: its own modules, and those it takes label words from (wait_label,
#: the arms' words, the burst flag's words).
LABEL_SOURCES = [*sorted((REPO / "expo_prof" / "terminal").glob("*.py")), REPO / "expo_prof" / "words.py",
                 REPO / "expo_prof" / "analysis" / "saving" / "words.py",
                 REPO / "expo_prof" / "analysis" / "saving" / "arrival.py"]

#: Table title (its start) -> (whose row labels count, whose column headers count, whether it has a header).
ROWS, COLUMNS, HEADER = "rows", "columns", "header"
TABLES = {
    "Hidden vs exposed time": {ROWS},
    "Distributions": {ROWS, COLUMNS, HEADER},
    "Per rank": {COLUMNS, HEADER},
    "The step": {ROWS, COLUMNS, HEADER},
    "Worst steps": {COLUMNS, HEADER},
    "What the overlay saves": {ROWS},
}


# ------------------------------------------------------------------------------------------------ the glossary
class Entry(msgspec.Struct):
    name: str
    text: str
    terminal: list[str]
    report: list[str]
    keys: list[str]


def _appears_as(text: str) -> tuple[list[str], list[str], list[str]]:
    """The terminal labels, report titles and JSON keys of an entry's "Appears as" paragraph."""
    m = re.search(r"^\*\*Appears as:\*\*(.*?)(?:\n\n|\Z)", text, re.S | re.M)
    assert m, "no Appears as line"
    line = " ".join(m.group(1).split())
    terminal: list[str] = []
    report: list[str] = []
    keys: list[str] = []
    for seg in re.split(r"\s+·\s+", line.strip()):
        kind = seg.split(None, 1)[0].rstrip(":")
        assert kind in ("terminal", "report", "JSON"), f"segment {seg!r} names no medium"
        if kind == "JSON":
            keys += re.findall(r"`([^`]+)`", seg)
        else:
            (terminal if kind == "terminal" else report).extend(re.findall(r'"([^"]+)"', seg))
    return terminal, report, keys


def _glossary() -> tuple[list[Entry], list[str]]:
    """The entries (### headings) and the keys listed under "Keys that are not figures"."""
    text = GLOSSARY.read_text(encoding="utf-8")
    entries = []
    for m in re.finditer(r"^### ([^\n]+)\n(.*?)(?=^#{2,3} |\Z)", text, re.S | re.M):
        name, body = m.group(1).strip(), m.group(2)
        terminal, report, keys = _appears_as(body)
        entries.append(Entry(name, body, terminal, report, keys))
    free = re.search(r"^## Keys that are not figures\n(.*?)(?=^#{1,3} |\Z)", text, re.S | re.M)
    assert free, "no section 'Keys that are not figures'"
    return entries, re.findall(r"`([^`]+)`", free.group(1))


ENTRIES, NOT_FIGURES = _glossary()


def _owners(attr: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for e in ENTRIES:
        for label in dict.fromkeys(getattr(e, attr)):  # once per entry: an entry may name a label twice
            out.setdefault(label, []).append(e.name)
    return out


def test_every_entry_says_what_how_and_where():
    """GIVEN each entry THEN it says what it measures, how it is computed, and where it appears."""
    assert len(ENTRIES) >= 30
    for e in ENTRIES:
        assert "**Measures:**" in e.text and "**Computed:**" in e.text and "**Appears as:**" in e.text, e.name
    names = {e.name for e in ENTRIES}
    for required in ("step id", "own time", "cadence", "window", "step count / rank-steps", "critical path",
                     "critical share", "exposed", "hidden", "hidden fraction", "wait", "sampler wait (span)",
                     "sampler wait (log window)", "saving", "bound", "block", "block pair", "arm / baseline",
                     "phase", "run", "recording", "rank", "instance", "forward", "decision words", "margin",
                     "confidence sequence", "measured under"):
        assert required in names


@pytest.mark.parametrize("attr", ["terminal", "report", "keys"])
def test_one_word_per_idea(attr):
    """GIVEN the glossary WHEN each label is looked up THEN it is listed under one entry only."""
    twice = {label: names for label, names in _owners(attr).items() if len(names) > 1}
    assert not twice
    if attr == "keys":
        assert not set(NOT_FIGURES) & set(_owners("keys"))


# ------------------------------------------------------------------------------------------------ the terminal
def _parts(line: str) -> list[str]:
    """A rich table line without a box: cells are parted by two spaces or more (pad_edge off, padding 1)."""
    return re.split(r"\s{2,}", line.strip())


def tables(text: str) -> dict[str, dict[str, list[str]]]:
    """Title start -> {"rows": first-column labels, "columns": headers} of each table of TABLES in ``text``."""
    lines = text.splitlines()
    found: dict[str, dict[str, list[str]]] = {}
    for i, line in enumerate(lines):
        title = next((t for t in TABLES if line.startswith(t)), None)
        if title is None and " — switchback, blocks of " in line:
            title = "What the overlay saves"  # three arms: "on (overlay) against off (inline draw) — switchback, …"
        if title is None:
            continue
        kind = TABLES[title]
        got = found.setdefault(title, {ROWS: [], COLUMNS: []})
        first = i + 1
        if HEADER in kind:
            # The header: the first (left) column's is empty in some tables, so the line starts with spaces.
            got[COLUMNS] += [h for h in _parts(lines[first]) if h]
            first += 1
        for row in lines[first:]:
            if not row.strip():
                break
            if len(row) - len(row.lstrip(" ")) > 2:
                continue  # a right-justified first column (a rank) or a wrapped detail: no label here
            cells = _parts(row)
            if len(cells) < 2:
                break  # a caption under the table ("own time: …", "P/D: …")
            got[ROWS].append(cells[0])
    return found


@pytest.fixture(scope="module")
def outputs(need) -> dict[str, str]:
    """The text of ``analyze`` on each input, at 200 columns."""
    need(INPUTS["realtrace"].is_file(), f"real trace {INPUTS['realtrace']}")
    env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(REPO)}
    out = {}
    for name, path in INPUTS.items():
        p = subprocess.run([sys.executable, "-m", "expo_prof", "analyze", str(path)], capture_output=True, text=True,
                           cwd=REPO, env=env, timeout=120)
        assert p.returncode == 0, p.stderr
        out[name] = p.stdout
    return out


@pytest.fixture(scope="module")
def labels(outputs) -> dict[str, set[str]]:
    """Each label of the tables -> the inputs whose output printed it (row labels and column headers alike)."""
    got: dict[str, set[str]] = {}
    for name, text in outputs.items():
        found = tables(text)
        expected = {"Hidden vs exposed time", "Distributions", "Per rank", "The step", "Worst steps"}
        if name == "switchback":
            expected.add("What the overlay saves")
        assert expected <= set(found), (name, sorted(found))
        for title, parts in found.items():
            kind = TABLES[title]
            for what in (ROWS, COLUMNS):
                if what in kind:
                    assert parts[what], (name, title, what)
                    for label in parts[what]:
                        got.setdefault(label, set()).add(name)
    return got


def test_the_parse_finds_the_tables(labels):
    """GIVEN the three outputs THEN the parse finds the labels every one prints (it reads real tables)."""
    for label in ("instances", "total", "hidden", "exposed", "forward", "sampler wait (log window)",
                  "sampler wait (span)", "sampler wait", "inst mean", "/step p99", "hidden %", "exp/step p99",
                  "own p50", "cadence p50", "critical/step", "share", "P/D", "reqs", "critical", "wait",
                  "decision", "saved / step", "block pairs", "cadence, overlay", "rest", "measured under"):
        assert label in labels, label
    assert len(labels) >= 40


def test_every_terminal_label_is_in_the_glossary(labels):
    """GIVEN every row label and column header of the tables THEN some entry lists it (exactly)."""
    listed = _owners("terminal")
    missing = sorted(label for label in labels if label not in listed)
    assert not missing


def _source_strings() -> tuple[set[str], list[re.Pattern[str]]]:
    """The string constants of the modules that write the terminal's labels, and each f-string as a pattern
    (a placeholder matches any text; at least three characters of its own)."""
    consts: set[str] = set()
    patterns: list[re.Pattern[str]] = []
    for path in LABEL_SOURCES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                parts = [re.escape(v.value) if isinstance(v, ast.Constant) else ".+" for v in node.values]
                literal = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
                if len(literal.strip()) >= 3:
                    patterns.append(re.compile("".join(parts)))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                consts.add(node.value)
    return consts, patterns


def test_no_stale_terminal_label(labels):
    """GIVEN every terminal label the glossary quotes THEN an output printed it, or the terminal's source writes
    it (a constant, or an f-string it fills): a label renamed in the code leaves the glossary stale here."""
    consts, patterns = _source_strings()
    stale = sorted(label for label in _owners("terminal") if label not in labels and label not in consts
                   and not any(p.fullmatch(label) for p in patterns))
    assert not stale


# ------------------------------------------------------------------------------------------------ the report page
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')


def _argument(js: str, i: int) -> str:
    """The JavaScript expression starting at ``i``, up to the comma (or parenthesis) that ends the argument."""
    depth, j, quote = 0, i, None
    while j < len(js):
        c = js[j]
        if quote:
            if c == "\\":
                j += 1
            elif c == quote:
                quote = None
        elif c in "\"'`":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                break
            depth -= 1
        elif c == "," and depth == 0:
            break
        j += 1
    return js[i:j]


def _literals(expr: str) -> list[tuple[str, bool]]:
    """Each string literal of a JavaScript expression, and whether a title starts with it: the expression's first
    term, or an alternative of a conditional (``a ? "x" : "y"``) in a group that starts the expression."""
    out: list[tuple[str, bool]] = []
    groups: list[int] = []  # where each open parenthesis is
    i = 0
    while i < len(expr):
        c = expr[i]
        m = _STRING.match(expr, i)
        if m:
            before = expr[:i].rstrip()
            group = groups[-1] if groups else 0  # the start of the group the literal is in
            starts = not before or (before[-1] in "?:(" and not expr[:group].strip())
            out.append((m.group(1), starts))
            i = m.end()
            continue
        if c == "(":
            groups.append(i)
        elif c == ")" and groups:
            groups.pop()
        i += 1
    return out


def card_titles() -> tuple[list[tuple[str, str]], list[str]]:
    """(card id, literal start) of every card title in report.js, and every string literal of the titles."""
    js = REPORT_JS.read_text(encoding="utf-8")
    starts: list[tuple[str, str]] = []
    literals: list[str] = []
    for m in re.finditer(r'\bcard\(\s*"(c-[\w-]+)"\s*,\s*', js):
        for lit, first in _literals(_argument(js, m.end())):
            literals.append(lit)
            if first:
                starts.append((m.group(1), lit))
    return starts, literals


def test_the_card_titles_are_found():
    starts, _ = card_titles()
    ids = {i for i, _ in starts}
    assert {"c-saving", "c-hidden", "c-exposed", "c-step", "c-wait", "c-toks", "c-fwdcost"} <= ids
    assert len(starts) >= 10


def test_every_card_title_is_in_the_glossary():
    """GIVEN each card title of the report page (its literal start where it is built) THEN some entry's report
    titles start with it."""
    titles = list(_owners("report"))
    starts, _ = card_titles()
    missing = sorted({f"{i}: {s}" for i, s in starts if not any(t.startswith(s) for t in titles)})
    assert not missing


def test_no_stale_card_title():
    """GIVEN each card title the glossary quotes THEN a literal of report.js's titles is part of it."""
    _, literals = card_titles()
    words = [x for x in literals if len(x.strip()) >= 4]
    stale = sorted(t for t in _owners("report") if not any(w in t for w in words))
    assert not stale


# ------------------------------------------------------------------------------------------------ the JSON model
def _structs():
    return [v for v in vars(model).values() if isinstance(v, type) and issubclass(v, msgspec.Struct)
            and v is not msgspec.Struct]


def test_every_json_key_maps_to_a_word():
    """GIVEN every field of every struct of the result model THEN it is a key of some entry, or one of the few
    keys that are not figures."""
    known = set(_owners("keys")) | set(NOT_FIGURES)
    missing = sorted({f"{s.__name__}.{f}" for s in _structs() for f in s.__struct_fields__ if f not in known})
    assert not missing


def test_no_stale_json_key():
    """GIVEN every key the glossary lists THEN it is a field of the result model."""
    fields = {f for s in _structs() for f in s.__struct_fields__}
    stale = sorted(k for k in [*_owners("keys"), *NOT_FIGURES] if k not in fields)
    assert not stale
    assert len(NOT_FIGURES) <= 25  # a short list: a figure belongs under its word
