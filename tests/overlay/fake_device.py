"""FakeDeviceModule: a FAKE of ``torch.cuda`` / ``torch.npu`` for CPU-only tests.

No CUDA or Ascend device exists on the test machines, so the device-stream
lane is exercised against this stand-in with the same API surface the lane
uses (``Stream``, ``Event``, ``current_stream``, ``stream``). Tensors are real
CPU tensors and ops run synchronously; what the fake adds is a *device
timeline*: events stay incomplete (``query()`` False) until the test calls
:meth:`FakeDeviceModule.run_device`, which is how "read one step late, never
synchronise" becomes observable. Every stream operation is logged in
``calls`` so the tests can check their order.
"""

from __future__ import annotations

import time
import weakref
from contextlib import contextmanager
from typing import Any


class FakeStream:
    """FAKE device stream: records ``wait_stream`` / ``wait_event`` calls."""

    def __init__(self, module: FakeDeviceModule, name: str) -> None:
        self.module = module
        self.name = name

    def wait_stream(self, other: FakeStream) -> None:
        self.module.calls.append(("wait_stream", self.name, other.name))

    def wait_event(self, event: FakeEvent) -> None:
        self.module.calls.append(("wait_event", self.name, event))

    def __repr__(self) -> str:
        return f"FakeStream({self.name})"


class FakeEvent:
    """FAKE device event: complete only after ``run_device``; ns timestamps."""

    def __init__(self, module: FakeDeviceModule, enable_timing: bool) -> None:
        self.module = module
        self.enable_timing = enable_timing
        self.stream: FakeStream | None = None
        self.recorded_ns: int | None = None
        self.completed = False

    def record(self, stream: FakeStream | None = None) -> None:
        self.stream = stream or self.module.current_stream()
        self.recorded_ns = time.monotonic_ns()
        self.completed = False
        self.module.calls.append(("record", self.stream.name, self))
        self.module.in_flight.append(self)

    def query(self) -> bool:
        self.module.queries += 1
        return self.completed

    def synchronize(self) -> None:
        self.module.synchronize_calls += 1
        self.completed = True

    def elapsed_time(self, end: FakeEvent) -> float:
        if not (self.enable_timing and end.enable_timing):
            raise RuntimeError("both events need enable_timing=True")
        if not (self.completed and end.completed):
            raise RuntimeError("elapsed_time on an incomplete event")
        return (end.recorded_ns - self.recorded_ns) / 1e6


class FakeNvtx:
    """FAKE ``torch.cuda.nvtx``: push/pop logged in the module's ``calls``."""

    def __init__(self, module: FakeDeviceModule) -> None:
        self.module = module
        self.depth = 0

    def range_push(self, msg: str) -> int:
        self.module.calls.append(("range_push", msg))
        self.depth += 1
        return self.depth - 1

    def range_pop(self) -> int:
        self.module.calls.append(("range_pop",))
        self.depth -= 1
        return self.depth


class FakeMstx:
    """FAKE ``torch.npu.mstx`` (torch_npu): range ids logged in the module's ``calls``."""

    def __init__(self, module: FakeDeviceModule) -> None:
        self.module = module
        self.next_id = 100

    def range_start(self, message: str, stream: Any = None) -> int:
        self.next_id += 1
        self.module.calls.append(("range_start", message, self.next_id))
        return self.next_id

    def range_end(self, range_id: int) -> None:
        self.module.calls.append(("range_end", range_id))


class FakeDeviceModule:
    """FAKE device module (torch.cuda / torch.npu API subset) with a fake timeline.

    ``ranges="nvtx"`` / ``"mstx"`` adds a fake ``nvtx`` (CUDA) / ``mstx`` (Ascend) marker API.
    """

    def __init__(self, ranges: str | None = None) -> None:
        if ranges == "nvtx":
            self.nvtx = FakeNvtx(self)
        elif ranges == "mstx":
            self.mstx = FakeMstx(self)
        self.calls: list[tuple[Any, ...]] = []
        self.in_flight: list[FakeEvent] = []
        self.queries = 0
        self.synchronize_calls = 0
        self.record_stream_calls: list[tuple[Any, FakeStream]] = []
        self._streams = 0
        self.default = FakeStream(self, "current")
        self._current = self.default

    def Stream(self, device: Any = None) -> FakeStream:  # noqa: N802 - torch API name
        self._streams += 1
        return FakeStream(self, f"side{self._streams}")

    def Event(self, enable_timing: bool = False) -> FakeEvent:  # noqa: N802
        return FakeEvent(self, enable_timing)

    def current_stream(self, device: Any = None) -> FakeStream:
        return self._current

    @contextmanager
    def stream(self, stream: FakeStream):
        previous, self._current = self._current, stream
        self.calls.append(("enter_stream", stream.name))
        try:
            yield
        finally:
            self._current = previous
            self.calls.append(("exit_stream", stream.name))

    def synchronize(self, device: Any = None) -> None:
        self.synchronize_calls += 1

    def record_stream(self, tensor: Any, stream: FakeStream) -> None:
        """Stands in for ``Tensor.record_stream`` (CPU tensors have none).

        Keeps the shape only, never the tensor, so FakeAllocator sees when q is freed.
        """
        self.record_stream_calls.append((tuple(tensor.shape), stream))
        self.calls.append(("record_stream", stream.name, tuple(tensor.shape)))

    def run_device(self) -> None:
        """Let the fake device finish everything enqueued so far."""
        for event in self.in_flight:
            event.completed = True
        self.in_flight.clear()


