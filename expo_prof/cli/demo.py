"""``expo-prof demo``: serve the built-in tiny model with the overlay on and show its event log.

The main job until ``record`` exists: build (or reuse) a tiny random-weight
Llama, start a real vLLM OpenAI server on it with the async exponential overlay
switched on and ``EXPO_PROF_OUT`` pointing into a fresh run directory under
``traces/``, send a few sampled, seeded and greedy requests (some concurrently,
so batches mix them), stop the server and summarise what the overlay logged:
steps, launched / used, fallbacks by reason, exponential time and how much of
it hid under the forward pass, and how long the sampler waited.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import click

from expo_prof.errors import BadInput, NothingFound

PROMPTS = (
    "The quick brown fox",
    "Sampling picks a token",
    "Once upon a time there was",
    "The forward pass runs",
    "Every step of the engine",
    "Exponential noise does not depend",
)


@dataclass
class Req:
    """One request of the demo's mix."""

    kind: str  # "sampled" | "seeded" | "greedy" | "top-k/p"
    prompt: str
    params: dict
    tokens: list[int] = field(default_factory=list)


def request_mix(max_tokens: int) -> tuple[list[Req], list[Req]]:
    """Two waves: a mixed batch (sampled, seeded, top-k/p, greedy), then greedy only.

    ``ignore_eos`` makes every request generate exactly ``max_tokens`` tokens
    (a random model emits EOS at random), so token counts are predictable.
    """
    base = {"max_tokens": max_tokens, "ignore_eos": True, "return_token_ids": True}
    mixed = [
        Req("sampled", PROMPTS[0], {**base, "temperature": 1.0}),
        Req("sampled", PROMPTS[1], {**base, "temperature": 1.0}),
        Req("sampled", PROMPTS[2], {**base, "temperature": 0.8}),
        Req("top-k/p", PROMPTS[3], {**base, "temperature": 1.0, "top_k": 20, "top_p": 0.9}),
        Req("seeded", PROMPTS[4], {**base, "temperature": 1.0, "seed": 1234}),
        Req("greedy", PROMPTS[5], {**base, "temperature": 0.0}),
    ]
    greedy = [Req("greedy", p, {**base, "temperature": 0.0}) for p in PROMPTS[:3]]
    return mixed, greedy


# --------------------------------------------------------------------------- event log summary


@dataclass
class LogSummary:
    """Counts and times over every ``step`` line of every event log in a directory."""

    files: int = 0
    processes: list[dict] = field(default_factory=list)  # header lines
    steps: int = 0
    launched: int = 0
    used: int = 0
    fallbacks: dict[str, int] = field(default_factory=dict)
    exp_ns: int = 0  # total exponential-draw time
    hidden_ns: int = 0  # part of it inside the forward window
    wait_ns: int = 0  # total sampler wait for q
    fwd_ns: int = 0  # total forward time of steps that drew q
    notices: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def exposed_ns(self) -> int:
        return self.exp_ns - self.hidden_ns


def summarize_event_logs(out_dir: Path) -> LogSummary:
    """Summarise every overlay event log under ``out_dir`` (read with :mod:`expo_prof.readers`).

    Hidden time of a step is the part of its exponential window inside its
    forward window (both on the same clock within one log).
    """
    import numpy as np

    from expo_prof.readers import load
    from overlay.contract import EVENT_LOG_GLOB

    s = LogSummary()
    if not any(out_dir.glob(EVENT_LOG_GLOB)):
        return s
    res = load([out_dir])
    s.warnings += res.warnings
    for tl in res.timelines:
        ov = tl.meta.get("overlay")
        if tl.fmt != "overlay-log" or ov is None:
            continue
        s.files += 1
        s.processes.append(ov["header"])
        s.notices += ov["notices"]
        c, counts = ov["steps"], ov["recomputed"]
        s.steps += counts["steps"]
        s.launched += counts["launched"]
        s.used += counts["used"]
        for reason, n in counts["fallbacks"].items():
            s.fallbacks[reason] = s.fallbacks.get(reason, 0) + n
        timed = (c["exp_ns"] >= 0) & (c["fwd_ns"] >= 0)
        e0, e1 = c["exp_start_ns"][timed], c["exp_start_ns"][timed] + c["exp_ns"][timed]
        f0, f1 = c["fwd_start_ns"][timed], c["fwd_start_ns"][timed] + c["fwd_ns"][timed]
        s.exp_ns += int(c["exp_ns"][c["exp_ns"] >= 0].sum())
        s.wait_ns += int(c["wait_ns"][c["wait_ns"] >= 0].sum())
        s.fwd_ns += int((f1 - f0).sum())
        s.hidden_ns += int(np.clip(np.minimum(e1, f1) - np.maximum(e0, f0), 0, None).sum())
    return s


