"""The event log's writer thread: lines leave the step's path, the file has a size cap.

The model runner only appends a dict to a bounded queue; a daemon thread
encodes it (stdlib ``json``) and writes it, one whole line per ``write`` on a
line-buffered file, so a killed process still leaves a valid prefix.

Size cap (``max_bytes``; 0 = none): step lines never take the file past it.
The first half of the cap holds every step line; each next halving of what is
left holds every 2nd, 4th, 8th … step line (stride ``2**j`` where the space
left is in ``(cap/2**(j+1), cap/2**j]``), so every level covers about as many
steps as the first and a long run stays sampled evenly-ish, never truncated.
A step line that does not fit, or falls between strides, is counted in
``sampled_out``. Header and notice lines are always written (there are few).

A full queue (the disk stalls) must not stall the step: ``put`` waits at most
``put_wait_s`` once, then drops and counts (``dropped`` step lines,
``dropped_notices`` other lines) without waiting again until a put succeeds.
Nothing is lost silently: the counts go into the summary line.

Checkpoint summaries (``checkpoint``): when the queue has been empty for
``idle_s`` after step lines were written (the engine went idle: the load is
over), or every ``every_s`` under steady load, the thread writes a summary line
with ``"final": false``; the owner writes the final one at exit. Why not (only)
a SIGTERM handler: vLLM's default ``--shutdown-timeout 0`` makes the API server
send the engine process SIGTERM and, with a zero grace window, SIGKILL right
after it (``vllm.v1.utils.shutdown``); a Python handler runs only on the main
thread between bytecodes, so it loses that race, and it would sit beside vLLM's
own SIGTERM handler in the engine core. A line already in the file survives any
kill, so the summary is kept by writing it before the kill can come — at the
moment the work stops — with no signal machinery, no new import and nothing on
the step's path.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

#: Lines the queue holds before ``put`` drops: ~80 s of 10 ms steps, ~2 MB.
QUEUE_LINES = 8192
#: Longest wait of the step's path for space in a full queue (seconds).
PUT_WAIT_S = 0.05
#: Longest wait of ``close`` for the writer to drain (seconds); past it the
#: rest is counted as dropped and the summary is not written (readers
#: recompute the counts from the step lines).
CLOSE_WAIT_S = 10.0
#: Quiet time after the last step line before a checkpoint summary (seconds): short against the time between
#: the end of a load and a stop, long against the gap between two steps.
CHECKPOINT_IDLE_S = 0.25
#: Longest time between checkpoint summaries while steps keep coming (seconds).
CHECKPOINT_EVERY_S = 10.0


def _encode(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":")) + "\n"


class LineWriter:
    """Writes dicts as JSON lines to ``file`` from a thread of its own."""

    def __init__(self, file: Any, *, max_bytes: int = 0, queue_lines: int = QUEUE_LINES,
                 put_wait_s: float = PUT_WAIT_S, checkpoint: Callable[[], dict[str, Any] | None] | None = None,
                 idle_s: float = CHECKPOINT_IDLE_S, every_s: float = CHECKPOINT_EVERY_S) -> None:
        self.file = file
        #: Called on the writer thread for a checkpoint summary line (None: skip this one); see the module doc.
        self.checkpoint = checkpoint
        self.idle_s = idle_s
        self.every_s = every_s
        self.checkpoints = 0  # checkpoint summary lines written
        self._dirty = False  # step lines written since the last checkpoint
        self._last_checkpoint = time.monotonic()
        self.max_bytes = max(0, int(max_bytes))
        self.queue_lines = max(1, int(queue_lines))
        self.put_wait_s = put_wait_s
        self.bytes = 0  # bytes written (all lines)
        self.step_lines = 0  # step lines written
        self.sampled_out = 0  # step lines left out by the size cap
        self.dropped = 0  # step lines dropped: queue full
        self.dropped_notices = 0  # other lines dropped: queue full
        self.error: BaseException | None = None  # first write error (then nothing more is written)
        self.error_checkpoint: BaseException | None = None  # the checkpoint callback's error (then no more)
        self._offered = 0  # step lines that reached the writer (the stride counts these)
        self._items: deque[tuple[dict[str, Any], bool]] = deque()
        self._cv = threading.Condition()
        self._busy = False
        self._stopping = False
        self._dropping = False
        self._thread = threading.Thread(target=self._run, name="expo-prof-log", daemon=True)
        self._thread.start()

    # -- producer side (the step's path) ----------------------------------------------

    def put(self, obj: dict[str, Any], *, step: bool) -> bool:
        """Queue one line; False when it was dropped (queue full past the bounded wait)."""
        with self._cv:
            if self._stopping:
                self._count_drop(step)
                return False
            if len(self._items) >= self.queue_lines:
                if not self._dropping:
                    self._cv.wait_for(lambda: len(self._items) < self.queue_lines or self._stopping,
                                      timeout=self.put_wait_s)
                if len(self._items) >= self.queue_lines or self._stopping:
                    # Already dropping: do not wait again on every step while the disk stalls.
                    self._dropping = True
                    self._count_drop(step)
                    return False
            self._dropping = False
            self._items.append((obj, step))
            self._cv.notify_all()
            return True

    def _count_drop(self, step: bool) -> None:
        if step:
            self.dropped += 1
        else:
            self.dropped_notices += 1

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every queued line is written; False on timeout."""
        with self._cv:
            return self._cv.wait_for(lambda: not self._items and not self._busy, timeout=timeout)

    def close(self, timeout: float = CLOSE_WAIT_S) -> bool:
        """Drain, stop and join the thread; False when it did not finish in time."""
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        self._thread.join(timeout)
        if self._thread.is_alive():
            with self._cv:  # stuck in a write: what is left will never be written
                for _obj, step in self._items:
                    self._count_drop(step)
                self._items.clear()
            return False
        return True

    def write_now(self, obj: dict[str, Any]) -> None:
        """Write one line from the caller's thread (after :meth:`close`: the summary)."""
        if self._thread.is_alive():
            raise RuntimeError("LineWriter.write_now() while the writer thread runs")
        self._write(_encode(obj))

    # -- writer thread ----------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cv:
                wait = self.idle_s if self._dirty and self.checkpoint is not None else None
                self._cv.wait_for(lambda: self._items or self._stopping, timeout=wait)
                if not self._items:
                    if self._stopping:
                        return  # stopping and drained
                    idle = True  # quiet for idle_s after step lines: the work stopped
                else:
                    idle = False
                    obj, step = self._items.popleft()
                self._busy = True
                self._cv.notify_all()  # space for a waiting producer
            try:
                if idle or (self._dirty and time.monotonic() - self._last_checkpoint >= self.every_s):
                    self._write_checkpoint()
                if not idle and self.error is None:
                    self._emit(obj, step)
            except (OSError, ValueError) as exc:  # disk full, file closed: stop writing, keep counting
                self.error = exc
            finally:
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()

    def _write_checkpoint(self) -> None:
        """One checkpoint summary line (module docstring); the owner's callback may decline (None)."""
        self._dirty = False
        self._last_checkpoint = time.monotonic()
        if self.error is not None or self.checkpoint is None:
            return
        try:
            obj = self.checkpoint()
        except Exception as exc:  # noqa: BLE001 - a broken callback must never stop the writer; no more checkpoints
            self.checkpoint = None
            self.error_checkpoint = exc
            return
        if obj is not None:
            self._write(_encode(obj))
            self.checkpoints += 1

    def stride(self) -> int:
        """Every how many step lines one is written now (0: none fits any more)."""
        if not self.max_bytes:
            return 1
        left = self.max_bytes - self.bytes
        if left <= 0:
            return 0
        return 1 << ((self.max_bytes // left).bit_length() - 1)

    def _emit(self, obj: dict[str, Any], step: bool) -> None:
        if not step:
            self._write(_encode(obj))
            return
        n, k = self._offered, self.stride()
        self._offered += 1
        if k == 0 or n % k:
            self.sampled_out += 1
            return
        line = _encode(obj)
        if self.max_bytes and self.bytes + len(line) > self.max_bytes:
            self.sampled_out += 1
            return
        self._write(line)
        self.step_lines += 1
        self._dirty = True

    def _write(self, line: str) -> None:
        self.file.write(line)
        self.file.flush()
        self.bytes += len(line)  # json.dumps escapes non-ASCII: characters are bytes
