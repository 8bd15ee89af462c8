"""``expo-prof collect``: every node's overlay logs and traces of a multi-node run, into one run directory.

With vLLM's Ray executor (``--distributed-executor-backend ray``) each
worker process writes on its own node: the profiler's traces under
``VLLM_TORCH_PROFILER_DIR`` and the overlay's event logs under
``EXPO_PROF_OUT`` — the same paths, which ``record`` sets inside the run
directory (``profiler/``, ``overlay/``), but on each node's local disk. After
the run only the head's files are in the run directory.

:func:`collect` runs, on every alive node of the Ray cluster, one task that
lists the files under that node's copy of the directory (or ``--from
NODE:DIR``), then fetches each file in chunks (one task per chunk on that
node, :data:`CHUNK` bytes: a worker never holds a whole multi-GB trace) and
writes it into the run directory at the same relative path. A file already
there with the same content (the head's own files, a shared filesystem) is
left alone; one with other content under the same name is written to
``nodes/<NODE>/<path>`` instead, never over it. ``collected.json`` records
which node each file came from.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from expo_prof.errors import BadInput
from expo_prof.serving.launch import answers

#: Bytes fetched per task.
CHUNK = 64 << 20
#: The subfolders of a run directory that nodes write into (record's layout).
SUBDIRS = ("profiler", "overlay", "msprof")


def list_files(root: str, subdirs: Sequence[str] = SUBDIRS) -> list[tuple[str, int, str]]:
    """Files under ``root``'s ``subdirs`` (all of ``root`` when none of them exists) on this node:
    (relative path, size, sha256)."""
    base = Path(root)
    if not base.is_dir():
        return []
    tops = [base / s for s in subdirs if (base / s).is_dir()] or [base]
    out = []
    for top in tops:
        for dirpath, _dirs, files in os.walk(top):
            for f in sorted(files):
                p = Path(dirpath) / f
                if p.is_file() and not p.is_symlink():
                    out.append((str(p.relative_to(base)), p.stat().st_size, _sha256(p)))
    return sorted(out)


def _sha256(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_chunk(root: str, rel: str, offset: int, size: int) -> bytes:
    """``size`` bytes of ``root/rel`` from ``offset`` (runs on the node holding the file)."""
    with open(Path(root) / rel, "rb") as f:
        f.seek(offset)
        return f.read(size)


@dataclass
class Collected:
    """What :func:`collect` did: per node, the files copied, already present, or put aside."""

    copied: list[dict] = field(default_factory=list)
    same: int = 0
    aside: list[str] = field(default_factory=list)


def collect(run_dir: Path, *, address: str = "", sources: Sequence[str] = (), chunk: int = CHUNK,
            say: Callable[[str], None] | None = None) -> Collected:
    """Copy every node's files of ``run_dir`` into it (see the module docstring).

    ``sources``: ``NODE:DIR`` pairs to take instead of every node's copy of ``run_dir``.
    """
    from expo_prof.pipeline.ray_exec import HOST_RESOURCE, connect, node_ids, resolve_node, split_input

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    ray = connect(address)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    names = node_ids(ray)
    label = _labels(ray, HOST_RESOURCE)
    pairs: list[tuple[str, str]] = []
    if sources:
        for s in sources:
            node, d = split_input(s)
            nid = resolve_node(node, names) if node else None
            if nid is None:
                raise BadInput(f"--from {s}: expected NODE:DIR with NODE one of {', '.join(sorted(label.values()))}")
            pairs.append((nid, d))
    else:
        pairs = [(nid, str(run_dir.resolve())) for nid in sorted(label)]

    def on(nid: str):
        return NodeAffinitySchedulingStrategy(node_id=nid, soft=False)

    lister = ray.remote(num_cpus=0.1)(list_files)
    reader = ray.remote(num_cpus=0.1)(read_chunk)
    listings = ray.get([lister.options(scheduling_strategy=on(nid)).remote(d) for nid, d in pairs])
    out = Collected()
    for (nid, d), files in zip(pairs, listings):
        node = label.get(nid, nid[:12])
        for rel, size, digest in files:
            dst, aside = run_dir / rel, run_dir / "nodes" / node / rel
            if any(p.is_file() and p.stat().st_size == size and _sha256(p) == digest for p in (dst, aside)):
                out.same += 1  # already here (the head's own file, a shared filesystem, an earlier collect)
                continue
            if dst.exists():
                dst = aside
                out.aside.append(str(dst.relative_to(run_dir)))
            dst.parent.mkdir(parents=True, exist_ok=True)
            tmp = dst.with_name(dst.name + ".part")
            h = hashlib.sha256()
            with open(tmp, "wb") as f:
                for off in range(0, max(size, 1), chunk):
                    data = ray.get(reader.options(scheduling_strategy=on(nid)).remote(d, rel, off, chunk))
                    f.write(data)
                    h.update(data)
            if h.hexdigest() != digest:
                tmp.unlink()
                raise BadInput(f"{node}:{d}/{rel} changed while it was copied; run collect again when the run is over")
            os.replace(tmp, dst)
            out.copied.append({"node": node, "node_id": nid, "from": f"{d}/{rel}",
                               "to": str(dst.relative_to(run_dir)), "bytes": size})
            if say is not None:
                say(f"{node}: {rel} ({size / 1e6:.1f} MB)")
    _record(run_dir, out)
    return out


def _labels(ray, resource_prefix: str) -> dict[str, str]:
    """Alive node id → a name for people: its expo-prof-host resource name, else hostname/IP + short id."""
    out: dict[str, str] = {}
    for n in ray.nodes():
        if not n.get("Alive"):
            continue
        nid = n["NodeID"]
        named = [r[len(resource_prefix):] for r in n.get("Resources", {}) if r.startswith(resource_prefix)]
        out[nid] = named[0] if named else f"{n.get('NodeManagerHostname') or n.get('NodeManagerAddress')}-{nid[:8]}"
    return out


def _record(run_dir: Path, c: Collected) -> None:
    path = run_dir / "collected.json"
    old = json.loads(path.read_text()) if path.is_file() else {"files": []}
    old["files"] = list(old.get("files", [])) + c.copied
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(old, indent=2) + "\n")
    os.replace(tmp, path)


def cluster_address(env: Mapping[str, str]) -> str | None:
    """The Ray cluster a recorded command ran on, when it outlives the command, else None.

    ``RAY_ADDRESS`` when set (how vLLM is pointed at a multi-node cluster), else the address a ``ray start``
    on this machine left in ``<RAY_TMPDIR or /tmp>/ray/ray_current_cluster``, when something still
    answers there: a Ray that vLLM started itself (one node) ends with vLLM, and its files are all here.
    """
    addr = (env.get("RAY_ADDRESS") or "").strip()
    if addr == "local":  # Ray's word for "start a new one here": it ended with the command
        return None
    if not addr:
        f = Path(env.get("RAY_TMPDIR") or "/tmp") / "ray" / "ray_current_cluster"
        addr = f.read_text().strip() if f.is_file() else ""
        host, _, port = addr.rpartition(":")
        if not port.isdigit() or not answers(host.strip("[]"), int(port), timeout=1.0):
            return None
    return addr


def after_run(run_dir: Path, env: Mapping[str, str], say: Callable[[str], None] | None = None) -> dict:
    """``record``'s last step for a command on Ray: :func:`collect` every node's files of ``run_dir``.

    Returns what goes into the manifest's ``collected``; never raises (the run is kept whatever happens):
    ``status`` is ``ok`` (with ``copied``, ``same``, ``aside``), ``skipped`` (no cluster outlived the run) or
    ``failed`` (with ``error`` and the command that collects by hand).
    """
    import sys

    addr = cluster_address(env)
    if addr is None:
        return {"status": "skipped", "why": "no Ray cluster outlived the run (vLLM's own Ray was on this node: "
                                            "its files are already here)"}
    by_hand = f"expo-prof collect {run_dir} --ray {addr}"
    mod = sys.modules.get("ray")
    ours = mod is None or not mod.is_initialized()  # a Ray session this call starts, it also ends
    try:
        c = collect(run_dir, address=addr, say=say)
    except Exception as exc:  # noqa: BLE001 - a failed collection never loses the run
        return {"status": "failed", "address": addr, "error": " ".join(str(exc).split())[:500], "by_hand": by_hand}
    finally:
        if ours and "ray" in sys.modules and sys.modules["ray"].is_initialized():
            sys.modules["ray"].shutdown()
    return {"status": "ok", "address": addr, "copied": len(c.copied), "same": c.same, "aside": c.aside,
            "by_hand": by_hand}
