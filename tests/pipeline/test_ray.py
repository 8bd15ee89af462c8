"""``--ray``: one task per file on the node that holds it, on Ray's own multi-node simulation.

``ray.cluster_utils.Cluster`` runs a head and a second node on this machine,
each named by an ``expo-prof-host:NAME`` resource; the inputs are placed per
node as ``NODE:PATH``. Everything stays on 127.0.0.1
(:func:`expo_prof.pipeline.ray_exec.loopback_env`): the test checks what the
nodes report and what Ray's processes listen on.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import msgspec
import pytest

from expo_prof.errors import BadInput
from expo_prof.pipeline import Options, run
from expo_prof.pipeline.ray_exec import HOST_RESOURCE, loopback_env, read_on_ray

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # ray_patience, here and in the scripts run below
import ray_patience  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SESSION = REPO / "traces" / "samples" / "tiny-cpu-off-on"


# Runs in a fresh interpreter: `analyze --json PATH --ray` (no address: a local Ray), then what that Ray reports.
LOCAL_RAY = r"""
import contextlib, io, json, sys, time
import psutil
import ray_patience
from expo_prof.cli.main import cli

ray_patience.install()

out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        cli.main(args=["analyze", "--json", sys.argv[1], "--ray"], standalone_mode=False)
    except SystemExit as exc:
        assert not exc.code, exc.code
import ray
kids = {p.pid for p in psutil.Process().children(recursive=True)}
listen = [[c.laddr.ip, c.laddr.port] for c in psutil.net_connections("inet")
          if c.status == psutil.CONN_LISTEN and c.pid in kids]
print(json.dumps({"doc": json.loads(out.getvalue()), "nodes": [n["NodeManagerAddress"] for n in ray.nodes()],
                  "listen": listen}))
