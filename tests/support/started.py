"""Start several real vLLM servers at once, for the tests that need them side by side.

A server's start is ~35 s on the 2-core CI machine, nearly all of it three Python interpreters importing
torch and vLLM one after another (API server, engine core, worker), each on one core. Two servers started
one after the other leave a core idle for all of that; started together they are both up in about the time
of one. What the tests then measure does not change: the waves and checks run after both are ready.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def started(*servers) -> Iterator[tuple]:
    """``with started(a, b) as (a, b):`` — spawn every :class:`~expo_prof.serving.launch.VllmServer`, then wait
    until each serves; stop them all on leaving (or when one fails to start, naming it in the error)."""
    with contextlib.ExitStack() as stack:
        for srv in servers:
            srv.start()
            stack.callback(srv.stop)
        for srv in servers:
            srv.wait_ready()
        yield servers
