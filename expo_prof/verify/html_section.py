"""The verify section of ``expo-prof report``: when a run or session directory holds a ``verify.json``."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

from expo_prof.verify.run import RESULT_FILE, SCHEMA, SCHEMA_NAME


def find(paths: list[Path]) -> list[tuple[Path, dict]]:
    """The verify results in (or just above) the given directories; unreadable or foreign files are skipped."""
    seen, out = set(), []
    for p in paths:
        for cand in (Path(p) / RESULT_FILE, Path(p).parent / RESULT_FILE):
            if cand in seen or not cand.is_file():
                continue
            seen.add(cand)
            try:
                doc = json.loads(cand.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(doc, dict) and doc.get("schema_name") == SCHEMA_NAME and doc.get("schema") == SCHEMA:
                out.append((cand, doc))
    return out


def _rows(doc: dict) -> list[tuple[str, str, str]]:
    c = doc.get("checks") or {}
    rows = []
    g = c.get("greedy") or {}
    rows.append(("greedy", g.get("status", "not_run"), f"{g.get('identical', 0)}/{g.get('compared', 0)} identical"))
    s = c.get("seeded") or {}
    rows.append(("seeded", s.get("status", "not_run"), s.get("guarantee", "")))
    d = c.get("distribution") or {}
    if d.get("tests"):
        rows.append(("sampling distribution", d["status"], f"{len(d['tests'])} tests, smallest p {d['min_p']:.3g}, "
                     f"detectable total variation {d['detectable_tv']:.3f} at power {d['power']:.0%}"))
    for name in ("constraints", "sanity"):
        x = (c.get(name) or {}).get("on") or {}
        rows.append((f"{name} (overlay on)", x.get("status", "not_run"), ""))
    a = doc.get("accuracy")
    if a and a.get("status") != "not_run":
        rows.append(("accuracy", a["status"], f"{a['accuracy_off']:.2%} → {a['accuracy_on']:.2%}, CI "
                     f"[{a['ci_low']:+.2%}, {a['ci_high']:+.2%}]"))
    return rows


def html_section(found: list[tuple[Path, dict]]) -> str:
    """One ``<section>`` with each result's verdict and checks (text only, escaped)."""
    parts = ['<section id="verify" style="margin:2em 0"><h2>Verify: does the overlay change the outputs?</h2>']
    for path, doc in found:
        v = doc.get("verdict") or {}
        parts.append(f"<p><b>{escape(v.get('verdict', '?'))}</b> — {escape(v.get('line', ''))} "
                     f"<small>({escape(str(path))})</small></p><table><tr><th>check</th><th>status</th><th>detail</th></tr>")
        parts += [f"<tr><td>{escape(a)}</td><td>{escape(b)}</td><td>{escape(str(t))}</td></tr>" for a, b, t in _rows(doc)]
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
