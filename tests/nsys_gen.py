"""GENERATED Nsight Systems SQLite exports with known ground truth (written by the tests with sqlite3).

No GPU records these here, so the tests write exports in nsys's documented schema (the columns and types
of NVIDIA's "Exporter SQLite Schema"; the real pipit export of nsys 2022.2.1 has the same ones): a vLLM-like
serving loop per GPU process, three steps, each with

* on the host thread, as NVTX push/pop ranges: vLLM's step annotation ``execute_context_0(0)_generation_8(8)``
  (written by vLLM's CUDA profiler wrapper), the overlay's ``expo_prof::exponential`` around the launch of the
  exponential kernel, ``expo_prof::forward`` around the launches of two compute kernels, ``expo_prof::wait``
  around a ``cudaStreamWaitEvent`` (no device work);
* on the device: the compute kernels on stream 7, the exponential draw (named like torch's kernel) on the
  side stream 13, placed so that step 0's draw is fully hidden, step 1's half hidden, step 2's fully exposed.

``schema="2022"``: ``EXPORT_META_DATA``, NVTX names in ``text``, every optional table (copies, memsets,
synchronisation, stream info, thread names). ``schema="2024"``: ``META_DATA_EXPORT``, NVTX names only through
``textId`` (registered strings), ``ENUM_NSYS_EVENT_TYPE``, and the optional tables missing.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

EXP_KERNEL = ("void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, "
              "at::native::templates::cuda::exponential_kernel<at::CUDAGeneratorImpl*>(at::TensorIteratorBase&, "
              "double, at::CUDAGeneratorImpl*)::{lambda()#1}::operator()() const::{lambda(curandStatePhilox4_32_10*)#2}"
              ">(long, at::PhiloxCudaState, float)")
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off"
ELEMWISE = "void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, (bool)1>()"
STEP_NAME = "execute_context_0(0)_generation_8(8)"
MAIN, SIDE = 7, 13
STEP_NS = 10_000_000
#: Per step, the draw on the side stream relative to the step's base: [150k, 250k) inside the first compute
#: kernel [100k, 400k) (hidden); [650k, 750k) half under the second [400k, 700k); [800k, 880k) after both.
DRAWS = ((150_000, 250_000), (650_000, 750_000), (800_000, 880_000))
K1, K2 = (100_000, 400_000), (400_000, 700_000)
WAIT = (600_000, 610_000)


@dataclass
class Truth:
    """What the export holds, by construction (per rank, the same for every GPU process)."""

    ranks: int
    total_ns: list[int] = field(default_factory=lambda: [b - a for a, b in DRAWS])
    hidden_ns: list[int] = field(default_factory=lambda: [100_000, 50_000, 0])
    #: the device window of each step's expo_prof::forward: first compute kernel start to last end
    forward_ns: int = K2[1] - K1[0]
    wait_ns: int = WAIT[1] - WAIT[0]

    @property
    def exposed_ns(self) -> list[int]:
        return [t - h for t, h in zip(self.total_ns, self.hidden_ns)]

    @property
    def critical_ns(self) -> list[int]:
        # exposed pieces and the host wait never overlap here: their union is their sum
        return [e + self.wait_ns for e in self.exposed_ns]


_SCHEMA = {
    "StringIds": "id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL",
    "CUPTI_ACTIVITY_KIND_KERNEL": "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, "
    "contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
    "demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, gridId INTEGER NOT NULL",
    "CUPTI_ACTIVITY_KIND_RUNTIME": "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, "
    "globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL",
    "NVTX_EVENTS": "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, "
    "category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, "
    "domainId INTEGER",
    "CUPTI_ACTIVITY_KIND_MEMCPY": "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, "
    "contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
    "bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL",
    "CUPTI_ACTIVITY_KIND_MEMSET": "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, "
    "contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
    "value INTEGER NOT NULL, bytes INTEGER NOT NULL",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, "
    "contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
    "syncType INTEGER NOT NULL, eventId INTEGER NOT NULL",
    "TARGET_INFO_CUDA_STREAM": "streamId INTEGER NOT NULL, hwId INTEGER NOT NULL, vmId INTEGER NOT NULL, "
    "processId INTEGER NOT NULL, contextId INTEGER NOT NULL, priority INTEGER NOT NULL, flag INTEGER NOT NULL",
    "TARGET_INFO_GPU": "vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT",
    "ThreadNames": "nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER",
    "TARGET_INFO_SESSION_START_TIME": "utcEpochNs INTEGER, utcTime TEXT, localTime TEXT",
    "ENUM_NSYS_EVENT_TYPE": "id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, label TEXT",
}
OPTIONAL_2022 = ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
                 "TARGET_INFO_CUDA_STREAM", "ThreadNames")


def gtid(pid: int, tid: int) -> int:
    """nsys's serialized thread id: pid in bits 24-47, tid in bits 0-23."""
    return (pid << 24) | tid


