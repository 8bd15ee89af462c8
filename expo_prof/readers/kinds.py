"""Event kinds by source: Kineto categories, Ascend task types, Nsight Systems tables, collective kernel names.

Shared by the Chrome-trace, CSV and SQLite readers so that one task type maps
to the same :class:`~expo_prof.timeline.Kind` whatever file it came from.
"""

from __future__ import annotations

import re
from typing import Any

from expo_prof.timeline import Kind

# Kineto categories, old (PyTorch 1.9) and new names -> (Kind, on a device lane).
KINETO_CATS: dict[str, tuple[Kind, bool]] = {
    "kernel": (Kind.KERNEL, True),
    "Kernel": (Kind.KERNEL, True),
    "gpu_memcpy": (Kind.MEMCPY, True),
    "Memcpy": (Kind.MEMCPY, True),
    "gpu_memset": (Kind.MEMCPY, True),
    "Memset": (Kind.MEMCPY, True),
    "gpu_user_annotation": (Kind.ANNOTATION, True),
    "cuda_sync": (Kind.OTHER, True),
    "cpu_op": (Kind.CPU_OP, False),
    "Operator": (Kind.CPU_OP, False),
    "user_annotation": (Kind.ANNOTATION, False),
    "cuda_runtime": (Kind.RUNTIME, False),
    "Runtime": (Kind.RUNTIME, False),
    "cuda_driver": (Kind.RUNTIME, False),
    "Driver": (Kind.RUNTIME, False),
}

# Ascend hardware "Task Type" -> Kind. Unknown *_SQE types are control tasks
# (OTHER); other unknown types are kernels (old torch_npu writes "Other").
ASCEND_TASK_KIND: dict[str, Kind] = {
    "AI_CORE": Kind.KERNEL,
    "AI_VECTOR_CORE": Kind.KERNEL,
    "AI_CPU": Kind.KERNEL,
    "MIX_AIC": Kind.KERNEL,
    "MIX_AIV": Kind.KERNEL,
    "DSA_SQE": Kind.KERNEL,
    "FFTS_PLUS": Kind.KERNEL,
    "KERNEL_AICORE": Kind.KERNEL,
    "KERNEL_AIVEC": Kind.KERNEL,
    "KERNEL_AICPU": Kind.KERNEL,
    "KERNEL_MIX_AIC": Kind.KERNEL,
    "KERNEL_MIX_AIV": Kind.KERNEL,
    "Other": Kind.KERNEL,
    "N/A": Kind.KERNEL,
    "PCIE_DMA_SQE": Kind.MEMCPY,
    "SDMA_SQE": Kind.MEMCPY,
    "MEMCPY_ASYNC": Kind.MEMCPY,
    "HCCL": Kind.COMM,
    "COMMUNICATION": Kind.COMM,
    "Notify Wait": Kind.COMM,
    "Notify_Wait": Kind.COMM,
    "Notify Record": Kind.COMM,
    "Notify_Record": Kind.COMM,
    "Write Value": Kind.COMM,
    "SDMA": Kind.COMM,
    "RDMA": Kind.COMM,
    "Reduce_Inline": Kind.COMM,
    "Reduce Inline": Kind.COMM,
    "Memcpy": Kind.COMM,  # an HCCL task type, not a user copy
    "Local_Copy": Kind.COMM,
    "EVENT_RECORD_SQE": Kind.OTHER,
    "EVENT_WAIT_SQE": Kind.OTHER,
    "PLACE_HOLDER_SQE": Kind.OTHER,
    "NOTIFY_RECORD_SQE": Kind.OTHER,
    "NOTIFY_WAIT_SQE": Kind.OTHER,
    "WRITE_VALUE_SQE": Kind.OTHER,
    "CAPTURE_RECORD": Kind.OTHER,
    "CAPTURE_WAIT": Kind.OTHER,
}

# Nsight Systems export tables -> Kind (readers/nsys/tables.py). Kernels with a collective's name become COMM
# (is_comm_kernel); synchronisation waits are Kineto's cuda_sync: not busy time.
NSYS_TABLE_KIND: dict[str, Kind] = {
    "CUPTI_ACTIVITY_KIND_KERNEL": Kind.KERNEL,
    "CUPTI_ACTIVITY_KIND_MEMCPY": Kind.MEMCPY,
    "CUPTI_ACTIVITY_KIND_MEMSET": Kind.MEMCPY,
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": Kind.OTHER,
    "CUPTI_ACTIVITY_KIND_RUNTIME": Kind.RUNTIME,
    "NVTX_EVENTS": Kind.ANNOTATION,
}

COMM_KERNEL_RE = re.compile(r"nccl|rccl|hccl|c10d::|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all", re.I)
# The same words as plain substrings of the lower-cased name: C++ kernel names
# run to hundreds of characters, where the case-insensitive alternation costs
# ~30 µs a name and substring search ~1 µs.
_COMM_WORDS = ("nccl", "rccl", "hccl", "c10d::", "allreduce", "all_reduce", "allgather", "all_gather",
               "reducescatter", "reduce_scatter", "alltoall", "all_toall", "allto_all", "all_to_all")


def is_comm_kernel(name: str) -> bool:
    """A collective communication kernel by its name (what :data:`COMM_KERNEL_RE` matches)."""
    low = name.lower()
    return any(w in low for w in _COMM_WORDS)


def ascend_task_kind(task_type: Any) -> Kind:
    """Kind of an Ascend task from its task type / accelerator core (see docs/trace-formats.md)."""
    if not isinstance(task_type, str):
        return Kind.KERNEL
    k = ASCEND_TASK_KIND.get(task_type)
    if k is not None:
        return k
    return Kind.OTHER if task_type.endswith("_SQE") else Kind.KERNEL
