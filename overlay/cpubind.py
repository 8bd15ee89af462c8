"""Where the CPU lane may run beside vLLM CPU's forward threads, and its OpenMP team.

vLLM CPU binds the forward's OpenMP threads of each *local rank* (one process
per rank) to its own CPUs (vLLM 0.32 ``vllm/utils/ompmultiprocessing.py``):

* ``VLLM_CPU_OMP_THREADS_BIND=0-31|32-63``: one CPU list per local rank;
* ``auto`` (default): local rank ``i`` takes the ``i``-th NUMA node, one logical
  CPU per physical core (x86 / s390x: the highest-numbered sibling; ARM,
  RISC-V: every CPU), and the last ``VLLM_CPU_NUM_OF_RESERVED_CPU`` of those
  (default: one per rank) are reserved for vLLM's other processes;
* ``nobind``: nothing.

A process sees only its own threads' masks, so without this the lane of rank 0
would take rank 1's cores. :func:`vllm_claimed_cpus` lists every local rank's
forward and reserved CPUs from those settings (pure, testable with fake
topologies); the lane avoids them, and takes a reserved CPU only when nothing
else is free (better than time-slicing with a forward: on a 2-core machine
vLLM leaves exactly one CPU, reserved).

:func:`limit_openmp_team` caps the OpenMP team of the *calling* thread: in
libgomp / LLVM libomp ``omp_set_num_threads`` sets the calling thread's
``nthreads-var``, so a parallel op drawn on the lane's thread does not start a
team as large as the forward's on the lane's few CPUs.
"""

from __future__ import annotations

import ctypes
import os
import platform
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from overlay.switch import parse_cpu_list

VLLM_BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"
VLLM_RESERVED_ENV = "VLLM_CPU_NUM_OF_RESERVED_CPU"
_OPENMP_RE = re.compile(r"/lib(?:gomp|iomp5|omp)[^/]*\.so[^/]*$")


# -- topology (sysfs) ---------------------------------------------------------------


def numa_nodes(root: str = "/sys/devices/system/node") -> list[set[int]]:
    """CPUs of each NUMA node, in node order (empty when unknown)."""
    nodes = []
    for path in sorted(Path(root).glob("node[0-9]*"), key=lambda p: int(p.name[4:])):
        try:
            nodes.append(parse_cpu_list((path / "cpulist").read_text().strip()))
        except (OSError, ValueError):
            continue
    return nodes


def physical_cores(root: str = "/sys/devices/system/cpu") -> dict[int, tuple[int, int]]:
    """CPU id -> (package, core) of its physical core (empty when unknown)."""
    out = {}
    for path in Path(root).glob("cpu[0-9]*"):
        try:
            topo = path / "topology"
            out[int(path.name[3:])] = (int((topo / "physical_package_id").read_text()),
                                       int((topo / "core_id").read_text()))
        except (OSError, ValueError):
            continue
    return out


def vllm_local_world_size() -> int | None:
    """Local ranks of this vLLM instance, from its current config (None outside vLLM)."""
    getter = getattr(sys.modules.get("vllm.config"), "get_current_vllm_config_or_none", None)
    try:
        config = getter() if getter is not None else None
        return int(config.parallel_config.local_world_size) if config is not None else None
    except Exception:  # noqa: BLE001 - placement is best effort; the caller says so
        return None


# -- vLLM's binding (pure) -------------------------------------------------------------


def vllm_claimed_cpus(environ: Mapping[str, str], *, local_world_size: int | None, nodes: list[set[int]],
                      cores: Mapping[int, tuple[int, int]],
                      one_per_core: bool = True) -> tuple[set[int], set[int], str]:
    """Every local rank's forward and reserved CPUs under vLLM CPU's binding: (claimed, reserved, how found).

    ``claimed`` includes ``reserved`` (CPUs vLLM keeps for its other
    processes, e.g. the engine core). ``one_per_core``: x86 / s390x keep one
    logical CPU per physical core for the forward (the others stay free);
    ARM / RISC-V use every CPU.
    """
    bind = environ.get(VLLM_BIND_ENV, "auto").strip() or "auto"
    if bind == "nobind":
        return set(), set(), f"{VLLM_BIND_ENV}=nobind"
    if bind != "auto":  # explicit lists: vLLM reserves nothing then
        claimed: set[int] = set()
        for part in bind.split("|"):
            try:
                claimed |= parse_cpu_list(part)
            except ValueError:
                return set(), set(), f"{VLLM_BIND_ENV}={bind!r} not understood"
        return claimed, set(), f"every local rank's {VLLM_BIND_ENV} CPUs"
    if not local_world_size or not nodes:
        return set(), set(), "auto binding, but the local ranks or NUMA nodes are unknown"
    lists = []
    for node in nodes[:local_world_size]:
        if one_per_core and cores:
            siblings: dict[tuple[int, int], int] = {}
            for cpu in node:
                key = cores.get(cpu, (-1, cpu))
                siblings[key] = max(cpu, siblings.get(key, cpu))
            lists.append(sorted(siblings.values()))
        else:
            lists.append(sorted(node))
    # vLLM reserves VLLM_CPU_NUM_OF_RESERVED_CPU (default: one per local rank) from
    # the tails of the ranks' lists, the extra ones from the last ranks.
    raw = environ.get(VLLM_RESERVED_ENV, "").strip()
    reserve = int(raw) if raw.isdigit() else local_world_size
    reserved: set[int] = set()
    if sum(map(len, lists)) > reserve:
        per_rank = [reserve // local_world_size] * local_world_size
        for i in range(local_world_size - reserve % local_world_size, local_world_size):
            per_rank[i] += 1
        for cpus, num in zip(lists, per_rank):
            reserved |= set(cpus[len(cpus) - num:]) if num else set()
    claimed = set().union(*map(set, lists))
    return claimed, reserved, f"the forward and reserved CPUs of {local_world_size} local rank(s) ({VLLM_BIND_ENV}=auto)"


def vllm_claims_here(environ: Mapping[str, str] | None = None) -> tuple[set[int], set[int], str]:
    """:func:`vllm_claimed_cpus` for this machine and process."""
    env = os.environ if environ is None else environ
    arch = platform.machine().lower()
    return vllm_claimed_cpus(env, local_world_size=vllm_local_world_size(), nodes=numa_nodes(),
                             cores=physical_cores(), one_per_core=arch in ("x86_64", "amd64", "i686", "s390x"))


# -- the OpenMP runtime torch loaded -----------------------------------------------------


def openmp_runtime(maps: str | None = None) -> str | None:
    """Path of the OpenMP runtime mapped into this process (libgomp, libiomp5, libomp)."""
    if maps is None:
        try:
            maps = Path("/proc/self/maps").read_text()
        except OSError:
            return None
    for line in maps.splitlines():
        path = line.split()[-1] if line.split() else ""
        if _OPENMP_RE.search(path):
            return path
    return None


def limit_openmp_team(n: int) -> tuple[int | None, str | None]:
    """Cap the calling thread's OpenMP team at ``n``; (team read back, None) or (None, why not)."""
    path = openmp_runtime()
    if path is None:
        return None, "no OpenMP runtime loaded: its team is not limited"
    try:
        lib = ctypes.CDLL(path)
        lib.omp_set_num_threads(ctypes.c_int(max(1, n)))
        return int(lib.omp_get_max_threads()), None
    except (OSError, AttributeError) as exc:
        return None, f"OpenMP team not limited ({exc!r})"
