"""Where ``q ~ Exp(1)`` is drawn while the forward pass runs.

Two lanes with one interface (``launch`` / ``wait`` / ``stamp`` / ``resolve``):

* :class:`CpuThreadLane` — one persistent daemon thread filling a preallocated
  buffer. Torch ops release the GIL, so the draw runs on a spare core while the
  model thread runs the forward. Host-clock timing (exact).
* :class:`DeviceStreamLane` — CUDA / Ascend NPU (any backend whose
  ``torch.get_device_module`` has streams and events): the draw is enqueued on
  a dedicated side stream that first waits for the current stream, and the
  consumer waits on the draw's event on the device (no host sync). Device
  timing through events, read later without synchronising.

torch is imported lazily (inside the lanes) so that importing this module stays
cheap; nothing here imports vLLM.
"""

from __future__ import annotations

import os
import queue
import threading
import time
import weakref
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from overlay.contract import SPAN_EXPONENTIAL
from overlay.cpubind import limit_openmp_team, vllm_claims_here
from overlay.npu_timing import TimingUnavailable, event_timer


_profiler: Any = None
#: (start, end) of the device lane's range markers — NVTX on CUDA, mstx on
#: Ascend — or None (CPU lane, or no markers). Set by DeviceStreamLane.
_ranges: tuple[Callable[[str], Any], Callable[[Any], Any]] | None = None
#: The device lane's NVTX ranges while an NVTX tool (Nsight Systems) listens, else None: then spans are NVTX
#: ranges even without a torch profiler. Set by DeviceStreamLane when it is created.
_tool_ranges: tuple[Callable[[str], Any], Callable[[Any], Any]] | None = None
#: How a tool makes itself heard by NVTX: the library NVTX loads at its first call (NVIDIA/NVTX
#: nvtxInitOnce; ``nsys profile`` sets it in the processes it profiles). Without it every NVTX call is a no-op.
NVTX_INJECTION_ENV = "NVTX_INJECTION64_PATH"


class LaneError(RuntimeError):
    """The side lane failed to produce ``q``; the caller draws inline."""


def device_ranges(mod: Any) -> tuple[Callable[[str], Any], Callable[[Any], Any]] | None:
    """Range markers of a device module: ``torch.cuda.nvtx`` or ``torch.npu.mstx`` (torch_npu)."""
    nvtx = getattr(mod, "nvtx", None)
    if nvtx is not None and hasattr(nvtx, "range_push"):
        return nvtx.range_push, lambda _depth: nvtx.range_pop()
    mstx = getattr(mod, "mstx", None)
    if mstx is not None and hasattr(mstx, "range_start"):
        return mstx.range_start, mstx.range_end
    return None


def nvtx_tool_listens() -> bool:
    """Whether an NVTX tool is injected into this process (Nsight Systems sets ``NVTX_INJECTION64_PATH``)."""
    return bool(os.environ.get(NVTX_INJECTION_ENV))


class _Range:
    """A device range as a context manager (a class, not a generator: this runs 3 times a step under nsys)."""

    __slots__ = ("_end", "_handle", "_name", "_start")

    def __init__(self, name: str, ranges: tuple[Callable[[str], Any], Callable[[Any], Any]]) -> None:
        self._name, (self._start, self._end) = name, ranges

    def __enter__(self) -> None:
        self._handle = self._start(self._name)

    def __exit__(self, *exc: object) -> None:
        self._end(self._handle)


@contextmanager
def _with_range(annotation: Any, name: str, ranges: tuple[Callable[[str], Any], Callable[[Any], Any]]):
    with annotation, _Range(name, ranges):
        yield


def span(name: str):
    """A profiler annotation when a torch profiler is recording, else nothing.

    ``record_function`` costs a few microseconds even with no profiler; the
    flag check keeps the overlay's own cost out of unprofiled runs. With a
    device lane the span is also an NVTX (CUDA) / mstx (Ascend) range, so
    Nsight Systems and msprof timelines show the same windows — while a torch
    profiler records, and on CUDA also whenever Nsight Systems (any NVTX tool)
    listens: nsys records NVTX ranges without a torch profiler, and vLLM's own
    ``--profiler-config '{"profiler": "cuda"}'`` starts none. Without a tool
    nothing changes: one more None check (docs/overlay.md measures both).
    """
    global _profiler
    if _profiler is None:
        from torch.autograd import profiler as _loaded

        _profiler = _loaded
    if _profiler._is_profiler_enabled:
        annotation = _profiler.record_function(name)
        ranges = _ranges
        return annotation if ranges is None else _with_range(annotation, name, ranges)
    if _tool_ranges is not None:
        return _Range(name, _tool_ranges)
    return nullcontext()


