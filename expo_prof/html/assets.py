"""Assemble one self-contained HTML file: plotly.js, our CSS/JS and the data, all inline.

The page loads nothing: plotly.js comes from the installed ``plotly`` Python
package (:func:`plotly.offline.get_plotlyjs`), our code from
``expo_prof/html/static/``, the data from a JSON block. A Content-Security-
Policy meta tag makes that a rule the browser enforces: no network request of
any kind (``default-src 'none'``), and only our inline scripts may run (each
allowed by its SHA-256 hash), so even markup that slipped into the page could
not run a handler such as ``onerror=…``.
"""

from __future__ import annotations

import base64
import hashlib
from functools import lru_cache
from importlib import resources

from expo_prof import __version__
from expo_prof.html.escape import inline_script, json_for_script, text

DATA_ID = "expo-data"


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """plotly.js as shipped in the installed plotly package (no network)."""
    from plotly.offline import get_plotlyjs

    return inline_script(get_plotlyjs())


@lru_cache(maxsize=None)
def static(name: str) -> str:
    """A file of ``expo_prof/html/static/``."""
    return resources.files("expo_prof.html").joinpath("static", name).read_text(encoding="utf-8")


def _sha256(code: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(code.encode("utf-8")).digest()).decode("ascii") + "'"


def render_page(*, title: str, body: str, data: dict, scripts: list[str], styles: list[str]) -> str:
    """The complete HTML document.

    ``body`` is our own static markup (never data); ``scripts`` are names of
    files in ``static/`` run in order after plotly.js; ``data`` is embedded as
    JSON in ``<script type="application/json" id="expo-data">``.
    """
    codes = [plotly_js()] + [inline_script(static(s)) for s in scripts]
    csp = (
        "default-src 'none'; "
        f"script-src {' '.join(_sha256(c) for c in codes)}; "
        "style-src 'unsafe-inline'; img-src data: blob:; font-src data:; "
        "connect-src 'none'; form-action 'none'; base-uri 'none'"
    )
    css = "\n".join(static(s) for s in styles)
    parts = [
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
        f'<meta name="generator" content="expo-prof {text(__version__)}">\n',
        f'<meta http-equiv="Content-Security-Policy" content="{text(csp)}">\n',
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
        f"<title>{text(title)}</title>\n<style>\n{css}\n</style>\n</head>\n<body>\n",
        body,
        f'\n<script type="application/json" id="{DATA_ID}">{json_for_script(data)}</script>\n',
    ]
    parts.extend(f"<script>{c}</script>\n" for c in codes)
    parts.append("</body>\n</html>\n")
    return "".join(parts)
