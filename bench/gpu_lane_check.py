#!/usr/bin/env python
"""DEVICE CHECK of the device-stream lane (step ``lane-checks`` of bench/gpu_check.sh).

Plain torch, no vLLM. Each check is built so that the fault it guards against
gives *wrong values* on a real GPU, not just a different call order:

* ``tokens_equal_inline`` — seeded and unseeded rows: the overlay's tokens
  must equal vLLM's inline draw bit for bit (``q`` is forked from the default
  generator, overlay/rng.py), and the default generator must end where the
  inline draw leaves it. The side stream is held back (``torch.cuda._sleep``)
  before each draw, and the forward is empty: a consumer that does not wait
  for the draw's event reads ``q`` before it is filled.
* ``allocator_reuse`` — after the sampler enqueued its read of ``q`` (held
  back by a sleep on the consumer stream) and dropped it, a new tensor is
  allocated on the side stream and filled with -1: without ``record_stream``
  the caching allocator hands out ``q``'s block at once and the read sees -1.
* ``flashinfer_launches_nothing`` — a FlashInfer-shaped batch (sampler
  dispatching through ``forward_cuda``, top-k, no seeded row) through the real
  runner hook (overlay/patches/_runner.py) allocates nothing and launches
  nothing; a seeded row in the same batch makes it launch (not vacuous).
* ``q_memory`` — ``torch.cuda.memory_allocated`` grows by the ``q`` bytes at
  a launch (and by the reserved ``q`` during profiling; up to the caching
  allocator's 2 MB rounding over), is back to the baseline once the sampler is
  done, and the event log's summary says the ``q`` figures.

Then the same checks run twice more with the lane sabotaged — without the
consumer's ``wait_event``, without ``record_stream`` — and each sabotage must
make its check fail: the check proves it can fail on this machine.

``--dry-run`` runs it all on the CPU with the FAKE device module of
tests/overlay/fake_device.py (named as a fake: no device here). CPU ops are
synchronous, so there the values cannot go wrong; the fake's call log stands
in for them (the consumer waited on the draw's event before reading; every
used ``q`` was recorded on the consumer stream), so the sabotages still fail.

    python bench/gpu_lane_check.py --json OUT.json [--dry-run] [--trace DIR]

Exit status 0 when every check passed and every sabotage was caught.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from overlay.events import EventLog  # noqa: E402
from overlay.lanes import DeviceStreamLane  # noqa: E402
from overlay.patches._runner import begin_for_runner  # noqa: E402
from overlay.sampler import Overlay, overlay_random_sample, sample_with_noise  # noqa: E402

SABOTAGES = {"wait_event": "tokens_equal_inline", "record_stream": "allocator_reuse"}


class CheckFailed(AssertionError):
    """A check's condition did not hold (the message says which)."""


def need(ok: bool, what: str) -> None:
    if not ok:
        raise CheckFailed(what)


# -- the device: a real CUDA GPU, or the CPU with the FAKE device module ------------------------------


