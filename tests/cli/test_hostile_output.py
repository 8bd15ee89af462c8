"""Hostile places to write to (issue 27): ``-o`` onto ``/dev/full`` and stdout, a full disk, Ctrl-C while
writing or reading, two processes writing the same ``-o`` at once; ``record``'s run directory on a read-only
file system and on a full disk (issue 42).

Every case runs the real CLI in a subprocess (``python -m expo_prof``) on the committed sample runs
(traces/samples/) or the real traces (``realtraces``), and checks the rules of expo_prof/output.py: a failure
is one line and a non-zero exit, Ctrl-C is exit 130, and the output's name never holds a partial or mixed file,
nor is a temporary file left beside it.

What it takes from the machine, each through ``require()`` (the ``need`` fixture: a failure under CI=true, a skip elsewhere):
``/dev/full``; ``unshare``/``nsenter`` and the right to make mount and pid namespaces (root, or user
namespaces) for the full tmpfs and for two writers with the same pid; ``strace``, which delivers a real
SIGINT / SIGSTOP to the process at one exact system call (``-e inject``), so that "interrupted between the
last byte and the rename" and "stopped in the middle of writing" happen every time, not by luck.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shared_paths import REPO

SAMPLE = REPO / "traces" / "samples" / "tiny-cpu-off-on"
OFF, ON = SAMPLE / "01-off", SAMPLE / "02-on"
# No .pyc written: strace counts and injects at system calls, and a bytecode cache being written is some.
ENV = {"COLUMNS": "200", "PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}
CLI = [sys.executable, "-m", "expo_prof"]
NOSPACE = "cannot write (No space left on device)"


def cli(*args: str, prefix: list[str] | None = None, cwd: Path = REPO, env: dict | None = None,
        stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run([*(prefix or []), *CLI, *args], stdout=stdout, stderr=subprocess.PIPE, text=True,
                          timeout=120, cwd=cwd, env={**ENV, **(env or {})})


def lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


def leftovers(folder: Path, name: str) -> list[str]:
    """Temporary files of output ``name`` left in ``folder`` (``.NAME.*``)."""
    return sorted(p for p in os.listdir(folder) if p.startswith(f".{name}."))


def tool(need, name: str) -> str:
    path = shutil.which(name, path=ENV["PATH"])
    need(path is not None, f"the `{name}` command")
    assert path is not None
    return path


# ------------------------------------------------------------------------------------ /dev/full and stdout


@pytest.mark.parametrize("args", [["analyze", "--json"], ["export"], ["timeline"]], ids=lambda a: a[0])
def test_dev_full_is_written_into_and_its_enospc_is_one_line(need, args):
    """GIVEN a sample run and ``-o /dev/full`` (a character device: every write fails with ENOSPC)
    WHEN analyze --json, export and timeline write to it
    THEN each exits 2 with the one line "error: -o /dev/full: cannot write (No space left on device)", no
    traceback, and no temporary file is made in /dev (a device is written into, never replaced).
    Before the fix: analyze refused /dev/full as "exists and is not an earlier analyze output", export and
    timeline as lacking a .json / .html suffix; a write error on a device was never reached."""
    need(Path("/dev/full").exists() and stat.S_ISCHR(os.stat("/dev/full").st_mode), "/dev/full")
    before = leftovers(Path("/dev"), "full")
    proc = cli("-q", *args, str(ON), "-o", "/dev/full")
    assert proc.returncode == 2, proc.stderr
    assert lines(proc.stderr) == [f"error: -o /dev/full: {NOSPACE}"]
    assert leftovers(Path("/dev"), "full") == before


@pytest.mark.parametrize("target", ["-", "/dev/stdout"])
def test_stdout_as_the_output_gets_the_whole_page_and_the_summary_goes_to_stderr(tmp_path, target):
    """GIVEN ``timeline -o -`` and ``-o /dev/stdout`` with stdout a pipe
    WHEN the page is written
    THEN stdout holds exactly the page (from <!DOCTYPE html> to </html>), the summary line "timeline: …" is on
    stderr, and no file is made in the working folder.
    Before the fix: ``-o -`` wrote a file named "-" (and the summary went to stdout); ``-o /dev/stdout`` was
    refused for lacking the .html suffix."""
    proc = cli("timeline", str(ON), "-o", target, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("<!DOCTYPE html>") and proc.stdout.rstrip().endswith("</html>")
    assert f"timeline: {target} (" in proc.stderr
    assert os.listdir(tmp_path) == []


def test_dev_fd_1_redirected_to_a_file_fills_that_file(tmp_path):
    """GIVEN ``analyze --json -o /dev/fd/1`` with stdout redirected to a regular file (as ``> result.json``)
    WHEN the result is written
    THEN that file holds the complete analyze JSON (written through the open descriptor, not renamed over
    the link), and the summary line is on stderr.
    Before the fix: the temporary file was made in /dev/fd/ and the write failed ("cannot write")."""
    dest = tmp_path / "result.json"
    with open(dest, "w") as f:
        proc = cli("analyze", "--json", str(ON), "-o", "/dev/fd/1", stdout=f)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(dest.read_text())
    assert doc["schema_name"] == "expo-prof.analyze"
    assert "json: /dev/fd/1" in proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["result.json"]


def test_a_socket_is_refused_as_a_socket(tmp_path):
    """GIVEN a Unix socket at the output's path
    WHEN analyze --json -o names it
    THEN exit 2 and one line saying it is a socket, not a file."""
    path = tmp_path / "out.json"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        proc = cli("-q", "analyze", "--json", str(ON), "-o", str(path))
    assert proc.returncode == 2
    assert lines(proc.stderr) == [f"error: -o {path} is a socket, not a file; refusing to write to it"]


# ----------------------------------------------------------------------------------------- a full disk


class FullTmpfs:
    """A small tmpfs mounted in a private mount namespace, held by a sleeping process: commands run inside
    it through ``nsenter`` (:attr:`enter`), the test reads and writes it through ``/proc/PID/root`` (:attr:`view`).
    Nothing is mounted in the test's own namespace; the mount goes away with the holder. ``readonly``: mounted
    read-only (``-o ro``: not even root writes there, unlike a folder of mode 555)."""

    def __init__(self, where: Path, size: str, need, readonly: bool = False) -> None:
        for name in ("unshare", "nsenter"):
            tool(need, name)
        user = [] if os.geteuid() == 0 else ["--map-root-user"]
        opts = f"size={size}" + (",ro" if readonly else "")
        self.holder = subprocess.Popen(
            ["unshare", *user, "--mount", "--propagation", "private", "sh", "-c",
             'mount -t tmpfs -o "$1" tmpfs "$0" && echo mounted && exec sleep 600', str(where), opts],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
        assert self.holder.stdout is not None
        ok = self.holder.stdout.readline().strip() == "mounted"
        if not ok:
            err = self.holder.communicate(timeout=10)[1]
            need(False, f"a mount namespace with a {size} tmpfs (root or user namespaces): {err.strip()}")
        self.where = where
        inside = ["--user", "--preserve-credentials"] if user else []  # a user namespace: enter it too
        self.enter = ["nsenter", "--target", str(self.holder.pid), *inside, "--mount", "--"]
        self.view = Path(f"/proc/{self.holder.pid}/root") / where.relative_to("/")

    def fill(self, leave: int = 0) -> None:
        """Write a filler file until the file system has no byte left, then give ``leave`` bytes of it back."""
        fd = os.open(self.view / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            for block in (1 << 16, 1 << 12, 1):
                try:
                    while os.write(fd, b"\0" * block):
                        pass
                except OSError:
                    continue
            if leave:
                os.ftruncate(fd, os.fstat(fd).st_size - leave)
        finally:
            os.close(fd)

    def close(self) -> None:
        subprocess.run([*self.enter, "umount", str(self.where)], capture_output=True, timeout=30)
        self.holder.kill()
        self.holder.wait(timeout=30)


@pytest.fixture
def full_tmpfs(tmp_path, need):
    (tmp_path / "full").mkdir()
    fs = FullTmpfs(tmp_path / "full", "16m", need)  # room for an earlier page (plotly inline: a few MB), then filled
    try:
        yield fs
    finally:
        fs.close()


FULL_CASES = {
    "analyze-json": (["analyze", "--json", str(ON)], "a.json"),
    "export-gz": (["export", str(ON)], "e.json.gz"),
    "timeline": (["timeline", str(ON)], "t.html"),
    "compare-html": (["compare", str(SAMPLE), "--format", "html"], "c.html"),
}


@pytest.mark.parametrize("case", list(FULL_CASES))
def test_a_full_disk_is_one_line_and_leaves_the_earlier_output_whole(full_tmpfs, case):
    """GIVEN a tmpfs holding an earlier output of the command (written by it) and then filled to the last byte
    WHEN analyze --json, export (.json.gz), timeline and compare --format html write that output again
    THEN each exits 2 with one line "error: -o PATH: cannot write (No space left on device)", the earlier
    output is byte for byte what it was, and no temporary file is left (only the output and the filler).
    Before the fix: compare's page was written straight under its name, so a full disk left a truncated page
    in place of the earlier one (the other commands already went through a temporary file)."""
    args, name = FULL_CASES[case]
    target = full_tmpfs.where / name
    first = cli("-q", *args, "-o", str(target), prefix=full_tmpfs.enter)
    assert first.returncode == 0, first.stderr
    earlier = (full_tmpfs.view / name).read_bytes()
    full_tmpfs.fill()

    proc = cli("-q", *args, "-o", str(target), prefix=full_tmpfs.enter)
    assert proc.returncode == 2, proc.stderr
    assert lines(proc.stderr) == [f"error: -o {target}: {NOSPACE}"]
    assert (full_tmpfs.view / name).read_bytes() == earlier
    assert sorted(os.listdir(full_tmpfs.view)) == sorted([name, "filler"])


# ------------------------------------------------------------------------------------------------ Ctrl-C


def strace_prefix(need, log: Path, inject: str, *, follow: bool = False) -> list[str]:
    """strace that only logs the calls of ``inject`` (``SYSCALLS:...``) and injects there."""
    calls = inject.split(":", 1)[0]
    return [tool(need, "strace"), *(["-f"] if follow else []), "-qq", "-o", str(log), "-e", f"trace={calls}",
            "-e", f"inject={inject}"]


RENAME = "rename,renameat,renameat2"
INTERRUPT_CASES = {
    "analyze-json": (["analyze", "--json", str(ON)], "a.json"),
    "timeline": (["timeline", str(ON)], "t.html"),
    "export": (["export", str(ON)], "e.json"),
}


@pytest.mark.parametrize("case", list(INTERRUPT_CASES))
def test_ctrl_c_between_the_last_byte_and_the_rename_leaves_nothing(tmp_path, need, case):
    """GIVEN analyze --json (with an earlier analyze output under the name: the sample's analysis.json),
    timeline and export writing ``-o``
    WHEN a real SIGINT arrives just as the complete temporary file is to be renamed over the name (strace makes
    that rename fail with EINTR and delivers SIGINT there)
    THEN exit 130 with the one line "error: interrupted", the name holds what it held before (the earlier
    output, or nothing), and no temporary file is left.
    Before the fix: analyze and timeline (output.write) removed the temporary file only on an OSError, so the
    interrupt left ``.NAME.PID.tmp`` beside the output."""
    args, name = INTERRUPT_CASES[case]
    target = tmp_path / name
    earlier = None
    if case == "analyze-json":
        earlier = (ON / "analysis.json").read_bytes()
        target.write_bytes(earlier)
    log = tmp_path.parent / f"{tmp_path.name}.strace"
    proc = cli("-q", *args, "-o", str(target),
               prefix=strace_prefix(need, log, f"{RENAME}:error=EINTR:signal=SIGINT:when=1"))
    injected = [ln for ln in log.read_text().splitlines() if "INJECTED" in ln]
    assert len(injected) == 1 and f"/.{name}." in injected[0], log.read_text()  # the output's own rename
    assert proc.returncode == 130, proc.stderr
    assert lines(proc.stderr) == ["error: interrupted"]
    assert (target.read_bytes() if target.exists() else None) == earlier
    assert leftovers(tmp_path, name) == []


def start(args: list[str], cwd: Path, env: dict | None = None) -> subprocess.Popen:
    """The CLI in its own process group, as a terminal's foreground job (Ctrl-C reaches every process of it)."""
    return subprocess.Popen([*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                            env={**ENV, **(env or {})}, start_new_session=True)


def test_ctrl_c_while_an_export_streams_its_chunks(tmp_path, realtraces):
    """GIVEN export of the largest real vLLM CPU trace (72 MB of JSON written in chunks)
    WHEN Ctrl-C reaches its process group while the temporary file is being written (seen growing)
    THEN exit 130, the one line "error: interrupted", no output and no temporary file."""
    trace = realtraces / "vllm-cpu" / "rank0-default-with-stack.pt.trace.json.gz"
    proc = start(["-q", "export", str(trace), "-o", "e.json"], tmp_path)
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        tmp = leftovers(tmp_path, "e.json")
        if tmp and os.path.getsize(tmp_path / tmp[0]) > 0:
            os.killpg(proc.pid, signal.SIGINT)
            break
        time.sleep(0.001)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, f"the export ended before it could be interrupted: {err}"
    assert lines(err) == ["error: interrupted"]
    assert os.listdir(tmp_path) == []


def test_ctrl_c_while_workers_read_is_one_line(tmp_path, realtraces, need):
    """GIVEN analyze --json of two real traces read by two worker processes (-j 2; the pool is forced on with
    EXPO_PROF_PARALLEL_MIN_BYTES=0), each read() of the large one held back 0.1 s by strace so that it reads for
    seconds: the small one's worker is done and idle while the large one's still reads
    WHEN Ctrl-C reaches the whole process group (strace itself ignores it: ``-I never``) after the large file's
    8th read, a good second after the small one was read
    THEN exit 130 with the one line "error: interrupted": no worker prints a traceback; no output is made.
    Before the fix: the idle worker died with a KeyboardInterrupt traceback on stderr (concurrent.futures'
    call_queue.get)."""
    big = realtraces / "vllm-cpu" / "rank0-default-with-stack.pt.trace.json.gz"
    small = realtraces / "vllm-cpu" / "rank0-fp64-gumbel.pt.trace.json.gz"
    log = tmp_path.parent / f"{tmp_path.name}.strace"
    slow = [tool(need, "strace"), "-f", "-I", "never", "-qq", "-o", str(log), "-P", str(big), "-e", "trace=read",
            "-e", "inject=read:delay_enter=100000"]
    proc = subprocess.Popen([*slow, *CLI, "analyze", "--json", str(big), str(small), "-j", "2", "-o", "a.json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            env={**ENV, "EXPO_PROF_PARALLEL_MIN_BYTES": "0"}, start_new_session=True)
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        if log.exists() and log.read_text().count(" read(") >= 8:
            os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: every process of the job
            break
        time.sleep(0.01)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, f"the analysis ended before it could be interrupted: {err}"
    assert "Traceback" not in err
    assert lines(err) == ["error: interrupted"]
    assert leftovers(tmp_path, "a.json") == [] and not (tmp_path / "a.json").exists()


# ------------------------------------------------------------------------------- two writers, one output


def test_two_writers_with_the_same_pid_never_mix_their_outputs(tmp_path, need):
    """GIVEN two exports to the same ``-o`` from two pid namespaces, where both processes are pid 1 (as two
    containers writing into one shared folder): A exports the overlay-on run, B the overlay-off run
    WHEN A is stopped in the middle of writing its temporary file (strace stops it at its 2nd write), B runs
    from start to end, then A goes on
    THEN both exit 0, no temporary file is left, and the output is exactly A's complete export (the last
    rename wins), byte for byte the same as A's export written alone — never a mix of the two.
    Before the fix: both used ``.out.json.1.tmp``; B truncated and rewrote A's half-written file and renamed it,
    A went on writing into what was now the output (B's first bytes, A's rest, B's tail: not JSON), then failed
    to rename ("No such file or directory", exit 2)."""
    user = [] if os.geteuid() == 0 else ["--map-root-user"]
    pidns = [tool(need, "unshare"), *user, "--pid", "--fork"]
    probe = subprocess.run([*pidns, "true"], capture_output=True, text=True, timeout=30)
    need(probe.returncode == 0, f"a pid namespace (root or user namespaces): {probe.stderr.strip()}")
    alone = cli("-q", "export", str(ON), "-o", str(tmp_path / "alone.json"))
    assert alone.returncode == 0, alone.stderr
    out = tmp_path / "out.json"
    log = tmp_path.parent / f"{tmp_path.name}.strace"
    stop = strace_prefix(need, log, "write:error=EINTR:signal=SIGSTOP:when=2", follow=True)
    a = subprocess.Popen([*stop, *pidns, *CLI, "-q", "export", str(ON), "-o", str(out)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=ENV, start_new_session=True)
    a_pid = None
    try:
        deadline = time.monotonic() + 60
        while a_pid is None and a.poll() is None and time.monotonic() < deadline:
            a_pid = stopped_at_injection(log)
            time.sleep(0.005)
        assert a_pid is not None, f"A never stopped in its write: {log.read_text() if log.exists() else ''}"
        assert len(leftovers(tmp_path, "out.json")) == 1  # A's temporary file, half written

        b = cli("-q", "export", str(OFF), "-o", str(out), prefix=pidns, cwd=tmp_path)
        assert b.returncode == 0, b.stderr
        assert json.loads(out.read_bytes())["expoProf"]["sources"][0]["path"].startswith(str(OFF))
    finally:
        if a_pid is not None:
            os.kill(a_pid, signal.SIGCONT)
        else:  # a failed check above: A may sit stopped; end strace, unshare and A (one process group)
            os.killpg(a.pid, signal.SIGKILL)
        _, a_err = a.communicate(timeout=60)
    assert a.returncode == 0, a_err
    assert out.read_bytes() == (tmp_path / "alone.json").read_bytes()
    assert leftovers(tmp_path, "out.json") == []


def stopped_at_injection(log: Path) -> int | None:
    """The pid (as this test sees it) of the process strace stopped at its injected call, once it is stopped:
    the strace log holds "PID write(3, …) = -1 EINTR … (INJECTED)", then "PID --- stopped by SIGSTOP ---"."""
    try:
        # "PID  call…" (strace pads the pid to a column): (pid, the rest)
        calls = [tuple(ln.split(None, 1)) for ln in log.read_text().splitlines() if " " in ln.strip()]
    except OSError:
        return None
    hit = [(pid, rest) for pid, rest in calls if "(INJECTED)" in rest]
    if not hit:
        return None
    # The one injected call is the output's write: fd 3, the temporary file (its header already written).
    assert len(hit) == 1 and hit[0][1].startswith("write(3, "), calls
    pid = hit[0][0]
    return int(pid) if (pid, "--- stopped by SIGSTOP ---") in calls else None


# ------------------------------------------------------------------------------ record's run directory


STANDIN = REPO / "tests" / "support" / "openai_standin.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def readonly_tmpfs(tmp_path, need):
    (tmp_path / "ro").mkdir()
    fs = FullTmpfs(tmp_path / "ro", "1m", need, readonly=True)
    try:
        yield fs
    finally:
        fs.close()


@pytest.mark.parametrize("where", ["-o", "--traces-dir", "cwd"])
def test_record_into_a_read_only_file_system_is_one_line(readonly_tmpfs, where):
    """GIVEN a read-only file system (a tmpfs mounted ``ro``: root cannot write there either)
    WHEN record is asked to put its run there: ``-o RO/run``, ``--traces-dir RO/t/u``, or run from inside it
    with the default ``--traces-dir traces``
    THEN exit 2 with the one line "error: OPTION PATH: cannot write (Read-only file system)", before anything is
    launched (the server's port never listens).
    Before: an OSError traceback from mkdir, exit 1."""
    ro = readonly_tmpfs.where
    port = _free_port()
    server = ["--", sys.executable, str(STANDIN), "--port", str(port)]
    prefix = readonly_tmpfs.enter
    if where == "-o":
        args, said = ["-o", str(ro / "run")], f"-o {ro / 'run'}"
    elif where == "--traces-dir":
        args, said = ["--traces-dir", str(ro / "t" / "u")], f"--traces-dir {ro / 't' / 'u'}"
    else:
        args, said = [], "--traces-dir traces"
        prefix = [*prefix, "sh", "-c", 'cd "$0" && exec "$@"', str(ro)]
    proc = cli("record", *args, "--profiler", "none", *server, prefix=prefix)
    assert proc.returncode == 2, proc.stderr
    assert lines(proc.stderr) == [f"error: {said}: cannot write (Read-only file system)"]
    assert not _listening(port) and os.listdir(readonly_tmpfs.view) == []


def test_record_on_a_full_disk_says_what_is_missing_and_the_run_is_not_ok(full_tmpfs, tmp_path):
    """GIVEN a disk with about 1 MB left: room for the run's manifest, log, event log (the committed switchback
    sample's, copied by the launch script), workload.json and analysis.json, not for its timeline page (plotly
    inlined: a few MB)
    WHEN record runs there (-q) and its summary writes the page
    THEN exit 2 with the one line "error: -o RUN: cannot write timeline.html (No space left on device); the run is
    kept, its manifest says 'incomplete'; once there is room: expo-prof timeline RUN -o RUN/timeline.html"; the
    manifest says "incomplete", names the page in `unwritten` with why, and notes it; no temporary file is left.
    Before: the page's error line, then exit 0 with status ok and no note."""
    (sample,) = (REPO / "traces/samples/tiny-cpu-switchback/overlay").glob("expo-prof-events-*.jsonl")
    script = tmp_path / "serve.sh"
    script.write_text(f'#!/bin/sh\ncp {sample} "$EXPO_PROF_OUT/"\nexec {sys.executable} {STANDIN} "$@"\n')
    script.chmod(0o755)
    full_tmpfs.fill(leave=1 << 20)
    run = full_tmpfs.where / "run"
    proc = cli("-q", "record", "-o", str(run), "--profiler", "none", "--num-prompts", "2", "--input-len", "8",
               "--output-len", "4", "--", str(script), "--port", str(_free_port()), prefix=full_tmpfs.enter)
    assert proc.returncode == 2, proc.stderr
    assert lines(proc.stderr) == [
        f"error: -o {run}: cannot write timeline.html (No space left on device); the run is kept, its manifest says "
        f"'incomplete'; once there is room: expo-prof timeline {run} -o {run / 'timeline.html'}"]
    view = full_tmpfs.view / "run"
    m = json.loads((view / "manifest.json").read_text())
    assert m["status"] == "incomplete" and m["unwritten"] == {"timeline.html": "No space left on device"}
    assert any(n.startswith("not written: timeline.html (No space left on device)") for n in m["notes"])
    assert (view / "analysis.json").is_file() and not (view / "timeline.html").exists()
    assert [p for p in os.listdir(view) if p.startswith(".") or p.endswith(".tmp")] == []


@pytest.mark.parametrize("command", ["ab", "ab-switchback", "demo"])
def test_ab_and_demo_into_a_read_only_file_system_are_one_line(readonly_tmpfs, command):
    """GIVEN the same read-only file system WHEN ab (its session directory, --session-dir RO/s) or demo (its
    --traces-dir RO/t) is asked to write there THEN exit 2 with the one line "error: OPTION PATH: cannot write
    (Read-only file system)", before any model is built or server launched. Before: an OSError traceback."""
    ro = readonly_tmpfs.where
    port = _free_port()
    server = ["--", sys.executable, str(STANDIN), "--port", str(port)]
    if command == "demo":
        args, said = ["demo", "--traces-dir", str(ro / "t")], f"--traces-dir {ro / 't'}"
    else:
        extra = ["--switchback"] if command == "ab-switchback" else []
        args, said = ["ab", *extra, "--session-dir", str(ro / "s"), *server], f"--session-dir {ro / 's'}"
    proc = cli(*args, prefix=readonly_tmpfs.enter)
    assert proc.returncode == 2, proc.stderr
    assert lines(proc.stderr) == [f"error: {said}: cannot write (Read-only file system)"]
    assert not _listening(port) and os.listdir(readonly_tmpfs.view) == []