@dataclass
class Draw:
    """One launched ``q``: its shape, the tensor, and the lane's timing marks."""

    rows: int
    vocab: int
    dtype: Any
    device: Any
    q: Any = None
    exp: list[Any] = field(default_factory=lambda: [None, None])
    done: Any = None
    error: BaseException | None = None
    #: The generator to draw from (a fork of vLLM's stream, overlay.rng); None: the lane's own.
    generator: Any = None
    #: Streams that read ``q`` besides the side stream (device lane): its block outlives ``q`` until they pass.
    readers: list[Any] = field(default_factory=list)


def thread_masks() -> list[frozenset[int]]:
    """The CPU masks of this process's threads (Linux ``/proc/self/task``)."""
    masks = []
    for tid in os.listdir("/proc/self/task"):
        try:
            masks.append(frozenset(os.sched_getaffinity(int(tid))))
        except OSError:  # the thread ended meanwhile
            continue
    return masks


def choose_auto(available: set[int], masks: list[frozenset[int]], claimed: set[int] | frozenset[int] = frozenset(),
                claimed_why: str = "", inherited: set[int] | None = None,
                reserved: set[int] | frozenset[int] = frozenset()) -> tuple[set[int], str]:
    """The ``auto`` CPUs of the lane thread, and why (pure: masks and claims are passed in).

    The forward's CPUs are those of this process's threads pinned narrower
    than ``available``; ``claimed`` adds every local rank's forward and
    reserved CPUs from vLLM's binding settings (:mod:`overlay.cpubind`), which
    other processes use. The lane takes the rest; when nothing is left, vLLM's
    ``reserved`` CPUs (not any rank's forward), else it shares.
    """
    inherited = available if inherited is None else inherited
    model = set().union(*(m for m in masks if m < available))
    busy = model | set(claimed)
    spare = set(available) - busy
    if busy and spare:
        why = f"beside the forward's pinned CPUs {sorted(model)}"
        if set(claimed) - model:
            why += f" and {claimed_why} {sorted(claimed)}"
        return spare, why
    free_reserved = (set(reserved) & set(available)) - model
    if free_reserved:
        return free_reserved, (f"beside the forward's pinned CPUs {sorted(model)}, on vLLM's reserved CPUs "
                               f"{sorted(free_reserved)}: no other CPU is free of {claimed_why} {sorted(claimed)}")
    if busy:
        return set(inherited), "no CPU is free of the forward's pinned threads, so it shares them"
    return set(inherited), "no thread of the forward is pinned"


def _place_this_thread(request: Any, masks: list[frozenset[int]],
                       claims: tuple[set[int], set[int], str] = (set(), set(), "")) -> tuple[set[int], str, int | None]:
    """Pin the calling thread; returns its CPUs, a one-line description and its OpenMP team (None: unknown).

    ``"auto"``: vLLM CPU binds the forward's (OpenMP) threads to the CPUs of
    its rank and leaves the others to other work; threads started later
    inherit that narrow mask. The CPUs this process may use are found by
    asking for all of them (the kernel clips the request to the cpuset); see
    :func:`choose_auto` for the rest.
    """
    inherited = os.sched_getaffinity(0)
    if request == "auto":
        try:
            os.sched_setaffinity(0, range(os.cpu_count() or 1))
        except OSError:
            pass
        claimed, reserved, claimed_why = claims
        target, why = choose_auto(os.sched_getaffinity(0), masks, claimed, claimed_why, inherited, reserved)
    else:
        target, why = set(request), "as EXPO_PROF_LANE_CPUS asks"
    os.sched_setaffinity(0, target)
    cpus = os.sched_getaffinity(0)
    # A parallel op on this thread would otherwise start an OpenMP team as large
    # as the forward's, on the lane's few CPUs.
    team, note = limit_openmp_team(len(cpus))
    limit = note or f"its OpenMP team limited to {team}"
    return cpus, f"CPU lane thread on CPUs {sorted(cpus)} ({why}; {limit})", team


