"""Assemble one self-contained HTML file: plotly.js, our CSS/JS and the data, all inline.

The page loads nothing: plotly.js is the pinned *partial* bundle
``static/plotly-basic.min.js`` (npm ``plotly.js-basic-dist-min``, the same
plotly.js version as the installed ``plotly`` package: scatter, bar and pie
traces, cartesian axes, range slider, modebar — all the pages use; 1.2 MB
instead of the full 4.8 MB), our code from
``expo_prof/html/static/``, the data from a JSON block. A Content-Security-
Policy meta tag makes that a rule the browser enforces: no network request of
any kind (``default-src 'none'``), and only our inline scripts may run (each
allowed by its SHA-256 hash), so even markup that slipped into the page could
not run a handler such as ``onerror=…``.
"""

from __future__ import annotations

import base64
import hashlib
from functools import cache, lru_cache
from importlib import resources

from expo_prof.html.escape import inline_script, json_for_script, text
from expo_prof.version import __version__

DATA_ID = "expo-data"


#: The pinned partial bundle: ``npm pack plotly.js-basic-dist-min@4.1.1`` (MIT, licence next to it).
PLOTLY_BUNDLE = "plotly-basic.min.js"
PLOTLY_VERSION = "4.1.1"
PLOTLY_SHA256 = "99784e3abfb07b142a15e521a439e6d9addceadb3f79553fd24c72774f0649ba"


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """The pinned partial plotly.js bundle (checked against its SHA-256: a changed file is a packaging error)."""
    code = static(PLOTLY_BUNDLE)
    got = hashlib.sha256(code.encode("utf-8")).hexdigest()
    if got != PLOTLY_SHA256:
        raise RuntimeError(f"expo_prof/html/static/{PLOTLY_BUNDLE} is not the pinned plotly.js {PLOTLY_VERSION} "
                           f"basic bundle (sha256 {got})")
    return inline_script(code)


@lru_cache(maxsize=1)
def plotly_js_full() -> str:
    """The full plotly.js of the installed plotly package (the benchmark's before/after comparison only)."""
    from plotly.offline import get_plotlyjs

    return inline_script(get_plotlyjs())


@cache
def static(name: str) -> str:
    """A file of ``expo_prof/html/static/``."""
    # One name per joinpath: Traversable.joinpath takes one before Python 3.11 (zip imports).
    return resources.files("expo_prof.html").joinpath("static").joinpath(name).read_text(encoding="utf-8")


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
