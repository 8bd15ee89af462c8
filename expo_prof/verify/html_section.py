"""The verify section of ``expo-prof report``: when a run or session directory holds a ``verify.json``."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

from expo_prof.paths import leads_out
from expo_prof.verify.run import RESULT_FILE, SCHEMA, SCHEMA_NAME
from expo_prof.words import visible


def find(paths: list[Path]) -> list[tuple[Path, dict]]:
    """The verify results in (or just above) the given directories; unreadable or foreign files are skipped, and
    so is a result whose verdict is not an object (the section shows what the file holds, never a traceback)."""
    seen, out = set(), []
    for p in paths:
        for cand in (Path(p) / RESULT_FILE, Path(p).parent / RESULT_FILE):
            if cand in seen or not cand.is_file():
                continue
            if cand.is_symlink() and leads_out(cand, cand.parent):
                continue  # a symbolic link out of its folder is never followed (docs/cli.md)
            seen.add(cand)
            try:
                doc = json.loads(cand.read_text())
            except (OSError, ValueError):
                continue
            if (isinstance(doc, dict) and doc.get("schema_name") == SCHEMA_NAME and doc.get("schema") == SCHEMA
                    and isinstance(doc.get("verdict") or {}, dict)):
                out.append((cand, doc))
    return out


def _obj(x: Any) -> dict:
    return x if isinstance(x, dict) else {}


def _num(x: Any, spec: str) -> str:
    """A number of the file formatted, or "?" for anything else (a hand-edited or damaged verify.json)."""
    return format(x, spec) if isinstance(x, (int, float)) and not isinstance(x, bool) else "?"


def _rows(doc: dict) -> list[tuple[str, object, object]]:
    c = _obj(doc.get("checks"))
    rows: list[tuple[str, object, object]] = []
    g = _obj(c.get("greedy"))
    rows.append(("greedy", g.get("status", "not_run"), f"{g.get('identical', 0)}/{g.get('compared', 0)} identical"))
    s = _obj(c.get("seeded"))
    rows.append(("seeded", s.get("status", "not_run"), s.get("guarantee", "")))
    d = _obj(c.get("distribution"))
    if d.get("tests"):
        n = len(d["tests"]) if isinstance(d["tests"], list) else "?"
        rows.append(("sampling distribution", d.get("status", "?"),
                     f"{n} tests, smallest p {_num(d.get('min_p'), '.3g')}, detectable total variation "
                     f"{_num(d.get('detectable_tv'), '.3f')} at power {_num(d.get('power'), '.0%')}"))
    for name in ("constraints", "sanity"):
        x = _obj(_obj(c.get(name)).get("on"))
        rows.append((f"{name} (overlay on)", x.get("status", "not_run"), ""))
    a = _obj(doc.get("accuracy"))
    if a and a.get("status") != "not_run":
        rows.append(("accuracy", a.get("status", "?"), f"{_num(a.get('accuracy_off'), '.2%')} → "
                     f"{_num(a.get('accuracy_on'), '.2%')}, CI [{_num(a.get('ci_low'), '+.2%')}, "
                     f"{_num(a.get('ci_high'), '+.2%')}]"))
    return rows


def verdict_line(doc: dict) -> str:
    """The result's one-line verdict for the terminal (control and bidi characters visible, long text cut)."""
    return visible(_obj(doc.get("verdict")).get("line", ""))


def _t(x: object) -> str:
    """Text of the file for markup: control and bidi characters visible, long text cut, escaped."""
    return escape(visible(x))


def html_section(found: list[tuple[Path, dict]]) -> str:
    """One ``<section>`` with each result's verdict and checks (text only, escaped)."""
    parts = ['<section id="verify" style="margin:2em 0"><h2>Verify: does the overlay change the outputs?</h2>']
    for path, doc in found:
        v = _obj(doc.get("verdict"))
        parts.append(f"<p><b>{_t(v.get('verdict', '?'))}</b> — {_t(v.get('line', ''))} "
                     f"<small>({_t(path)})</small></p><table><tr><th>check</th><th>status</th><th>detail</th></tr>")
        parts += [f"<tr><td>{_t(a)}</td><td>{_t(b)}</td><td>{_t(t)}</td></tr>" for a, b, t in _rows(doc)]
        parts.append("</table>")
    parts.append("</section>")
    return "".join(parts)


def add_to_page(page: str, found: list[tuple[Path, dict]]) -> str:
    """``page`` with the verify section before ``</body>`` (unchanged when nothing was found)."""
    if not found:
        return page
    i = page.rfind("</body>")
    section = html_section(found)
    return page[:i] + section + page[i:] if i >= 0 else page + section
