"""Patience for Ray starting on loaded cores (test-only; imported by test_ray.py and the scripts it runs).

Ray gives a raylet a fixed 30 s to register with the GCS (``ray/_private/node.py`` asks
``services.get_node`` in a loop); on 2 cores shared by several jobs that runs out. :func:`install` makes
each ask keep asking for up to 60 s. (Not helped by any setting found: the raylet itself also aborts when
its node's dashboard agent takes longer than ~15 s to write its port file, so callers still retry.)
"""

from __future__ import annotations

import time


def install():
    """Patch ``ray._private.services.get_node``; returns the original (to put back)."""
    import ray._private.services as services

    asked = services.get_node

    def patient(*a, **kw):
        end = time.monotonic() + 60
        while True:
            try:
                return asked(*a, **kw)
            except RuntimeError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.5)

    services.get_node = patient
    return asked
