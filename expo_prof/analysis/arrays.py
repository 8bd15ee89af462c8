"""Small numpy helpers of the analysis."""

from __future__ import annotations

import numpy as np


def distinct(a: np.ndarray) -> np.ndarray:
    """The sorted distinct values of ``a`` (``np.unique(a)``), without the import of numpy.ma that np.unique's
    first plain call makes (about 10 ms, once a process: a noticeable share of analysing one rank)."""
    s = np.sort(np.asarray(a).ravel())
    if len(s) < 2:
        return s
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    np.not_equal(s[1:], s[:-1], out=new[1:])
    return s[new]
