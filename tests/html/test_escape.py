"""Escaping of data and code embedded in pages: nothing from a trace can end a script block."""

from __future__ import annotations

import json

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from expo_prof.html.escape import inline_script, json_for_script, text

NASTY = [
    "</script><script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "<!--<script>",
    "\u2028\u2029",
    "a & b < c > d",
    "</SCRIPT >",
]


def test_nasty_names_round_trip_and_leave_no_markup():
    """GIVEN names that would close a script block or open a comment
    WHEN they are embedded as JSON for a <script type="application/json"> block
    THEN the text holds no '<', '>', '&' or raw line separators, and parses back to the same names."""
    out = json_for_script({"names": NASTY})
    for bad in ("<", ">", "&", "\u2028", "\u2029"):
        assert bad not in out
    assert json.loads(out) == {"names": NASTY}


@settings(max_examples=300, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(),
                    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4), max_leaves=20))
def test_any_value_round_trips(value):
    """GIVEN any JSON value with arbitrary text WHEN escaped for a script block THEN it parses back unchanged
    and no closing tag or comment opener survives."""
    out = json_for_script(value)
    assert json.loads(out) == value
    assert "</" not in out.lower() and "<!--" not in out


def test_inline_script_breaks_closing_tags_and_text_escapes_markup():
    """GIVEN code holding '</script' and '<!--' WHEN prepared for an inline script THEN neither survives;
    AND text() escapes markup characters and quotes for attributes."""
    code = inline_script('var s = "</script>"; var c = "<!-- x";')
    assert "</script" not in code and "<!--" not in code
    assert text('"><img src=x>') == "&quot;&gt;&lt;img src=x&gt;"


@pytest.mark.parametrize("closing", ["</script>", "</SCRIPT>", "</Script >", "</sCrIpT\n>"])
def test_inline_script_breaks_closing_tags_in_any_case(closing):
    """GIVEN code holding a closing script tag in any letter case (HTML tag names are case-insensitive)
    WHEN prepared for an inline script THEN no case-insensitive '</script' survives, and the JS text means the same."""
    code = inline_script(f'var s = "{closing}";')
    assert "</script" not in code.lower()
    assert code.replace("<\\/", "</") == f'var s = "{closing}";'
