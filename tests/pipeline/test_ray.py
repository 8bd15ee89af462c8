"""``--ray``: one task per file on the node that holds it, on Ray's own multi-node simulation.

``ray.cluster_utils.Cluster`` runs a head and a second node on this machine,
each named by an ``expo-prof-host:NAME`` resource; the inputs are placed per
node as ``NODE:PATH``. Everything stays on 127.0.0.1
(:func:`expo_prof.pipeline.ray_exec.loopback_env`): the test checks what the
nodes report and what Ray's processes listen on.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from expo_prof.errors import BadInput
from expo_prof.pipeline import Options, run
from expo_prof.pipeline.ray_exec import HOST_RESOURCE, loopback_env, read_on_ray

REPO = Path(__file__).resolve().parents[2]
SESSION = REPO / "traces" / "samples" / "tiny-cpu-off-on"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, realtraces, need):
    # (`need`, not `from conftest import require`: another directory's conftest may own that name.)
    need(importlib.util.find_spec("ray") is not None, "Ray (pip install 'expo-prof[ray]')")
    for k, v in loopback_env().items():
        os.environ[k] = v
    os.environ["PYTHONPATH"] = str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")
    import ray
    from ray.cluster_utils import Cluster

    common = dict(node_ip_address="127.0.0.1", num_cpus=1)
    # Ray gives a raylet a fixed 30 s to register with the GCS (ray/_private/node.py asks
    # services.get_node in a loop); on a loaded machine (2 cores shared by several jobs) that runs
    # out. Each ask here keeps asking for up to 60 s; and the whole start is tried 3 times (the
    # raylet also aborts when its agents are slow to start, which a warm page cache makes rarer).
    import time

    import ray._private.services as services

    # (Not helped by any setting found: the raylet itself aborts when its node's dashboard agent takes
    # longer than ~15 s to write its port file, as it does on this machine under load.)

    asked = services.get_node

    def patient(*a, **kw):
        end = time.monotonic() + 60
        while True:
            try:
                return asked(*a, **kw)
            except RuntimeError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.5)

    services.get_node = patient
    for attempt in range(3):
        c = Cluster()
        try:
            c.add_node(include_dashboard=False, resources={HOST_RESOURCE + "n0": 1}, **common)
            c.add_node(resources={HOST_RESOURCE + "n1": 1}, **common)
            ray.init(address=c.address, include_dashboard=False, log_to_driver=False)
            break
        except Exception:
            ray.shutdown()
            c.shutdown()  # never leave a half-started cluster's processes behind
            if attempt == 2:
                raise
    # Files placed per node: n0 holds the overlay-off run and one vLLM trace, n1 the overlay-on run and another.
    root = tmp_path_factory.mktemp("nodes")
    for node, run_dir, trace in (("n0", "01-off", "rank0-fp64-gumbel.pt.trace.json.gz"),
                                 ("n1", "02-on", "rank0-default-with-stack.pt.trace.json.gz")):
        shutil.copytree(SESSION / run_dir, root / node / run_dir)
        (root / node / "traces").mkdir()
        shutil.copy(realtraces / "vllm-cpu" / trace, root / node / "traces" / trace)
    yield c, root
    ray.shutdown()
    c.shutdown()
    services.get_node = asked


def _node_of(ray, name: str) -> str:
    return next(n["NodeID"] for n in ray.nodes() if HOST_RESOURCE + name in n["Resources"])


def test_results_equal_the_local_run_and_each_file_is_read_on_its_node(cluster):
    import ray

    c, root = cluster
    inputs = [f"n0:{root / 'n0' / '01-off'}", f"n1:{root / 'n1' / '02-on'}",
              f"n0:{root / 'n0' / 'traces'}", f"n1:{root / 'n1' / 'traces'}"]
    local = [root / "n0" / "01-off", root / "n1" / "02-on", root / "n0" / "traces", root / "n1" / "traces"]
    # GIVEN the run directories and traces placed on two nodes
    # WHEN analysed on Ray, and locally in one process
    on_ray = run(inputs, Options.make(ray=c.address, events=False))
    here = run(local, Options.make())
    # THEN the documents are the same (four recordings, overlay off and on)
    assert msgspec.to_builtins(on_ray.document) == msgspec.to_builtins(here.document)
    assert len(on_ray.recordings) == 4 and {r.recording.overlay for r in on_ray.recordings} >= {"on", "off"}
    # AND every file was read on the node that holds it
    par = read_on_ray(inputs, address=c.address, events=False)
    ids = {"n0": _node_of(ray, "n0"), "n1": _node_of(ray, "n1")}
    assert par.where and set(par.where.values()) == set(ids.values())
    for source, nid in par.where.items():
        assert Path(source).relative_to(root).parts[0] == next(k for k, v in ids.items() if v == nid), source
    # AND only compact results came back (a trace's events stayed on its node)
    from expo_prof.timeline import event_count

    assert all(len(t) <= 2 < event_count(t) for t in par.loaded.timelines if t.fmt == "kineto")


def test_ray_stays_on_loopback(cluster):
    import psutil
    import ray

    # GIVEN the running simulated cluster WHEN its nodes and Ray's processes are looked at
    addrs = {n["NodeManagerAddress"] for n in ray.nodes()}
    # THEN every node reports 127.0.0.1
    assert addrs == {"127.0.0.1"}, addrs
    # AND every socket a Ray process listens on is bound to the loopback interface
    ray_pids = {p.pid for p in psutil.process_iter(["cmdline"])
                if any(k in " ".join(p.info["cmdline"] or []) for k in ("gcs_server", "raylet", "default_worker",
                                                                      "ray::", "ray/_private", "log_monitor"))}
    listening = [(cn.pid, cn.laddr.ip, cn.laddr.port) for cn in psutil.net_connections("inet")
                 if cn.status == psutil.CONN_LISTEN and cn.pid in ray_pids]
    assert listening, "no listening Ray socket found: the check would prove nothing"
    def loopback(ip: str) -> bool:
        a = ipaddress.ip_address(ip.split("%")[0])
        return (getattr(a, "ipv4_mapped", None) or a).is_loopback  # ::ffff:127.0.0.1 is 127.0.0.1

    outside = [x for x in listening if not loopback(x[1])]
    assert not outside, outside


def test_unknown_node_is_one_line(cluster):
    c, root = cluster
    # GIVEN an input on a node the cluster does not have WHEN analysed on Ray THEN BadInput names the nodes
    with pytest.raises(BadInput, match=r"no Ray node 'n9'.*n0.*n1|no Ray node 'n9'.*n1.*n0"):
        run([f"n9:{root / 'n0' / 'traces'}"], Options.make(ray=c.address))


def test_cli_ray_address(cluster):
    c, root = cluster
    # GIVEN the CLI WHEN analyze runs with --ray=ADDRESS on NODE:PATH inputs, and locally
    env = dict(os.environ, PYTHONPATH=str(REPO), **loopback_env())
    args = [sys.executable, "-m", "expo_prof", "analyze", "--json"]
    p = subprocess.run(args + [f"n1:{root / 'n1' / 'traces'}", f"--ray={c.address}"], capture_output=True, text=True,
                       env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    q = subprocess.run(args + [str(root / "n1" / "traces"), "-j", "1"], capture_output=True, text=True, env=env,
                       timeout=300)
    # THEN the documents are the same
    assert json.loads(p.stdout) == json.loads(q.stdout)


def test_collect_copies_each_nodes_files_into_one_run_dir(cluster, tmp_path):
    from expo_prof.record.collect import collect

    c, root = cluster
    # GIVEN a multi-node run's files written on two nodes: n0 has the overlay-on run's trace and overlay log,
    # n1 a trace of another rank-0 run under the same relative folder, and a file whose name n0 also has
    a, b = tmp_path / "on-n0", tmp_path / "on-n1"
    shutil.copytree(root / "n1" / "02-on" / "profiler", a / "profiler")
    shutil.copytree(root / "n1" / "02-on" / "overlay", a / "overlay")
    (b / "profiler").mkdir(parents=True)
    shutil.copy(next((root / "n0" / "traces").iterdir()), b / "profiler" / "rank1.pt.trace.json.gz")
    (a / "overlay" / "note.txt").write_text("from n0\n")
    (b / "overlay").mkdir()
    (b / "overlay" / "note.txt").write_text("from n1\n")
    run_dir = tmp_path / "RUN"
    # WHEN collected from the two nodes (small chunks: a file comes back in several pieces)
    res = collect(run_dir, address=c.address, sources=[f"n0:{a}", f"n1:{b}"], chunk=1 << 16)
    # THEN every file is in the run directory at its relative path, byte for byte, with where it came from
    for src in (a, b):
        for f in src.rglob("*"):
            if f.is_file() and f.name != "note.txt":
                assert (run_dir / f.relative_to(src)).read_bytes() == f.read_bytes()
    # AND the second note.txt (another content, same name) went under nodes/n1/, never over the first
    assert (run_dir / "overlay" / "note.txt").read_text() == "from n0\n"
    assert (run_dir / "nodes" / "n1" / "overlay" / "note.txt").read_text() == "from n1\n"
    rec = json.loads((run_dir / "collected.json").read_text())
    assert {f["node"] for f in rec["files"]} == {"n0", "n1"} and len(rec["files"]) == len(res.copied)
    assert any(f["bytes"] > (1 << 16) for f in rec["files"])  # a multi-chunk file was among them
    # AND collecting again copies nothing (same content already here)
    again = collect(run_dir, address=c.address, sources=[f"n0:{a}", f"n1:{b}"])
    assert again.copied == [] and again.same == len(res.copied)
    # AND the collected run holds the instances of both nodes' files
    def instances(p):
        return sum(r.instances for r in run([p], Options.make()).document.ranks)

    assert instances(run_dir) == instances(a) + instances(b) > 0
