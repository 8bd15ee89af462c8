"""One overlay-off and one overlay-on real vLLM CPU server, shared by the server tests that ask the same pair.

``tests/e2e/test_server_overlay.py`` (what the overlay does inside a serving vLLM: answers, event log,
processes, lane placement) and ``tests/verify/test_verify_e2e.py``'s equivalence case (``expo-prof verify
--off-url --on-url`` on a correct overlay) each started an overlay-off and an overlay-on server of the same
tiny model: four launches for one pair of configurations. :func:`serve_off_on` (the session fixture
``off_on_session`` in tests/conftest.py) starts the pair once and at the same time (:func:`support.started.
started`), holding the server lock once, and does what both modules ask of it — the overlay's request
waves, then ``verify`` against both URLs — and stops both. The overlay-on server is a user's own: no
``--shutdown-timeout``, stopped with SIGTERM to its API server (issue 33 item 7: its event logs must still end
with their summary). Each test is then a THEN over what it recorded.

One configuration serves both: ``--logprobs-mode processed_logprobs`` (what ``verify``'s constraint check
reads; the overlay's requests ask no logprobs) and the overlay's own switch, log folder and no
instrumentation. The overlay's step accounting counts the steps of its waves only (their monotonic window,
:attr:`Run.window_ns`): ``verify``'s requests come after them on the same server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from overlay.contract import ENV_INSTRUMENT, ENV_OUT, ENV_SWITCH, ENV_SWITCH_ALIAS
from shared_paths import REPO
from support.started import started

#: Tokens per request. ``ignore_eos`` makes every request produce exactly this many (a random model emits
#: EOS at random), so token counts are known.
N = 12
PROMPTS = ["The quick brown fox", "Sampling picks a token", "Once upon a time", "The forward pass runs"]
GREEDY_PROMPTS = PROMPTS[:3]
SEED = 4321

EXPO_PROF = [str(Path(sys.executable).parent / "expo-prof")]
#: verify's budget in these tests (--samples 300): the breaks it must catch are large.
VERIFY_BUDGET = ["--samples", "300", "--per-request", "50", "--greedy-tokens", "8", "--positions", "2"]


def pythonpath(*extra: Path) -> str:
    """``extra`` + this repository + the caller's PYTHONPATH."""
    parts = [str(p) for p in extra] + [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join(parts)


def verify_cli(args: list[str], cwd: Path, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """``expo-prof verify ARGS`` as a user runs it (this repository's code)."""
    full = {**os.environ, "COLUMNS": "160", "PYTHONPATH": pythonpath(), **(env or {})}
    return subprocess.run([*EXPO_PROF, "verify", *args], cwd=cwd, env=full, capture_output=True, text=True,
                          timeout=timeout)


def accuracy_rows() -> list[dict]:
    """The small accuracy set verify's equivalence case scores on both sides."""
    return [{"prompt": f"Count: one two three {w}", "reference": w} for w in ("four", "five", "six", "seven")]


@dataclass
class Run:
    """What one server answered, and where its event logs are."""

    out_dir: Path
    model: Path = Path()
    answers: dict[str, list[int]] = field(default_factory=dict)
    completion_tokens: dict[str, int] = field(default_factory=dict)
    waves: int = 0  # request waves sent strictly one after another
    #: CLOCK_MONOTONIC (the event log's clock) before the first wave and after the last one.
    window_ns: tuple[int, int] = (0, 0)
    pids: set[int] = field(default_factory=set)
    pgid: int = 0
    #: Per vLLM worker process: {thread id: allowed CPUs}, read while it served.
    worker_threads: dict[int, dict[int, set[int]]] = field(default_factory=dict)
    #: The overlay-on server's command line, and its log once it was stopped with SIGTERM.
    argv: list[str] = field(default_factory=list)
    stop_log: str = ""


@dataclass
class OffOn:
    """The shared pair's record: the overlay's waves on each server, and verify's run against both."""

    on: Run
    off: Run
    verify: subprocess.CompletedProcess
    verify_dir: Path


def _params(**kw) -> dict:
    return {"max_tokens": N, "ignore_eos": True, "return_token_ids": True, **kw}


def _ask(srv, run: Run, name: str, prompt: str, **kw) -> None:
    ans = srv.completion(prompt, **_params(**kw))
    choice = ans["choices"][0]
    run.answers[name] = list(choice["token_ids"])
    run.completion_tokens[name] = ans["usage"]["completion_tokens"]


def _wave(srv, run: Run, reqs: dict[str, tuple[str, dict]]) -> None:
    """Send ``reqs`` at the same time (so vLLM batches them together) and wait for all."""
    errors: list[BaseException] = []

    def one(name: str, prompt: str, kw: dict) -> None:
        try:
            _ask(srv, run, name, prompt, **kw)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test thread
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(n, p, kw)) for n, (p, kw) in reqs.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    run.waves += 1


def _cpu_list(text: str) -> set[int]:
    cpus: set[int] = set()
    for part in text.strip().split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def _worker_threads(pids: set[int]) -> dict[int, dict[int, set[int]]]:
    """Allowed CPUs of every thread of the vLLM worker processes (from /proc)."""
    out: dict[int, dict[int, set[int]]] = {}
    for pid in pids:
        try:
            if not Path(f"/proc/{pid}/comm").read_text().startswith("VLLM::Worker"):
                continue
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except FileNotFoundError:
            continue
        threads = {}
        for task in tasks:
            try:
                status = (task / "status").read_text()
            except FileNotFoundError:  # the thread ended meanwhile
                continue
            for line in status.splitlines():
                if line.startswith("Cpus_allowed_list:"):
                    threads[int(task.name)] = _cpu_list(line.split(":", 1)[1])
        out[pid] = threads
    return out


def _on_waves(srv, run: Run) -> None:
    """WHEN the overlay-on server serves: a mixed batch (sampled, top-k/top-p, top-k=1, seeded, greedy), the
    seeded request again alone, a greedy-only batch."""
    t0 = time.monotonic_ns()
    _wave(srv, run, {
        "sampled0": (PROMPTS[0], {"temperature": 1.0}),
        "sampled1": (PROMPTS[1], {"temperature": 1.0}),
        "topkp": (PROMPTS[2], {"temperature": 1.0, "top_k": 20, "top_p": 0.8}),
        "topk1": (PROMPTS[3], {"temperature": 1.0, "top_k": 1}),
        "seeded_a": (PROMPTS[3], {"temperature": 1.0, "seed": SEED}),
        "mixed_greedy": (PROMPTS[3], {"temperature": 0.0}),
    })
    _wave(srv, run, {"seeded_b": (PROMPTS[3], {"temperature": 1.0, "seed": SEED})})
    _wave(srv, run, {f"greedy{i}": (p, {"temperature": 0.0}) for i, p in enumerate(GREEDY_PROMPTS)})
    run.window_ns = (t0, time.monotonic_ns())
    run.model = Path(srv.model)
    run.pgid = srv.pid
    srv._remember_children()
    run.pids = set(srv._seen)
    run.worker_threads = _worker_threads(run.pids)


def _off_waves(srv, run: Run) -> None:
    """WHEN the overlay-off server serves the same greedy-only batch, plus greedy for the prompt that ran greedy
    inside the overlay-on server's mixed batch."""
    t0 = time.monotonic_ns()
    _wave(srv, run, {f"greedy{i}": (p, {"temperature": 0.0}) for i, p in enumerate(GREEDY_PROMPTS)})
    _wave(srv, run, {"mixed_greedy": (PROMPTS[3], {"temperature": 0.0})})
    run.window_ns = (t0, time.monotonic_ns())


def _env(on: bool, out: Path) -> dict[str, str | None]:
    return {ENV_SWITCH: "1" if on else "0", ENV_SWITCH_ALIAS: None, ENV_OUT: str(out), ENV_INSTRUMENT: None}


def serve_off_on(tiny_model: Path, work: Path, lock) -> OffOn:
    """GIVEN an overlay-off and an overlay-on real vLLM CPU server of the tiny model, both up at once (the
    server lock held once, ``lock`` is tests/conftest.py's ``server_lock``), WHEN the overlay's waves run on
    each and ``expo-prof verify`` runs against both, THEN what they answered (both servers stopped)."""
    from expo_prof.serving.launch import VllmServer

    on, off = Run(work / "events-on"), Run(work / "events-off")
    on.out_dir.mkdir(parents=True)
    off.out_dir.mkdir(parents=True)
    acc = work / "accuracy.jsonl"
    acc.write_text("".join(json.dumps(r) + "\n" for r in accuracy_rows()))
    verify_dir = work / "verify"
    verify_dir.mkdir()
    # A long startup limit: on a loaded 2-core CI machine a start has taken over 5 minutes. The overlay-on
    # server is started as a user starts their own (no --shutdown-timeout: vLLM's default 0), so that its stop
    # below is the one a user's `kill PID` gives.
    servers = {name: VllmServer(tiny_model, env=_env(name == "on", run.out_dir), log_path=work / f"server-{name}.log",
                                startup_timeout=900, extra_args=["--logprobs-mode", "processed_logprobs"],
                                shutdown_timeout=None if name == "on" else 10)
               for name, run in (("off", off), ("on", on))}
    with lock(timeout_s=1800), started(*servers.values()):
        _on_waves(servers["on"], on)
        _off_waves(servers["off"], off)
        # verify's equivalence case (--alpha 0.001: a correct overlay fails it by chance once in a thousand runs)
        res = verify_cli(["--off-url", servers["off"].base_url, "--on-url", servers["on"].base_url,
                          *VERIFY_BUDGET, "--alpha", "0.001", "--accuracy", str(acc), "--json",
                          "--out", str(verify_dir / "s")], verify_dir)
        _stop_as_a_user_does(servers["on"], on)
    return OffOn(on=on, off=off, verify=res, verify_dir=verify_dir)


def _stop_as_a_user_does(srv, run: Run) -> None:
    """SIGTERM to the API server only (``kill PID``, systemd, ``docker stop``), with vLLM's default
    ``--shutdown-timeout 0``: the API server SIGTERMs the engine and SIGKILLs it at once (issue 33, item 7).
    The server's own exit is awaited; ``started``'s stop then reaps whatever is left."""
    run.argv = list(srv.argv)
    srv.proc.send_signal(signal.SIGTERM)
    srv.proc.wait(timeout=120)
    run.stop_log = srv.log_path.read_text(errors="replace")
