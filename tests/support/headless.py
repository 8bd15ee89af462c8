"""Drive a headless Chromium through the DevTools protocol (the HTML tests, bench/bench_html.py, screenshots).

No playwright, no browser download: the system's ``chromium`` (Debian:
``apt-get install -y chromium``) started with ``--remote-debugging-port=0``,
one websocket per page (``websocket-client``, imported lazily; a dev
dependency, never needed to *build* a page). The browser runs in a fresh
temporary profile and is stopped (its own process group only) on
:meth:`Chromium.close`.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Flags that work on a headless server without a GPU or network.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--mute-audio",
    # WebGL through the software rasteriser: plotly's scattergl needs a context.
    "--use-angle=swiftshader",
    "--enable-unsafe-swiftshader",
)
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def find_chromium() -> str | None:
    """Path of a Chromium/Chrome executable (``EXPO_PROF_CHROMIUM`` first), or None."""
    env = os.environ.get("EXPO_PROF_CHROMIUM")
    if env and Path(env).is_file():
        return env
    for name in CANDIDATES:
        p = shutil.which(name)
        if p:
            return p
    return None


class BrowserError(RuntimeError):
    """The browser could not be started or answered with a protocol error."""


@dataclass
class Page:
    """One page target: send commands, collect events (console, exceptions, dialogs, requests)."""

    ws: Any
    timeout: float = 60.0
    events: list[dict] = field(default_factory=list)
    _next_id: int = 1

    def send(self, method: str, params: dict | None = None, timeout: float | None = None) -> dict:
        """Send one command and wait for its answer; events arriving meanwhile are kept in :attr:`events`."""
        mid = self._next_id
        self._next_id += 1
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params or {}}))
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            msg = self._recv(deadline, method)
            if msg.get("id") == mid:
                if "error" in msg:
                    raise BrowserError(f"{method}: {msg['error'].get('message')}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def _recv(self, deadline: float, what: str) -> dict:
        left = deadline - time.monotonic()
        if left <= 0:
            raise BrowserError(f"timed out waiting for {what}")
        self.ws.settimeout(left)
        try:
            return json.loads(self.ws.recv())
        except Exception as exc:  # websocket timeout / closed
            raise BrowserError(f"waiting for {what}: {type(exc).__name__}: {exc}") from None

    def wait_event(self, method: str, timeout: float | None = None) -> dict:
        """Wait for an event (or return one already received and not yet waited for)."""
        for ev in self.events:
            if ev["method"] == method and not ev.get("_seen"):
                ev["_seen"] = True
                return ev
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            msg = self._recv(deadline, method)
            if "method" in msg:
                self.events.append(msg)
                if msg["method"] == method:
                    msg["_seen"] = True
                    return msg

    def enable(self) -> None:
        """Turn on the event domains the checks read."""
        for dom in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{dom}.enable")

    def navigate(self, url: str, timeout: float | None = None) -> float:
        """Open ``url`` and wait for its load event; returns the seconds it took."""
        t0 = time.monotonic()
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired", timeout)
        return time.monotonic() - t0

    def evaluate(self, expression: str, timeout: float | None = None) -> Any:
        """Evaluate JavaScript (promises awaited) and return its JSON value; a thrown error raises."""
        params = {"expression": expression, "awaitPromise": True, "returnByValue": True,
                  "timeout": int(1000 * (timeout or self.timeout))}
        r = self.send("Runtime.evaluate", params, timeout)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            text = d.get("exception", {}).get("description") or d.get("text")
            raise BrowserError(f"JavaScript error: {text}")
        return r.get("result", {}).get("value")

    def drain(self, seconds: float = 0.2) -> None:
        """Collect the events that arrive within ``seconds``."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                self.ws.settimeout(max(0.01, deadline - time.monotonic()))
                msg = json.loads(self.ws.recv())
            except Exception:
                break
            if "method" in msg:
                self.events.append(msg)

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries seen so far."""
        out = []
        for ev in self.events:
            m, p = ev["method"], ev.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console: " + " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
            elif m == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                out.append("exception: " + str(d.get("exception", {}).get("description") or d.get("text")))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append("log: " + p["entry"].get("text", ""))
        return out

    def dialogs(self) -> list[str]:
        """Messages of every JavaScript dialog (alert/confirm/prompt) the page opened."""
        return [ev["params"].get("message", "") for ev in self.events if ev["method"] == "Page.javascriptDialogOpening"]

    def requests(self) -> list[str]:
        """URLs of every network request the page made."""
        return [ev["params"]["request"]["url"] for ev in self.events if ev["method"] == "Network.requestWillBeSent"]

    def screenshot(self, path: str | Path, width: int = 1400, height: int = 900, full_page: bool = False) -> None:
        """Write a PNG of the viewport (``width`` × ``height`` CSS pixels), or of the whole page."""
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        if full_page:
            h = int(self.evaluate("Math.ceil(document.documentElement.scrollHeight)") or height)
            self.send("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": max(h, height), "deviceScaleFactor": 1, "mobile": False})
            self.evaluate("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
        data = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": False})["data"]
        Path(path).write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:
            pass


class Chromium:
    """A headless Chromium in a fresh profile; use as a context manager."""

    def __init__(self, executable: str | None = None, extra_args: tuple[str, ...] = (), start_timeout: float = 30.0) -> None:
        exe = executable or find_chromium()
        if exe is None:
            raise BrowserError("no chromium executable found (Debian: apt-get install -y chromium; or set EXPO_PROF_CHROMIUM)")
        self.exe = exe
        self.extra_args = extra_args
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None
        self.profile: str | None = None
        self.port: int | None = None

    def __enter__(self) -> Chromium:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        self.profile = tempfile.mkdtemp(prefix="expo-prof-chromium-")
        args = [self.exe, *FLAGS, *self.extra_args, "--remote-debugging-port=0", f"--user-data-dir={self.profile}", "about:blank"]
        # Own process group: close() ends the browser and its helpers, nothing else.
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BrowserError(f"{self.exe} exited with code {self.proc.returncode} at start")
            if port_file.is_file():
                lines = port_file.read_text().split()
                if lines:
                    self.port = int(lines[0])
                    return
            time.sleep(0.05)
        self.close()
        raise BrowserError(f"{self.exe} did not open its DevTools port within {self.start_timeout:.0f} s")

    def new_page(self, timeout: float = 60.0) -> Page:
        """A fresh tab with the Page/Runtime/Log/Network domains enabled."""
        import websocket  # websocket-client (dev dependency)

        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/json/new?about:blank", method="PUT")
        with urllib.request.urlopen(req, timeout=10) as resp:
            info = json.loads(resp.read())
        ws = websocket.create_connection(info["webSocketDebuggerUrl"], timeout=timeout, suppress_origin=True)
        page = Page(ws, timeout=timeout)
        page.enable()
        return page

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=10)
        self.proc = None
        if self.profile:
            shutil.rmtree(self.profile, ignore_errors=True)
            self.profile = None


def screenshot(page_path: str | Path, out: str | Path, *, width: int = 1400, height: int = 900, full_page: bool = False,
               before: str | None = None, timeout: float = 60.0) -> list[str]:
    """Open a page in a fresh headless Chromium, wait until it says ready, optionally run ``before`` (JavaScript,
    e.g. a zoom), and write a PNG; returns the page's console errors."""
    with Chromium() as c:
        page = c.new_page(timeout=timeout)
        page.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        page.navigate(Path(page_path).resolve().as_uri(), timeout=timeout)
        deadline = time.monotonic() + timeout
        while not page.evaluate("document.body && document.body.dataset.ready === '1'"):
            if time.monotonic() > deadline:
                raise BrowserError(f"{page_path} never became ready: {page.errors()}")
            time.sleep(0.05)
        if before:
            page.evaluate(before)
        page.evaluate("new Promise((r) => setTimeout(r, 300))")
        page.screenshot(out, width, height, full_page=full_page)
        return page.errors()


if __name__ == "__main__":  # python tests/support/headless.py PAGE.html OUT.png [--full] [--before JS]
    import argparse
    import sys

    ap = argparse.ArgumentParser(description="Screenshot an expo-prof page in headless Chromium.")
    ap.add_argument("page")
    ap.add_argument("out")
    ap.add_argument("--width", type=int, default=1400)
    ap.add_argument("--height", type=int, default=900)
    ap.add_argument("--full", action="store_true", help="the whole page, not just the viewport")
    ap.add_argument("--before", help="JavaScript to run first (e.g. a zoom)")
    a = ap.parse_args()
    errs = screenshot(a.page, a.out, width=a.width, height=a.height, full_page=a.full, before=a.before)
    for e in errs:
        print(e, file=sys.stderr)
    sys.exit(1 if errs else 0)