def write_nsys_export(path: Path, *, schema: str = "2022", processes: int = 1) -> Truth:
    """Write a GENERATED export to ``path``; ``processes`` GPU worker processes (device i each) plus, with more
    than one, an API-server process with host NVTX only (no GPU work: no rank)."""
    con = sqlite3.connect(path)
    old = schema == "2022"
    tables = [t for t in _SCHEMA if old or t not in OPTIONAL_2022]
    if old:
        tables.remove("ENUM_NSYS_EVENT_TYPE")
    for t in tables:
        con.execute(f"CREATE TABLE {t} ({_SCHEMA[t]})")
    meta = "EXPORT_META_DATA" if old else "META_DATA_EXPORT"
    con.execute(f"CREATE TABLE {meta} (name TEXT NOT NULL, value TEXT)")
    ver = ("2022.2.1.31", "2.9.1") if old else ("2024.6.2.225", "3.16.1")
    con.executemany(f"INSERT INTO {meta} VALUES (?, ?)", [("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"),
                                                         ("EXPORT_PRODUCT_VERSION", ver[0]),
                                                         ("EXPORT_SCHEMA_VERSION", ver[1]),
                                                         ("EXPORT_INPUT_PATH_ABS", "/private/path/report.nsys-rep")])
    if not old:
        con.executemany("INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (?, ?, ?)",
                        [(33, "NvtxCategory", "NVTX Category"), (34, "NvtxMark", "NVTX Mark"),
                         (59, "NvtxPushPopRange", "NVTX PushPop Range"), (60, "NvtxStartEndRange", "NVTX StartEnd Range"),
                         (75, "NvtxDomainCreate", "NVTX Domain Create")])
    con.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1767225600000000000, '2026-01-01T00:00:00', '')")
    strings: dict[str, int] = {}

    def sid(s: str) -> int:
        if s not in strings:
            strings[s] = len(strings) + 1
            con.execute("INSERT INTO StringIds VALUES (?, ?)", (strings[s], s))
        return strings[s]

    def nvtx(start: int, end: int | None, g: int, name: str, etype: int = 59) -> None:
        text, tid = (name, None) if old else (None, sid(name))
        con.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, endGlobalTid, textId, "
                    "domainId) VALUES (?, ?, ?, ?, ?, ?, ?, 0)", (start, end, etype, text, g, g, tid))

    for p in range(processes):
        pid = 4242 + p
        g, gp = gtid(pid, pid), pid << 24
        con.execute("INSERT INTO TARGET_INFO_GPU VALUES (0, ?, 'NVIDIA H200')", (p,))
        if old:
            con.execute("INSERT INTO ThreadNames VALUES (?, 10, ?)", (sid("VllmWorker"), g))
            con.executemany("INSERT INTO TARGET_INFO_CUDA_STREAM VALUES (?, 0, 0, ?, 1, ?, ?)",
                            [(MAIN, pid, 0, 1), (SIDE, pid, -1 & 0xFFFFFFFF, 1)])
        corr = 0

        def launch(host: int, name: str, dev: tuple[int, int] | None, stream: int, kname: str | None,
                   g: int = g, gp: int = gp, p: int = p) -> None:
            nonlocal corr
            corr += 1
            con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 0, ?, ?, ?, 0)",
                        (host, host + 5_000, g, corr, sid(name)))
            if dev and kname:
                con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?, NULL, ?)",
                            (dev[0], dev[1], p, stream, corr, gp, sid(kname), sid(kname.split("<")[0][-40:]), corr))

        for k, (d0, d1) in enumerate(DRAWS):
            b = STEP_NS * (k + 1)
            nvtx(b, b + 2_000_000, g, STEP_NAME)
            nvtx(b + 10_000, b + 30_000, g, "expo_prof::exponential")
            launch(b + 20_000, "cudaLaunchKernel_v7000", (b + d0, b + d1), SIDE, EXP_KERNEL)
            if old:  # a copy launched before the forward, outside every overlay range
                launch(b + 32_000, "cudaMemcpyAsync_v3020", None, MAIN, None)
                con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?, ?, ?, 1, ?, ?, ?, 4096, 1)",
                            (b + 50_000, b + 60_000, p, MAIN, corr, gp))
            nvtx(b + 40_000, b + 500_000, g, "expo_prof::forward")
            launch(b + 50_000, "cudaLaunchKernel_v7000", (b + K1[0], b + K1[1]), MAIN, GEMM)
            launch(b + 60_000, "cudaLaunchKernel_v7000", (b + K2[0], b + K2[1]), MAIN, ELEMWISE)
            nvtx(b + WAIT[0], b + WAIT[1], g, "expo_prof::wait")
            launch(b + WAIT[0] + 2_000, "cudaStreamWaitEvent_v3020", None, MAIN, None)
            if old:  # the host waits for the step's end: a synchronisation record, not busy time
                launch(b + 690_000, "cudaStreamSynchronize_v3020", None, MAIN, None)
                con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES (?, ?, ?, 1, ?, ?, ?, 3, 0)",
                            (b + 700_000, b + 710_000, p, MAIN, corr, gp))
        # a range still open when the capture ended (end NULL): skipped with a warning
        nvtx(STEP_NS * 4, None, g, "unterminated")
    if processes > 1:  # the API server: host NVTX only
        nvtx(STEP_NS, STEP_NS + 5_000, gtid(4000, 4001), "api_server: request", 60)
    con.commit()
    con.close()
    return Truth(ranks=processes)
