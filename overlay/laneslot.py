"""The process's one lane, made on first use, and what is said about it.

The lane (:mod:`overlay.lanes`) can only be made once the device is known —
the first step, reserve or sampler call — and the event log's header names
it, so notices said before then wait here until the header can be written.
Stdlib only at import: the lane factory imports torch itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from overlay.contract import NOTICE_LANE_ERROR, NOTICE_LANE_PLACEMENT
from overlay.events import EventLog

logger = logging.getLogger("vllm.expo_prof")


class LaneSlot:
    """Owns the lane of this process: its creation, the log header it fixes, and its failures.

    ``factory(device, instrument)`` makes the lane; ``header`` holds the
    overlay's own header fields (the switchback schedule), written together
    with the backend and lane kind once the lane exists.
    """

    def __init__(self, log: EventLog, factory: Callable[[Any, bool], Any], *, instrument: bool,
                 header: dict[str, Any]) -> None:
        self.log = log
        self.instrument = instrument
        self._factory = factory
        self._header = header
        self.lane: Any = None
        #: The device type of the lane ("cpu", "cuda", "npu"), None before it exists.
        self.backend: str | None = None
        #: Notices said before the log header is known (no lane yet).
        self._deferred: list[tuple[str, str, str]] = []
        #: Lane failures so far: only the first is said, the rest are counted.
        self._errors = 0

    @property
    def timing(self) -> str:
        """How the lane times its windows: "device" (events read later) or "host" (final at once)."""
        return getattr(self.lane, "timing", "host")

    def get(self, device: Any) -> Any:
        """The lane for ``device`` (created on first use; fixes the log header)."""
        if self.lane is None:
            import torch

            self.lane = self._factory(device, self.instrument)
            self.backend = torch.device(device).type
            self.log.configure(backend=self.backend, lane=self.lane.kind, **self._header)
            # The header is written first, then what waited for it, in the order it was said.
            for notice in self._deferred:
                self.log.notice(*notice)
            self._deferred.clear()
            placement = getattr(self.lane, "placement", None)
            if placement:
                logger.info("expo-prof overlay: %s", placement)
                self.log.notice("info", NOTICE_LANE_PLACEMENT, placement)
        return self.lane

    def forget(self) -> None:
        """Drop the lane without closing it: a forked child inherits the object, not its thread."""
        self.lane = None

    def notice_later(self, level: str, code: str, message: str) -> None:
        """Write a notice now when the log header is known, else once the lane exists."""
        if self.log.configured:
            self.log.notice(level, code, message)
        else:
            self._deferred.append((level, code, message))

    def failed(self, exc: BaseException) -> None:
        """A lane failure (the step draws inline): warn once, then only count (each such step falls back ``error``)."""
        self._errors += 1
        if self._errors == 1:
            message = f"side lane failed, drawing inline for that step: {exc!r}"
            logger.warning("expo-prof overlay: %s", message)
            self.log.notice("warning", NOTICE_LANE_ERROR, message + " (later lane errors are only counted)")

    def close(self) -> None:
        """Stop the lane (its thread or stream), if one was made."""
        if self.lane is not None:
            self.lane.close()