class CpuThreadLane:
    """A persistent worker thread that draws ``q`` into a reused buffer.

    ``cpus``: where the worker runs — ``"auto"`` (the CPUs not used by the
    forward's pinned threads, i.e. the core vLLM CPU leaves free; threads
    inherit their creator's mask, so without this the lane would time-slice
    with the forward on the model's core), ``"inherit"``, or a set of CPU ids.
    """

    kind = "thread"
    timing = "host"

    def __init__(self, seed: int | None = None, cpus: Any = "inherit", wait_timeout_s: float = 30.0) -> None:
        import torch

        #: Longest the model thread waits for a draw; past it the step draws
        #: inline (counted as ``error``) instead of hanging the engine.
        self.wait_timeout_s = wait_timeout_s

        self._torch = torch
        # A dedicated generator, not the default one: the default CPU generator
        # is shared with the model thread, and two threads drawing from it
        # interleave in an order that changes run to run — every other random
        # draw in the process would stop being repeatable. Seeding it once from
        # the default generator (after vLLM's set_random_seed) keeps runs with
        # a fixed --seed repeatable.
        if seed is None:
            seed = int(torch.randint(0, 2**62, (1,)).item())
        self.generator = torch.Generator(device="cpu")
        self.generator.manual_seed(seed)
        self._buffers: dict[Any, Any] = {}
        self._last: Draw | None = None
        self._jobs: queue.SimpleQueue[Draw | None] = queue.SimpleQueue()
        self.cpus: set[int] | None = None
        self.placement: str | None = None
        #: The lane thread's OpenMP team after placement (None: not placed, or no OpenMP runtime).
        self.omp_team: int | None = None
        self._placed = threading.Event()
        masks: list[frozenset[int]] = []
        claims: tuple[set[int], set[int], str] = (set(), set(), "")
        if cpus == "inherit":
            cpus = "none"  # no placement, nothing to report
        else:
            try:
                # Read in the model thread, before the worker exists.
                masks = thread_masks()
                if cpus == "auto":
                    claims = vllm_claims_here()
            except (OSError, AttributeError):  # not Linux: no placement
                cpus = "none"
        self._thread = threading.Thread(
            target=self._run, args=(cpus, masks, claims), name="expo-prof-exponential", daemon=True
        )
        self._thread.start()
        self._placed.wait()

    # -- worker --------------------------------------------------------------------

    def _run(self, cpus: Any, masks: list[frozenset[int]], claims: tuple[set[int], set[int], str]) -> None:
        try:
            if cpus != "none":
                self.cpus, self.placement, self.omp_team = _place_this_thread(cpus, masks, claims)
            elif hasattr(os, "sched_getaffinity"):
                self.cpus = os.sched_getaffinity(0)
        except (OSError, ValueError, AttributeError) as exc:
            self.placement = f"CPU lane thread not placed ({exc!r}); it keeps its inherited CPUs"
        finally:
            self._placed.set()
        while True:
            draw = self._jobs.get()
            if draw is None:
                return
            try:
                # vLLM allocates under torch.inference_mode(), which is
                # thread-local: the buffer may be an inference tensor, and
                # only inside inference mode may it be updated in place.
                with self._torch.inference_mode(), span(SPAN_EXPONENTIAL):
                    draw.exp[0] = time.monotonic_ns()
                    draw.q.exponential_(generator=draw.generator or self.generator)
                    draw.exp[1] = time.monotonic_ns()
            except BaseException as exc:  # noqa: BLE001 - reported to the consumer
                draw.error = exc
            finally:
                draw.done.set()

    # -- model thread ----------------------------------------------------------------

    def stamp(self) -> int:
        """A host timestamp (ns)."""
        return time.monotonic_ns()

    def anchor(self) -> None:
        """Host timing needs no anchor: offsets are taken from ``t0_ns``."""
        return None

    def _buffer(self, dtype: Any, numel: int) -> Any:
        buf = self._buffers.get(dtype)
        if buf is None or buf.numel() < numel:
            # Grow geometrically so a slowly rising batch size reallocates
            # O(log n) times, not every step.
            size = max(numel, 2 * buf.numel() if buf is not None else numel)
            buf = self._torch.empty(size, dtype=dtype)
            self._buffers[dtype] = buf
        return buf

    def held_bytes(self) -> int:
        """Bytes of ``q`` memory the lane holds: its reused buffers (one per dtype)."""
        return sum(buf.numel() * buf.element_size() for buf in self._buffers.values())

    def block_bytes(self) -> int:
        """Bytes of memory ``q`` occupies: the buffers (the sampler reads ``q`` on the host, nothing outlives it)."""
        return self.held_bytes()

    def launch(self, rows: int, vocab: int, dtype: Any, device: Any, generator: Any = None) -> Draw:
        """Hand a ``[rows, vocab]`` draw to the worker; returns at once.

        ``generator``: what to draw from (default: the lane's own generator).
        """
        if self._torch.device(device).type != "cpu":
            raise LaneError(f"CpuThreadLane cannot draw on {device}")
        if self._last is not None:
            # The buffer is reused: a previous draw nobody consumed may still
            # be in flight.
            self._await(self._last)
        flat = self._buffer(dtype, rows * vocab)
        draw = Draw(rows, vocab, dtype, self._torch.device("cpu"), generator=generator)
        draw.q = flat[: rows * vocab].view(rows, vocab)
        draw.done = threading.Event()
        self._last = draw
        self._jobs.put(draw)
        return draw

    def wait(self, draw: Draw) -> tuple[Any, int, int]:
        """Block until ``q`` is drawn; returns ``(q, wait_start, wait_end)``."""
        start = time.monotonic_ns()
        self._await(draw)
        end = time.monotonic_ns()
        if draw.error is not None:
            raise LaneError(f"exponential draw failed: {draw.error!r}") from draw.error
        return draw.q, start, end

    def _await(self, draw: Draw) -> None:
        if not self._thread.is_alive() and not draw.done.is_set():
            raise LaneError("the CPU lane's worker thread is not running")
        if not draw.done.wait(self.wait_timeout_s):
            raise LaneError(f"exponential draw not done after {self.wait_timeout_s} s")

    def ready(self, draw: Draw | None) -> bool:
        return draw is None or draw.done.is_set()

    def resolve(self, t0_ns: int, anchor: Any, windows: dict[str, Any]) -> dict | None:
        """Offsets from ``t0_ns`` for each complete window (host clock)."""
        out: dict[str, list[int] | None] = {}
        for name, marks in windows.items():
            if marks is None or marks[0] is None or marks[1] is None:
                out[name] = None
            else:
                out[name] = [int(marks[0]) - t0_ns, int(marks[1]) - t0_ns]
        return out

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the worker and join it (bounded: a stuck draw cannot hang exit)."""
        self._jobs.put(None)
        if self._thread is not threading.current_thread():
            self._thread.join(timeout_s)


class DeviceStreamLane:
    """Draw ``q`` on a side stream of a CUDA / NPU device.

    ``device_module`` defaults to ``torch.get_device_module(device)``; tests on
    a CPU-only machine pass a fake with the same Stream/Event API.
    ``allocate`` defaults to ``torch.empty``. ``record_stream`` defaults to
    ``Tensor.record_stream``: it tells the caching allocator that the consumer
    stream uses ``q``, so its memory is not handed out again while the sampler
    still reads it (the gap vllm-ascend #13394 closed in its *default*
    side-stream sampler; the original async-exponential feature waited on an
    event instead). Event times are read with :func:`overlay.npu_timing.event_timer`
    (``device_type`` overrides the device's type, ``acl`` the NPU runtime
    function: tests): on NPU never through torch_npu's ``elapsed_time``,
    which flushes every stream's launch queue.
    """

    kind = "stream"
    timing = "device"

    def __init__(
        self,
        device: Any,
        *,
        device_module: Any = None,
        instrument: bool = True,
        record_stream: Callable[[Any, Any], None] | None = None,
        allocate: Callable[..., Any] | None = None,
        device_type: str | None = None,
        acl: Callable[..., int] | None = None,
    ) -> None:
        import torch

        self._torch = torch
        self.device = torch.device(device)
        self.mod = device_module or torch.get_device_module(self.device)
        self.instrument = instrument
        self._record_stream = record_stream or (lambda t, s: t.record_stream(s))
        #: ``torch.empty`` unless a test counts allocations (FakeAllocator).
        self._allocate = allocate or torch.empty
        #: (start, end) -> ms for two complete events; None: device windows stay null.
        self._elapsed_ms = event_timer(device_type or self.device.type, acl) if instrument else None
        self.side = self.mod.Stream(device=self.device)
        #: Bytes of the q tensors still alive (whoever holds them: the lane, a
        #: step, the sampler), counted down by a finalizer when the last
        #: reference goes - the figure the summary's ``q_peak_bytes`` reports.
        self._live_bytes = 0
        #: q freed while a reader stream may still use it: (bytes, an event on each reader recorded at the
        #: free). The caching allocator keeps such a block (``record_stream``) until those streams pass the
        #: free; ``block_bytes`` counts it until the events complete (``q_block_peak_bytes``).
        self._after_free: list[tuple[int, list[Any]]] = []
        self._live_lock = threading.Lock()
        global _ranges, _tool_ranges
        _ranges = device_ranges(self.mod)
        # Only NVTX: an mstx range is recorded by msprof, which runs with torch_npu's profiler anyway.
        is_nvtx = _ranges is not None and getattr(self.mod, "nvtx", None) is not None
        _tool_ranges = _ranges if is_nvtx and nvtx_tool_listens() else None

    def _current(self) -> Any:
        return self.mod.current_stream(self.device)

    def _event(self, timing: bool) -> Any:
        return self.mod.Event(enable_timing=timing)

    def stamp(self) -> Any:
        """An event recorded on the current stream (None without instrumentation)."""
        if not self.instrument:
            return None
        event = self._event(True)
        event.record(self._current())
        return event

    def anchor(self) -> Any:
        """The reference event all of a step's device offsets are measured from."""
        return self.stamp()

    def launch(self, rows: int, vocab: int, dtype: Any, device: Any, generator: Any = None) -> Draw:
        """Enqueue the draw on the side stream after the current stream's work.

        ``generator``: what to draw from (default: the device's default generator).
        """
        current = self._current()
        # Input preparation (and the previous sampler, which may still read the
        # last q) is queued on the current stream: the side stream starts after.
        self.side.wait_stream(current)
        draw = Draw(rows, vocab, dtype, self.device)
        with self.mod.stream(self.side):
            if self.instrument:
                draw.exp[0] = self._event(True)
                draw.exp[0].record(self.side)
            with span(SPAN_EXPONENTIAL):
                q = self._allocate((rows, vocab), dtype=dtype, device=self.device)
                q.exponential_(generator=generator)
            draw.done = self._event(self.instrument)
            draw.done.record(self.side)
        if self.instrument:
            draw.exp[1] = draw.done
        nbytes = q.numel() * q.element_size()
        with self._live_lock:
            self._live_bytes += nbytes
        # The finalizer holds the draw's list of readers, never q or the draw itself; not run at interpreter
        # exit (no event is recorded on a device being torn down).
        weakref.finalize(q, self._freed, nbytes, draw.readers).atexit = False
        draw.q = q
        return draw

    def _freed(self, nbytes: int, readers: list[Any]) -> None:
        # Where the allocator records its own events for a block with recorded streams: at the free.
        fences = []
        for stream in readers:
            try:
                fence = self._event(False)
                fence.record(stream)
                fences.append(fence)
            except Exception:  # noqa: BLE001 - a finalizer must not raise; the block then counts as free
                pass
        with self._live_lock:
            self._live_bytes -= nbytes
            if fences:
                self._after_free.append((nbytes, fences))

    def held_bytes(self) -> int:
        """Bytes of ``q`` tensors alive now (launched and not yet released by every holder)."""
        return self._live_bytes

    def block_bytes(self) -> int:
        """Bytes of device memory ``q`` occupies now: the live ``q``, and each freed ``q`` whose reader stream
        has not passed its free yet (the allocator cannot hand that block out before). Never synchronises."""
        with self._live_lock:
            self._after_free = [(n, f) for n, f in self._after_free if not all(e.query() for e in f)]
            return self._live_bytes + sum(n for n, _ in self._after_free)

    def wait(self, draw: Draw) -> tuple[Any, Any, Any]:
        """Make the current stream wait for ``q`` on the device; no host sync."""
        current = self._current()
        start = self.stamp()
        current.wait_event(draw.done)
        end = self.stamp()
        self._record_stream(draw.q, current)
        draw.readers.append(current)
        return draw.q, start, end

    def ready(self, draw: Draw | None) -> bool:
        return True

    def resolve(self, t0_ns: int, anchor: Any, windows: dict[str, Any]) -> dict | None:
        """Device offsets (ns) from ``anchor``; None while any event is pending.

        Never synchronises: ``Event.query()`` only asks whether it completed,
        and the time is read by a timer that does not flush (on NPU the
        runtime's ``aclrtEventElapsedTime``, overlay.npu_timing).
        """
        out: dict[str, list[int] | None] = {}
        events = [m for marks in windows.values() if marks for m in marks if m is not None]
        elapsed = self._elapsed_ms
        if anchor is None or elapsed is None:
            return {name: None for name in windows}
        if not anchor.query() or not all(e.query() for e in events):
            return None
        for name, marks in windows.items():
            if marks is None or marks[0] is None or marks[1] is None:
                out[name] = None
            else:
                try:
                    out[name] = [round(elapsed(anchor, marks[0]) * 1e6), round(elapsed(anchor, marks[1]) * 1e6)]
                except TimingUnavailable:  # the runtime refused: this window stays unknown
                    out[name] = None
        return out

    def close(self) -> None:
        """Stop marking spans as device ranges (the overlay is shutting down)."""
        global _ranges, _tool_ranges
        _ranges = _tool_ranges = None