class FakeAllocator:
    """FAKE device allocator: real CPU tensors, with the bytes still alive counted.

    Stands in for the device caching allocator's ``memory_allocated`` (no device
    here): a tensor counts from allocation until its Python object is freed.
    """

    def __init__(self) -> None:
        self.live_bytes = 0
        self.peak_bytes = 0
        self.allocations = 0

    def __call__(self, shape: Any, *, dtype: Any, device: Any) -> Any:
        import torch

        tensor = torch.empty(shape, dtype=dtype, device="cpu")
        size = tensor.numel() * tensor.element_size()
        self.allocations += 1
        self.live_bytes += size
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        weakref.finalize(tensor, self._free, size)
        return tensor

    def _free(self, size: int) -> None:
        self.live_bytes -= size


class FakeCachingAllocator(FakeAllocator):
    """FAKE device caching allocator: FakeAllocator plus the stream-ordered hold on a freed block.

    As torch's CUDA caching allocator does, a block whose tensor was recorded on a stream
    (:meth:`record_stream`, ``Tensor.record_stream``) is not handed out again when the tensor is
    freed, but only once that stream has passed the free: an event is recorded on it at the free,
    and here it completes when the FAKE device runs (:meth:`FakeDeviceModule.run_device`).
    :meth:`held_bytes` is what the allocator cannot hand out (live tensors and such blocks);
    ``peak_held_bytes`` the most of it, taken at each allocation (the only moment it grows).
    """

    def __init__(self, module: FakeDeviceModule) -> None:
        super().__init__()
        self.module = module
        self.peak_held_bytes = 0
        self._streams: dict[int, list[FakeStream]] = {}
        self._after_free: list[tuple[int, list[FakeEvent]]] = []

    def __call__(self, shape: Any, *, dtype: Any, device: Any) -> Any:
        import torch

        tensor = torch.empty(shape, dtype=dtype, device="cpu")
        size = tensor.numel() * tensor.element_size()
        ptr = tensor.untyped_storage().data_ptr()
        self._streams[ptr] = []
        self.allocations += 1
        self.live_bytes += size
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        self.peak_held_bytes = max(self.peak_held_bytes, self.held_bytes())
        weakref.finalize(tensor, self._free_block, size, ptr)
        return tensor

    def record_stream(self, tensor: Any, stream: FakeStream) -> None:
        """``Tensor.record_stream``: the block is used by ``stream`` too (logged by the module as well)."""
        self.module.record_stream(tensor, stream)
        self._streams.setdefault(tensor.untyped_storage().data_ptr(), []).append(stream)

    def _free_block(self, size: int, ptr: int) -> None:
        self.live_bytes -= size
        streams = self._streams.pop(ptr, [])
        if streams:
            events = []
            for stream in streams:
                event = self.module.Event()
                event.record(stream)
                events.append(event)
            self._after_free.append((size, events))

    def held_bytes(self) -> int:
        """Bytes the allocator cannot hand out now: live tensors, and freed blocks a recorded stream has not passed."""
        self._after_free = [(n, evs) for n, evs in self._after_free if not all(e.completed for e in evs)]
        return self.live_bytes + sum(n for n, _ in self._after_free)


class FakeNpuEvent(FakeEvent):
    """FAKE torch_npu ``torch.npu.Event``: a raw handle (``npu_event``), and an ``elapsed_time`` that
    flushes first, as torch_npu's does (``NPUEvent::elapsed_time`` calls ``emptyAllNPUStream()`` and
    ``aclrtSynchronizeEvent`` on both events before ``aclrtEventElapsedTime``). The flush is counted
    in ``FakeNpuModule.flushes``; nothing on the step path may cause one."""

    def __init__(self, module: FakeNpuModule, enable_timing: bool) -> None:
        super().__init__(module, enable_timing)
        self.npu_event = module.register(self)

    def elapsed_time(self, end: FakeEvent) -> float:
        self.module.flushes += 1
        self.module.run_device()  # the flush and the two synchronisations wait for the device
        return super().elapsed_time(end)


class FakeNpuModule(FakeDeviceModule):
    """FAKE ``torch.npu`` (torch_npu): mstx ranges, events with raw handles, and a stand-in for the
    runtime's ``aclrtEventElapsedTime`` (:meth:`acl_elapsed_time`) that reads those handles."""

    #: ACL_ERROR_RT_EVENT_NOT_COMPLETE-like code for an event the fake device has not reached yet.
    NOT_COMPLETE = 507017

    def __init__(self) -> None:
        super().__init__(ranges="mstx")
        self.flushes = 0
        self.acl_calls = 0
        self._handles: dict[int, FakeNpuEvent] = {}
        self._callback: Any = None

    def register(self, event: FakeNpuEvent) -> int:
        handle = 0x1000 + len(self._handles)  # never 0: a NULL aclrtEvent
        self._handles[handle] = event
        return handle

    def Event(self, enable_timing: bool = False) -> FakeNpuEvent:  # noqa: N802 - torch API name
        return FakeNpuEvent(self, enable_timing)

    def acl_elapsed_time(self) -> Any:
        """A C function ``int (float *ms, void *start, void *end)`` over this fake's events (ctypes callback)."""
        import ctypes

        from overlay.npu_timing import ACL_ELAPSED_ARGTYPES

        def elapsed(ms, start, end) -> int:
            self.acl_calls += 1
            first, last = self._handles[start], self._handles[end]
            if not (first.completed and last.completed):
                return self.NOT_COMPLETE
            ms[0] = (last.recorded_ns - first.recorded_ns) / 1e6
            return 0

        self._callback = ctypes.CFUNCTYPE(ctypes.c_int, *ACL_ELAPSED_ARGTYPES)(elapsed)
        return self._callback