# --------------------------------------------------------------------------- output


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.2f} ms"


def _pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:.0f}%" if b else "–"


def print_summary(s: LogSummary, reqs: list[Req], run_dir: Path, seeded_repeat: bool | None, overlay: bool = True) -> None:
    from rich.markup import escape
    from rich.table import Table

    from expo_prof.console import console, warn

    for w in s.warnings:
        warn(escape(w))
    for n in s.notices:
        if n.get("level") in ("warning", "error"):
            warn(f"overlay {escape(str(n.get('code')))}: {escape(str(n.get('message')))}")

    by_kind: dict[str, int] = {}
    for r in reqs:
        by_kind[r.kind] = by_kind.get(r.kind, 0) + 1
    sent = ", ".join(f"{n} {k}" for k, n in by_kind.items())
    console.print(f"[bold]requests[/]: {sent}; {sum(len(r.tokens) for r in reqs)} tokens generated")
    if seeded_repeat is not None:
        mark = "[green]identical[/]" if seeded_repeat else "[red]DIFFERENT[/]"
        console.print(f"[bold]seeded request sent twice[/]: {mark} tokens")
    if not overlay:
        console.print("[dim]overlay off: no event log expected[/]")
        console.print(f"run directory: {escape(str(run_dir))}")
        return

    hdr = s.processes[0] if s.processes else {}
    t = Table(title=f"overlay event log ({s.files} file{'s' * (s.files != 1)}, "
              f"backend {escape(str(hdr.get('backend', '?')))}, lane {escape(str(hdr.get('lane', '?')))})")
    t.add_column("what")
    t.add_column("value", justify="right")
    t.add_column("", justify="right", style="dim")
    t.add_row("steps (forward passes)", str(s.steps), "")
    t.add_row("q launched on the side lane", str(s.launched), _pct(s.launched, s.steps) + " of steps")
    t.add_row("q used by the sampler", str(s.used), _pct(s.used, s.launched) + " of launched")
    for reason, n in sorted(s.fallbacks.items(), key=lambda kv: -kv[1]):
        t.add_row(f"  fallback: {escape(reason)}", str(n), _pct(n, s.steps) + " of steps")
    t.add_row("exponential time (total)", _ms(s.exp_ns), "")
    t.add_row("  hidden under the forward", _ms(s.hidden_ns), _pct(s.hidden_ns, s.exp_ns))
    t.add_row("  exposed (outside it)", _ms(s.exposed_ns), _pct(s.exposed_ns, s.exp_ns))
    t.add_row("forward time (steps with q)", _ms(s.fwd_ns), "")
    t.add_row("sampler wait for q (total)", _ms(s.wait_ns), _pct(s.wait_ns, s.fwd_ns) + " of forward")
    console.print(t)
    console.print(f"run directory: {escape(str(run_dir))}")
    console.print(f"[dim]next: expo-prof analyze {escape(str(run_dir))}[/]")


# --------------------------------------------------------------------------- command


def _send(srv, reqs: list[Req]) -> None:
    """Send ``reqs`` concurrently, so the server batches them together."""

    def one(r: Req) -> None:
        ans = srv.completion(r.prompt, **r.params)
        r.tokens = list(ans["choices"][0].get("token_ids") or [])

    with ThreadPoolExecutor(max_workers=len(reqs)) as pool:
        for fut in [pool.submit(one, r) for r in reqs]:
            fut.result()


