"""``--ray [ADDRESS]``: the parallel read (:mod:`.parallel`) as Ray tasks, each on the node that holds its file.

Where an input lives:

* ``NODE:PATH`` — on the Ray node NODE: its ``expo-prof-host:NAME`` custom
  resource (``ray start --resources '{"expo-prof-host:NAME": 1}'``), its
  hostname, its IP address or (a prefix of) its node id;
* a run directory whose manifest names the host it was recorded on
  (``host.hostname``) when a node of the cluster has that hostname or name;
* anything else — on the node of this process (the driver).

Per input, one small task on its node lists the files (the reader plan,
:func:`expo_prof.readers.detect.plan`); then one task per file (or msprof
folder) reads and analyses it there (:func:`.parallel.work`). Only the
compact per-file result travels back, never the events (unless the command
draws them). The results are put together exactly as a local read
(:func:`.parallel.collect`), so ``--ray`` and ``--jobs`` give the same document.

Ray is an optional extra (``pip install 'expo-prof[ray]'``); expo-prof must be
importable on every node. With no ADDRESS a local Ray is started on the loopback
interface only (:func:`loopback_env`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from expo_prof.errors import BadInput
from expo_prof.pipeline.parallel import Parallel, Unit, collect, work
from expo_prof.readers import detect, tasks
from expo_prof.readers.file_bytes import DEFAULT_MAX_DECOMPRESSED

#: The custom resource that names a node for ``NODE:PATH`` inputs (``expo-prof-host:NAME``).
HOST_RESOURCE = "expo-prof-host:"

_NODE_PATH = re.compile(r"^(?P<node>[A-Za-z0-9][A-Za-z0-9_.\-]*):(?P<path>/.*|[^/].*)$")


def loopback_env() -> dict[str, str]:
    """Environment that keeps a Ray started here on 127.0.0.1: the node, its raylet, GCS and workers.

    ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` makes Ray's own address look-up answer the loopback address
    (as it does on a laptop) instead of the interface that routes outward; usage statistics off.
    Set before ``import ray`` (Ray reads it at import).
    """
    return {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


def _import_ray():
    for k, v in loopback_env().items():
        os.environ.setdefault(k, v)
    try:
        import ray
    except ImportError:
        raise BadInput("Ray is not installed (--ray and `expo-prof collect` work through it): "
                       "pip install 'expo-prof[ray]'") from None
    return ray


def connect(address: str):
    """Ray, initialised: the running session if there is one, else ``ray.init(address)`` ("" : a local Ray
    on 127.0.0.1 without the dashboard)."""
    ray = _import_ray()
    if ray.is_initialized():
        return ray
    kw = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        if address in ("", "local"):
            ray.init(_node_ip_address="127.0.0.1", **kw)
        else:
            ray.init(address=address, **kw)
    except Exception as exc:  # noqa: BLE001 - Ray raises plain Exception too (a node that did not start)
        if "Could not find any running Ray instance" in str(exc):  # Ray's text names ray's own --address flag
            raise BadInput(f"--ray {address}: no Ray cluster is running here; start one (`ray start --head`) or "
                           "name it: --ray HOST:PORT (or RAY_ADDRESS)") from None
        raise BadInput(f"--ray {address or '(local)'}: cannot start or reach Ray: {' '.join(str(exc).split())}") \
            from None
    return ray


@dataclass
class Placed:
    """One input and the Ray node id it is read on."""

    path: Path
    node: str


def split_input(text: str) -> tuple[str | None, str]:
    """``"NODE:PATH"`` → (NODE, PATH); a plain path → (None, path). A path that exists here is always plain."""
    m = _NODE_PATH.match(text)
    if m is None or Path(text).exists():
        return None, text
    return m.group("node"), m.group("path")


def node_ids(ray) -> dict[str, str]:
    """Every name an alive node answers to → its node id (resource name, hostname, IP, id)."""
    names: dict[str, str] = {}
    for n in ray.nodes():
        if not n.get("Alive"):
            continue
        nid = n["NodeID"]
        for r in n.get("Resources", {}):
            if r.startswith(HOST_RESOURCE):
                names[r[len(HOST_RESOURCE):]] = nid
        for k in ("NodeManagerHostname", "NodeManagerAddress"):
            if n.get(k):
                names.setdefault(n[k], nid)
        names[nid] = nid
    return names


def resolve_node(name: str, names: dict[str, str]) -> str | None:
    """The node id ``name`` stands for (a name of :func:`node_ids`, or an id prefix of 6+ characters)."""
    if name in names:
        return names[name]
    hits = {nid for nid in names.values() if nid.startswith(name)} if len(name) >= 6 else set()
    return hits.pop() if len(hits) == 1 else None


def _manifest_host(path: Path) -> str | None:
    from expo_prof.runs.manifest import is_run_dir, read_manifest

    try:
        if path.is_dir() and is_run_dir(path):
            host = read_manifest(path).raw.get("host") or {}
            name = host.get("hostname") if isinstance(host, dict) else None
            return name if isinstance(name, str) and name else None
    except Exception:  # noqa: BLE001 - a damaged manifest: read the run where the driver is
        return None
    return None


def place(inputs: Sequence[str | Path], ray) -> list[Placed]:
    """Each input with the node it is read on (BadInput naming the nodes when NODE is unknown)."""
    names = node_ids(ray)
    here = ray.get_runtime_context().get_node_id()
    out = []
    for raw in inputs:
        node, path = split_input(str(raw))
        if node is not None:
            nid = resolve_node(node, names)
            if nid is None:
                known = sorted(k for k, v in names.items() if k != v)
                raise BadInput(f"{raw}: no Ray node {node!r} (nodes: {', '.join(known) or 'none named'}; name one "
                               f"with ray start --resources '{{\"{HOST_RESOURCE}NAME\": 1}}')")
            out.append(Placed(Path(path), nid))
            continue
        host = _manifest_host(Path(path))
        nid = resolve_node(host, names) if host else None
        out.append(Placed(Path(path), nid or here))
    return out


def _plan_here(path: Path) -> detect.Plan:
    if not path.exists():
        raise BadInput(f"{path}: no such file or directory (on the node it was sent to)")
    from expo_prof.runs.manifest import is_session_dir, read_session

    paths = read_session(path).run_dirs() if is_session_dir(path) else [path]
    return detect.plan(paths)


def _remote_work(task, max_bytes, op, events) -> Unit:
    import ray

    return work(task, max_bytes, op, events, node=ray.get_runtime_context().get_node_id())


def read_on_ray(inputs: Sequence[str | Path], *, address: str = "", max_bytes: int = DEFAULT_MAX_DECOMPRESSED,
                op: str | None = None, events: bool = True) -> Parallel:
    """Read and analyse ``inputs`` as Ray tasks on the nodes that hold them (see the module docstring)."""
    ray = connect(address)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    def on(nid: str):
        return NodeAffinitySchedulingStrategy(node_id=nid, soft=False)

    placed = place(inputs, ray)
    plan_remote = ray.remote(num_cpus=0.1)(_plan_here)
    try:
        plans = ray.get([plan_remote.options(scheduling_strategy=on(p.node)).remote(p.path) for p in placed])
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, BadInput):
            raise BadInput(str(cause)) from None
        raise
    merged = detect.Plan()
    node_of_job: list[str] = []
    for pl, p in zip(plans, placed):
        merged.jobs += pl.jobs
        merged.skipped += pl.skipped
        merged.empty_dirs += pl.empty_dirs
        node_of_job += [p.node] * len(pl.jobs)
    ts = tasks(merged)
    remote = ray.remote(num_cpus=1)(_remote_work)
    refs = [remote.options(scheduling_strategy=on(node_of_job[t.jobs[0][0]])).remote(t, max_bytes, op, events)
            for t in ts]
    units = ray.get(refs)
    plist = [p.path for p in placed]
    return collect(plist, merged, units, len({u.node for u in units}), op)


def local_inputs(inputs: Sequence[str | Path]) -> list[str]:
    """The inputs with any ``NODE:`` prefix removed (the paths grouping and labels use)."""
    return [split_input(str(i))[1] for i in inputs]
