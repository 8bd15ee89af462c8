"""The user's own load command (``record --load-cmd '…'``), e.g. their ``vllm bench serve`` with their dataset.

The command runs once the server is ready, with the profiler window open
around it, in the run directory's ``load/`` folder (its output goes to
``load/load.log``). ``{base_url}``, ``{host}``, ``{port}`` and ``{model}`` in
its arguments are replaced by the served endpoint and model; the same values
are in its environment as ``EXPO_PROF_BASE_URL`` … ``EXPO_PROF_MODEL``. When it
leaves a ``vllm bench serve --save-result`` JSON in that folder (the newest
JSON holding ``output_throughput``), its metrics become the run's metrics —
``workload.json`` and the manifest, which ``compare`` reads — under the same
names vLLM uses, so teams keep their datasets and their metrics.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from expo_prof.errors import BadInput

LOAD_DIR = "load"
_PLACEHOLDER = re.compile(r"\{(base_url|host|port|model)\}")


def parse(text: str) -> list[str]:
    """``--load-cmd`` split like a shell would (no shell runs it); BadInput when empty or unbalanced."""
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise BadInput(f"--load-cmd {text!r}: {exc}") from None
    if not argv:
        raise BadInput("--load-cmd is empty: give the load command, e.g. 'vllm bench serve --model {model} …'")
    return argv


def expand(argv: list[str], values: dict[str, str]) -> list[str]:
    """The arguments with ``{base_url}``, ``{host}``, ``{port}``, ``{model}`` filled in (other braces kept)."""
    return [_PLACEHOLDER.sub(lambda m: values[m.group(1)], a) for a in argv]


async def run(argv: list[str], cwd: Path, values: dict[str, str], server_alive: Callable[[], bool],
              stop: asyncio.Event | None = None) -> int:
    """Run the load command to its end; returns its exit code. Stopped (terminate, then kill) when the
    server dies or the recording is interrupted; asked to end (SIGINT, the Ctrl-C a benchmark client already
    handles, then terminate) once ``stop`` is set: a sequential switchback that settled or spent its budget."""
    env = {**os.environ, **{f"EXPO_PROF_{k.upper()}": v for k, v in values.items()}}
    cwd.mkdir(parents=True, exist_ok=True)
    with open(cwd / "load.log", "ab") as log:
        try:
            proc = await asyncio.create_subprocess_exec(*argv, cwd=cwd, env=env, stdout=log, stderr=log,
                                                        stdin=asyncio.subprocess.DEVNULL)
        except OSError as exc:
            raise BadInput(f"--load-cmd: cannot run {argv[0]!r} ({exc.strerror or exc})") from None
        try:
            while True:
                try:
                    return await asyncio.wait_for(proc.wait(), timeout=0.5)
                except asyncio.TimeoutError:
                    if not server_alive():
                        return await _stop(proc)
                    if stop is not None and stop.is_set():
                        return await _interrupt(proc)
        finally:
            if proc.returncode is None:
                await _stop(proc)


async def _interrupt(proc: asyncio.subprocess.Process) -> int:
    """SIGINT first: a client like ``vllm bench serve`` ends as on Ctrl-C; terminate after STOP_GRACE_S."""
    proc.send_signal(signal.SIGINT)
    try:
        return await asyncio.wait_for(proc.wait(), timeout=STOP_GRACE_S)
    except asyncio.TimeoutError:
        return await _stop(proc)


#: Seconds a load command has to end after SIGINT before it is terminated.
STOP_GRACE_S = 10.0


async def _stop(proc: asyncio.subprocess.Process) -> int:
    proc.terminate()
    try:
        return await asyncio.wait_for(proc.wait(), timeout=10)
    except asyncio.TimeoutError:
        proc.kill()
        return await proc.wait()


def find_result(cwd: Path) -> tuple[Path, dict[str, Any]] | None:
    """The newest ``vllm bench serve --save-result`` JSON the load command left in ``cwd`` (None if none)."""
    found = []
    for p in cwd.glob("*.json"):
        try:
            data = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("output_throughput"), (int, float)):
            found.append((p.stat().st_mtime, p, data))
    if not found:
        return None
    _, path, data = max(found, key=lambda t: t[0])
    return path, data


def workload_json(argv: list[str], returncode: int | None, cwd: Path) -> dict[str, Any]:
    """``workload.json`` of a run driven by the user's command: the command, its exit, its saved metrics."""
    res = find_result(cwd)
    metrics = {} if res is None else {k: v for k, v in res[1].items()
                                      if isinstance(v, (int, float)) and not isinstance(v, bool)}
    notes = [] if res is not None else [
        f"the load command left no vllm bench serve result JSON in {cwd} (add --save-result): no workload metrics"]
    return {"source": "load-cmd", "command": argv, "exit_code": returncode,
            "result_file": str(res[0]) if res else None, "log": str(cwd / "load.log"),
            "spec": None, "metrics": metrics, "notes": notes}