def new_run_dir(root: Path, label: str = "demo") -> Path:
    """A fresh ``<root>/<UTC timestamp>-<label>/`` (suffixed if two runs share a second)."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for i in range(100):
        d = root / (f"{stamp}-{label}" if i == 0 else f"{stamp}-{label}-{i}")
        try:
            d.mkdir(parents=True)
            return d
        except FileExistsError:
            continue
        except OSError as exc:
            raise BadInput(f"cannot create the run directory {d}: {exc.strerror or exc}") from exc
    raise BadInput(f"cannot create a run directory under {root}")


@click.command("demo")
@click.option("--max-tokens", default=32, show_default=True, type=click.IntRange(1, 200), help="Tokens per request.")
@click.option("--traces", "traces_root", default="traces", show_default=True,
              type=click.Path(file_okay=False, path_type=Path), help="Where the run directory is created.")
@click.option("--model", "model_dir", default=None, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Serve this Hugging Face model directory instead of the built-in tiny Llama.")
@click.option("--overlay/--no-overlay", default=True, show_default=True, help="Switch the async exponential overlay.")
@click.option("--startup-timeout", default=300.0, show_default=True, type=click.FloatRange(10), help="Seconds to wait for the server.")
@click.pass_obj
def command(settings, max_tokens: int, traces_root: Path, model_dir: Path | None, overlay: bool, startup_timeout: float) -> None:
    """Serve the tiny CPU model with the overlay on, send requests, summarise the event log."""
    from overlay.contract import ENV_OUT, ENV_RUN_ID, ENV_SWITCH, ENV_SWITCH_ALIAS

    from rich.markup import escape

    from expo_prof.console import err_console
    from expo_prof.server import VllmServer
    from expo_prof.tinymodel import build_tiny_llama

    quiet = bool(settings and settings.quiet)

    def step(msg: str) -> None:
        if not quiet:
            err_console.print(f"[dim]·[/] {msg}")

    if model_dir is None:
        step("building the tiny random-weight Llama (cached under .cache/tiny-llama)")
        model_dir = build_tiny_llama()
    run_dir = new_run_dir(traces_root).resolve()
    env = {
        ENV_SWITCH: "1" if overlay else "0",
        ENV_SWITCH_ALIAS: None,  # the alias from the caller's shell must not override the choice
        ENV_OUT: str(run_dir),
        ENV_RUN_ID: run_dir.name,
    }
    srv = VllmServer(model_dir, env=env, log_path=run_dir / "vllm-server.log", startup_timeout=startup_timeout)
    mixed, greedy = request_mix(max_tokens)
    seeded_again = Req("seeded", mixed[4].prompt, dict(mixed[4].params))
    t0 = time.monotonic()
    step(f"starting vLLM (overlay {'on' if overlay else 'off'}); log: {escape(str(run_dir / 'vllm-server.log'))}")
    with srv:
        step(f"server ready in {time.monotonic() - t0:.0f} s; sending {len(mixed)} mixed, then {len(greedy)} greedy requests")
        _send(srv, mixed)
        _send(srv, greedy)
        _send(srv, [seeded_again])
        step("stopping the server")
        t_stop = time.monotonic()
    step(f"server stopped in {time.monotonic() - t_stop:.0f} s")
    reqs = mixed + greedy + [seeded_again]
    (run_dir / "requests.json").write_text(
        json.dumps([{"kind": r.kind, "prompt": r.prompt, "params": r.params, "tokens": r.tokens} for r in reqs], indent=1)
    )
    seeded_repeat = seeded_again.tokens == mixed[4].tokens

    s = summarize_event_logs(run_dir)
    if overlay and s.files == 0:
        raise NothingFound(
            f"the overlay wrote no event log into {run_dir}: is expo-prof installed in the server's Python "
            f"(entry point 'expo_prof' in vllm.general_plugins)? See {run_dir / 'vllm-server.log'}"
        )
    print_summary(s, reqs, run_dir, seeded_repeat, overlay)
