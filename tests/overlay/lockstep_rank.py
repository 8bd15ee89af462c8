"""One tensor-parallel rank for test_overlay_lockstep.py (run as a script, two at a time).

Both ranks sample the same batches with vLLM's real ``random_sample`` (the overlay's patch of it
while the overlay is on), seeded alike as vLLM seeds every rank. Rank 1's overlay is switched off
by an internal error at ``--disable-at`` (through the real guard, as any overlay bug would); rank
0's lane fails once at ``--lane-error-at`` (that step draws inline there only). With
``--bookkeeping-error-at`` rank 1's overlay instead fails inside the sampler's bookkeeping of a step
whose q it took (a FAKE internal error in ``StepLines.complete``): the guard switches it off there and
vLLM draws inline. After every step
the ranks exchange their tokens and the state of torch's default generator over gloo
(127.0.0.1); the script writes what it saw to ``--out`` as JSON.
"""

from __future__ import annotations

import argparse
import os
import sys
import hashlib
import json

import torch
import torch.distributed as dist

ROWS, VOCAB = 4, 257
#: What the sampler does in each step: take q, take nothing random (the launched q goes unused), or
#: see more rows than were launched (rows_mismatch: vLLM draws inline).
SCHEDULE = ["sample", "sample", "unconsumed", "sample", "mismatch", "sample", "sample", "sample", "sample", "sample"]


def _failing_when_used(complete):
    """``StepLines.complete`` raising a FAKE internal error for the step whose q the sampler takes."""

    def failing(step):
        if step.used:
            raise RuntimeError("FAKE internal error in the step's bookkeeping on rank 1")
        return complete(step)

    return failing


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--log-dir", required=True)
    ap.add_argument("--disable-at", type=int, default=3)
    ap.add_argument("--lane-error-at", type=int, default=6)
    ap.add_argument("--bookkeeping-error-at", type=int, default=-1)
    args = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=args.rank, world_size=2)

    import vllm.v1.sample.ops.topk_topp_sampler as topk

    from overlay import guard, plugin
    from overlay.events import EventLog
    from overlay.patches import topk_topp
    from overlay.sampler import active

    torch.manual_seed(1234)  # vLLM's set_random_seed(seed): the same on every rank
    overlay = plugin.enable(log=EventLog(args.log_dir), patches=(topk_topp,), lane_cpus="inherit")
    data = torch.Generator().manual_seed(7)  # the batches: identical on both ranks
    seen = []
    for i, kind in enumerate(SCHEDULE):
        if args.rank == 1 and i == args.disable_at:
            guard.failed(RuntimeError("FAKE internal error on rank 1 only"))
        rows = ROWS + 1 if kind == "mismatch" else ROWS
        probs = torch.softmax(torch.randn(rows, VOCAB, generator=data) * 3, dim=-1)
        ov = active()
        if ov is not None:
            if args.rank == 0 and i == args.lane_error_at:
                launch = ov.lane.launch
                ov.lane.launch = lambda *a, **k: (_ for _ in ()).throw(RuntimeError("FAKE lane failure"))
            step = ov.begin_step(rows=ROWS, vocab=VOCAB, dtype=torch.float32, device="cpu", all_greedy=False,
                                 seeded_rows=0)
            if args.rank == 0 and i == args.lane_error_at:
                ov.lane.launch = launch
            ov.end_forward(step)
            if args.rank == 1 and i == args.bookkeeping_error_at:
                ov.lines.complete = _failing_when_used(ov.lines.complete)
        tokens = [] if kind == "unconsumed" else topk.random_sample(probs, {}).tolist()
        state = hashlib.sha256(torch.default_generator.get_state().numpy().tobytes()).hexdigest()
        mine = {"tokens": tokens, "rng": state, "overlay_on": ov is not None}
        both = [None, None]
        dist.all_gather_object(both, mine)
        seen.append(both)
    # What the overlay's atexit hook does in vLLM, done here because the script leaves by os._exit (below):
    # write what is left and the final summary, also when the overlay was switched off (rank 1), whose
    # log would otherwise end at a checkpoint summary or the disabled notice.
    overlay.shutdown()
    dist.destroy_process_group()
    with open(args.out, "w") as f:
        json.dump(seen, f)


if __name__ == "__main__":
    main()
    # Everything this rank saw is written and its process group destroyed. Leave without the interpreter's
    # teardown: torch's gloo / TCPStore C++ objects are destroyed there, and now and then (about one run in
    # ten on a loaded 2-core machine, rank 0: the store's host) that aborts with "terminate called without an
    # active exception" after the work is done (pytorch/pytorch#190489, pytorch#179291) — torch's teardown,
    # not the overlay's: no overlay thread is alive by then (the lane is shut down above).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