class Device:
    """What the checks need of the device, real or FAKE."""

    def __init__(self, dry_run: bool) -> None:
        self.dry_run = dry_run
        if dry_run:
            sys.path.insert(0, str(REPO / "tests" / "overlay"))
            from fake_device import FakeAllocator, FakeDeviceModule  # the FAKE device, tests only

            self.fake = FakeDeviceModule()
            self.alloc = FakeAllocator()
            self.mod = self.fake
            self.device = torch.device("cpu")
            self.rows, self.vocab = 8, 1000
            self.slack = 0
        else:
            if not torch.cuda.is_available():
                raise SystemExit(f"gpu_lane_check: torch {torch.__version__} sees no CUDA device (use --dry-run)")
            self.fake = self.alloc = None
            self.mod = torch.cuda
            self.device = torch.device("cuda", torch.cuda.current_device())
            # 256 x 152064 float32 (156 MB): a draw that takes long enough to be caught unfinished.
            self.rows, self.vocab = 256, 152064
            # The caching allocator keeps a large block whole when splitting would leave <= 1 MB, and
            # segments are 2 MB multiples: an allocation may count up to 2 MB over what was asked.
            self.slack = 2 ** 21

    def lane(self, sabotage: str | None) -> DeviceStreamLane:
        kwargs: dict[str, Any] = {}
        if self.dry_run:
            kwargs = {"device_module": self.fake, "record_stream": self.fake.record_stream, "allocate": self.alloc}
        if sabotage == "record_stream":
            kwargs["record_stream"] = lambda tensor, stream: None
        lane = DeviceStreamLane(self.device, instrument=True, **kwargs)
        if sabotage == "wait_event":
            def wait(draw: Any) -> tuple[Any, Any, Any]:  # the lane's wait without current.wait_event(...)
                current = lane._current()
                lane._record_stream(draw.q, current)
                return draw.q, lane.stamp(), lane.stamp()

            lane.wait = wait  # type: ignore[method-assign]
        return lane

    def default_generator(self) -> Any:
        return torch.default_generator if self.dry_run else torch.cuda.default_generators[self.device.index]

    def generator(self, seed: int) -> Any:
        return torch.Generator(device=self.device).manual_seed(seed)

    def hold(self, stream: Any, ms: float = 3.0) -> None:
        """Keep ``stream`` busy for about ``ms`` (nothing on the FAKE device)."""
        if not self.dry_run:
            with torch.cuda.stream(stream):
                torch.cuda._sleep(int(ms * 2e6))  # ~2 GHz SM clock

    def sync(self) -> None:
        if self.dry_run:
            self.fake.run_device()
        else:
            torch.cuda.synchronize(self.device)

    def settle(self) -> None:
        """Synchronise, and let the caching allocator free the blocks whose recorded streams are done."""
        self.sync()
        if not self.dry_run:
            torch.empty(1, device=self.device)  # a malloc processes the events of freed blocks

    def allocated(self) -> int:
        return self.alloc.live_bytes if self.dry_run else torch.cuda.memory_allocated(self.device)

    def allocations(self) -> int:
        if self.dry_run:
            return self.alloc.allocations
        return int(torch.cuda.memory_stats(self.device).get("allocation.all.allocated", 0))


def overlay_on(dev: Device, out: Path, sabotage: str | None = None) -> Overlay:
    lane = dev.lane(sabotage)
    return Overlay(EventLog(str(out), instrument=True, max_bytes=0), instrument=True,
                   lane_factory=lambda device, instrument: lane)


def probs_for(dev: Device, seed: int) -> Any:
    data = torch.Generator(device=dev.device).manual_seed(seed)
    return torch.softmax(torch.randn(dev.rows, dev.vocab, generator=data, device=dev.device) * 4, dim=-1)


def seeded(dev: Device, step: int) -> dict[int, Any]:
    return {1: dev.generator(1000 + step), dev.rows - 2: dev.generator(2000 + step)}


def inline_reference(dev: Device, probs: Any, generators: dict[int, Any]) -> Any:
    """vLLM's own random_sample (0.32/0.33), on the default generator."""
    q = torch.empty_like(probs)
    q.exponential_()
    for i, g in generators.items():
        q[i].exponential_(generator=g)
    return sample_with_noise(probs, q)


def _fake_waited_before_read(dev: Device, launched_calls: int) -> bool:
    """FAKE device only: the consumer stream waited on the draw's done event after the launch."""
    done = [c for c in dev.fake.calls[launched_calls:] if c[0] == "record" and c[1].startswith("side")]
    waits = [c for c in dev.fake.calls[launched_calls:] if c[0] == "wait_event" and c[1] == "current"]
    return bool(done) and any(w[2] is done[-1][2] for w in waits)


# -- the checks -----------------------------------------------------------------------------------


