"""Long names on reading (issue 34): what a reader keeps of names of any length, so that memory and every output
stay bounded whatever the names.

A trace may name every event with 10 KB of its own text. Names are interned
(one table per file, each distinct name once), which bounds names that repeat,
but not names that all differ: 100 k distinct 10 KB names held the table at
1 GB, and every output that names events carried them. So long names share a
budget per file: names up to :data:`LONG` characters are always whole; longer
ones are kept whole, each once, until :data:`WHOLE_BUDGET` characters of long
names are held (the one that crosses it whole too: a single huge name is always
kept once), and every later one is cut to its first :data:`KEEP` characters
with ``… (+N characters #HASH)`` (:func:`expo_prof.words.cut_name`): the count
says what was left out, the hash of the whole name keeps different names apart
(and the same name the same), so interning, counts per name and ``--op``
(matched on the kept characters) work as before. The table thus holds at most
``WHOLE_BUDGET`` + the longest name + about :data:`LONG` characters per distinct
long name, whatever the names; one warning per file says what was cut
(docs/trace-formats.md, "Long names").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from expo_prof.words import cut_name

#: Names up to this many characters are always whole (most ops and kernels; a long C++ template kernel name uses the
#: budget, which holds thousands of them).
LONG = 256
#: Characters of long names kept whole per file (each distinct long name once).
WHOLE_BUDGET = 1 << 20
#: Characters of whole long names an output without a table of names (the JSON export) writes, all events together.
WRITTEN_BUDGET = 64 << 20
#: Characters a long name keeps once the budget is spent (the cut name, marker included, stays within LONG).
KEEP = 200


class LongNames:
    """The long-name budget of one file: :meth:`fit` gives the name to keep for a name longer than :data:`LONG`."""

    __slots__ = ("held", "whole", "cuts", "dropped", "left")

    def __init__(self, *, written: int | None = None) -> None:
        # An output without a table of names (a JSON export) writes a name once per event: ``written`` caps the
        # characters of whole long names it writes in all, after which every long name is cut (None: a table
        # holds each name once, the budget alone bounds it).
        self.left = written
        self.held = 0  # characters of long names kept whole
        self.whole: set[str] = set()  # the long names kept whole
        self.cuts: set[str] = set()  # the distinct cut names
        self.dropped = 0  # characters left out of the distinct cut names

    def fit(self, name: str) -> str:
        """``name`` (longer than :data:`LONG`) as it is kept: whole while the budget lasts (and for a name kept
        whole before), else cut to :data:`KEEP` characters with its count and hash."""
        keep = name in self.whole
        if not keep and self.held < WHOLE_BUDGET:  # the name that crosses the budget is whole too (kept once)
            self.held += len(name)
            self.whole.add(name)
            keep = True
        if keep and (self.left is None or self.left >= len(name)):
            if self.left is not None:
                self.left -= len(name)
            return name
        short = cut_name(name, KEEP)
        if short not in self.cuts:
            self.cuts.add(short)
            self.dropped += len(name) - KEEP
        return short

    def fit_all(self, values: list[Any]) -> list[Any]:
        """``values`` (a batch's names: str, or anything a file holds there) with every long name fitted; the
        same list when none is long (one C-level pass finds that)."""
        try:
            lens = np.fromiter(map(len, values), np.int64, len(values))
        except TypeError:  # a name that is no string (None, a number): look at each
            return [self.fit(v) if type(v) is str and len(v) > LONG else v for v in values]
        long = np.flatnonzero(lens > LONG)
        if len(long) == 0:
            return values
        # Only the long ones are looked at one by one (a GPU trace's template kernels: a few in a batch).
        out = list(values)
        for i in long.tolist():
            v = out[i]
            if type(v) is str:
                out[i] = self.fit(v)
        return out

    @property
    def seen(self) -> int:
        """Distinct long names seen (kept whole or cut)."""
        return len(self.whole) + len(self.cuts)

    def warning(self, where: str) -> str | None:
        """The one warning of a file whose names were cut (None when none was)."""
        if not self.cuts:
            return None
        if self.left is not None:  # an output that writes a name per event (export)
            return (f"{where}: {len(self.cuts):,} distinct names longer than {LONG} characters cut to their first "
                    f"{KEEP} ({self.dropped:,} characters left out), each ending in `… (+N characters #HASH)`, once "
                    f"{WRITTEN_BUDGET >> 20} Mi characters of long names were written whole; the source trace "
                    "keeps them whole")
        return (f"{where}: {len(self.cuts):,} distinct names longer than {LONG} characters cut to their first {KEEP} "
                f"({self.dropped:,} characters left out; the first {WHOLE_BUDGET >> 20} Mi characters of long names "
                "are kept whole, each once); a cut name ends in `… (+N characters #HASH)`, which keeps different "
                f"names apart, and --op matches its first {KEEP} characters")