"""


def _loopback(ip: str) -> bool:
    a = ipaddress.ip_address(ip.split("%")[0])
    return (getattr(a, "ipv4_mapped", None) or a).is_loopback  # ::ffff:127.0.0.1 is 127.0.0.1


def test_ray_without_address_starts_a_local_ray_on_loopback(realtraces, ray_available):
    # Its own Ray temp dir: no other Ray's address file to join; short, for Ray's Unix socket paths.
    tmp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    trace = realtraces / "vllm-cpu" / "rank0-fp64-gumbel.pt.trace.json.gz"
    # GIVEN a trace WHEN `analyze --ray` runs with no address (before any cluster of this module is up)
    # (RAY_ADDRESS=local: a new Ray even when another runs on this machine, which `--ray` alone would join.)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(HERE)]), RAY_TMPDIR=tmp, RAY_ADDRESS="local",
               **loopback_env())
    for _attempt in range(3):  # the raylet aborts when its agents start slowly (loaded cores): as the fixture
        p = subprocess.run([sys.executable, "-c", LOCAL_RAY, str(trace)], capture_output=True, text=True, env=env,
                           timeout=600)
        if "timed out during startup" not in p.stderr:
            break
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    # THEN it started its own Ray, whose only node is 127.0.0.1 and which listens on loopback only
    assert got["nodes"] == ["127.0.0.1"], got["nodes"]
    assert got["listen"], "no listening socket of the local Ray found: the check would prove nothing"
    assert all(_loopback(ip) for ip, _port in got["listen"]), got["listen"]
    # AND the document equals the one read in this process without Ray
    here = json.loads(subprocess.run([sys.executable, "-m", "expo_prof", "analyze", "--json", str(trace), "-j", "1"],
                                     capture_output=True, text=True, env=env, timeout=300).stdout)
    assert got["doc"] == here
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, realtraces, ray_available):
    for k, v in loopback_env().items():
        os.environ[k] = v
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), str(HERE), os.environ.get("PYTHONPATH", "")])
    import ray
    from ray.cluster_utils import Cluster

    common = dict(node_ip_address="127.0.0.1", num_cpus=1)
    # Ray's start on loaded cores: patience for the raylet's registration (ray_patience), and the whole start
    # tried 3 times (the raylet also aborts when its agents are slow to start).
    asked = ray_patience.install()
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
    import ray._private.services as services

    services.get_node = asked


def instances(p: Path) -> int:
    """Instances found in ``p``, read here without Ray."""
    return sum(r.instances for r in run([p], Options.make()).document.ranks)


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


def test_a_run_dir_goes_to_the_node_its_manifest_names(cluster, tmp_path):
    import ray

    c, root = cluster
    # GIVEN two copies of a recorded run, given as plain paths, whose manifests name the hosts n1 and n0
    # (an `expo-prof-host:` name here; a real node's hostname works the same way), and one naming no node
    runs = {}
    for name, host in (("rec-n1", "n1"), ("rec-n0", "n0"), ("rec-elsewhere", "no-such-host")):
        shutil.copytree(root / "n1" / "02-on", tmp_path / name)
        m = json.loads((tmp_path / name / "manifest.json").read_text())
        m["host"]["hostname"] = host
        (tmp_path / name / "manifest.json").write_text(json.dumps(m))
        runs[name] = tmp_path / name
    # WHEN analysed on Ray
    par = read_on_ray(list(runs.values()), address=c.address, events=False)
    # THEN each run's files were read on the node its manifest names; the unknown host on the driver's node
    driver = ray.get_runtime_context().get_node_id()
    want = {"rec-n1": _node_of(ray, "n1"), "rec-n0": _node_of(ray, "n0"), "rec-elsewhere": driver}
    assert _node_of(ray, "n1") != driver  # else the first check proves nothing
    seen = {}
    for source, nid in par.where.items():
        seen.setdefault(Path(source).relative_to(tmp_path).parts[0], set()).add(nid)
    assert seen == {k: {v} for k, v in want.items()}, seen


def _ray_listening() -> list[tuple[int, str, int]]:
    """(pid, ip, port) of every socket a Ray process on this machine listens on."""
    import psutil

    ray_pids = {p.pid for p in psutil.process_iter(["cmdline"])
                if any(k in " ".join(p.info["cmdline"] or []) for k in ("gcs_server", "raylet", "default_worker",
                                                                      "ray::", "ray/_private", "log_monitor"))}
    return [(cn.pid, cn.laddr.ip, cn.laddr.port) for cn in psutil.net_connections("inet")
            if cn.status == psutil.CONN_LISTEN and cn.pid in ray_pids]


def test_ray_stays_on_loopback(cluster):
    import ray

    # GIVEN the running simulated cluster WHEN its nodes and Ray's processes are looked at
    addrs = {n["NodeManagerAddress"] for n in ray.nodes()}
    # THEN every node reports 127.0.0.1
    assert addrs == {"127.0.0.1"}, addrs
    # AND every socket a Ray process listens on is bound to the loopback interface
    listening = _ray_listening()
    assert listening, "no listening Ray socket found: the check would prove nothing"
    outside = [x for x in listening if not _loopback(x[1])]
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
    assert instances(run_dir) == instances(a) + instances(b) > 0


# A Ray node joining the cluster at argv[1], as ray.cluster_utils.Cluster.add_node starts one (`ray start
# --address` cannot: with loopback_env it refuses to join, without it Ray swaps 127.0.0.1 for the outward address).
JOIN_NODE = r"""
import json, signal, sys, time
import ray_patience
from ray._private.node import Node
from ray._private.parameter import RayParams

ray_patience.install()
params = RayParams(gcs_address=sys.argv[1], node_ip_address="127.0.0.1", num_cpus=1, num_gpus=0,
                   resources=json.loads(sys.argv[2]), object_store_memory=150 * 1024 * 1024, min_worker_port=0,
                   max_worker_port=0, include_log_monitor=False, node_manager_port=0)
params.dashboard_agent_listen_port = None
node = Node(params, head=False, shutdown_at_exit=True, spawn_reaper=True)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # exits through Node's shutdown_at_exit: kills its processes
while True:
    time.sleep(1)
"""


@pytest.fixture(scope="module")
def private_node(cluster, need, tmp_path_factory):
    """A third node, n2, whose processes see their own empty disk at DISK: a tmpfs mounted there in a mount
    namespace of its own (``unshare -m``), so what its workers write the other nodes never see, as on a real
    node's local disk. Yields DISK."""
    import time

    import ray

    need(shutil.which("unshare") is not None, "unshare (util-linux)")
    c, _root = cluster
    disk = tmp_path_factory.mktemp("node-local")
    res = json.dumps({HOST_RESOURCE + "n2": 1})
    log = open(disk.parent / "n2.log", "wb")  # noqa: SIM115 - closed below
    cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c",
           'mount -t tmpfs tmpfs "$0" && exec "$1" -c "$2" "$3" "$4"', str(disk), sys.executable, JOIN_NODE,
           c.address, res]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    end = time.monotonic() + 300
    while not any(n["Alive"] and HOST_RESOURCE + "n2" in n["Resources"] for n in ray.nodes()):
        if proc.poll() is not None or time.monotonic() > end:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
            pytest.fail("node n2 did not start: " + (disk.parent / "n2.log").read_text(errors="replace")[-2000:])
        time.sleep(1)
    yield disk
    os.killpg(proc.pid, 15)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
    log.close()