def check_tokens_equal_inline(dev: Device, out: Path, sabotage: str | None) -> str:
    ov = overlay_on(dev, out, sabotage)
    lane = ov.lane_for(dev.device)
    gen = dev.default_generator()
    for step in range(6):
        probs = probs_for(dev, step)
        gens = seeded(dev, step) if step % 2 else {}
        before = gen.get_state()
        want = inline_reference(dev, probs.clone(), gens)
        after_inline = gen.get_state()
        gen.set_state(before)
        dev.sync()
        dev.hold(lane.side)  # the draw starts late: only a consumer that waits for it reads a filled q
        mark = len(dev.fake.calls) if dev.dry_run else 0
        st = ov.begin_step(rows=dev.rows, vocab=dev.vocab, dtype=torch.float32, device=dev.device,
                           all_greedy=False, seeded_rows=len(gens))
        ov.end_forward(st)  # an empty forward
        got = overlay_random_sample(probs.clone(), seeded(dev, step) if gens else {}, False,
                                    inline=_no_inline, overlay=ov)
        dev.sync()
        need(st.used, f"step {step}: the side-lane q was not used ({st.fallback})")
        if dev.dry_run:
            need(_fake_waited_before_read(dev, mark), f"step {step}: the consumer did not wait for the draw's event")
        need(torch.equal(got.cpu(), want.cpu()),
             f"step {step}: tokens differ from vLLM's inline draw in {int((got != want).sum())} of {dev.rows} rows")
        need(torch.equal(gen.get_state(), after_inline), f"step {step}: the default generator is not where vLLM's draw leaves it")
    ov.shutdown()
    return "6 steps (3 with seeded rows): tokens and generator state equal vLLM's inline draw"


def _no_inline(probs: Any, generators: Any, fp64: bool = False) -> Any:
    raise CheckFailed("the sampler fell back to the inline draw")


def check_allocator_reuse(dev: Device, out: Path, sabotage: str | None) -> str:
    ov = overlay_on(dev, out, sabotage)
    lane = ov.lane_for(dev.device)
    gen = dev.default_generator()
    for step in range(4):
        probs = probs_for(dev, 100 + step)
        before = gen.get_state()
        want = inline_reference(dev, probs.clone(), {})
        gen.set_state(before)
        dev.sync()
        recorded = len(dev.fake.record_stream_calls) if dev.dry_run else 0
        st = ov.begin_step(rows=dev.rows, vocab=dev.vocab, dtype=torch.float32, device=dev.device,
                           all_greedy=False, seeded_rows=0)
        ov.end_forward(st)
        q = ov.take(probs, {}, False)
        need(q is not None, f"step {step}: no q ({st.fallback})")
        dev.hold(dev.mod.current_stream(dev.device))  # the consumer reads q late
        got = sample_with_noise(probs, q)
        del q  # the sampler's reference ends here, as random_sample returns
        with dev.mod.stream(lane.side):  # another allocation on the side stream, not ordered after the read
            junk = torch.empty(dev.rows, dev.vocab, device=dev.device)
            junk.fill_(-1.0)
        dev.sync()
        del junk
        if dev.dry_run:
            need(len(dev.fake.record_stream_calls) > recorded, f"step {step}: q was not recorded on the consumer stream")
        need(torch.equal(got.cpu(), want.cpu()),
             f"step {step}: the read of q saw another allocation's data ({int((got != want).sum())} rows differ)")
    ov.shutdown()
    return "4 steps: q's block was not handed out while the sampler still read it"


class _FakeRunner:
    """A FAKE vLLM V1 runner (no vLLM here): only what the runner hook reads, FlashInfer-shaped."""

    def __init__(self, dev: Device, generators: dict[int, Any]) -> None:
        def forward_cuda(*args: Any) -> None:  # vLLM's FlashInfer dispatch is a method of this name
            raise CheckFailed("not called here")

        self.device = dev.device
        self.is_pooling_model = False
        metadata = types.SimpleNamespace(all_greedy=False, generators=generators, top_p=None,
                                         top_k=torch.full((dev.rows,), 20, dtype=torch.int32, device=dev.device))
        self.input_batch = types.SimpleNamespace(num_reqs=dev.rows, sampling_metadata=metadata)
        self.model_config = types.SimpleNamespace(get_vocab_size=lambda: dev.vocab)
        self.sampler = types.SimpleNamespace(topk_topp_sampler=types.SimpleNamespace(forward=forward_cuda))


