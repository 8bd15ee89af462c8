"""Where inside each instance the hidden and the exposed time lie (sub-intervals, for drawing).

:func:`expo_prof.analysis.overlap.hidden.hidden_time` gives each instance's hidden
*total*; the pages, the export and the critical path need the *pieces*: which
stretches of the draw ran under other lanes' compute and which did not. They
are computed here with the same busy-time definition
(:class:`~expo_prof.analysis.overlap.cover.Cover`: compute on the other lanes of the
same device) and the public interval helpers, so the pieces of every instance
add up exactly to its hidden and exposed totals (tests check it against the
analysis).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from expo_prof.analysis import intervals as iv
from expo_prof.analysis.overlap.cover import Cover
from expo_prof.analysis.arrays import distinct


@dataclass
class Pieces:
    """Sub-intervals of instances, column-wise, sorted by (instance, start).

    Piece ``k`` is ``[start[k], end[k])`` of instance ``inst[k]``; ``hidden[k]``
    says whether it ran under compute on another lane of its device.
    """

    inst: np.ndarray  # int64
    start: np.ndarray  # int64 ns
    end: np.ndarray  # int64 ns
    hidden: np.ndarray  # bool

    def __len__(self) -> int:
        return len(self.inst)

    def totals(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``(hidden_ns, exposed_ns)`` per instance, summed over the pieces."""
        h = np.zeros(n, dtype=np.int64)
        e = np.zeros(n, dtype=np.int64)
        d = self.end - self.start
        np.add.at(h, self.inst[self.hidden], d[self.hidden])
        np.add.at(e, self.inst[~self.hidden], d[~self.hidden])
        return h, e


def split_members(ms: np.ndarray, me: np.ndarray, busy: iv.Union) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Cut each member ``[ms[i], me[i])`` at the edges of ``busy``.

    Returns ``(member, start, end, hidden)`` of every non-empty piece, sorted
    by member then start. Vectorised: the busy intervals overlapping member
    ``i`` are ``busy[k0[i]:k1[i]]`` (two ``searchsorted``), clipped to it; the
    exposed pieces are the gaps between them.
    """
    n = len(ms)
    if n == 0:
        z = np.empty(0, np.int64)
        return z, z, z, np.empty(0, bool)
    if len(busy) == 0:
        idx = np.arange(n, dtype=np.int64)
        keep = me > ms
        return idx[keep], ms[keep], me[keep], np.zeros(int(keep.sum()), bool)
    k0 = np.searchsorted(busy.end, ms, side="right")  # first busy interval ending after ms
    k1 = np.searchsorted(busy.start, me, side="left")  # busy intervals starting before me
    cnt = np.maximum(k1 - k0, 0)
    owner = np.repeat(np.arange(n, dtype=np.int64), cnt)
    offs = np.arange(int(cnt.sum()), dtype=np.int64) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    k = np.repeat(k0, cnt) + offs
    hs = np.maximum(busy.start[k], ms[owner])
    he = np.minimum(busy.end[k], me[owner])
    # Exposed pieces: member start → first hidden start, hidden end → next hidden start, last hidden end → member end.
    first = np.ones(len(owner), dtype=bool)
    first[1:] = owner[1:] != owner[:-1]
    prev_end = np.where(first, ms[owner], np.concatenate(([0], he[:-1])))
    gap_owner = owner
    gap_s, gap_e = prev_end, hs
    # Tail gaps: members with hidden pieces end after their last piece; members without any are wholly exposed.
    last = np.ones(len(owner), dtype=bool)
    last[:-1] = owner[:-1] != owner[1:]
    tail_owner = owner[last]
    tail_s, tail_e = he[last], me[tail_owner]
    none = np.flatnonzero(cnt == 0)
    m = np.concatenate((owner, gap_owner, tail_owner, none))
    s = np.concatenate((hs, gap_s, tail_s, ms[none]))
    e = np.concatenate((he, gap_e, tail_e, me[none]))
    h = np.concatenate((np.ones(len(owner), bool), np.zeros(len(gap_owner) + len(tail_owner) + len(none), bool)))
    keep = e > s
    m, s, e, h = m[keep], s[keep], e[keep], h[keep]
    o = np.lexsort((s, m))
    return m[o], s[o], e[o], h[o]


def instance_pieces(a, cover: Cover | None = None) -> Pieces:
    """Hidden and exposed pieces of every instance of one analysed Timeline (anything with ``tl`` and ``inst``);
    ``cover``: its busy time when already computed (the same Timeline and instances)."""
    tl, inst = a.tl, a.inst
    z = np.empty(0, np.int64)
    if len(inst) == 0:
        return Pieces(z, z, z, np.empty(0, bool))
    cover = cover or Cover(tl, inst)
    member_lane = inst.lane[inst.member_inst]
    parts = []
    for lane in distinct(inst.lane):
        sel = np.flatnonzero(member_lane == lane)
        mi, s, e, h = split_members(inst.member_start[sel], inst.member_end[sel], cover.of(int(lane)))
        parts.append((inst.member_inst[sel][mi], s, e, h))
    m = np.concatenate([p[0] for p in parts])
    s = np.concatenate([p[1] for p in parts])
    e = np.concatenate([p[2] for p in parts])
    h = np.concatenate([p[3] for p in parts])
    o = np.lexsort((s, m))
    return Pieces(m[o].astype(np.int64), s[o], e[o], h[o])
