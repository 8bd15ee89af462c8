"""Escaping for everything that goes into a page: JSON inside ``<script>``, text inside markup.

Names in traces (kernel names, op names, thread names) can hold any text,
including ``</script>`` and ``"><img onerror=…>``. The pages never put such a
name into markup: the data travels as JSON in a ``<script
type="application/json">`` block (escaped here so that no byte sequence in it
can end the block or open a comment), and the page's JavaScript puts names on
screen with ``textContent`` only, or through plotly text escaped by
``expoText`` in ``static/common.js``.
"""

from __future__ import annotations

import html
import re
from typing import Any

import orjson

# Inside JSON these characters only occur within strings, where a \\u escape
# means the same character: the JSON value is unchanged, the HTML parser sees
# no "<", ">" or "&" at all, and JavaScript engines that predate ES2019 see no
# raw line/paragraph separators.
_SCRIPT_UNSAFE = (
    (b"<", b"\\u003c"),
    (b">", b"\\u003e"),
    (b"&", b"\\u0026"),
    ("\u2028".encode(), b"\\u2028"),
    ("\u2029".encode(), b"\\u2029"),
)


def json_for_script(data: Any) -> str:
    """``data`` as JSON that is safe verbatim inside ``<script type="application/json">…</script>``.

    Stricter than escaping ``</`` alone: no ``<`` survives, so neither
    ``</script>`` nor ``<!--`` (which can make the HTML parser skip the
    closing tag) can appear. ``JSON.parse`` of the block's ``textContent``
    returns exactly ``data``.
    """
    raw = orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY)
    for bad, good in _SCRIPT_UNSAFE:
        if bad in raw:
            raw = raw.replace(bad, good)
    return raw.decode("utf-8")


def text(s: object) -> str:
    """Text for HTML markup (element content or a quoted attribute value)."""
    return html.escape(str(s), quote=True)


def inline_script(code: str) -> str:
    """Code for an inline ``<script>`` element (plotly.js, the page's own code).

    Our own code never holds ``</script``; plotly.js does not either, but a
    future build could, in a string or a regex: break such sequences so the
    element cannot end early (``<\\/`` and ``\\x3C`` mean ``</`` and ``<``
    inside JS strings and regexes alike).
    """
    # HTML tag names are case-insensitive: </SCRIPT> and </Script end the element too.
    return _SCRIPT_END.sub(r"<\\/\1", code).replace("<!--", "\\x3C!--")


_SCRIPT_END = re.compile(r"</(script)", re.IGNORECASE)
