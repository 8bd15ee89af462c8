"""Where the CPU lane runs beside every local vLLM rank, and its OpenMP team (overlay/cpubind.py).

GIVEN fake CPU topologies (two NUMA nodes with SMT siblings, as a TP=2 vLLM CPU
run on a two-socket x86 machine sees them) and vLLM's binding settings, WHEN
the lane's ``auto`` CPUs are chosen, THEN no local rank's forward or reserved
CPU is taken. GIVEN the real OpenMP runtime torch loaded, WHEN the lane thread
is placed, THEN its OpenMP team is capped at its CPUs, and only its own.
"""

from __future__ import annotations

import ctypes
import threading

import pytest
import torch

from overlay.cpubind import (
    limit_openmp_team,
    numa_nodes,
    openmp_runtime,
    physical_cores,
    vllm_claimed_cpus,
)
from overlay.lanes import CpuThreadLane, choose_auto

# Two sockets, 4 cores each, 2 SMT siblings per core: CPU c and c + 8 share a core.
NODES = [{0, 1, 2, 3, 8, 9, 10, 11}, {4, 5, 6, 7, 12, 13, 14, 15}]
CORES = {c: (0 if c % 8 < 4 else 1, c % 8) for c in range(16)}
ALL = set(range(16))


def _auto(env, *, nodes=NODES, world=2, one_per_core=True, own=None, available=ALL, cores=CORES):
    claimed, reserved, why = vllm_claimed_cpus(env, local_world_size=world, nodes=nodes, cores=cores,
                                               one_per_core=one_per_core)
    masks = [frozenset(available)] + ([frozenset(own)] if own else [])
    return claimed, choose_auto(set(available), masks, claimed, why, reserved=reserved)


def test_tp2_auto_binding_keeps_the_lane_off_both_ranks_cores():
    # GIVEN rank 0 of TP=2 with vLLM's auto binding: its OpenMP threads pinned to node 0's high siblings
    claimed, (lane, why) = _auto({}, own={8, 9, 10, 11})
    # THEN both ranks' forward (and reserved) CPUs are claimed: the highest sibling of each core of nodes 0 and 1
    assert claimed == {8, 9, 10, 11, 12, 13, 14, 15}
    # AND the lane takes the free siblings, never rank 1's cores
    assert lane == {0, 1, 2, 3, 4, 5, 6, 7} and not lane & {12, 13, 14, 15}
    assert "2 local rank(s)" in why and "beside the forward's pinned CPUs [8, 9, 10, 11]" in why
    # AND vLLM's reserved CPUs (one per rank by default, the tail of each rank's list) are among the claimed
    _claimed, reserved, _why = vllm_claimed_cpus({}, local_world_size=2, nodes=NODES, cores=CORES)
    assert reserved == {11, 15}
    _claimed, reserved3, _why = vllm_claimed_cpus({"VLLM_CPU_NUM_OF_RESERVED_CPU": "3"}, local_world_size=2,
                                                  nodes=NODES, cores=CORES)
    assert reserved3 == {11, 14, 15}  # the extra one from the last rank, as vLLM does


def test_single_rank_on_two_cores_takes_the_reserved_cpu():
    # GIVEN vLLM CPU auto binding on a 2-core machine (one node, no SMT): forward on CPU 0, CPU 1 reserved
    claimed, (lane, why) = _auto({}, nodes=[{0, 1}], world=1, own={0}, available={0, 1}, cores={0: (0, 0), 1: (0, 1)})
    # THEN nothing is free of vLLM's claims, so the lane takes the reserved CPU, never the forward's
    assert claimed == {0, 1} and lane == {1}
    assert "on vLLM's reserved CPUs [1]" in why


def test_explicit_binding_lists_every_local_rank():
    # GIVEN VLLM_CPU_OMP_THREADS_BIND with one list per local rank, rank 0 pinned to its own
    claimed, (lane, why) = _auto({"VLLM_CPU_OMP_THREADS_BIND": "0-6|8-14"}, own=set(range(7)))
    # THEN the lane avoids both lists
    assert claimed == set(range(7)) | set(range(8, 15))
    assert lane == {7, 15} and "every local rank's VLLM_CPU_OMP_THREADS_BIND CPUs" in why