def test_record_collects_what_ray_workers_wrote_on_another_nodes_disk(cluster, private_node, realtraces,
                                                                     monkeypatch):
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from expo_prof.record.collect import after_run
    from expo_prof.record.command import inject, parse_target
    from overlay.contract import ENV_OUT

    c, root = cluster
    # GIVEN a run directory at the same path on every node (on n2 its own disk), the head's rank 0 files in it,
    run_dir = private_node / "RUN"
    shutil.copytree(SESSION / "02-on" / "overlay", run_dir / "overlay")
    (run_dir / "profiler").mkdir()
    shutil.copy(realtraces / "vllm-cpu" / "rank0-fp64-gumbel.pt.trace.json.gz", run_dir / "profiler" / "rank0.pt.trace.json.gz")
    # and the environment record gives a command on vLLM's Ray executor, as vLLM's own code copies it to workers
    target = parse_target([sys.executable, "-m", "vllm.entrypoints.openai.api_server",
                           "--distributed-executor-backend", "ray"])
    inj = inject(target, run_dir=run_dir, overlay=True, profiler="torch", vllm_version="0.32.0", run_id="RUN")
    with monkeypatch.context() as env:
        for k, v in inj.env.items():
            env.setenv(k, v)
        from vllm.ray.ray_env import get_env_vars_to_copy

        worker_env = {k: os.environ[k] for k in get_env_vars_to_copy(destination="workers") if k in os.environ}
    # AND a rank-1 worker on n2 (a stand-in for vLLM's Ray worker: vLLM's CPU platform refuses the Ray
    # executor) that writes its overlay log and trace where that environment says, on n2's disk
    log = next((SESSION / "02-on" / "overlay").iterdir())
    files = {f"overlay/rank1-{log.name}": log.read_bytes(),
             "profiler/rank1.pt.trace.json.gz": (realtraces / "vllm-cpu" /
                                                 "rank0-default-with-stack.pt.trace.json.gz").read_bytes()}

    def write_rank1(env: dict, files: dict) -> list[str]:
        run_dir = Path(env[ENV_OUT]).parent  # the overlay writes into RUN/overlay
        for rel, data in files.items():
            (run_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            (run_dir / rel).write_bytes(data)
        return [str(run_dir / rel) for rel in files]

    before = instances(run_dir)
    n2 = _node_of(ray, "n2")
    written = ray.get(ray.remote(num_cpus=0)(write_rank1).options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n2, soft=False)).remote(worker_env, files))
    assert written == [str(run_dir / rel) for rel in files]
    assert not any(Path(w).exists() for w in written)  # on n2's disk only, not on the head's
    # WHEN record's last step runs against the cluster the command ran on
    got = after_run(run_dir, {"RAY_ADDRESS": c.address})
    # THEN n2's two files are in the head's run directory, byte for byte, and the head's own were left alone
    assert got["status"] == "ok" and got["copied"] == 2 and got["aside"] == [], got
    for w, data in zip(written, files.values()):
        assert Path(w).read_bytes() == data
    assert got["same"] == 2 * 2  # the head's two files, listed by n0 and n1 (one disk)
    rec = json.loads((run_dir / "collected.json").read_text())
    assert [f["node"] for f in rec["files"]] == ["n2", "n2"]
    # AND the run now holds n2's instances too
    alone = private_node.parent / "n2-alone"
    for rel, data in files.items():
        (alone / rel).parent.mkdir(parents=True, exist_ok=True)
        (alone / rel).write_bytes(data)
    assert instances(run_dir) == before + instances(alone) > before
    # AND the third node, too, stayed on 127.0.0.1
    assert {n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]} == {"127.0.0.1"}
    assert [x for x in _ray_listening() if not _loopback(x[1])] == []