def check_flashinfer_launches_nothing(dev: Device, out: Path, sabotage: str | None) -> str:
    ov = overlay_on(dev, out, sabotage)
    lane = ov.lane_for(dev.device)
    launches = []
    launch = lane.launch
    lane.launch = lambda *a, **k: launches.append(1) or launch(*a, **k)  # type: ignore[method-assign]
    runner = _FakeRunner(dev, {})
    dev.sync()
    allocations = dev.allocations()
    st = begin_for_runner(ov, runner)
    ov.end_forward(st)
    dev.sync()
    need(not st.launched and st.fallback == "flashinfer", f"a FlashInfer batch launched q ({st.fallback})")
    need(not launches and dev.allocations() == allocations, "a FlashInfer batch allocated or launched on the device")
    st = begin_for_runner(ov, _FakeRunner(dev, {0: dev.generator(5)}))
    ov.end_forward(st)
    need(st.launched and len(launches) == 1, "a batch with a seeded row (native path) launched nothing")
    ov.shutdown()
    return "FlashInfer batch: no launch, no allocation (fallback flashinfer); with a seeded row: one launch"


def check_q_memory(dev: Device, out: Path, sabotage: str | None) -> str:
    ov = overlay_on(dev, out, sabotage)
    ov.lane_for(dev.device)
    q_bytes = dev.rows * dev.vocab * 4
    probs = probs_for(dev, 7)
    dev.settle()
    base = dev.allocated()
    draw = ov.reserve(2 * dev.rows, dev.vocab, torch.float32, dev.device)  # what profile_run holds
    grown = dev.allocated() - base
    need(2 * q_bytes <= grown <= 2 * q_bytes + dev.slack, f"reserved q: {grown} B allocated, want {2 * q_bytes}")
    ov.release(draw)
    del draw
    dev.settle()
    need(dev.allocated() == base, f"{dev.allocated() - base} B still allocated after the reserved q was released")
    for step in range(3):
        st = ov.begin_step(rows=dev.rows, vocab=dev.vocab, dtype=torch.float32, device=dev.device,
                           all_greedy=False, seeded_rows=0)
        grown = dev.allocated() - base
        need(q_bytes <= grown <= q_bytes + dev.slack, f"step {step}: {grown} B allocated at launch, want {q_bytes}")
        need(ov.lane.held_bytes() == q_bytes, f"step {step}: the lane counts {ov.lane.held_bytes()} B, want {q_bytes}")
        ov.end_forward(st)
        tokens = overlay_random_sample(probs.clone(), {}, False, inline=_no_inline, overlay=ov)
        del tokens
        dev.settle()
        need(dev.allocated() == base, f"step {step}: {dev.allocated() - base} B still allocated after the sampler")
    summary = ov.log.summary()
    ov.shutdown()
    figures = tuple(summary[k] for k in ("q_max_bytes", "q_peak_bytes", "q_reserved_bytes", "q_block_peak_bytes"))
    # Each step's q was freed and its sampler done (settled) before the next launch: no block outlived it.
    need(figures == (q_bytes, 2 * q_bytes, 2 * q_bytes, 2 * q_bytes), f"summary q figures {figures}")
    return f"q {q_bytes} B at each launch and freed after the sampler; reserved {2 * q_bytes} B; summary agrees"


CHECKS: dict[str, Callable[[Device, Path, str | None], str]] = {
    "tokens_equal_inline": check_tokens_equal_inline,
    "allocator_reuse": check_allocator_reuse,
    "flashinfer_launches_nothing": check_flashinfer_launches_nothing,
    "q_memory": check_q_memory,
}


