"""Reading device-event times without stalling the host (Ascend NPU).

The device lane times a step's windows with events it reads one step late,
from ``begin_step``, right before the next forward is launched. On CUDA
``Event.elapsed_time`` is ``cudaEventElapsedTime`` on events ``query()``
already found complete: nothing waits. On Ascend it is not (torch_npu,
Ascend/pytorch):

* ``torch_npu/csrc/core/npu/NPUEvent.cpp``, ``NPUEvent::elapsed_time``: calls
  ``c10_npu::emptyAllNPUStream()`` — waits until the task queue of *every*
  stream has handed all its queued launches to the runtime — then
  ``aclrtSynchronizeEvent`` on both events, then ``aclrtEventElapsedTime``;
* ``torch_npu/csrc/npu/Event.cpp``, ``THNPEvent_elapsed_time``: the Python
  binding calls it holding the GIL, so moving the call to another thread
  would stall the model thread's Python as well;
* ``NPUEvent::query`` (same file) does not flush: it answers False while the
  record task is still in the queue (``NPUEventManager::IsEventRecorded``),
  else asks ``AclQueryEventRecordedStatus``.

Up to ~8 ``elapsed_time`` calls per step would flush every stream's launch
queue each step, on by default. So on NPU the lane reads the time with the
runtime's own ``aclrtEventElapsedTime(float *ms, aclrtEvent start,
aclrtEvent end)`` (libascendcl, already loaded by torch_npu), called through
ctypes on the events' handles (``torch_npu.npu.Event.npu_event``,
``torch_npu/npu/streams.py``) — only once ``query()`` found both complete,
which is what the flush and the two synchronisations were there to ensure.
Nothing is flushed, nothing waits, and the result is the one
``elapsed_time`` would have returned.

Stdlib only (ctypes).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

#: The C signature: aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent).
ACL_ELAPSED_ARGTYPES = (ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_void_p)
ACL_LIBRARY = "libascendcl.so"


class TimingUnavailable(RuntimeError):
    """No way to read device-event times without a flush: windows stay null."""


class AclEventTimer:
    """``start.elapsed_time(end)`` for torch_npu events, without torch_npu's flush.

    ``fn`` is ``aclrtEventElapsedTime`` (or a stand-in with the same C
    signature, e.g. a ``ctypes.CFUNCTYPE`` callback in tests).
    """

    def __init__(self, fn: Callable[..., int]) -> None:
        self._fn = fn

    @classmethod
    def load(cls, library: str = ACL_LIBRARY) -> AclEventTimer:
        """The runtime's function from libascendcl (loaded already wherever torch_npu is)."""
        try:
            fn = ctypes.CDLL(library).aclrtEventElapsedTime
        except (OSError, AttributeError) as exc:
            raise TimingUnavailable(f"{library} has no aclrtEventElapsedTime: {exc}") from exc
        fn.argtypes = ACL_ELAPSED_ARGTYPES
        fn.restype = ctypes.c_int
        return cls(fn)

    def __call__(self, start: Any, end: Any) -> float:
        """Milliseconds from ``start`` to ``end`` (both complete: the caller queried them)."""
        ms = ctypes.c_float(0.0)
        rc = self._fn(ctypes.byref(ms), ctypes.c_void_p(int(start.npu_event)), ctypes.c_void_p(int(end.npu_event)))
        if rc != 0:
            raise TimingUnavailable(f"aclrtEventElapsedTime returned {rc}")
        return float(ms.value)


def _event_elapsed(start: Any, end: Any) -> float:
    return float(start.elapsed_time(end))


def event_timer(device_type: str, acl: Callable[..., int] | None = None) -> Callable[[Any, Any], float] | None:
    """How the device lane reads ``(start, end)`` event times on ``device_type`` (ms).

    NPU: :class:`AclEventTimer` (``acl``: the C function; default: loaded from
    libascendcl); None when it cannot be had — the lane then leaves its
    device windows null rather than flush. Elsewhere ``Event.elapsed_time``.
    """
    if device_type != "npu":
        return _event_elapsed
    try:
        return AclEventTimer(acl) if acl is not None else AclEventTimer.load()
    except TimingUnavailable:
        return None