def test_auto_without_smt_and_one_node_per_rank_leaves_only_other_nodes():
    # GIVEN an ARM-like machine (every CPU used) with three nodes, TP=2
    nodes = [{0, 1, 2, 3, 8, 9, 10, 11}, {4, 5, 6, 7, 12, 13, 14, 15}, set()]
    claimed, (lane, _why) = _auto({}, nodes=nodes, one_per_core=False, own={0, 1})
    # THEN both ranks' nodes are claimed whole; nothing else is left: the lane takes vLLM's reserved CPUs
    # (the tail of each rank's list), never a forward's
    assert claimed == ALL
    assert lane == {11, 15} and "on vLLM's reserved CPUs [11, 15]" in _why
    # AND with nothing reserved (VLLM_CPU_NUM_OF_RESERVED_CPU=0) it shares, and says so
    _c, (lane0, why0) = _auto({"VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}, nodes=nodes, one_per_core=False, own={0, 1})
    assert lane0 == ALL and why0 == "no CPU is free of the forward's pinned threads, so it shares them"
    # WHEN the machine has a third node with CPUs THEN the lane goes there
    claimed3, reserved3, why3 = vllm_claimed_cpus({}, local_world_size=2, nodes=nodes[:2] + [{16, 17}], cores={},
                                                  one_per_core=False)
    lane3, _ = choose_auto(ALL | {16, 17}, [frozenset({0, 1})], claimed3, why3, reserved=reserved3)
    assert lane3 == {16, 17}


@pytest.mark.parametrize(
    ("env", "world", "reason"),
    [
        ({"VLLM_CPU_OMP_THREADS_BIND": "nobind"}, 2, "nobind"),
        ({}, None, "unknown"),
        ({"VLLM_CPU_OMP_THREADS_BIND": "0-3|x"}, 2, "not understood"),
    ],
)
def test_no_claim_when_vllm_binds_nothing_or_is_unknown(env, world, reason):
    # GIVEN vLLM binding nothing, an unknown rank count, or a malformed list
    claimed, reserved, why = vllm_claimed_cpus(env, local_world_size=world, nodes=NODES, cores=CORES)
    # THEN nothing is claimed, and the reason is given (placement falls back to this process's masks)
    assert claimed == reserved == set() and reason in why


def test_topology_is_read_from_sysfs(tmp_path):
    # GIVEN a sysfs-shaped tree with two nodes and two CPUs
    for n, cpus in ((0, "0-1,4"), (1, "2-3")):
        (tmp_path / "node" / f"node{n}").mkdir(parents=True)
        (tmp_path / "node" / f"node{n}" / "cpulist").write_text(cpus + "\n")
    for cpu, (pkg, core) in ((0, (0, 0)), (4, (0, 0))):
        topo = tmp_path / "cpu" / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text(f"{pkg}\n")
        (topo / "core_id").write_text(f"{core}\n")
    # THEN nodes and physical cores come back as the claims need them
    assert numa_nodes(str(tmp_path / "node")) == [{0, 1, 4}, {2, 3}]
    assert physical_cores(str(tmp_path / "cpu")) == {0: (0, 0), 4: (0, 0)}


def test_openmp_runtime_is_found_in_the_maps():
    # GIVEN this process (torch loaded its OpenMP runtime) and a maps text with none
    maps = "7f00-7f01 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
    # THEN the real runtime is found by name, and none in the other text
    path = openmp_runtime()
    assert path is not None and any(k in path for k in ("libgomp", "libiomp5", "libomp"))
    assert openmp_runtime(maps) is None
    assert openmp_runtime(maps + "7f02-7f03 r-xp 0 08:01 2 /opt/x/lib/libiomp5.so\n") == "/opt/x/lib/libiomp5.so"


def _main_team() -> int:
    return int(ctypes.CDLL(openmp_runtime()).omp_get_max_threads())


def test_lane_thread_openmp_team_is_capped_at_its_cpus_and_only_its_own():
    # GIVEN the model thread's OpenMP team of 2 or more threads
    before = _main_team()
    if before < 2:
        pytest.fail(f"needs an OpenMP team of at least 2 in the model thread (has {before}): the cap could not show")
    cpu = max(__import__("os").sched_getaffinity(0))
    # WHEN the lane is placed on one CPU and draws a large q
    lane = CpuThreadLane(seed=3, cpus={cpu})
    try:
        q, _, _ = lane.wait(lane.launch(512, 4096, torch.float32, "cpu"))
        assert q.min().item() > 0
        # THEN its own team is 1 (read back in the lane thread) and the placement line says so
        assert lane.cpus == {cpu} and lane.omp_team == 1
        assert "its OpenMP team limited to 1" in lane.placement
        # AND the model thread's team is untouched (per-thread setting)
        assert _main_team() == before
    finally:
        lane.close()


def test_limit_openmp_team_reports_the_value_read_back():
    # GIVEN a fresh thread WHEN its team is capped at 1 THEN the runtime reads back 1 there
    out = []
    t = threading.Thread(target=lambda: out.append(limit_openmp_team(1)))
    t.start()
    t.join()
    assert out == [(1, None)]