def run(dev: Device, work: Path, sabotage: str | None) -> dict[str, dict[str, Any]]:
    results = {}
    for name, check in CHECKS.items():
        if sabotage is not None and name != SABOTAGES[sabotage]:
            continue
        t0 = time.monotonic()
        out = work / f"{sabotage or 'plain'}-{name}"
        out.mkdir(parents=True, exist_ok=True)
        try:
            results[name] = {"ok": True, "detail": check(dev, out, sabotage)}
        except CheckFailed as exc:
            results[name] = {"ok": False, "detail": str(exc)}
        results[name]["seconds"] = round(time.monotonic() - t0, 3)
    return results


def write_trace(dev: Device, trace_dir: Path) -> None:
    """A few overlay steps under torch.profiler (for ``expo-prof analyze``): the real lane on CUDA;
    on the dry run the real CPU lane (the FAKE device has no kernels to trace)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    from overlay.lanes import CpuThreadLane
    from overlay.patches.profiler import add_all_threads

    trace_dir.mkdir(parents=True, exist_ok=True)
    options: dict[str, Any] = {}
    if dev.dry_run:
        ov = Overlay(EventLog(str(trace_dir), instrument=True, max_bytes=0), instrument=True,
                     lane_factory=lambda device, instrument: CpuThreadLane(cpus="inherit"))
        options["activities"] = [ProfilerActivity.CPU]
        add_all_threads(options)  # the lane's draws run on its own thread
    else:
        ov = overlay_on(dev, trace_dir)
        options["activities"] = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    probs = probs_for(dev, 9)
    weights = torch.randn(512, 512, device=dev.device)
    with profile(**options) as prof:
        for i in range(5):
            with record_function(f"ProfilerStep#{i}"):
                st = ov.begin_step(rows=dev.rows, vocab=dev.vocab, dtype=torch.float32, device=dev.device,
                                   all_greedy=False, seeded_rows=0)
                x = weights
                for _ in range(20):
                    x = torch.tanh(x @ weights)
                ov.end_forward(st)
                overlay_random_sample(probs.clone(), {}, False, inline=_no_inline, overlay=ov)
    ov.shutdown()
    prof.export_chrome_trace(str(trace_dir / "lane-check.pt.trace.json"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, required=True, help="results as JSON")
    ap.add_argument("--work", type=Path, default=Path("/tmp/expo-prof-lane-check"), help="event logs of each check")
    ap.add_argument("--dry-run", action="store_true", help="CPU with the FAKE device module (no GPU)")
    ap.add_argument("--trace", type=Path, help="also write a profiler trace + event log of overlay steps here")
    args = ap.parse_args()
    dev = Device(args.dry_run)
    report: dict[str, Any] = {"device": "FAKE device on CPU (dry run)" if dev.dry_run else torch.cuda.get_device_name(dev.device),
                              "torch": torch.__version__, "rows": dev.rows, "vocab": dev.vocab}
    report["checks"] = run(dev, args.work, None)
    report["sabotage"] = {}
    for sabotage, target in SABOTAGES.items():
        res = run(dev, args.work, sabotage)[target]
        res["caught"] = not res.pop("ok")
        report["sabotage"][f"without {sabotage}"] = {target: res}
    if args.trace:
        write_trace(dev, args.trace)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1))
    ok = all(r["ok"] for r in report["checks"].values())
    caught = all(r["caught"] for s in report["sabotage"].values() for r in s.values())
    for name, r in report["checks"].items():
        print(f"{'ok  ' if r['ok'] else 'FAIL'}  {name}: {r['detail']} ({r['seconds']} s)")
    for sabotage, s in report["sabotage"].items():
        for name, r in s.items():
            print(f"{'ok  ' if r['caught'] else 'FAIL'}  {sabotage}: {name} {'fails' if r['caught'] else 'still passes'}"
                  f" ({r['detail']})")
    return 0 if ok and caught else 1


if __name__ == "__main__":
    sys.exit(main())
