"""Long names in outputs (issue 34): what a page or an export keeps of names of any length.

A trace may name its events with any text, 10 KB each. Interning (one table of
names per page) holds a name used by any number of events once; names that are
all different cannot be interned, so long names also share a *budget*: the
first long names are kept whole, once, until :data:`LONG_BUDGET` characters of
long names are in the table (the name that crosses it is whole too: a single
huge name is always kept once), and every later long name is cut to :data:`CUT`
characters with a count of the rest. Ordinary names (up to :data:`LONG`
characters: kernels, ops, C++ templates) are always whole. The names table thus
holds at most ``LONG_BUDGET`` + the longest name + about 90 bytes per distinct
long name, whatever
the names (docs/html.md, "What a name may do"). A name the reader cut already
(:mod:`expo_prof.readers.long_names`, ``… (+N characters #HASH)``) is cut to
:data:`CUT` characters here too, its count and hash kept.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from expo_prof.words import cut_name, is_cut_name, plural

#: Names up to this many characters are always kept whole.
LONG = 256
#: Characters of long names a names table keeps whole (each whole long name once).
LONG_BUDGET = 1 << 20
#: Characters a long name keeps once the budget is spent (then ``… (+N characters #HASH)``).
CUT = 64
#: Characters of cut names a page's table holds; every later cut name shares one entry (:func:`fold_cut_names`).
FOLD_AFTER = 4 << 20


def budget_names(names: Sequence[str], what: str) -> tuple[list[str], str | None]:
    """``names`` (one table, each name once) as an output keeps them, and the warning that says what was cut
    (None when nothing was)."""
    out: list[str] = []
    held = n_cut = dropped = 0
    for name in names:
        if is_cut_name(name):  # cut on reading already (expo_prof.readers.long_names): shorter still, count and hash kept
            short = cut_name(name, CUT)
            if short != name:
                n_cut += 1
                dropped += len(name) - len(short)
            out.append(short)
        elif len(name) <= LONG:
            out.append(name)
        elif held < LONG_BUDGET:  # the name that crosses the budget is whole too: one huge name is kept once
            held += len(name)
            out.append(name)
        else:
            n_cut += 1
            dropped += len(name) - CUT
            out.append(cut_name(name, CUT))
    if not n_cut:
        return out, None
    return out, (f"{what}: {plural(n_cut, 'name')} longer than {LONG} characters cut to {CUT} "
                 f"({dropped:,} characters left out; the page keeps {LONG_BUDGET // (1 << 20)} Mi characters of long "
                 "names whole, each once); the trace keeps them whole")


def fold_cut_names(names: list[str]) -> tuple[list[str], np.ndarray | None, int]:
    """A page's table past :data:`FOLD_AFTER` characters of cut names: every later cut name shares one entry,
    ``other long names (N)``, so that a million distinct long names cost the page one name, not a million
    (issue 34). Returns the table, the old → new index map (None when nothing was folded) and N."""
    held = folded = 0
    other = -1
    out: list[str] = []
    remap = np.empty(len(names), dtype=np.int64)
    for i, name in enumerate(names):
        if is_cut_name(name):
            if held >= FOLD_AFTER:
                if other < 0:
                    other = len(out)
                    out.append("")
                remap[i] = other
                folded += 1
                continue
            held += len(name)
        remap[i] = len(out)
        out.append(name)
    if not folded:
        return out, None, 0
    out[other] = f"other long names ({folded:,})"
    return out, remap, folded
